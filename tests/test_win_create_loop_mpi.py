"""``win_create`` windows never block the event loop (issue: "win_create windows block the loop")."""

from __future__ import annotations

from pathlib import Path

import pytest

from .mpi_harness import run_mpi_json

SCRIPT = Path(__file__).parent / "mpi_scripts" / "win_create_loop.py"


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_win_create_calls_leave_the_loop_free() -> None:
    origin, target = run_mpi_json(SCRIPT, 2, timeout=80)
    assert origin["last_cas_old"] == 49  # every compare-and-swap hit, in order
    assert target["user"][:3] == [50, 1, 1]  # the put made while the target was stopped landed
    # A stopped target makes the flush wait, but the loop runs on and the timeout fires on time.
    assert origin["flush"] == "timed out"
    assert 0.9 < origin["waited_s"] < 2.0
    assert origin["max_gap_ms"] < 250, origin  # no call held the loop (was 1360 ms)

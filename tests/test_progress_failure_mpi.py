"""An error inside progress is never swallowed (issue: "an error inside progress is swallowed")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .mpi_harness import run_mpi

SCRIPT = Path(__file__).parent / "mpi_scripts" / "progress_failure.py"


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_poll_error_fails_pending_and_later_calls() -> None:
    result = run_mpi(SCRIPT, 1, timeout=50)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["outcome"] == "TransportError", report
    assert "injected" in report["message"]
    assert report["later"] == "TransportError", report

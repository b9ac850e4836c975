"""``python -m aiorma.bench calls`` runs end to end, tiny, and its counts mean what they say.

Counts, not times: the aiorma-path count of a unit is what the code runs for it, so it is
bounded here loosely (a structural regression — a second engine path, an object graph per call —
shows as a multiple, not a few percent)."""

from __future__ import annotations

import cProfile
import json
from pathlib import Path

import pytest

from aiorma.bench import calls

from .mpi_harness import locate_mpiexec, run_python

UNITS = {
    "transactions blocking",
    "transactions nonblocking",
    "transactions nonblocking+aaar",
    "lock/put/unlock",
    "fence/put/fence",
    "pscw",
}


def test_the_aiorma_path_counts_only_its_own_files() -> None:
    profile = cProfile.Profile()
    profile.enable()
    calls._on_path("x/aiorma/engine/window_engine.py", "lock")  # (one call on aiorma's path?)
    profile.disable()
    assert calls._on_path("/site/aiorma/engine/window_engine.py", "_advance")
    assert calls._on_path("C:\\site\\aiorma\\window.py", "put")
    assert calls._on_path("/site/aiorma/_core/driver.py", "request")
    assert not calls._on_path("/site/aiorma/_core/driver.py", "pump")  # a poll's, not a call's
    assert not calls._on_path("/usr/lib/python3.11/asyncio/base_events.py", "_run_once")
    counted = calls.count(profile, 1)
    assert counted["aiorma"] == 0  # bench/calls.py itself is not on the path
    assert counted["all"] >= 1


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_calls_mpi_tiny(tmp_path: Path) -> None:
    assert locate_mpiexec() is not None, "no mpiexec found (install the mpich wheel)"
    out = tmp_path / "calls.json"
    args = ["--transactions", "50", "--epochs", "50", "--json", str(out)]
    run_python("-m", "aiorma.bench", "calls", *args, timeout=170)
    rows = json.loads(out.read_text())["rows"]
    assert set(rows) == UNITS
    for unit, row in rows.items():
        # Every unit makes engine calls (an epoch at least a handful), fewer than everything.
        assert 20 < row["aiorma"] < row["all"], (unit, row)
        assert row["aiorma"] < 400, (unit, row)  # today 65-90: a multiple means a structural slip


def test_plot_makes_its_directory(tmp_path: Path) -> None:
    """``--plot DIR`` with a DIR that does not exist yet: the figure goes there (a new directory,
    as the collectives' and LU's plots already did), not a FileNotFoundError after the run."""
    pytest.importorskip("matplotlib")
    rows = {unit: {"aiorma": 50.0, "all": 100.0} for unit in sorted(UNITS)}
    path = calls.plot(rows, None, tmp_path / "new" / "figures")
    assert path == tmp_path / "new" / "figures" / "calls.png" and path.stat().st_size > 0

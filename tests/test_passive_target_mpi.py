"""A target that computes without awaiting never delays an origin (issue: truly passive target).

Runs tests/mpi_scripts/passive_target.py under the mpich wheel's mpiexec on one node, where MPICH
carries RMA into allocated windows through shared memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .mpi_harness import run_mpi_json

SCRIPT = Path(__file__).parent / "mpi_scripts" / "passive_target.py"


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("nprocs", [2, 3])
def test_busy_target_grants_every_lock(nprocs: int) -> None:
    reports = run_mpi_json(SCRIPT, nprocs, timeout=100)
    target, origins = reports[0], reports[1:]
    # Every update landed while the target was still spinning in pure Python: the locks, the
    # accumulates and the releases needed none of its CPU.
    assert target["seen"] == 1000, reports
    assert target["busy_s"] < 30, reports
    assert target["final"] == 1000
    assert sorted(r["rank"] for r in origins) == list(range(1, nprocs))
    assert sum(r["epochs"] for r in origins) == 1000

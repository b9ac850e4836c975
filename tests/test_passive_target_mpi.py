"""A target that computes without awaiting never delays an origin (issue: truly passive target).

Runs tests/mpi_scripts/passive_target.py under the mpich wheel's mpiexec on one node, where MPICH
carries RMA into allocated windows through shared memory, and on two emulated nodes, where
MPICH's network module applies atomics only while the target drives MPI progress: there the
target's progress thread (aiorma.transport.busy_progress) serves them while its loop computes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorma.bench._launch import emulation_unavailable, mpi_library_name

from .mpi_harness import RESULTS_DIR, launch_mpi, run_mpi_json

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


OFF_NODE_TOTAL = 40


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_busy_target_on_another_node_grants_every_lock() -> None:
    if (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    reports = run_mpi_json(SCRIPT, 2, str(OFF_NODE_TOTAL), "60", timeout=150, emulate_nodes=2)
    target, origin = reports
    # Every lock, accumulate and release was served while rank 0 computed without awaiting.
    assert target["seen"] == OFF_NODE_TOTAL, reports
    assert target["busy_s"] < 60, reports
    assert target["final"] == OFF_NODE_TOTAL
    assert origin["epochs"] == OFF_NODE_TOTAL


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_busy_target_on_another_node_without_progress_thread_serves_nothing(tmp_path: Path) -> None:
    """The control case: with the thread off, nothing needing rank 0's progress is served while
    it computes, so it sees no update before it gives up (2 s); all land once it awaits again."""
    if (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    if (mpi_library_name() or "").startswith("Open MPI"):
        pytest.skip(
            "Open MPI's one-sided components serve another node's atomics without the target's "
            "progress: the control case (MPICH needs the thread) has nothing to show there"
        )
    env = {"AIORMA_PROGRESS_THREAD": "0", RESULTS_DIR: str(tmp_path)}
    outcome = launch_mpi(SCRIPT, 2, "5", "2", timeout=100, emulate_nodes=2, env=env)
    assert outcome.ok, outcome.describe()
    target = json.loads((tmp_path / "rank0.json").read_text())
    assert target["seen"] == 0, target
    assert target["final"] == 5, target

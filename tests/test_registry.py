"""Every check of the registry (tests/registry.py: the shared scenarios and the collectives
battery) at each of its world sizes on each transport, one test per check:
``test_check[<transport>-<size>-<check>]``, and each again with the inline paths off
(``...-inline_off``): the inline paths must change nothing a check can see.

* ``local``: in-process ranks through ``aiorma.run(..., nprocs=size)``;
* ``simulated``: the simulated network on a virtual clock (conftest.run_simulated_ranks);
* ``mpi`` / ``mpi_2nodes``: real processes under the mpich wheel's mpiexec (on two emulated nodes
  for the second), one job per size running every check of that size; each test reads its check's
  per-rank JSON results (tests/mpi_registry.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable

from .conftest import RegistryCase, run_simulated_ranks
from .mpi_harness import launch_mpi
from .mpi_registry import RegistryJobs, run_job
from .registry import REGISTRY


def test_check(
    registry_case: RegistryCase, mpi_registry_jobs: RegistryJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = registry_case
    check = REGISTRY[case.name]
    if not case.inline:
        monkeypatch.setenv("AIORMA_INLINE", "0")  # read when the connection opens
    if case.transport == "local":
        assert aiorma.run(check.run, nprocs=case.size) == [None] * case.size
    elif case.transport == "simulated":
        assert run_simulated_ranks(check.run, case.size) == [None] * case.size
    else:
        pytest.importorskip("mpi4py")
        if case.transport == "mpi_2nodes" and (reason := emulation_unavailable()) is not None:
            pytest.skip(reason)
        failure = mpi_registry_jobs.job(case.transport, case.size, case.inline).failure(case.name)
        assert failure is None, failure


# ------------------------------------------------------------------ the MPI harness's own failures


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_failed_check_fails_itself_and_every_later_check(tmp_path: Path) -> None:
    """A check that raises is reported with its traceback from every rank; the job then aborts,
    and the checks it never reached fail too, with the job's exit status; the one before passes."""
    pytest.importorskip("mpi4py")
    job = run_job(2, "mpi", tmp_path, names=["fence_ring_put", "no_such_check", "barrier_back_to_back"])
    assert not job.outcome.ok
    assert job.failure("fence_ring_put") is None
    failed = job.failure("no_such_check")
    assert failed is not None and "KeyError: 'no_such_check'" in failed
    unreached = job.failure("barrier_back_to_back")
    assert unreached is not None and "no result from ranks [0, 1]" in unreached and "exited with" in unreached


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_a_hung_job_is_killed_at_its_timeout(tmp_path: Path) -> None:
    """A job still running at its timeout is killed, ranks and all, and every check of it fails
    naming the timeout instead of the test hanging."""
    script = tmp_path / "hang.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    outcome = launch_mpi(script, 2, timeout=5)
    assert outcome.returncode is None and "timed out after 5" in outcome.describe()
    assert outcome.stdout.count("started") == 2

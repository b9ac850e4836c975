"""What :func:`aiorma.run` sets in MPICH's environment before it initialises MPI: the progress
throttle when the launcher put more ranks on the host than there are cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorma._core.settings import PROGRESS_THROTTLE_VARIABLE, cores_available, prepare_mpi_environment
from aiorma.bench._launch import MPICH, emulation_unavailable, find_mpiexec, mpiexec_library

from .mpi_harness import REPO_ROOT, run_mpi_json


def test_the_throttle_is_set_only_when_ranks_outnumber_cores_and_some_peers_are_off_node() -> None:
    for off_node in ({"PMI_SIZE": "8"}, {"PMI_SIZE": "4", "MPIR_CVAR_NOLOCAL": "1"}):
        env = {"MPI_LOCALNRANKS": "4", **off_node}
        assert prepare_mpi_environment(env, cores=2) and env[PROGRESS_THROTTLE_VARIABLE] == "1"
    for unset in (
        {"MPI_LOCALNRANKS": "4", "PMI_SIZE": "4"},  # one node, shared memory
        {"MPI_LOCALNRANKS": "2", "PMI_SIZE": "8"},  # enough cores
        {"MPI_LOCALNRANKS": "x"},
        {},  # not started by hydra
    ):
        assert not prepare_mpi_environment(unset, cores=2) and PROGRESS_THROTTLE_VARIABLE not in unset


def test_a_value_the_user_set_is_kept() -> None:
    env = {"MPI_LOCALNRANKS": "8", "PMI_SIZE": "16", PROGRESS_THROTTLE_VARIABLE: "0"}
    assert not prepare_mpi_environment(env, cores=2)
    assert env[PROGRESS_THROTTLE_VARIABLE] == "0"


SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
import aiorma
from tests.mpi_harness import write_rank_result

async def main(comm):
    write_rank_result(comm.rank, os.environ.get({name!r}))

aiorma.run(main)
"""


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_aiorma_run_sets_it_where_ranks_share_cores_and_talk_across_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rank more than the cores, on two emulated nodes: every rank starts MPI with the
    throttle on; on one node (shared memory) none does.  Under Open MPI's launcher neither:
    the throttle is MPICH's, and the variables that say how many ranks share the host are
    hydra's."""
    if (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    monkeypatch.delenv(PROGRESS_THROTTLE_VARIABLE, raising=False)
    script = tmp_path / "throttle.py"
    script.write_text(SCRIPT.format(root=str(REPO_ROOT), name=PROGRESS_THROTTLE_VARIABLE))
    ranks = cores_available() + 1
    throttled = "1" if mpiexec_library(find_mpiexec()) == MPICH else None
    assert run_mpi_json(script, ranks, timeout=100, emulate_nodes=2) == [throttled] * ranks
    assert run_mpi_json(script, ranks, timeout=100) == [None] * ranks

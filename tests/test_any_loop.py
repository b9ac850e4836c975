"""One program written with anyio only (tests/mpi_scripts/any_loop.py: every epoch kind, RMA call,
collective, notified put, synchronization object, and cancel scopes) gives the same results
under asyncio and under trio, in-process and under mpiexec, on one node and on two emulated
nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable

from .mpi_harness import run_mpi_json
from .mpi_scripts import any_loop

SCRIPT = Path(any_loop.__file__)
BACKENDS = ["asyncio", "trio"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("nprocs", [1, 3])
def test_same_program_local(backend: str, nprocs: int) -> None:
    results = aiorma.run(any_loop.main, nprocs=nprocs, backend=backend)
    assert results == [any_loop.expected(rank, nprocs) for rank in range(nprocs)]


@pytest.mark.mpi
@pytest.mark.timeout(200)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("emulate_nodes", [0, 2], ids=["one_node", "two_nodes"])
def test_same_program_mpi(backend: str, emulate_nodes: int) -> None:
    if emulate_nodes and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    results = run_mpi_json(SCRIPT, 3, backend, timeout=180, emulate_nodes=emulate_nodes)
    assert results == [any_loop.expected(rank, 3) for rank in range(3)]


def test_unknown_backend_is_refused() -> None:
    async def main(comm: aiorma.Comm) -> None:
        pass

    with pytest.raises(ValueError, match="backend"):
        aiorma.run(main, nprocs=1, backend="curio")

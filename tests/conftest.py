"""The registry's test matrix: every check of tests/registry.py at each of its world sizes on each
transport, with the inline paths on and off (``AIORMA_INLINE=0``), as ``registry_case`` (ids
``<transport>-<size>-<check>``, and ``...-inline_off``), and the MPI jobs behind it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .mpi_registry import JOB_TIMEOUT, RegistryJobs
from .registry import TRANSPORTS, cases


def run_simulated_ranks(main: Callable[[Any], Awaitable[Any]], size: int) -> list[Any]:
    """Run ``main(comm)`` on ``size`` ranks of the simulated network (flat topology, virtual clock).

    The only place the tests reach the simulation layer for the matrix, so that moving it changes
    this one import."""
    from aiorma.collectives.topology import Topology
    from aiorma.sim.network import SimNetwork
    from aiorma.sim.run import run_simulated

    return run_simulated(main, SimNetwork(Topology.flat(size)))


@dataclass(frozen=True)
class RegistryCase:
    transport: str
    size: int
    name: str
    inline: bool = True


def _param(case: RegistryCase) -> Any:
    if case.transport.startswith("mpi"):
        # The first test of a job waits for the whole job; each check also has its own timeout.
        marks = [pytest.mark.mpi, pytest.mark.timeout(JOB_TIMEOUT + 60)]
    else:
        marks = [pytest.mark.timeout(120)]
    suffix = "" if case.inline else "-inline_off"
    return pytest.param(case, id=f"{case.transport}-{case.size}-{case.name}{suffix}", marks=marks)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "registry_case" in metafunc.fixturenames:
        params = [
            _param(RegistryCase(transport, size, name, inline))
            for inline in (True, False)
            for transport in TRANSPORTS
            for size, name in cases(transport)
        ]
        metafunc.parametrize("registry_case", params)


@pytest.fixture(scope="session")
def mpi_registry_jobs(tmp_path_factory: pytest.TempPathFactory) -> RegistryJobs:
    """The session's registry jobs under mpiexec, one per (transport, size), run on first use."""
    return RegistryJobs(Path(tmp_path_factory.mktemp("registry")))

"""The soak test's short version (tests/soak.py; the long one is ``python -m tests.soak --minutes
N --transport local|mpi|mpi_2nodes``): seeded random programs with waits abandoned at random
points must give exactly the outcome computed without aiorma, and with a rank failing at a random
step (an exception; under mpiexec also SIGKILL) every other rank must fail within BOUND seconds,
naming it — on the in-process transport, under mpiexec and on two emulated nodes."""

from __future__ import annotations

import pytest

from aiorma.bench._launch import emulation_unavailable

from .soak import KINDS_2NODES, KINDS_LOCAL, KINDS_MPI, Round, local_round, mpi_round


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", range(1, 21))
def test_soak_local(seed: int) -> None:
    plan = Round.plan(seed, 2 + seed % 3, KINDS_LOCAL[seed % len(KINDS_LOCAL)])
    assert local_round(plan) is None


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", KINDS_MPI)
def test_soak_mpi(fault: str) -> None:
    assert (broken := mpi_round(Round.plan(101, 3, fault))) is None, broken


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", KINDS_2NODES)
def test_soak_two_emulated_nodes(fault: str) -> None:
    if (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    assert (broken := mpi_round(Round.plan(202, 4, fault), emulate_nodes=2)) is None, broken

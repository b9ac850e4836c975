"""MpiEndpoint against real MPI processes (the mpich wheel's mpiexec)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from .mpi_harness import run_mpi

SCRIPTS = Path(__file__).parent / "mpi_scripts"


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_transport_smoke(nprocs: int) -> None:
    result = run_mpi(SCRIPTS / "transport_smoke.py", nprocs, timeout=90)
    # mpiexec forwards the ranks' output in chunks, so lines of different ranks may run together.
    ok = sorted(re.findall(r"OK \d+/\d+", result.stdout))
    assert ok == sorted(f"OK {rank}/{nprocs}" for rank in range(nprocs)), result.stdout

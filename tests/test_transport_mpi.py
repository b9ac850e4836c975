"""MpiEndpoint against real MPI processes (the mpich wheel's mpiexec)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from .mpi_harness import run_smoke


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_transport_smoke(nprocs: int, tmp_path: Path) -> None:
    run_smoke(nprocs, tmp_path, timeout=90)

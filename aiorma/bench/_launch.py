"""Start a benchmark's ranks under the mpich wheel's ``mpiexec`` when it was run without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def under_mpiexec() -> bool:
    """True inside a process started by mpiexec (hydra sets PMI_RANK)."""
    return "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ


def find_mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise SystemExit("no mpiexec found: install the mpich wheel (pip install 'aiorma[mpich]')")
    return found


def ensure_mpi_ranks(nprocs: int, module: str, args: list[str]) -> bool:
    """Outside mpiexec: run ``python -m module args`` on ``nprocs`` ranks and return True (raising
    SystemExit if it failed).  Inside mpiexec: return False, so the caller measures."""
    if under_mpiexec():
        return False
    command = [find_mpiexec(), "-n", str(nprocs), sys.executable, "-m", module, *args]
    print("launching:", " ".join(command), file=sys.stderr, flush=True)
    status = subprocess.run(command, check=False).returncode
    if status != 0:
        raise SystemExit(f"mpiexec exited with {status}")
    return True

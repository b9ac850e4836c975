"""mpi4py buffer specs (``[buf, MPI.DOUBLE]``, ``(buf, MPI.DOUBLE)``, ``[buf, count, MPI.DOUBLE]``)
are accepted by the RMA calls and the collectives when the datatype is the array's own type;
every other spec raises RmaTypeError naming what to pass, and changes nothing.  The checks run in
tests/mpi_scripts/buffer_specs_check.py, in its own process: the specs need ``mpi4py.MPI``,
whose import initialises MPI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .mpi_harness import REPO_ROOT, run_mpi

SCRIPT = Path(__file__).parent / "mpi_scripts" / "buffer_specs_check.py"


def oks(output: str) -> list[str]:
    return sorted(re.findall(r"OK (\d+)", output))  # the ranks' lines may interleave


@pytest.mark.timeout(60)
def test_buffer_specs_local() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--local"], capture_output=True, text=True, timeout=50, env=env
    )
    assert result.returncode == 0 and oks(result.stdout) == ["0", "1"], result.stdout + result.stderr


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_buffer_specs_under_mpi() -> None:
    result = run_mpi(SCRIPT, 2, timeout=80)
    assert oks(result.stdout) == ["0", "1"], result.stdout + result.stderr

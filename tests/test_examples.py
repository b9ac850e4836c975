"""The examples run and verify themselves, in-process and under mpiexec."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .mpi_harness import REPO_ROOT, run_mpi

QUICKSTART = Path(REPO_ROOT) / "examples" / "quickstart.py"


@pytest.mark.timeout(60)
def test_quickstart_local() -> None:
    # The repository on the path, so this works with or without aiorma installed.
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(QUICKSTART), "--local", "3"],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=REPO_ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "verified on 3 ranks" in result.stdout


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_quickstart_mpi() -> None:
    result = run_mpi(QUICKSTART, 4, timeout=80)
    assert "verified on 4 ranks" in result.stdout
    assert result.stdout.count("drew ticket") == 4

"""The guides' programs run and print what the guides say, in-process and under mpiexec."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .mpi_harness import REPO_ROOT, run_mpi

EXAMPLES = Path(REPO_ROOT) / "examples"


def run_local(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.timeout(90)
def test_getting_started_local() -> None:
    out = run_local("getting_started.py", "--local", "3")
    assert out.splitlines() == ["rank 0 of 3 got 102", "rank 1 of 3 got 100", "rank 2 of 3 got 101"]


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_getting_started_mpi() -> None:
    out = run_mpi(EXAMPLES / "getting_started.py", 2, timeout=80).stdout
    assert sorted(re.findall(r"rank \d of 2 got \d+", out)) == ["rank 0 of 2 got 101", "rank 1 of 2 got 100"]


@pytest.mark.timeout(90)
def test_double_buffer_local() -> None:
    out = run_local("double_buffer.py", "--local", "3", "--steps", "60")
    assert out.splitlines() == [f"rank {r}: 60 steps read intact" for r in range(3)]


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_double_buffer_mpi() -> None:
    out = run_mpi(EXAMPLES / "double_buffer.py", 2, timeout=80).stdout
    assert sorted(re.findall(r"rank \d: 200 steps read intact", out)) == [
        "rank 0: 200 steps read intact",
        "rank 1: 200 steps read intact",
    ]


@pytest.mark.timeout(90)
def test_collectives_tour_local() -> None:
    out = run_local("collectives_tour.py", "--local", "3")
    expected = [f"rank {r}: allreduce 3, allgather, bcast, alltoall verified" for r in range(3)]
    assert out.splitlines() == expected


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_collectives_tour_mpi() -> None:
    out = run_mpi(EXAMPLES / "collectives_tour.py", 2, timeout=80).stdout
    assert len(re.findall(r"rank \d: allreduce 1, allgather, bcast, alltoall verified", out)) == 2, out


@pytest.mark.timeout(90)
def test_notified_put_local() -> None:
    out = run_local("notified_put.py", "--local", "2", "--items", "300")
    assert "rank 1: consumed 300 blocks in order, sum 1435200" in out.splitlines()


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_notified_put_mpi() -> None:
    out = run_mpi(EXAMPLES / "notified_put.py", 2, timeout=80).stdout
    assert "rank 1: consumed 2000 blocks in order, sum 63968000" in out


@pytest.mark.timeout(90)
def test_trio_ring_local() -> None:
    out = run_local("trio_ring.py", "--local", "3")
    assert out.splitlines() == [
        f"rank {r}: 200 fence epochs done, the timer ticked meanwhile: True" for r in range(3)
    ]


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_trio_ring_mpi() -> None:
    out = run_mpi(EXAMPLES / "trio_ring.py", 3, timeout=80).stdout
    assert sorted(re.findall(r"rank \d: 200 fence epochs done, the timer ticked meanwhile: True", out)) == [
        f"rank {r}: 200 fence epochs done, the timer ticked meanwhile: True" for r in range(3)
    ]

"""The README's "Use it" program runs as printed, under mpiexec, and prints what it says it does
(every rank: the put and the accumulate of its left neighbour, eight 2.0s)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .mpi_harness import REPO_ROOT, run_mpi


def readme_program() -> str:
    text = (Path(REPO_ROOT) / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    [program] = [block for block in blocks if "aiorma.connect(MPI.COMM_WORLD)" in block]
    return program


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("nprocs", [2, 3])
def test_readme_program_runs_and_prints_what_it_says(nprocs: int, tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(readme_program())
    result = run_mpi(script, nprocs, timeout=100)
    # mpiexec forwards each rank's output in chunks, not lines: find the reports by pattern.
    reports = sorted(re.findall(r"rank (\d+): (\[[^\]]*\])", result.stdout))
    assert reports == [(str(r), str([2.0] * 8)) for r in range(nprocs)], result.stdout

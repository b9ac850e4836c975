"""The collectives battery on the ``mpi`` transport: real processes under the mpich wheel's mpiexec.

One mpiexec job per rank count (2..5) runs every check of tests/mpi_scripts/collectives_check.py
in turn; each check is then its own test, passing only if every rank reported it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from .mpi_harness import run_mpi
from .mpi_scripts.collectives_check import CHECKS

SCRIPT = Path(__file__).parent / "mpi_scripts" / "collectives_check.py"
SIZES = (2, 3, 4, 5)
_outputs: dict[int, str] = {}


def _job_output(size: int) -> str:
    if size not in _outputs:
        try:
            _outputs[size] = run_mpi(SCRIPT, size, timeout=240).stdout
        except AssertionError as failure:  # keep the output: each check reports its own part
            _outputs[size] = str(failure)
    return _outputs[size]


CASES = [(name, size) for size in SIZES for name in CHECKS]


@pytest.mark.mpi
@pytest.mark.timeout(260)
@pytest.mark.parametrize(("name", "size"), CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_collective_mpi(name: str, size: int) -> None:
    output = _job_output(size)
    # Ranks share stdout, so their lines can interleave mid-line: match tokens, not lines.
    passed = {rank for found, rank in re.findall(r"PASS (\w+) (\d+)", output) if found == name}
    assert passed == {str(r) for r in range(size)}, f"check {name} on {size} ranks:\n{output[-6000:]}"

"""The shared scenarios on the ``mpi`` transport: real processes under the mpich wheel's mpiexec.

One mpiexec job per rank count runs every scenario in turn (start-up costs about a second); each
scenario is then its own test, passing only if every rank reported it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .mpi_harness import run_mpi
from .scenarios import SCENARIOS, runs_with

SCRIPT = Path(__file__).parent / "mpi_scripts" / "run_scenarios.py"
SIZES = (2, 3, 4)
_outputs: dict[int, str] = {}


def _job_output(size: int) -> str:
    if size not in _outputs:
        try:
            result = run_mpi(SCRIPT, size, timeout=300)
            _outputs[size] = result.stdout
        except AssertionError as failure:  # keep the output: each scenario reports its own part
            _outputs[size] = str(failure)
    return _outputs[size]


CASES = [(name, size) for size in SIZES for name in SCENARIOS if runs_with(name, size)]


@pytest.mark.mpi
@pytest.mark.timeout(320)
@pytest.mark.parametrize(("name", "size"), CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_scenario_mpi(name: str, size: int) -> None:
    output = _job_output(size)
    # Ranks share stdout, so their lines can interleave mid-line: match tokens, not lines.
    passed = {rank for found, rank in re.findall(r"PASS (\w+) (\d+)", output) if found == name}
    assert passed == {str(r) for r in range(size)}, f"scenario {name} on {size} ranks:\n{output}"

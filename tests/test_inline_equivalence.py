"""The inline paths (inline waiting, signals written inside the call, the MPI transport's off-node fast
paths) change nothing: seeded random programs (tests/random_program.py) give the same window
contents and gets with the inline paths on and off (``AIORMA_INLINE=0``), equal to the outcome
computed without aiorma, on the local transport and under mpiexec (one node and two emulated nodes).
The scenario registry runs both ways too (tests/test_registry.py, ``...-inline_off``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable

from .mpi_harness import run_mpi_json
from .random_program import expected_outcome, make_program, run_program

SCRIPT = Path(__file__).parent / "mpi_scripts" / "random_programs.py"
LOCAL_SEEDS = range(12)
MPI_SEEDS = [3, 7, 11]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("inline", [True, False], ids=["inline_on", "inline_off"])
def test_random_programs_local(size: int, inline: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not inline:
        monkeypatch.setenv("AIORMA_INLINE", "0")
    for seed in LOCAL_SEEDS:
        program = make_program(seed, size)

        async def main(comm: aiorma.Comm, program: list[dict[str, Any]] = program) -> dict[str, Any]:
            return await run_program(comm, program)

        assert aiorma.run(main, nprocs=size) == expected_outcome(program, size), f"seed {seed}"


def _mpi_outcomes(
    size: int, inline: bool, emulate_nodes: int, monkeypatch: pytest.MonkeyPatch
) -> dict[int, list[dict[str, Any]]]:
    with monkeypatch.context() as patch:
        if not inline:
            patch.setenv("AIORMA_INLINE", "0")  # the ranks inherit the environment
        seeds = [str(s) for s in MPI_SEEDS]
        per_rank = run_mpi_json(SCRIPT, size, *seeds, timeout=150, emulate_nodes=emulate_nodes)
    return {seed: [outcomes[str(seed)] for outcomes in per_rank] for seed in MPI_SEEDS}


@pytest.mark.mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize("emulate_nodes", [0, 2], ids=["one_node", "two_nodes"])
def test_random_programs_mpi_both_ways(emulate_nodes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if emulate_nodes and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    size = 3
    on = _mpi_outcomes(size, True, emulate_nodes, monkeypatch)
    off = _mpi_outcomes(size, False, emulate_nodes, monkeypatch)
    for seed in MPI_SEEDS:
        expected = expected_outcome(make_program(seed, size), size)
        assert on.get(seed) == expected, f"seed {seed}, inline paths on"
        assert off.get(seed) == expected, f"seed {seed}, inline paths off"


@pytest.mark.parametrize("inline", [True, False], ids=["inline_on", "inline_off"])
@pytest.mark.parametrize("call", ["lock", "post", "start", "fence"])
def test_odd_assertions_are_refused_alike(call: str, inline: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """An assertion that is not an int combination of MODE_* flags (0.0, -1, 2.5) is refused at
    the call with the inline paths on as with it off, and changes nothing."""
    if not inline:
        monkeypatch.setenv("AIORMA_INLINE", "0")

    async def main(comm: aiorma.Comm) -> list[str]:
        win = await comm.win_allocate(2, np.int64)
        refused = []
        for assertion in (0.0, -1, 2.5):
            make = {
                "lock": lambda a=assertion: win.lock(0, aiorma.LOCK_EXCLUSIVE, a),
                "post": lambda a=assertion: win.post([0], a),
                "start": lambda a=assertion: win.start([0], a),
                "fence": lambda a=assertion: win.fence(a),
            }[call]
            try:
                make()
                refused.append("accepted")
            except aiorma.RmaUsageError as error:
                refused.append(type(error).__name__)
            assert win.engine.open_epochs() == []  # nothing changed
        await win.free()
        return refused

    [outcome] = aiorma.run(main, nprocs=1)
    assert outcome == ["RmaUsageError"] * 3, outcome

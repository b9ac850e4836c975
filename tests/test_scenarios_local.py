"""The shared scenarios on the in-process ``local`` transport, at 1 to 5 ranks."""

from __future__ import annotations

import pytest

import aiorma

from .scenarios import SCENARIOS

CASES = [(name, size) for name, (_fn, sizes) in SCENARIOS.items() for size in sizes]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "size"), CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_scenario_local(name: str, size: int) -> None:
    fn, _sizes = SCENARIOS[name]
    assert aiorma.run(fn, nprocs=size) == [None] * size

"""Holding N epochs costs O(N) engine work in all (issue: "cost grows faster than the work").

Counted, not timed: the number of times the engine looks at an epoch (``_advance``) while N held
fence / GATS / lock epochs run to completion.  Before the engine kept active and deferred epochs
apart, every event walked every live epoch, so doubling N quadrupled the work.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiorma import _native
from aiorma.constants import MODE_NOSUCCEED
from aiorma.engine import window_engine
from aiorma.engine.window_engine import WindowEngine

from .engine_net import EngineNet


def _fences(net: EngineNet, n: int) -> None:
    for r in range(2):
        net[r].fence()
    for _ in range(n):
        for r in range(2):
            net[r].rma(1 - r, "x")
            net[r].fence()
    for r in range(2):
        net[r].fence(MODE_NOSUCCEED)


def _gats(net: EngineNet, n: int) -> None:
    for _ in range(n):
        net[1].post([0])
        net[0].start([1])
        net[0].rma(1, "x")
        net[0].complete()
        net[1].wait()


def _locks(net: EngineNet, n: int) -> None:
    for _ in range(n):
        net[0].lock(1)
        net[0].rma(1, "x")
        net[0].unlock(1)


def _looks(pattern: Callable[[EngineNet, int], None], n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    count = 0
    original = WindowEngine._advance

    def counted(self: WindowEngine, epoch: object) -> None:
        nonlocal count
        count += 1
        original(self, epoch)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(WindowEngine, "_advance", counted)
        net = EngineNet(2)
        pattern(net, n)  # every epoch opened and closed, none completed yet: all held
        net.settle()
    assert all(e.quiescent for e in net.engines)
    return count


@pytest.mark.parametrize("pattern", [_fences, _gats, _locks], ids=["fence", "gats", "lock"])
def test_held_epochs_cost_linear_work(
    pattern: Callable[[EngineNet, int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    if _native.running_compiled(window_engine):
        # Compiled calls do not go through the class attribute the count replaces.
        pytest.skip("counts calls into the engine's source: runs in the pure-Python pass")
    small = _looks(pattern, 200, monkeypatch)
    large = _looks(pattern, 800, monkeypatch)
    assert 0 < large <= 4.5 * small, (small, large)  # linear: 4x; quadratic would be 16x

"""A window created with ``peers_write_control=False`` (the collectives' landing windows) takes
only the epochs that never write a peer's control region — lock and lock_all with MODE_NOCHECK —
so that a polled transport may skip its control region.  Every other epoch is refused at the call,
changing nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiorma.constants import MODE_NOCHECK, MODE_NOPRECEDE, LockType
from aiorma.engine.actions import ControlFetch, ControlWrite
from aiorma.engine.window_engine import WindowEngine
from aiorma.errors import RmaUsageError

REFUSED: dict[str, Callable[[WindowEngine], int]] = {
    "fence": lambda e: e.fence(),
    "fence(MODE_NOPRECEDE)": lambda e: e.fence(MODE_NOPRECEDE),
    "post": lambda e: e.post([1]),
    "start": lambda e: e.start([1]),
    "lock exclusive": lambda e: e.lock(1, LockType.EXCLUSIVE),
    "lock shared": lambda e: e.lock(0, LockType.SHARED),
    "lock_all": lambda e: e.lock_all(),
}


@pytest.mark.parametrize("call", list(REFUSED), ids=list(REFUSED))
def test_epochs_that_write_control_are_refused_and_change_nothing(call: str) -> None:
    engine = WindowEngine(1, 0, 2, peers_write_control=False)
    with pytest.raises(RmaUsageError, match="peers_write_control=False"):
        REFUSED[call](engine)
    assert engine.open_epochs() == [] and engine.drain() == []
    # The same call is fine on an ordinary window.
    ordinary = WindowEngine(1, 0, 2)
    REFUSED[call](ordinary)
    assert ordinary.open_epochs()


def test_nocheck_passive_epochs_run_without_a_control_write() -> None:
    engine = WindowEngine(1, 0, 2, peers_write_control=False)
    engine.lock_all(MODE_NOCHECK)
    engine.unlock_all()
    engine.lock(1, LockType.EXCLUSIVE, MODE_NOCHECK)
    engine.unlock(1)
    actions = engine.drain()
    assert not [a for a in actions if isinstance(a, (ControlWrite, ControlFetch))], actions
    assert engine.open_epochs() == []

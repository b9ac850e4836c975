"""When a deferred epoch may activate: the rules of :mod:`.rules` applied to the epochs active
before it (Zounmevo 2014, §5.6; restated and numbered in docs/semantics.md).

Activation is serial (rule 8): the engine asks only about the oldest deferred epoch, and every
earlier live epoch is active.  This module decides; :class:`~.window_engine.WindowEngine`
activates.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Final

from .epochs import Epoch
from .rules import EXTRA_CONDITION, NEVER_REORDERED, REORDER_FLAG, ExtraCondition, ReorderFlag

# Enum members the functions below read, as module constants: on Python 3.11 reading a
# member (``EpochKind.LOCK``) goes through the enum metaclass's ``__getattr__`` hook, five
# times a plain attribute's cost; compiled, a Final name is a C variable.
_EXTRA_CONDITION_LOCKED_RANK_NOT_A_TARGET: Final = ExtraCondition.LOCKED_RANK_NOT_A_TARGET
_EXTRA_CONDITION_WINDOW_NOT_LOCKED: Final = ExtraCondition.WINDOW_NOT_LOCKED


def may_activate(
    epoch: Epoch, earlier: list[Epoch], reorder: Container[ReorderFlag], window_locked: Callable[[], bool]
) -> bool:
    """True when ``epoch`` may activate now, with ``earlier`` (the active epochs, oldest first)
    still live.  ``reorder``: the reorder flags the window's Info sets.  ``window_locked()``
    reads whether some process holds or is queued for a lock on this rank's window (asked only
    for the rule that needs it)."""
    # Plain loops, not any()/all() over generators: this runs for every epoch the engine
    # activates, and a generator is a frame per call on the interpreters aiorma supports.
    if not earlier:
        return True
    if epoch.kind in NEVER_REORDERED:
        return False  # rules 18-19: wait for completion
    overlapped = True
    for e in earlier:
        if e.kind in NEVER_REORDERED:
            return False  # rules 18-19
        if e.id not in epoch.overlaps:
            overlapped = False
    if overlapped:
        return True  # opened together at application level: run together, as MPI would
    previous = epoch.predecessor
    flag = REORDER_FLAG.get((previous, epoch.kind)) if previous is not None else None
    # (a pair not in the table has no flag: none names a fence or lock_all epoch)
    if flag is None or flag not in reorder:
        return False
    condition = EXTRA_CONDITION.get(epoch.kind)
    if condition is _EXTRA_CONDITION_LOCKED_RANK_NOT_A_TARGET:  # rules 13a, 15a
        rank = epoch.group[0]
        for e in earlier:  # noqa: SIM110 (a loop, not all(): no generator frame)
            if rank in e.access:  # (only access epochs have targets)
                return False
        return True
    if condition is _EXTRA_CONDITION_WINDOW_NOT_LOCKED:  # rules 16a, 17a
        return not window_locked()
    return True

"""When a deferred epoch may activate: the rules of :mod:`.rules` applied to the epochs active
before it (Zounmevo 2014, §5.6; restated and numbered in docs/semantics.md).

Activation is serial (rule 8): the engine asks only about the oldest deferred epoch, and every
earlier live epoch is active.  This module decides; :class:`~.window_engine.WindowEngine`
activates.
"""

from __future__ import annotations

from collections.abc import Callable

from ..win_info import Info
from .epochs import Epoch
from .rules import EXTRA_CONDITION, NEVER_REORDERED, ExtraCondition, reorder_flag


def may_activate(epoch: Epoch, earlier: list[Epoch], info: Info, window_locked: Callable[[], bool]) -> bool:
    """True when ``epoch`` may activate now, with ``earlier`` (the active epochs, oldest first)
    still live.  ``window_locked()`` reads whether some process holds or is queued for a lock on
    this rank's window (asked only for the rule that needs it)."""
    if not earlier:
        return True
    if epoch.kind in NEVER_REORDERED or any(e.kind in NEVER_REORDERED for e in earlier):
        return False  # rules 18-19: wait for completion
    if all(e.id in epoch.overlaps for e in earlier):
        return True  # opened together at application level: run together, as MPI would
    flag = reorder_flag(epoch.predecessor, epoch.kind) if epoch.predecessor else None
    if flag is None or not flag.enabled(info):
        return False
    condition = EXTRA_CONDITION.get(epoch.kind)
    if condition is ExtraCondition.LOCKED_RANK_NOT_A_TARGET:  # rules 13a, 15a
        rank = epoch.group[0]
        return not any(e.is_access and rank in e.access for e in earlier)
    if condition is ExtraCondition.WINDOW_NOT_LOCKED:  # rules 16a, 17a
        return not window_locked()
    return True

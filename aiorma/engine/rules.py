"""The activation rules of Zounmevo (2014) §5.6 as tables, in one place.

Rules 7–19 order *successive* epochs of one window on one process (one closed at application level
before the next is opened).  Read with :func:`aiorma.engine.activation.may_activate`:

* Rule 8 (serial activation): an epoch is considered only once every earlier epoch is activated.
* Default: an epoch activates when every earlier epoch has completed, except those it overlapped at
  application level (opened while they were still open — MPI lets ``post``+``start`` and several
  ``lock`` epochs be open together, and blocking MPI runs them together; docs/semantics.md).
* Rules 12–17: a reorder flag lets an epoch activate while its *immediate predecessor* is active,
  for the (predecessor, epoch) kind pairs in :data:`REORDER_FLAG`, with the extra conditions in
  :data:`EXTRA_CONDITION`.
* Rules 18–19: no flag applies when either epoch is a fence or a lock_all epoch
  (:data:`NEVER_REORDERED`); the later one waits for completion.
"""

from __future__ import annotations

from typing import Final

from ..win_info import Info
from .identity_enum import IdentityEnum


class EpochKind(IdentityEnum):
    FENCE = "fence"
    POST = "post"  # exposure (GATS target side)
    START = "start"  # access (GATS origin side)
    LOCK = "lock"  # passive-target access to one rank
    LOCK_ALL = "lock_all"  # passive-target access to every rank


class EpochState(IdentityEnum):
    """The engine's view of an epoch's :class:`~.states.EpochPhase` (open or closed aside)."""

    DEFERRED = "deferred"  # opened, waiting for the activation rules; its calls are recorded
    ACTIVE = "active"  # activated by the engine; RMA is issued as targets grant access
    COMPLETED = "completed"  # RMA done and closing notifications sent


ACCESS_KINDS: Final = frozenset({EpochKind.FENCE, EpochKind.START, EpochKind.LOCK, EpochKind.LOCK_ALL})
PASSIVE_KINDS: Final = frozenset({EpochKind.LOCK, EpochKind.LOCK_ALL})

# Rules 18–19.
NEVER_REORDERED: Final = frozenset({EpochKind.FENCE, EpochKind.LOCK_ALL})


class ReorderFlag(IdentityEnum):
    """The four reorder flags; the value is the :class:`~aiorma.win_info.Info` field that holds it."""

    ACCESS_AFTER_ACCESS = "access_after_access_reorder"
    ACCESS_AFTER_EXPOSURE = "access_after_exposure_reorder"
    EXPOSURE_AFTER_EXPOSURE = "exposure_after_exposure_reorder"
    EXPOSURE_AFTER_ACCESS = "exposure_after_access_reorder"

    def enabled(self, info: Info) -> bool:
        return bool(getattr(info, self.value))


# Rules 12–17: (immediately preceding epoch, epoch to activate) -> the flag that allows it.  No
# pair names a fence or lock_all epoch (rules 18–19), so a pair not in the table has no flag.
REORDER_FLAG: Final[dict[tuple[EpochKind, EpochKind], ReorderFlag]] = {
    (EpochKind.START, EpochKind.START): ReorderFlag.ACCESS_AFTER_ACCESS,  # 12
    (EpochKind.LOCK, EpochKind.START): ReorderFlag.ACCESS_AFTER_ACCESS,  # 12
    (EpochKind.START, EpochKind.LOCK): ReorderFlag.ACCESS_AFTER_ACCESS,  # 13
    (EpochKind.LOCK, EpochKind.LOCK): ReorderFlag.ACCESS_AFTER_ACCESS,  # 13
    (EpochKind.POST, EpochKind.START): ReorderFlag.ACCESS_AFTER_EXPOSURE,  # 14
    (EpochKind.POST, EpochKind.LOCK): ReorderFlag.ACCESS_AFTER_EXPOSURE,  # 15
    (EpochKind.POST, EpochKind.POST): ReorderFlag.EXPOSURE_AFTER_EXPOSURE,  # 16
    (EpochKind.START, EpochKind.POST): ReorderFlag.EXPOSURE_AFTER_ACCESS,  # 17
    (EpochKind.LOCK, EpochKind.POST): ReorderFlag.EXPOSURE_AFTER_ACCESS,  # 17
}


class ExtraCondition(IdentityEnum):
    LOCKED_RANK_NOT_A_TARGET = "the rank to lock is not a target of an active access epoch"  # 13a, 15a
    WINDOW_NOT_LOCKED = "no process holds a lock on the local window"  # 16a, 17a


EXTRA_CONDITION: Final[dict[EpochKind, ExtraCondition]] = {
    EpochKind.LOCK: ExtraCondition.LOCKED_RANK_NOT_A_TARGET,
    EpochKind.POST: ExtraCondition.WINDOW_NOT_LOCKED,
}

# Kinds that MPI lets be open at application level at the same time on one process.  Pairs not
# listed here are refused at the call (for instance a second start before complete).
MAY_OVERLAP: Final = frozenset(
    {
        (EpochKind.POST, EpochKind.START),
        (EpochKind.START, EpochKind.POST),
        (EpochKind.POST, EpochKind.LOCK),
        (EpochKind.LOCK, EpochKind.POST),
        (EpochKind.START, EpochKind.LOCK),
        (EpochKind.LOCK, EpochKind.START),
        (EpochKind.LOCK, EpochKind.LOCK),  # towards different ranks; checked at the call
    }
)

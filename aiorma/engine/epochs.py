"""Epoch records and the per-peer window traits (docs/architecture.md, *The control region*)."""

from __future__ import annotations

from typing import Any, Final

import attr

from ..constants import LockType
from .lock_protocol import QueueLock
from .rules import ACCESS_KINDS, EpochKind, EpochState
from .states import (
    ACTIVATED_PHASES,
    CLOSED_OUT_PHASES,
    CLOSED_PHASES,
    GRANTED_PHASES,
    EpochPhase,
    TargetPhase,
)

# Enum members the functions below read, as module constants: on Python 3.11 reading a
# member (``EpochKind.LOCK``) goes through the enum metaclass's ``__getattr__`` hook, five
# times a plain attribute's cost; compiled, a Final name is a C variable.
_EPOCH_PHASE_COMPLETED: Final = EpochPhase.COMPLETED
_EPOCH_STATE_ACTIVE: Final = EpochState.ACTIVE
_EPOCH_STATE_COMPLETED: Final = EpochState.COMPLETED
_EPOCH_STATE_DEFERRED: Final = EpochState.DEFERRED


class AccessTarget:
    """An access epoch's dealings with one target.

    (A plain class with its own ``__init__``, not an attrs class: one is made per target of every
    epoch, and compiled (aiorma._native) a hand-written ``__init__`` is native code, where attrs'
    generated one stays an interpreted function.)"""

    def __init__(self, rank: int, ordinal: int = 0, phase: TargetPhase = TargetPhase.WAITING) -> None:
        self.rank = rank
        self.ordinal = ordinal  # this access's number towards `rank` (0 until activation)
        self.phase = phase  # moved only by WindowEngine._move_target
        # RMA calls recorded while the epoch is deferred or not yet granted: (token, payload), in
        # call order; replayed at the grant.
        self.queued: list[tuple[int, Any]] = []
        self.op_count = 0  # RMA calls made in this epoch towards this target
        # Issue sequence number (per target, PeerTrait.issued_seq) of this access's last issued
        # op: the access's RMA is remotely complete once the target's flushed watermark reaches it.
        self.last_seq = 0
        # The lock request (lock/lock_all epochs without NOCHECK), until released.
        self.lock: QueueLock | None = None

    def __repr__(self) -> str:
        return f"AccessTarget(rank={self.rank}, ordinal={self.ordinal}, phase={self.phase.value})"

    @property
    def granted(self) -> bool:
        """The target granted this access (its RMA is issued as called)."""
        return self.phase in GRANTED_PHASES

    @property
    def closed_out(self) -> bool:
        """The "done" is sent or the lock released."""
        return self.phase in CLOSED_OUT_PHASES


class Epoch:
    """One epoch on this process; its life is :mod:`.states`.  (A plain class, for the reason
    :class:`AccessTarget` gives.)"""

    def __init__(
        self,
        id: int,
        kind: EpochKind,
        group: tuple[int, ...],
        assertion: int,
        predecessor: EpochKind | None,
        overlaps: frozenset[int],
        open_token: int,
        lock_type: LockType = LockType.SHARED,
        phase: EpochPhase = EpochPhase.DEFERRED,
        slot: tuple[EpochKind, int | None] = (EpochKind.FENCE, None),
    ) -> None:
        self.id = id
        self.kind = kind
        self.group = group
        self.assertion = assertion
        self.predecessor = predecessor  # kind of the epoch opened just before (rules 12-17)
        self.overlaps = overlaps  # ids of epochs open at application level when this one opened
        self.open_token = open_token
        self.lock_type = lock_type
        self.fence_ordinal = 0
        self.phase = phase  # moved only by WindowEngine._move_epoch
        self.close_token = 0
        self.access: dict[int, AccessTarget] = {}
        self.expected_done: dict[int, int] = {}  # exposure: origin -> ordinal
        self.fence_done_sent = False
        # Its key among the epochs open at application level: the kind, and the target of a lock
        # epoch (several lock epochs towards different ranks may be open at once; one of any other).
        self.slot = slot

    def __repr__(self) -> str:
        return f"Epoch(id={self.id}, kind={self.kind.value}, group={self.group}, phase={self.phase.value})"

    @property
    def state(self) -> EpochState:
        """The engine's view of the phase: deferred, active or completed."""
        if self.phase in ACTIVATED_PHASES:
            return _EPOCH_STATE_ACTIVE
        return _EPOCH_STATE_COMPLETED if self.phase is _EPOCH_PHASE_COMPLETED else _EPOCH_STATE_DEFERRED

    @property
    def closed(self) -> bool:
        """The program's view of the phase: closed by its closing call."""
        return self.phase in CLOSED_PHASES

    @property
    def is_access(self) -> bool:
        return self.kind in ACCESS_KINDS

    @property
    def has_ops(self) -> bool:
        return any(t.op_count for t in self.access.values())


@attr.s(auto_attribs=True)
class PeerTrait:
    """What one window knows about its instance at one peer: monotonic counters only.

    Every counter only grows and is compared with >=, so a grant that arrives long before the access
    it grants is remembered in O(1) space, and replayed writes cannot move anything backwards.
    """

    gats_accesses_opened: int = 0  # our accesses towards this peer
    gats_granted_access_id: int = 0  # highest access of ours this peer has granted
    gats_accesses_granted: int = 0  # accesses we granted to this peer (our exposures)
    gats_done_received: int = 0  # highest access of theirs towards us that they closed
    lock_requests_sent: int = 0
    fence_done_received: int = 0  # highest fence epoch this peer finished
    fence_opened: int = 0  # highest fence epoch this peer opened
    issued_seq: int = 0  # ops issued to this peer
    flush_requested: int = 0  # highest issue seq a flush was asked for
    remote_complete_seq: int = 0  # every op with seq <= this is complete at the peer

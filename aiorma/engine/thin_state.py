"""What the engine keeps for its thin path (:mod:`.thin`): the records of epochs served inline
and the answers the general path replays when one inflates."""

from __future__ import annotations

from typing import Any

from .lock_protocol import QueueLock

NOT_THIN = -1  # the call is not one the thin path serves: nothing changed, take the general path
DONE = 0  # served inline: the call's Request is finished


class ThinLock:
    """A lock epoch granted inside its ``lock()`` call and held through the thin path: its lock
    request is the one :class:`~.lock_protocol.QueueLock` state machine every lock epoch has,
    handed to the Epoch built if the epoch inflates."""

    __slots__ = ("exclusive", "last_seq", "lock", "op_count", "target")

    def __init__(self, target: int, exclusive: bool, lock: QueueLock) -> None:
        self.target = target
        self.exclusive = exclusive
        self.lock = lock
        self.op_count = 0
        self.last_seq = 0


class ThinFence:
    """Fence epochs served inline: at most one open (``ordinal``, its RMA per target) and at most
    one closed whose peers' "done"s are still awaited (``closing``, finished by
    ``closing_token``).  While one is closing, the open one is not yet active (a fence epoch
    activates only after the previous one completed), and its RMA calls take the general path."""

    __slots__ = ("assertion", "closing", "closing_token", "last_seq", "ops", "ordinal", "recorded", "waiting")

    def __init__(self, ordinal: int, assertion: int) -> None:
        self.ordinal = ordinal  # the open epoch's fence number (0: none open)
        self.assertion = assertion
        self.ops: dict[int, int] = {}  # target -> RMA calls of the open epoch
        self.last_seq: dict[int, int] = {}  # target -> issue sequence number of its last op
        # RMA calls towards targets whose fence notice had not arrived, in call order, issued at
        # the closing fence (as MPI libraries defer fence-epoch RMA): (target, token, payload).
        self.recorded: list[tuple[int, int, Any]] = []
        self.waiting: set[int] = set()  # their targets
        self.closing = 0
        self.closing_token = 0


class ThinAccess:
    """A GATS access epoch (start ... complete) served inline: its targets, the access number
    towards each (the peer's grant word must reach it), and its RMA per target.  ``open_token``
    finishes when every target has granted."""

    __slots__ = ("assertion", "group", "last_seq", "open_token", "ops", "ordinals")

    def __init__(
        self, group: tuple[int, ...], assertion: int, ordinals: dict[int, int], open_token: int
    ) -> None:
        self.group = group
        self.assertion = assertion
        self.ordinals = ordinals
        self.open_token = open_token
        self.ops: dict[int, int] = {}
        self.last_seq: dict[int, int] = {}


class ThinExposure:
    """A GATS exposure epoch (post ... wait) served inline: the "done" ordinal expected from each
    origin, and, once ``wait`` was called before every "done" arrived, its token."""

    __slots__ = ("assertion", "close_token", "expected_done", "group")

    def __init__(self, group: tuple[int, ...], assertion: int, expected_done: dict[int, int]) -> None:
        self.group = group
        self.assertion = assertion
        self.expected_done = expected_done
        self.close_token = 0

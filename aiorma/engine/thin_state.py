"""What the engine keeps for its thin path (:mod:`.thin`): the records of epochs served inline,
the answers the general path replays when one inflates, and the I/O the thin path needs."""

from __future__ import annotations

import os
from typing import Protocol

from .control import AtomicOp

#: (dest, index, op, value, compare, old): an atomic the thin path made, and its answer.
Answer = tuple[int, int, AtomicOp, int, int, int]

NOT_THIN = -1  # the call is not one the thin path serves: nothing changed, take the general path
DONE = 0  # served inline: the call's Request is finished


def thin_path_enabled() -> bool:
    """The switch: ``AIORMA_THIN=0`` in the environment turns the thin path (and inline waiting)
    off, for tests that check both give the same results."""
    return os.environ.get("AIORMA_THIN", "1") != "0"


class InlineIO(Protocol):
    """What the thin path needs from the driver: the transport's answers inside the call."""

    def atomics_inline(self, dest: int) -> bool:
        """True when atomics on ``dest``'s control words are answered inside the call."""

    def fetch(self, dest: int, index: int, op: AtomicOp, value: int, compare: int) -> int:
        """An atomic with a result on ``dest``'s control word ``index``, answered now."""

    def flush(self, target: int, upto: int) -> bool:
        """Ask for remote completion of the ops issued to ``target``; True when already so (else
        the transport reports ``flushed`` later, as for a general flush)."""


class ThinLock:
    """An uncontended lock epoch held through the thin path (see the module docstring)."""

    __slots__ = ("acquired", "exclusive", "last_seq", "op_count", "target")

    def __init__(self, target: int, exclusive: bool, acquired: list[Answer]) -> None:
        self.target = target
        self.exclusive = exclusive
        self.acquired = acquired  # the acquisition's atomics, replayed if the epoch inflates
        self.op_count = 0
        self.last_seq = 0

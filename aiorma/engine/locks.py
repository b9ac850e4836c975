"""Target-side lock table: who holds this window's lock, and who waits (FIFO)."""

from __future__ import annotations

from collections import deque

import attrs

from ..constants import LockType


@attrs.frozen
class LockRequest:
    origin: int
    ordinal: int
    lock_type: LockType


@attrs.define
class LockTable:
    """Shared/exclusive lock of one window at its target.

    Requests are granted in arrival order: a shared request behind a waiting exclusive one waits
    too, so writers are not starved.  An origin holds at most one lock here at a time (the origin's
    engine refuses a second ``lock`` of the same rank before ``unlock``).
    """

    holders: dict[int, LockRequest] = attrs.field(factory=dict)
    waiting: deque[LockRequest] = attrs.field(factory=deque)

    @property
    def locked(self) -> bool:
        return bool(self.holders)

    def request(self, request: LockRequest) -> list[LockRequest]:
        """Queue a request; returns the requests granted as a result (possibly this one)."""
        self.waiting.append(request)
        return self._grant()

    def release(self, origin: int, ordinal: int) -> list[LockRequest]:
        """Release ``origin``'s lock number ``ordinal``; returns the requests granted next."""
        held = self.holders.get(origin)
        if held is None or held.ordinal != ordinal:
            raise ValueError(f"rank {origin} released lock {ordinal} that it does not hold")
        del self.holders[origin]
        return self._grant()

    def _grant(self) -> list[LockRequest]:
        granted: list[LockRequest] = []
        while self.waiting:
            head = self.waiting[0]
            if head.lock_type is LockType.EXCLUSIVE:
                if self.holders:
                    break
            elif any(h.lock_type is LockType.EXCLUSIVE for h in self.holders.values()):
                break
            self.waiting.popleft()
            self.holders[head.origin] = head
            granted.append(head)
            if head.lock_type is LockType.EXCLUSIVE:
                break
        return granted

"""A few WindowEngines wired together in memory, with no event loop (as h11's tests/helpers.py).

Each engine gets its own control region (a numpy array).  Control writes wait in one FIFO queue
per (src, dst) pair until delivered: delivery applies them to the destination's array and tells
its engine ``control_changed()``.  Control fetches (the lock atomics) are applied at once and
answered at once.  RMA operations are not applied (payloads may be plain strings): an IssueRma is
recorded; a FlushTarget is answered at once unless its rank is ``manual``.  CompleteRequest
actions are collected per rank.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from aiorma.engine.actions import CompleteRequest, ControlFetch, ControlWrite, FlushTarget, IssueRma
from aiorma.engine.control import AtomicOp, ControlLayout, Word
from aiorma.engine.window_engine import WindowEngine
from aiorma.win_info import Info

WIN_ID = 7
LIFETIME = ("open", "close", "activate", "complete")


class EngineNet:
    def __init__(self, size: int, info: Info | None = None) -> None:
        self.size = size
        self.layout = ControlLayout(size)
        self.engines = [WindowEngine(WIN_ID, r, size, info, history=True) for r in range(size)]
        self.queues: dict[tuple[int, int], deque[ControlWrite]] = {
            (s, d): deque() for s in range(size) for d in range(size)
        }
        self.held: set[tuple[int, int]] = set()
        self.manual: set[int] = set()  # ranks whose FlushTargets are left to the test
        self.sent: list[tuple[int, int, ControlWrite]] = []
        self.fetches: list[tuple[int, ControlFetch]] = []
        self.issued: list[list[IssueRma]] = [[] for _ in range(size)]
        self.flush_requests: list[list[FlushTarget]] = [[] for _ in range(size)]
        self.completed: list[set[int]] = [set() for _ in range(size)]
        self.order: list[list[int]] = [[] for _ in range(size)]  # completion order
        self.errors: list[dict[int, BaseException]] = [{} for _ in range(size)]

    def __getitem__(self, rank: int) -> WindowEngine:
        return self.engines[rank]

    def hold(self, src: int, dst: int) -> None:
        self.held.add((src, dst))

    def release(self, src: int, dst: int) -> None:
        self.held.discard((src, dst))

    def deliver(self, src: int | None = None, dst: int | None = None) -> int:
        """Deliver queued packets: all not-held pairs, or exactly the pair given (held or not)."""
        if src is not None and dst is not None:
            pairs = [(src, dst)]
        else:
            pairs = [p for p in self.queues if p not in self.held]
        count = 0
        for s, d in pairs:
            queue = self.queues[(s, d)]
            while queue:
                write = queue.popleft()
                control = self.engines[d].control
                if write.op is AtomicOp.SUM:
                    control[write.index] += write.value
                else:
                    control[write.index] = max(int(control[write.index]), write.value)
                self.engines[d].control_changed()
                count += 1
        return count

    def notice(self, src: int, word: Word, value: int) -> ControlWrite:
        """The control write by which ``src`` raises its slot of ``word`` to ``value``."""
        return ControlWrite(0, self.layout.index(word, src), AtomicOp.MAX, value)

    def notices(self, src: int, dst: int) -> list[tuple[Word | None, int]]:
        """The writes queued from ``src`` to ``dst``, as (word, value)."""
        return [(self.layout.word_of(w.index)[0], w.value) for w in self.queues[(src, dst)]]

    def step(self) -> int:
        """Drain every engine once and carry out the actions; returns how many there were."""
        count = 0
        for rank, engine in enumerate(self.engines):
            for action in engine.drain():
                count += 1
                self._execute(rank, engine, action)
        return count

    def _execute(self, rank: int, engine: WindowEngine, action: Any) -> None:
        if isinstance(action, ControlWrite):
            self.queues[(rank, action.dest)].append(action)
            self.sent.append((rank, action.dest, action))
        elif isinstance(action, ControlFetch):
            self.fetches.append((rank, action))
            control = self.engines[action.dest].control
            old = int(control[action.index])
            if action.op is AtomicOp.SUM:
                control[action.index] = old + action.value
            elif action.op is AtomicOp.REPLACE or (action.op is AtomicOp.CAS and old == action.compare):
                control[action.index] = action.value
            if action.op is not AtomicOp.NO_OP and action.dest != rank:
                self.engines[action.dest].control_changed()
            engine.fetched(action.token, old)
        elif isinstance(action, IssueRma):
            self.issued[rank].append(action)
        elif isinstance(action, FlushTarget):
            self.flush_requests[rank].append(action)
            if rank not in self.manual:
                engine.flushed(action.target, action.upto)
        elif isinstance(action, CompleteRequest):
            assert action.token not in self.completed[rank], f"token {action.token} completed twice"
            self.completed[rank].add(action.token)
            self.order[rank].append(action.token)
            if action.error is not None:
                self.errors[rank][action.token] = action.error
        else:  # pragma: no cover
            raise AssertionError(f"unknown action {action!r}")

    def settle(self) -> None:
        """Step and deliver until nothing moves."""
        while self.step() + self.deliver():
            pass

    def payloads(self, rank: int) -> list[Any]:
        return [a.payload for a in self.issued[rank]]

    def steps(self, rank: int) -> list[tuple[str, int]]:
        """The rank's epoch lifetime steps (open/close/activate/complete), in order."""
        history = self.engines[rank].history
        assert history is not None
        return [(e.step, e.epoch_id) for e in history if e.step in LIFETIME]


def snapshot(engine: WindowEngine) -> dict[str, Any]:
    """A comparable picture of everything an application call could change."""

    def access(epoch: Any) -> tuple[Any, ...]:
        return tuple(
            (r, a.ordinal, a.granted, a.op_count, a.last_seq, len(a.queued), a.closed_out)
            for r, a in sorted(epoch.access.items())
        )

    return {
        "live": [
            (e.id, e.kind, e.state, e.closed, access(e), tuple(sorted(e.expected_done.items())))
            for e in engine.live_epochs()
        ],
        "open": [e.id for e in engine.open_epochs()],
        "peers": [attrs.astuple(p) for p in engine.peers],
        "control": engine.control.tolist(),
        "locks": sorted((t, lock.head, lock.hold) for t, lock in engine._locks.items()),
        "freeing": engine.freeing,
        "failure": engine.failure,
        "history": list(engine.history or ()),
        "pending_tokens": sorted(engine._pending_tokens),
        "next_token": engine._next_token,
        "actions": list(engine._actions),
    }

"""The in-process transport: every rank is a task in one event loop.

Deterministic, and part of the package so that users can test their own code with it.  Data moves
with numpy at issue time; control-region atomics are applied to the destination's array directly.
Completions and "your control region changed" reports are delivered by event-loop callbacks (never
from inside ``issue``/``control_write``), in the order they were produced.  Two hooks inject delays:

* ``notice_delay(src, dest, notice) -> seconds``: apply a control write (a grant, a "done", a
  fence notice, a lock hand-off) only later; writes between one pair of ranks still land in the
  order made.
* ``op_delay(origin, op) -> seconds``: apply an RMA operation to target memory only later; flushes
  towards that target wait for it.  Accumulate-family operations (accumulate, get_accumulate,
  fetch_and_op, compare_and_swap) from one origin to one target of a window still apply in call
  order, as MPI's default ``accumulate_ordering`` (rar, raw, war, waw) requires: one that is
  due earlier waits for its predecessors.  Puts and gets are not ordered (nor are they in MPI).
"""

from __future__ import annotations

import asyncio
import ctypes
from collections import deque
from collections.abc import Callable

import attrs
import numpy as np

from .._core.watch import poke_all
from ..engine.control import AtomicOp, ControlLayout, Word
from ..errors import RmaTypeError
from ..ops import combine
from .base import EndpointBase, PollNeed, RmaKind, RmaOp, Sink, WindowLayout


@attrs.frozen
class Notice:
    """A control write as the ``notice_delay`` hook sees it: ``word`` is None for the target's
    own lock words (never written by plain writes)."""

    win_id: int
    word: Word | None
    index: int
    op: AtomicOp
    value: int


NoticeDelay = Callable[[int, int, Notice], float]
OpDelay = Callable[[int, RmaOp], float]


@attrs.define(eq=False)
class _Rendezvous:
    """A collective step (window creation or free) that every rank must reach."""

    future: asyncio.Future[None]
    arrived: int = 0
    broken: bool = False  # a rank failed before every rank arrived


class LocalNetwork:
    """The shared medium of ``size`` in-process ranks."""

    def __init__(
        self,
        size: int,
        *,
        notice_delay: NoticeDelay | None = None,
        op_delay: OpDelay | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a network needs at least one rank")
        self.size = size
        self.notice_delay = notice_delay
        self.op_delay = op_delay
        self.memory: dict[int, list[np.ndarray | None]] = {}
        self.control: dict[int, list[np.ndarray | None]] = {}
        self.endpoints = [LocalEndpoint(self, rank) for rank in range(size)]
        self._rendezvous: dict[tuple[str, int], _Rendezvous] = {}
        self._queues: dict[tuple[int, int], deque[tuple[float, int, int, AtomicOp, int]]] = {}
        self._changed: set[tuple[int, int]] = set()  # (dest, win_id) with a report scheduled
        #: Set by :meth:`fail`: the error that collective steps raise once a rank has failed.
        self.failure: Callable[[], BaseException] | None = None

    def fail(self, error: Callable[[], BaseException]) -> None:
        """A rank failed: every collective step (window creation, free) now waiting, and every
        later one, raises ``error()`` instead of waiting for a rank that will never come."""
        self.failure = error
        points, self._rendezvous = self._rendezvous, {}
        for point in points.values():
            point.broken = True
            point.future.set_result(None)

    async def rendezvous(self, what: str, win_id: int) -> None:
        if self.failure is not None:
            raise self.failure()
        loop = asyncio.get_running_loop()
        point = self._rendezvous.setdefault((what, win_id), _Rendezvous(loop.create_future()))
        point.arrived += 1
        if point.arrived == self.size:
            del self._rendezvous[(what, win_id)]
            point.future.set_result(None)
        await asyncio.shield(point.future)
        if point.broken and self.failure is not None:
            raise self.failure()

    def control_write(self, src: int, dest: int, win_id: int, index: int, op: AtomicOp, value: int) -> None:
        delay = 0.0
        if self.notice_delay is not None:
            word, _ = ControlLayout(self.size).word_of(index)
            delay = self.notice_delay(src, dest, Notice(win_id, word, index, op, value))
        queue = self._queues.setdefault((src, dest), deque())
        if delay <= 0 and not queue:
            self._apply_write(dest, win_id, index, op, value)
            return
        loop = asyncio.get_running_loop()
        # FIFO per pair: a write never overtakes an earlier, more delayed one.
        when = loop.time() + max(delay, 0.0)
        if queue:
            when = max(when, queue[-1][0])
        queue.append((when, win_id, index, op, value))
        if len(queue) == 1:
            self._schedule(src, dest)

    def control_fetch(
        self, src: int, dest: int, win_id: int, token: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> int | None:
        """Apply an atomic to ``dest``'s control word; the old value (here: at once; a subclass
        may return None and report it to ``src``'s sink later)."""
        return self.apply_fetch(dest, win_id, index, op, value, compare)

    def apply_fetch(
        self,
        dest: int,
        win_id: int,
        index: int,
        op: AtomicOp,
        value: int,
        compare: int = 0,
        *,
        report: bool = True,
    ) -> int:
        """Apply ``op`` to ``dest``'s control word ``index`` (atomic: one thread, no await) and
        return the old value; a change is reported to ``dest``'s sink unless ``report`` is off."""
        control = self._control_of(dest, win_id)
        assert control is not None, "fetch on a freed window"
        old = int(control[index])
        if op is AtomicOp.SUM:
            control[index] = old + value
        elif op is AtomicOp.REPLACE:
            control[index] = value
        elif op is AtomicOp.MAX:
            control[index] = max(old, value)
        elif op is AtomicOp.CAS and old == compare:
            control[index] = value
        if report and op is not AtomicOp.NO_OP:
            self._report_change(dest, win_id)
        return old

    def _control_of(self, rank: int, win_id: int) -> np.ndarray | None:
        regions = self.control.get(win_id)
        return regions[rank] if regions is not None else None

    def _apply_write(
        self, dest: int, win_id: int, index: int, op: AtomicOp, value: int, *, report: bool = True
    ) -> None:
        if self._control_of(dest, win_id) is not None:  # else the window was freed: a stale write
            self.apply_fetch(dest, win_id, index, op, value, report=report)

    def _report_change(self, dest: int, win_id: int) -> None:
        # One report per (rank, window) per turn of the loop, however many words changed.
        key = (dest, win_id)
        if key not in self._changed:
            self._changed.add(key)
            asyncio.get_running_loop().call_soon(self._changed_report, key)

    def _changed_report(self, key: tuple[int, int]) -> None:
        self._changed.discard(key)
        dest, win_id = key
        sink = self.endpoints[dest].sink
        if sink is not None and win_id in self.control:
            sink.control_changed(win_id)

    def _schedule(self, src: int, dest: int) -> None:
        loop = asyncio.get_running_loop()
        when = self._queues[(src, dest)][0][0]
        if when <= loop.time():
            loop.call_soon(self._drain, src, dest)
        else:
            loop.call_at(when, self._drain, src, dest)

    def _drain(self, src: int, dest: int) -> None:
        queue = self._queues[(src, dest)]
        now = asyncio.get_running_loop().time()
        while queue and queue[0][0] <= now:
            _, win_id, index, op, value = queue.popleft()
            self._apply_write(dest, win_id, index, op, value)
        if queue:
            self._schedule(src, dest)


class LocalEndpoint(EndpointBase):
    """One rank of a :class:`LocalNetwork`."""

    def __init__(self, network: LocalNetwork, rank: int) -> None:
        self.network = network
        self.rank = rank
        self.size = network.size
        self.polled = False
        self.sink: Sink | None = None
        # (win_id, target) -> ops applied later because of op_delay, and flushes waiting on them
        self._delayed: dict[tuple[int, int], int] = {}
        self._flushes: dict[tuple[int, int], list[int]] = {}
        # (win_id, target) -> delayed accumulate-family ops, in call order: (due time, token, op)
        self._ordered: dict[tuple[int, int], deque[tuple[float, int, RmaOp]]] = {}

    def attach(self, sink: Sink) -> None:
        self.sink = sink

    async def create_window(
        self,
        win_id: int,
        memory: np.ndarray | None,
        count: int,
        dtype: np.dtype,
        control_words: int,
        *,
        notify: bool = False,  # every write is noticed here anyway
        watch_control: bool = True,  # (nothing is scanned here: writes are reported as they land)
    ) -> WindowLayout:
        if memory is None:
            memory = np.zeros(count, dtype=dtype)
        control = np.zeros(control_words, np.int64)
        slots = self.network.memory.setdefault(win_id, [None] * self.size)
        slots[self.rank] = memory.reshape(-1)
        self.network.control.setdefault(win_id, [None] * self.size)[self.rank] = control
        await self.network.rendezvous("create", win_id)
        dtypes = {m.dtype for m in slots if m is not None}
        if len(dtypes) != 1:
            raise RmaTypeError(f"window {win_id} has different dtypes on different ranks: {dtypes}")
        return WindowLayout(memory, control, tuple(int(m.size) for m in slots if m is not None))

    async def free_window(self, win_id: int) -> np.ndarray | None:
        await self.network.rendezvous("free", win_id)
        self.network.memory.pop(win_id, None)
        self.network.control.pop(win_id, None)
        return None  # local memory is ordinary numpy memory: it stays valid

    def issue(self, win_id: int, token: int, op: RmaOp) -> bool:
        delay = self.network.op_delay(self.rank, op) if self.network.op_delay else 0.0
        key = (win_id, op.target)
        ordered = self._ordered.get(key) if op.kind in _ACCUMULATE_FAMILY else None
        if delay <= 0 and not ordered:
            _apply(self.network.memory[win_id][op.target], op)
            if op.kind is not RmaKind.GET:
                poke_all()  # a rank of this process may wait on that word (aiorma._core.watch)
            return True
        self._delayed[key] = self._delayed.get(key, 0) + 1
        loop = asyncio.get_running_loop()
        if op.kind not in _ACCUMULATE_FAMILY:
            loop.call_later(delay, self._apply_delayed, win_id, token, op)
            return False
        # Accumulate ordering: never due before the previous accumulate-family op to this target,
        # applied from one FIFO queue (timers due at the same time are not ordered by asyncio).
        queue = self._ordered.setdefault(key, deque())
        when = loop.time() + max(delay, 0.0)
        if queue:
            when = max(when, queue[-1][0])
        queue.append((when, token, op))
        if len(queue) == 1:
            loop.call_at(when, self._drain_ordered, key)
        return False

    def _drain_ordered(self, key: tuple[int, int]) -> None:
        queue = self._ordered[key]
        loop = asyncio.get_running_loop()
        now = loop.time()
        while queue and queue[0][0] <= now:
            _, token, op = queue.popleft()
            self._apply_delayed(key[0], token, op)
        if queue:
            loop.call_at(queue[0][0], self._drain_ordered, key)
        else:
            del self._ordered[key]

    def _apply_delayed(self, win_id: int, token: int, op: RmaOp) -> None:
        key = (win_id, op.target)
        memory = self.network.memory.get(win_id)
        if memory is not None:
            _apply(memory[op.target], op)
            if op.kind is not RmaKind.GET:
                poke_all()
        self._delayed[key] -= 1
        self._op_done(win_id, token)
        if self._delayed[key] == 0:
            for upto in self._flushes.pop(key, []):
                self._flushed(win_id, op.target, upto)

    def stores_words_whole(self, target: int) -> bool:
        """Always: every rank's memory is an array of this process, copied into by numpy."""
        return True

    def put_words_flushed(self, win_id: int, target: int, disp: int, words: np.ndarray) -> bool:
        return self.put_flushed(win_id, target, disp, words)

    def put_word_flushed(self, win_id: int, target: int, disp: int, word: int) -> bool:
        return self.put_words_flushed(win_id, target, disp, np.array([word], np.int64))

    def post_words(self, win_id: int, target: int, disp: int, words: np.ndarray | int) -> bool:
        """Stored at once (whole words: numpy copies int64 elements into an array of this
        process), unless the network delays ops (then the caller takes the general path)."""
        if isinstance(words, int):
            words = np.array([words], np.int64)
        return self.put_words_flushed(win_id, target, disp, words)

    def reads_memory_of(self, peer: int) -> bool:
        """Always: every rank is this process."""
        return True

    def read_memory(self, peer: int, address: int, out: np.ndarray) -> None:
        """A copy within this process."""
        ctypes.memmove(out.ctypes.data, address, int(out.nbytes))

    def put_flushed(self, win_id: int, target: int, disp: int, data: np.ndarray) -> bool:
        """Applied at once, unless the network delays ops (then the general path keeps order)."""
        if self.network.op_delay or self._delayed.get((win_id, target)):
            return False
        self.network.memory[win_id][target][disp : disp + data.size] = data
        poke_all()
        return True

    def flush(self, win_id: int, target: int, upto: int) -> bool:
        key = (win_id, target)
        if not self._delayed.get(key, 0):
            return True
        self._flushes.setdefault(key, []).append(upto)
        return False

    def control_write(self, win_id: int, dest: int, index: int, op: AtomicOp, value: int) -> None:
        self.network.control_write(self.rank, dest, win_id, index, op, value)

    def control_fetch(
        self, win_id: int, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> int | None:
        return self.network.control_fetch(self.rank, dest, win_id, token, index, op, value, compare)

    def poll(self) -> bool:
        return False

    def doorbell(self) -> int | None:
        return None

    def parking(self, parked: bool) -> None:
        return None

    def poll_need(self) -> PollNeed:
        return PollNeed.IDLE

    async def close(self) -> None:
        return None

    def abandon(self, reason: str | None = None) -> None:
        return None  # in-process ranks fail their peers with the exception itself (runtime.py)

    def _op_done(self, win_id: int, token: int) -> None:
        if self.sink is not None:
            self.sink.op_completed(win_id, token)

    def _flushed(self, win_id: int, target: int, upto: int) -> None:
        if self.sink is not None:
            self.sink.flushed(win_id, target, upto)


#: The operations MPI's default ``accumulate_ordering`` orders (per origin, target and window).
_ACCUMULATE_FAMILY = frozenset(
    {RmaKind.ACCUMULATE, RmaKind.GET_ACCUMULATE, RmaKind.FETCH_AND_OP, RmaKind.COMPARE_AND_SWAP}
)


def _apply(memory: np.ndarray | None, op: RmaOp) -> None:
    """Carry out one RMA operation on the target's memory (atomic: one thread, no await)."""
    assert memory is not None
    span = memory[op.disp : op.disp + op.count]
    kind = op.kind
    if kind is RmaKind.PUT:
        span[...] = op.origin
    elif kind is RmaKind.GET:
        op.result[...] = span
    elif kind is RmaKind.ACCUMULATE:
        span[...] = combine(op.op, span, op.origin)
    elif kind in (RmaKind.GET_ACCUMULATE, RmaKind.FETCH_AND_OP):
        old = span.copy()
        span[...] = combine(op.op, old, op.origin)
        op.result[...] = old
    elif kind is RmaKind.COMPARE_AND_SWAP:
        old = span[0]
        op.result[0] = old
        if old == op.compare[0]:
            span[0] = op.origin[0]

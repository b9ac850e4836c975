"""The in-process transport: every rank is a task in one event loop.

Deterministic, and part of the package so that users can test their own code with it.  Data moves
with numpy at issue time; completions and packets are delivered by event-loop callbacks (never
from inside ``issue``/``send``), in the order they were produced.  Two hooks inject delays:

* ``packet_delay(src, dest, packet) -> seconds``: hold a control packet back; packets between one
  pair of ranks still arrive in the order sent.
* ``op_delay(origin, op) -> seconds``: apply an RMA operation to target memory only later; flushes
  towards that target wait for it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import attrs
import numpy as np

from ..engine.packets import ControlPacket
from ..errors import RmaTypeError
from ..ops import combine
from .base import RmaKind, RmaOp, Sink, WindowLayout

PacketDelay = Callable[[int, int, ControlPacket], float]
OpDelay = Callable[[int, RmaOp], float]


@attrs.define(eq=False)
class _Rendezvous:
    """A collective step (window creation or free) that every rank must reach."""

    future: asyncio.Future[None]
    arrived: int = 0


class LocalNetwork:
    """The shared medium of ``size`` in-process ranks."""

    def __init__(
        self,
        size: int,
        *,
        packet_delay: PacketDelay | None = None,
        op_delay: OpDelay | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a network needs at least one rank")
        self.size = size
        self.packet_delay = packet_delay
        self.op_delay = op_delay
        self.memory: dict[int, list[np.ndarray | None]] = {}
        self.endpoints = [LocalEndpoint(self, rank) for rank in range(size)]
        self._rendezvous: dict[tuple[str, int], _Rendezvous] = {}
        self._queues: dict[tuple[int, int], deque[tuple[float, ControlPacket]]] = {}

    async def rendezvous(self, what: str, win_id: int) -> None:
        loop = asyncio.get_running_loop()
        point = self._rendezvous.setdefault((what, win_id), _Rendezvous(loop.create_future()))
        point.arrived += 1
        if point.arrived == self.size:
            del self._rendezvous[(what, win_id)]
            point.future.set_result(None)
        await asyncio.shield(point.future)

    def deliver(self, src: int, dest: int, packet: ControlPacket) -> None:
        loop = asyncio.get_running_loop()
        delay = self.packet_delay(src, dest, packet) if self.packet_delay else 0.0
        queue = self._queues.setdefault((src, dest), deque())
        # FIFO per pair: a packet never overtakes an earlier, more delayed one.
        when = loop.time() + max(delay, 0.0)
        if queue:
            when = max(when, queue[-1][0])
        queue.append((when, packet))
        if len(queue) == 1:
            self._schedule(src, dest)

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
        sink = self.endpoints[dest].sink
        while queue and queue[0][0] <= now:
            _, packet = queue.popleft()
            if sink is not None:
                sink.packet_received(src, packet)
        if queue:
            self._schedule(src, dest)


class LocalEndpoint:
    """One rank of a :class:`LocalNetwork`."""

    def __init__(self, network: LocalNetwork, rank: int) -> None:
        self.network = network
        self.rank = rank
        self.size = network.size
        self.sink: Sink | None = None
        # (win_id, target) -> ops applied later because of op_delay, and flushes waiting on them
        self._delayed: dict[tuple[int, int], int] = {}
        self._flushes: dict[tuple[int, int], list[int]] = {}

    def attach(self, sink: Sink) -> None:
        self.sink = sink

    async def create_window(
        self, win_id: int, memory: np.ndarray | None, count: int, dtype: np.dtype
    ) -> WindowLayout:
        if memory is None:
            memory = np.zeros(count, dtype=dtype)
        slots = self.network.memory.setdefault(win_id, [None] * self.size)
        slots[self.rank] = memory.reshape(-1)
        await self.network.rendezvous("create", win_id)
        dtypes = {m.dtype for m in slots if m is not None}
        if len(dtypes) != 1:
            raise RmaTypeError(f"window {win_id} has different dtypes on different ranks: {dtypes}")
        return WindowLayout(memory, tuple(int(m.size) for m in slots if m is not None))

    async def free_window(self, win_id: int) -> np.ndarray | None:
        await self.network.rendezvous("free", win_id)
        self.network.memory.pop(win_id, None)
        return None  # local memory is ordinary numpy memory: it stays valid

    def issue(self, win_id: int, token: int, op: RmaOp) -> None:
        loop = asyncio.get_running_loop()
        delay = self.network.op_delay(self.rank, op) if self.network.op_delay else 0.0
        if delay <= 0:
            _apply(self.network.memory[win_id][op.target], op)
            loop.call_soon(self._op_done, win_id, token)
            return
        key = (win_id, op.target)
        self._delayed[key] = self._delayed.get(key, 0) + 1

        def apply_later() -> None:
            memory = self.network.memory.get(win_id)
            if memory is not None:
                _apply(memory[op.target], op)
            self._delayed[key] -= 1
            self._op_done(win_id, token)
            if self._delayed[key] == 0:
                for upto in self._flushes.pop(key, []):
                    self._flushed(win_id, op.target, upto)

        loop.call_later(delay, apply_later)

    def flush(self, win_id: int, target: int, upto: int) -> None:
        key = (win_id, target)
        if self._delayed.get(key, 0):
            self._flushes.setdefault(key, []).append(upto)
        else:
            asyncio.get_running_loop().call_soon(self._flushed, win_id, target, upto)

    def send(self, dest: int, packet: ControlPacket) -> None:
        self.network.deliver(self.rank, dest, packet)

    def poll(self) -> bool:
        return False

    def wants_polling(self) -> bool:
        return False

    def idle_fileno(self) -> int | None:
        return None

    def busy(self) -> bool:
        return False

    def expecting(self) -> bool:
        return False

    async def close(self) -> None:
        return None

    def _op_done(self, win_id: int, token: int) -> None:
        if self.sink is not None:
            self.sink.op_completed(win_id, token)

    def _flushed(self, win_id: int, target: int, upto: int) -> None:
        if self.sink is not None:
            self.sink.flushed(win_id, target, upto)


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

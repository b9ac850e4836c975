"""Lightweight simulated ranks: windows and one-sided puts straight on the network model.

The full engine costs O(P²) control writes per fence (every rank tells every other), which is
fine up to a few dozen ranks but not for evaluating collectives at P = 1024.  Here a window is a
numpy array per rank and a put is a real write into the target's array, delivered at the time the
:class:`~aiorma.sim.cost.NetworkModel` gives; nothing else is modelled (no epochs, no
locks).  The collectives run on it are real executions of their message pattern: each put is
booked on the model and each rank learns of data only by watching its own memory.

A rank watches memory with :meth:`LiteWindow.wait_until` — the simulated form of polling a
monotonic flag: the NIC writes the data at its arrival, the rank notices it after spending the
receive overhead ``o`` of its CPU (booked at the arrival, in time order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from ..errors import RmaRangeError, RmaTypeError
from ..request import Request
from .clock import EventQueue
from .cost import NetworkModel

#: ``consume(slot, lo, hi)``: the receiver's use of a landed message (as in ``Landing.recv_with``).
Consume = Callable[[np.ndarray, int, int], None]


class LiteFabric:
    """``model.size`` lightweight ranks sharing one simulated network and one event queue.
    Use inside a :class:`~aiorma.sim.clock.VirtualClockLoop` (``run_virtual``)."""

    def __init__(self, model: NetworkModel) -> None:
        self.model = model
        self.size = model.size
        self.events = EventQueue()
        self._next_group = 0

    def allocate(self, count: int, dtype: np.dtype | type = np.int64) -> list[LiteWindow]:
        """One zeroed window of ``count`` elements per rank (collective in spirit; costs no time)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, not {count}")
        group_id = self._next_group
        self._next_group += 1
        group: list[LiteWindow] = []
        for rank in range(self.size):
            group.append(LiteWindow(self, group_id, group, rank, np.zeros(count, dtype=dtype)))
        return group


class LiteWindow:
    """One rank's window of a :class:`LiteFabric` group.  ``put`` and ``multicast`` return a
    :class:`~aiorma.Request` that completes at local completion (when the rank's CPU has posted
    the message); the data lands at the target later, as the model says."""

    __slots__ = ("_waiters", "fabric", "group", "group_id", "memory", "rank")

    def __init__(
        self, fabric: LiteFabric, group_id: int, group: list[LiteWindow], rank: int, memory: np.ndarray
    ):
        self.fabric = fabric
        self.group_id = group_id
        self.group = group
        self.rank = rank
        self.memory = memory
        self._waiters: dict[int, list[tuple[Any, asyncio.Future[None]]]] = {}

    @property
    def size(self) -> int:
        return self.fabric.size

    # ------------------------------------------------------------------------- RMA

    def put(self, origin: np.ndarray, target: int, disp: int = 0) -> Request:
        """Write ``origin`` into ``target``'s window at ``disp`` (the data is taken now)."""
        data = self._check(origin, target, disp)
        fabric, model = self.fabric, self.fabric.model
        loop = asyncio.get_running_loop()
        model.counters[self.rank].puts += 1
        arrival = model.send(self.rank, target, int(data.nbytes), loop.time())
        fabric.events.at_fifo((self.group_id, self.rank, target), arrival, self._arrive, target, disp, data)
        return self._local_completion(loop, model.cpu[self.rank], "put")

    def multicast(self, origin: np.ndarray, disp: int = 0) -> Request:
        """Unreliable constant-cost multicast of ``origin`` to every other rank's window at
        ``disp``; each copy may be lost (``NetworkParams.multicast_loss``)."""
        data = self._check(origin, self.rank, disp)
        fabric, model = self.fabric, self.fabric.model
        loop = asyncio.get_running_loop()
        others = [r for r in range(self.size) if r != self.rank]
        for dest, arrival in model.multicast(self.rank, others, int(data.nbytes), loop.time()):
            fabric.events.at(arrival, self._arrive, dest, disp, data)
        return self._local_completion(loop, model.cpu[self.rank], "multicast")

    def wait_until(self, disp: int, value: Any) -> Request:
        """Completes once this rank has seen ``memory[disp] >= value`` (a monotonic flag)."""
        if not 0 <= disp < self.memory.size:
            raise RmaRangeError(f"displacement {disp} is outside this window of {self.memory.size}")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.memory[disp] >= value:
            future.set_result(None)
        else:
            self._waiters.setdefault(disp, []).append((value, future))
        return Request(future, None, "wait_until")

    # --------------------------------------------------------------------- helpers

    def _check(self, origin: np.ndarray, target: int, disp: int) -> np.ndarray:
        if not isinstance(origin, np.ndarray) or origin.dtype != self.memory.dtype:
            raise RmaTypeError(f"origin must be a numpy array of {self.memory.dtype}")
        if not 0 <= target < self.size:
            raise RmaRangeError(f"target {target} is outside the group of {self.size}")
        if disp < 0 or disp + origin.size > self.memory.size:
            raise RmaRangeError(
                f"elements [{disp}, {disp + origin.size}) are outside the window of {self.memory.size}"
            )
        return origin.reshape(-1).copy()

    def _local_completion(self, loop: asyncio.AbstractEventLoop, when: float, what: str) -> Request:
        future: asyncio.Future[None] = loop.create_future()
        self.fabric.events.at(when, _finish, future)
        return Request(future, None, what)

    def _arrive(self, target: int, disp: int, data: np.ndarray) -> None:
        """The data reached the target's memory now: the target notices it after ``o``."""
        fabric = self.fabric
        seen = fabric.model.receive(target, asyncio.get_running_loop().time())
        fabric.events.at_fifo(
            (self.group_id, self.rank, target, "seen"), seen, self.group[target]._land, disp, data
        )

    def _land(self, disp: int, data: np.ndarray) -> None:
        self.memory[disp : disp + data.size] = data
        for d in range(disp, disp + data.size):
            waiters = self._waiters.get(d)
            if not waiters:
                continue
            still = []
            for value, future in waiters:
                if self.memory[d] >= value:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((value, future))
            if still:
                self._waiters[d] = still
            else:
                del self._waiters[d]


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class LiteLanding:
    """:class:`~aiorma.collectives.landing.Landing`'s interface on lightweight ranks — ``rank``,
    ``size``, ``signal``/``wait_signal``, ``chunks``, ``send``, ``recv``, ``recv_with`` — so the
    library's real collective algorithms (:func:`aiorma.collectives.barrier.nway_barrier`,
    :func:`aiorma.collectives.bcast.tree_bcast`, ``knomial_bcast``, ...) run here unchanged.

    As in ``Landing``: a signal raises a per-pair monotonic count in the destination's flag slot for
    the source (a put of the count; one pair's messages never overtake each other, so the slot only
    grows), and the ``k``-th signal from a source has arrived once that slot holds ``k``.  A data
    message is a put of its bytes into the destination's landing slot for the source, then a put
    of the pair's message count into a second flag (data before flag, by the pair's FIFO order).

    Simplifications, all deliberate for thousand-rank runs: a message is one chunk (slots hold
    ``slot_bytes``, the largest message an experiment sends), and there are no credits, so a pair
    may have only one data message in flight — each experiment sends one message per pair.
    """

    def __init__(self, flags: LiteWindow, data: LiteWindow, slot_bytes: int) -> None:
        size = flags.size
        if flags.memory.size < 2 * size or flags.memory.dtype != np.int64:
            raise RmaTypeError(f"a lite landing needs {2 * size} int64 flag slots per rank")
        if data.memory.size < size * slot_bytes or data.memory.dtype != np.uint8:
            raise RmaTypeError(f"a lite landing needs {size} uint8 slots of {slot_bytes} bytes per rank")
        self.flags = flags
        self.data = data
        self.rank = flags.rank
        self.size = size
        self.slot_bytes = slot_bytes
        self.SIG, self.DATA = 0, size
        self._sig_sent = [0] * size
        self._sig_expected = [0] * size
        self._msg_sent = [0] * size
        self._msg_expected = [0] * size
        self._done = asyncio.get_running_loop().create_future()
        self._done.set_result(None)

    @classmethod
    def group(cls, fabric: LiteFabric, slot_bytes: int = 0) -> list[LiteLanding]:
        """One landing per rank of ``fabric`` (collective in spirit; costs no time)."""
        if slot_bytes < 0:
            raise ValueError(f"slot_bytes must be >= 0, not {slot_bytes}")
        flags = fabric.allocate(2 * fabric.size, np.int64)
        data = fabric.allocate(fabric.size * slot_bytes, np.uint8)
        return [cls(f, d, slot_bytes) for f, d in zip(flags, data, strict=True)]

    # ------------------------------------------------------------------ signals

    def signal(self, dst: int) -> None:
        """Send a flag-only message to ``dst`` (issued now; nothing to wait for locally)."""
        self._sig_sent[dst] += 1
        self.flags.put(np.array([self._sig_sent[dst]], dtype=np.int64), dst, self.SIG + self.rank)

    def wait_signal(self, src: int) -> Request:
        """The next signal from ``src``: finished once this rank has seen it arrive."""
        self._sig_expected[src] += 1
        return self.flags.wait_until(self.SIG + src, self._sig_expected[src])

    # --------------------------------------------------------------------- data

    def chunks(self, nbytes: int) -> int:
        return 1 if nbytes else 0

    def send(
        self, dst: int, data: np.ndarray, part_of: int | None = None, via_slots: bool = False
    ) -> Awaitable[None]:
        """Send the bytes of ``data`` (1-D uint8) to ``dst``; the awaitable finishes at local
        completion of the flag put (``data`` may then be reused).  ``part_of`` is the real
        landing's hint for a forwarded chunk of a longer message; one message path here, so it
        changes nothing."""
        nbytes = int(data.size)
        if nbytes == 0:
            return self._done
        if nbytes > self.slot_bytes:
            raise RmaRangeError(f"a message of {nbytes} bytes exceeds the landing slot of {self.slot_bytes}")
        self.data.put(data, dst, self.rank * self.slot_bytes)
        self._msg_sent[dst] += 1
        return self.flags.put(np.array([self._msg_sent[dst]], dtype=np.int64), dst, self.DATA + self.rank)

    def recv(self, src: int, out: np.ndarray) -> Awaitable[None]:
        """Receive ``out.size`` bytes from ``src`` into ``out`` (1-D uint8)."""

        def copy(slot: np.ndarray, lo: int, hi: int) -> None:
            out[lo:hi] = slot

        return self.recv_with(src, int(out.size), copy)

    def single_copy(self, peer: int, nbytes: int) -> bool:
        """Never: every message goes through the slot."""
        return False

    def recv_with(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]:
        """Receive ``nbytes`` from ``src``, handing them to ``consume(slot, 0, nbytes)``."""
        if nbytes == 0:
            return self._done
        if nbytes > self.slot_bytes:
            raise RmaRangeError(f"a message of {nbytes} bytes exceeds the landing slot of {self.slot_bytes}")
        self._msg_expected[src] += 1
        return self._recv(src, nbytes, consume, self._msg_expected[src])

    async def _recv(self, src: int, nbytes: int, consume: Consume, ordinal: int) -> None:
        await self.flags.wait_until(self.DATA + src, ordinal)
        lo = src * self.slot_bytes
        consume(self.data.memory[lo : lo + nbytes], 0, nbytes)

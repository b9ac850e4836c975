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
from typing import Any

import numpy as np

from ..errors import RmaRangeError, RmaTypeError
from ..request import Request
from .clock import EventQueue
from .cost import NetworkModel


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
    """The signal half of :class:`~aiorma.collectives.landing.Landing` on lightweight ranks, so the
    real flag-only collectives (:func:`aiorma.collectives.barrier.nway_barrier`) run here unchanged.

    As in ``Landing``, a signal raises a per-pair monotonic count in the destination's flag slot for
    the source (a put of the count: the pair's messages never overtake each other, so the slot only
    grows), and waiting for the ``k``-th signal from a source waits until that slot holds ``k``.
    Create one per rank from one :meth:`LiteFabric.allocate` group of ``size`` slots with
    :meth:`group`."""

    def __init__(self, win: LiteWindow) -> None:
        if win.memory.size < win.size or win.memory.dtype != np.int64:
            raise RmaTypeError(f"a lite landing needs {win.size} int64 flag slots per rank")
        self.win = win
        self.rank = win.rank
        self.size = win.size
        self._sent = [0] * win.size
        self._expected = [0] * win.size

    @classmethod
    def group(cls, fabric: LiteFabric) -> list[LiteLanding]:
        """One landing per rank of ``fabric`` (collective in spirit; costs no time)."""
        return [cls(win) for win in fabric.allocate(fabric.size, np.int64)]

    def signal(self, dst: int) -> None:
        """Send a flag-only message to ``dst`` (issued now; nothing to wait for locally)."""
        self._sent[dst] += 1
        self.win.put(np.array([self._sent[dst]], dtype=np.int64), dst, self.rank)

    def wait_signal(self, src: int) -> Request:
        """The next signal from ``src``: finished once this rank has seen it arrive."""
        self._expected[src] += 1
        return self.win.wait_until(src, self._expected[src])

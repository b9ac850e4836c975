"""Virtual time for asyncio: an event loop whose ``time()`` jumps to the next timer when nothing
is ready, and one heap of simulated-time callbacks driven by a single timer of that loop.

Python work costs no simulated time; time passes only through the delays the cost model
(:mod:`aiorma.sim.cost`) books, so runs are deterministic: same program, same seed, same times.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import selectors
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..errors import SimulationStalled

T = TypeVar("T")


class EventQueue:
    """Simulated-time callbacks on one heap, driven by a single event-loop timer.

    Callbacks run in order of time, then of submission, so equal times keep FIFO order (asyncio's
    own timer heap does not promise that).  One heap of tuples is also much cheaper than one
    asyncio timer per message.  :meth:`at_fifo` additionally keeps a channel's callbacks in
    submission order even if a later one asks for an earlier time.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = math.inf
        self._last: dict[Any, float] = {}

    def at(self, when: float, callback: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), callback, args))
        if when < self._timer_when:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_when = when
            self._timer = asyncio.get_running_loop().call_at(when, self._fire)

    def at_fifo(self, channel: Any, when: float, callback: Callable[..., None], *args: Any) -> None:
        when = max(when, self._last.get(channel, when))
        self._last[channel] = when
        self.at(when, callback, *args)

    def _fire(self) -> None:
        self._timer, self._timer_when = None, math.inf
        heap = self._heap
        now = asyncio.get_running_loop().time()
        while heap and heap[0][0] <= now:
            _, _, callback, args = heapq.heappop(heap)
            callback(*args)  # may call at(), which arms the timer for its own time
        # the earliest pending event may precede whatever a callback armed the timer for
        if heap and heap[0][0] < self._timer_when:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_when = heap[0][0]
            self._timer = asyncio.get_running_loop().call_at(self._timer_when, self._fire)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time.  ``time()`` starts at 0 and only moves when no callback
    is ready: then it jumps to the earliest timer.  Real I/O is still polled (without waiting).

    Our own ~20 lines rather than the ``looptime`` package: looptime's pytest plugin patches every
    pytest-asyncio loop of the whole test suite once installed, it spins no-op cycles before each
    jump, and when nothing is scheduled it waits in real time; here a deadlock raises
    :class:`SimulationStalled` at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._real_select = self._selector.select
        self._selector.select = self._select  # type: ignore[method-assign]

    def time(self) -> float:
        return self._virtual_now

    def _select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._real_select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise SimulationStalled("every task waits and no timer is pending: the simulation is deadlocked")
        self._virtual_now += timeout  # the loop asked to sleep until its next timer: be there now
        return events


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualClockLoop` and return its value."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(main)

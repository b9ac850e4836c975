"""The progress driver: runs window engines against a transport on the event loop.

It executes the engines' actions, feeds transport completions and packets back into them, and —
for transports that must be polled (MPI) — runs a poll task while any window exists.  After any
activity the task spins briefly (polls with ``asyncio.sleep(0)``), then *parks*: on the endpoint's
doorbell descriptor when nothing of its own is outstanding (a peer rings it after sending a
packet), otherwise in 1 ms sleeps.  An idle rank costs almost no CPU (DESIGN §6).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import deque
from typing import Any

from .engine.actions import CompleteRequest, FlushTarget, IssueRma, SendControl
from .engine.packets import ControlPacket
from .engine.window_engine import WindowEngine
from .transport.base import Endpoint

_SPIN_POLLS = 4  # measured: 16 cost ~30 % of transaction throughput on 2 cores (CPU-bound)
_IDLE_SLEEP = 1e-3  # asyncio cannot sleep shorter than the selector's 1 ms resolution anyway
# A parked rank still polls this often, as a guard against MPI progress that rings no doorbell.
# None is known to be needed: RMA into allocated windows is passive on one node, and a rank with
# a Win.Create window never parks (MpiEndpoint.idle_fileno).
_PARKED_POLL = 0.05

_drivers: weakref.WeakSet[ProgressDriver] = weakref.WeakSet()


class ProgressDriver:
    """One per rank: owns the endpoint's sink side and the engines of that rank's windows."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.engines: dict[int, WindowEngine] = {}
        self._futures: dict[tuple[int, int], tuple[asyncio.Future[Any], Any]] = {}
        self._events: deque[tuple[Any, ...]] = deque()
        self._pumping = False
        self._poll_task: asyncio.Task[None] | None = None
        self._parked: asyncio.Future[None] | None = None  # set while the poll task is parked
        endpoint.attach(self)
        _drivers.add(self)

    # -------------------------------------------------------------- Sink (transport side)

    def packet_received(self, src: int, packet: ControlPacket) -> None:
        self._events.append(("packet", src, packet))
        self.pump()

    def op_completed(self, win_id: int, token: int) -> None:
        self._events.append(("op", win_id, token))
        self.pump()

    def flushed(self, win_id: int, target: int, upto: int) -> None:
        self._events.append(("flushed", win_id, target, upto))
        self.pump()

    # ------------------------------------------------------------------- engines

    def add_engine(self, engine: WindowEngine) -> None:
        self.engines[engine.win_id] = engine
        if self.endpoint.wants_polling() and self._poll_task is None:
            self._poll_task = asyncio.get_running_loop().create_task(self._poll_loop())

    def remove_engine(self, win_id: int) -> None:
        self.engines.pop(win_id, None)

    def watch(self, win_id: int, token: int, value: Any = None) -> asyncio.Future[Any]:
        """The future that the engine's CompleteRequest for ``token`` will finish."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._futures[(win_id, token)] = (future, value)
        return future

    # ------------------------------------------------------------------- progress

    def progress(self) -> None:
        """Run the engines, poll the transport once, and run everything that follows from it."""
        self.pump()  # actions the calling API method queued (a flush, say) reach the transport first
        if self.endpoint.wants_polling():
            self.endpoint.poll()
            self.pump()
            # This poll may have read a doorbell ring whose packet is not visible yet; the poll
            # task, parked on the now-empty doorbell, would not notice it before its guard poll.
            if self._parked is not None and not self._parked.done() and self.endpoint.expecting():
                self._parked.set_result(None)

    def pump(self) -> None:
        """Feed queued events to engines and execute their actions until nothing is left."""
        if self._pumping:
            return  # re-entered from a transport callback: the outer loop picks it up
        self._pumping = True
        try:
            busy = True
            while busy:
                busy = False
                while self._events:
                    busy = True
                    self._dispatch(self._events.popleft())
                for engine in list(self.engines.values()):
                    actions = engine.drain()
                    if actions:
                        busy = True
                        self._execute(engine.win_id, actions)
        finally:
            self._pumping = False

    def _dispatch(self, event: tuple[Any, ...]) -> None:
        if event[0] == "packet":
            _, src, packet = event
            engine = self.engines.get(packet.win_id)
            if engine is not None:  # else: stale packet for a freed window
                engine.receive(src, packet)
        elif event[0] == "op":
            _, win_id, token = event
            if (engine := self.engines.get(win_id)) is not None:
                engine.op_completed(token)
        else:
            _, win_id, target, upto = event
            if (engine := self.engines.get(win_id)) is not None:
                engine.flushed(target, upto)

    def _execute(self, win_id: int, actions: list[Any]) -> None:
        endpoint = self.endpoint
        for action in actions:
            if isinstance(action, SendControl):
                endpoint.send(action.dest, action.packet)
            elif isinstance(action, IssueRma):
                endpoint.issue(win_id, action.token, action.payload)
            elif isinstance(action, FlushTarget):
                endpoint.flush(win_id, action.target, action.upto)
            elif isinstance(action, CompleteRequest):
                entry = self._futures.pop((win_id, action.token), None)
                if entry is None:
                    continue  # an internal token nobody waits for
                future, value = entry
                if future.done():
                    continue
                if action.error is not None:
                    future.set_exception(action.error)
                else:
                    future.set_result(value)

    async def _poll_loop(self) -> None:
        endpoint = self.endpoint
        idle_polls = 0
        while self.engines:
            if endpoint.poll():
                idle_polls = 0
            else:
                idle_polls += 1
            self.pump()
            if idle_polls < _SPIN_POLLS or endpoint.expecting():
                await asyncio.sleep(0)
                continue
            fileno = endpoint.idle_fileno()
            if fileno is None:
                await asyncio.sleep(_IDLE_SLEEP)
            # Own ops in flight ring nothing when they finish: poll again within 1 ms, but wake
            # at once for a peer's packet.  Idle: park on the doorbell, with a guard poll.
            elif await self._park(fileno, _IDLE_SLEEP if endpoint.busy() else _PARKED_POLL):
                idle_polls = 0  # rung: spin again while the exchange goes on
        self._poll_task = None

    async def _park(self, fileno: int, timeout: float) -> bool:
        """Wait until ``fileno`` is readable or :meth:`progress` wakes us (True), or ``timeout``
        passes (False)."""
        loop = asyncio.get_running_loop()
        self._parked = ready = loop.create_future()
        loop.add_reader(fileno, lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            loop.remove_reader(fileno)
            self._parked = None

    async def close(self) -> None:
        self.engines.clear()
        if self._poll_task is not None:
            self._poll_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll_task
            self._poll_task = None
        await self.endpoint.close()


def progress() -> None:
    """Drive progress on every rank of this process once (for compute-heavy code that does not
    return to the event loop for a while)."""
    for driver in list(_drivers):
        driver.progress()

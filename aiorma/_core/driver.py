"""The progress driver: runs one rank's window engines against its transport endpoint.

Each engine's :class:`~aiorma.engine.engine_io.EngineIO` is the driver's :class:`_EngineIO`, which
hands every step to the endpoint at once and gives the engine the endpoint's answer when it comes
inside the call.  The driver feeds the completions and control-region changes the endpoint
reports later back into the engines, and turns finished engine tokens into Request completions.
Polled transports (MPI) are polled by the rank's :class:`~aiorma._core.waiter.Waiter` while any
window exists, and inside an await for a bounded time (:func:`aiorma._core.await_policy.wait`
decides how an await waits; the driver is what it polls).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final, cast

from ..engine.control import AtomicOp
from ..engine.engine_io import EngineIO
from ..engine.window_engine import WindowEngine
from ..errors import CommClosedError, PeerFailed, RmaFailure, TransportError
from ..request import Request, epoch_request, finish_pending, finished_request, pending_request
from ..transport.base import Endpoint, EndpointBase
from .context import ProgressEntry, context
from .settings import Settings
from .waiter import Waiter

_LINK_PATIENCE: Final = 2e-4
# While a lock request waits for a peer's hand-off, a call polls if no poll ran for this long: a
# hand-off waits at most about this much beyond the program's own call, and a rank issuing calls
# polls at most once per interval — where ranks outnumber cores each poll is CPU the others need
# (bench transactions, 8 ranks on 2 cores: a poll at every call cost 1.15 x the CPU per
# nonblocking transaction).
_CALL_POLL_INTERVAL: Final = 5e-5
#: The clock, a static of the compiled module: no look-up of ``time`` and its attribute per call.
_perf_counter: Final = time.perf_counter
_sched_yield: Final = os.sched_yield


class _EngineIO(EngineIO):
    """One window's road to the endpoint (:class:`~aiorma.engine.engine_io.EngineIO`): every call
    goes to the transport at once; an RMA operation complete at issue and a finished token are
    recorded for the Request that the call returning them is about to make."""

    __slots__ = ("_driver", "_endpoint", "_win_id")

    def __init__(self, driver: ProgressDriver, endpoint: EndpointBase, win_id: int) -> None:
        self._driver = driver
        self._endpoint = endpoint  # (the compiled base: native calls to the MPI endpoint)
        self._win_id = win_id

    def issue(self, token: int, target: int, payload: Any) -> None:
        if self._endpoint.issue(self._win_id, token, payload):
            self._driver._finish(self._win_id, token, None)

    def fetch(self, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int) -> int | None:
        return self._endpoint.control_fetch(self._win_id, token, dest, index, op, value, compare)

    def write(self, dest: int, index: int, op: AtomicOp, value: int) -> None:
        self._endpoint.control_write(self._win_id, dest, index, op, value)

    def flush(self, target: int, upto: int) -> bool:
        return self._endpoint.flush(self._win_id, target, upto)

    def complete(self, token: int, error: BaseException | None) -> None:
        # A finished token: the Request the call returning it is about to make is returned
        # finished, or the Request already made is finished.
        self._driver._finish(self._win_id, token, error)


class ProgressDriver:
    """One per rank: the endpoint's sink, and the engines of that rank's windows.  ``settings``
    are the connection's switches (default: the environment's now)."""

    def __init__(self, endpoint: Endpoint, ranks_on_node: int = 1, settings: Settings | None = None) -> None:
        if settings is None:
            settings = Settings.from_environment()
        self.endpoint = endpoint
        # The same endpoint as its compiled base (every endpoint derives from it; the protocol is
        # the whole contract, for typing): polled natively.
        self._calls = cast(EndpointBase, endpoint)
        self.engines: dict[int, WindowEngine] = {}
        self.waiter = Waiter(endpoint, self.poll_turn, self.failed, ranks_on_node)
        # Requests made pending, with the value each finishes with, by token_key().
        self._pending: dict[int, tuple[Request, Any]] = {}
        # Tokens finished before anyone asked for their Request (an RMA call that completed at
        # issue, a flush answered at once).  Asked for right after the call that made them, so
        # it is cleared then: whatever is left belonged to internal tokens nobody waits for.
        self._finished: dict[int, BaseException | None] = {}
        self._events: deque[tuple[Any, ...]] = deque()
        # What this rank failed with, once it failed (fail()): a window added later fails at once
        # (its collective creation may finish after a peer's departure was found).
        self._failure: Callable[[], RmaFailure] | None = None
        self._pumping = False
        self._polled = endpoint.polled
        self._polled_at = 0.0  # when poll_turn last ran (perf_counter)
        #: Inline waiting and signals (off with AIORMA_INLINE=0, for equivalence tests).
        self.inline = settings.inline
        #: What the Requests of this rank hand to aiorma._core.await_policy.wait, which decides how
        #: an await waits: this driver, whose endpoint an await polls inline for a bounded time
        #: before it suspends (None: suspend at once; AIORMA_INLINE=0 or the in-process transport).
        self.inline_wait: ProgressDriver | None = self if endpoint.polled and self.inline else None
        endpoint.attach(self)
        self._progress_entry = ProgressEntry(self.progress)
        context().drivers.add(self._progress_entry)  # for aiorma.progress() in this thread

    # -------------------------------------------------------------- Sink (transport side)

    def op_completed(self, win_id: int, token: int) -> None:
        self._finish(win_id, token, None)
        self.waiter.wake()

    def flushed(self, win_id: int, target: int, upto: int) -> None:
        self._events.append(("flushed", win_id, target, upto))
        self.pump()
        self.waiter.wake()

    def fetched(self, win_id: int, token: int, old: int) -> None:
        self._events.append(("fetched", win_id, token, old))
        self.pump()
        self.waiter.wake()

    def control_changed(self, win_id: int) -> None:
        self._events.append(("control", win_id))
        self.pump()

    def failed(self, error: BaseException) -> None:
        """Progress itself failed (the poll, a worker-thread MPI call): every window of this rank
        fails for good with ``error`` (as an :class:`RmaFailure`)."""
        failure = error if isinstance(error, RmaFailure) else TransportError(f"progress failed: {error!r}")
        if failure is not error:
            failure.__cause__ = error
        self.fail(lambda: failure)

    def peer_departed(self, rank: int, cause: BaseException | None = None) -> None:
        """Peer ``rank`` left aiorma by an exception (the transport found its departure notice),
        or its process ended without leaving (``cause``): this rank fails for good with
        :class:`PeerFailed` naming it, as the in-process transport fails its ranks when one of
        them raises."""
        cause = cause or TransportError(f"rank {rank} left aiorma by an exception")
        self.fail(lambda: PeerFailed(rank, cause))

    def fail(self, make_error: Callable[[], RmaFailure]) -> None:
        """Fail this rank for good: every pending Request — engine tokens, RMA operations,
        collectives' waits on the waiter — raises ``make_error()``, and so does every later call
        on its windows.  (Nothing logs an error nobody retrieves: see finish_pending.)"""
        if self._failure is None:
            self._failure = make_error
        for engine in list(self.engines.values()):
            engine.fail(make_error())
        # RMA calls' tokens are finished by the transport, not by the engine: fail those too.
        self._fail_waiting(make_error)

    def _fail_waiting(self, make_error: Callable[[], BaseException]) -> None:
        """Every Request still pending, and every wait source of the waiter, raises a fresh
        ``make_error()`` (one exception object raised in many places would gather every
        traceback)."""
        pending, self._pending = self._pending, {}
        for request, _value in pending.values():
            finish_pending(request, None, make_error())
        self.waiter.fail_sources(make_error())

    # ------------------------------------------------------------------- engines

    def engine_io(self, win_id: int) -> _EngineIO:
        """The I/O for the engine of window ``win_id`` (made before the engine, which takes it)."""
        return _EngineIO(self, self._calls, win_id)

    def add_engine(self, engine: WindowEngine) -> None:
        self.engines[engine.win_id] = engine
        if self._failure is not None:
            engine.fail(self._failure())  # created while (or after) the rank failed
            return
        self.waiter.start()

    def remove_engine(self, win_id: int) -> None:
        self.engines.pop(win_id, None)

    def request(
        self,
        win_id: int,
        token: int,
        what: str,
        value: Any = None,
        close: Callable[[], Request] | None = None,
    ) -> Request:
        """The Request of ``token``, just returned by an engine call (which carried out every
        step it could): an already-finished Request when the token is done (no future, no loop),
        else one that the engine's completion will finish.  With ``close`` (the call that ends
        the epoch this call opened) an :class:`~aiorma.EpochRequest`."""
        if self._events:
            self.pump()  # events reported while the call ran
        finished = self._finished
        if self._polled:
            engine = self.engines[win_id]
            if engine.links_awaited:
                self._finish_release(engine)
            if engine.grant_look_wanted:
                # The call's op waits for its target's grant, which a poll may find already
                # written (a fence or post notice): then the op is issued inside this call.
                engine.grant_look_wanted = False
                self.poll_turn()
            if (
                engine.lock_words_awaited
                and not self._calls.look_control(win_id)
                and _perf_counter() - self._polled_at >= _CALL_POLL_INTERVAL
            ):
                # A lock request of ours waits for a peer's hand-off (or drain), and the program
                # calls rather than awaits: look now, as MPI's calls drive its progress.  A
                # hand-off seen only at the next await would hold every peer queued behind us for
                # as long as the program keeps issuing (a convoy), and the lock is the workload's
                # bottleneck.  So at every call a look at the window's own control words, where
                # it costs a C call (a change found is fed to the engine at once), and a poll of
                # the transport at most once per interval.  (Not while an atomic is merely in
                # flight: its answer is no one else's wait.)
                self.poll_turn()
            if engine.handoffs_given:
                # This call handed a lock on.  Where ranks outnumber cores the successor may be
                # off its core, and the lock stays idle until it runs (a scheduler slice is
                # milliseconds): hand the core on once (sched_yield), as the inline wait does
                # between its polls.  Only after a hand-off: a yield at every call while we wait
                # would hand our core to whichever rank is runnable, a late one included (the
                # reorder flag's pattern, access_after_access_lock, propagated 24-41 % of a
                # peer's delay where it propagates 2-19 % without).
                engine.handoffs_given = 0
                if self.waiter.oversubscribed:
                    _sched_yield()
        if finished:
            # (Indexing, then clear: compiled, ``dict.pop`` is a generic method call.)
            key = token_key(win_id, token)
            if key in finished:
                error = finished[key]
                finished.clear()
                done = finished_request(value, error, what)
                return done if close is None else epoch_request(done, close)
            finished.clear()
        self.waiter.wake()  # something to wait for: poll on the fast path
        request = pending_request(self.progress, what, self.inline_wait, close)
        self._pending[token_key(win_id, token)] = (request, value)
        return request

    def _finish_release(self, engine: WindowEngine) -> None:
        """Poll for at most _LINK_PATIENCE while a release of ``engine`` waits for its successor's
        link, so that the release completes inside the call that made it (Late Unlock: a rank
        that unlocks and then computes must not hold the next holder for its whole computation).
        On one node the link follows the successor's swap by microseconds; past the bound (a
        descheduled successor) the waiter finishes the release in the background."""
        deadline = _perf_counter() + _LINK_PATIENCE
        while engine.links_awaited and _perf_counter() < deadline:
            self.poll_turn()

    # ------------------------------------------------------------------- progress

    def progress(self) -> None:
        """Poll the transport once, and run everything that follows from it."""
        self.pump()
        if self.endpoint.polled:
            if self.poll_turn():
                self.waiter.wake()
            self.waiter.check_sources()

    def poll_turn(self) -> bool:
        """Poll the endpoint once and feed the engines what it found; True when it found
        anything (the waiter's activity, and the inline wait's turn)."""
        self._polled_at = _perf_counter()
        active = self._calls.poll()
        self.pump()
        return active

    def pump(self) -> None:
        """Feed the events the endpoint reported to the engines, in order, until none is left
        (an engine's steps may make the endpoint report more)."""
        if self._pumping or not self._events:
            return  # re-entered from a transport callback: the outer loop picks it up
        self._pumping = True
        events = self._events
        try:
            while events:
                self._dispatch(events.popleft())
        finally:
            self._pumping = False

    def _dispatch(self, event: tuple[Any, ...]) -> None:
        engine = self.engines.get(event[1])
        if engine is None:
            return  # a stale report for a freed window
        kind = event[0]
        if kind == "control":
            engine.control_changed()
        elif kind == "fetched":
            engine.fetched(event[2], event[3])
        else:
            engine.flushed(event[2], event[3])

    def _finish(self, win_id: int, token: int, error: BaseException | None) -> None:
        key = token_key(win_id, token)
        entry = self._pending.get(key)
        if entry is None:
            self._finished[key] = error
            return
        del self._pending[key]  # (get and del: compiled, dict.pop is a generic method call)
        request, value = entry
        finish_pending(request, value, error)

    async def close(self) -> None:
        """Collective (the endpoint frees what it created on every rank).  A Request still
        pending fails with :class:`CommClosedError`, and so does every later call."""
        self._fail_waiting(lambda: CommClosedError("the Comm was closed while this Request was pending"))
        self.engines.clear()
        await self.waiter.stop()
        await self.endpoint.close()

    async def abandon(self, cause: BaseException | None = None) -> None:
        """Stop this rank's progress without anything collective, after a failure: pending
        Requests fail with :class:`TransportError`, the waiter stops, the endpoint closes its
        threads and sockets (its MPI objects are left for ``MPI_Finalize``)."""
        self.fail(lambda: TransportError("aiorma was left by an exception while this was pending"))
        self.engines.clear()
        await self.waiter.stop()
        # What the peers are told this rank left with: its exception's type and message.
        self.endpoint.abandon(None if cause is None else f"{type(cause).__name__}: {cause}")


def token_key(win_id: int, token: int) -> int:
    """One int for a window's token, the key of the driver's tables: a (win_id, token) tuple
    would be built, hashed element by element and freed several times per call.  Window ids are
    far below 2**32 (a Comm numbers its windows from 1; internal ones have small fixed ids)."""
    return token << 32 | win_id


def progress() -> None:
    """Drive progress on every rank of this thread once (for compute-heavy code that does not
    return to the event loop for a while).  A thread's ranks are those of the connections opened
    by its event loop: another thread's loop owns its own ranks, which only it may touch."""
    for entry in list(context().drivers):
        entry.progress()

"""Synchronization objects on window atomics: Counter, Mutex, Semaphore, Event.

The set ``mpi4py.util.sync`` offers as blocking calls, here as calls that return a
:class:`~aiorma.Request`.  Each object is made collectively over a :class:`~aiorma.Comm` (every
rank calls ``await X.create(comm, ...)``, in the same order as the Comm's other collective calls)
and freed collectively (``await x.free()``); in between any rank uses it on its own.  Each keeps
its shared state in one small int64 window on ``root`` under a long-lived ``lock_all``, changed
only by atomics there.  A rank that must wait for another parks: it awaits a word of its *own*
memory (:meth:`Window.wait_until`), which the rank that lets it go writes with
:meth:`Window.signal` — no spinning on a remote word.

* :class:`Counter`: a shared integer; ``counter.next(incr)`` is one fetch-and-add.
* :class:`Mutex`: a FIFO lock across ranks and tasks — the window's exclusive lock on ``root``,
  i.e. the engine's MCS queue lock (one swap to enter, a hand-over to the next in line).
* :class:`Semaphore`: ``value`` permits, granted in the order they were asked for (tickets).
* :class:`Event`: set once, seen by every rank's waiters (``asyncio.Event`` across ranks).

**Every call takes effect at the call** and returns a Request, as the window's calls do: the
counter is incremented, the place in line taken, the permit given back, the event set whether or
not the Request is ever awaited.  Operations of several dependent steps (a ticket, then a slot,
then parking) are driven by the completion of each step, not by the await.

**Cancellation.**  Cancelling a task that awaits ``acquire``'s Request (``asyncio.timeout``,
``anyio.move_on_after``, trio's cancel scopes) *abandons the acquire*: it cannot be withdrawn from
the queue the other ranks see, so the lock or permit is still granted to it later — and then
given back at once, so no permit is lost and no rank behind it waits for ever.  An abandoned
acquire's Request fails with :class:`~aiorma.RmaUsageError` (awaiting it again raises that).
Every other call's Request follows the general rule: cancelling an await abandons only the wait.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from ._core.driver import progress as _drive_progress
from .comm import Comm
from .constants import LOCK_EXCLUSIVE, MODE_NOCHECK, NO_OP, SIGNAL_SET, SUM, Op
from .errors import RmaTypeError, RmaUsageError, WindowFreedError
from .request import AcquireRequest, OutcomeRequest, Request
from .window import Window

# ------------------------------------------------------------------ chaining window calls


def _then(request: Request, step: Callable[[Request], None]) -> None:
    """Run ``step(request)`` once ``request`` is done: inside this call if it already is (so a
    chain whose calls all finish at once finishes inside its first call), else from its
    done-callback."""
    if request.done():
        step(request)
    else:
        request.add_done_callback(step)


Failed = Callable[[BaseException], None]


def _chain(request: Request, then: Callable[[Request], None], failed: Failed) -> None:
    """``then(request)`` once ``request`` succeeded; ``failed(error)`` if it failed or ``then``
    raised (a later call refused because the window was freed or failed meanwhile)."""

    def step(done: Request) -> None:
        error = done.exception()  # (retrieved: a failed step is reported through ``failed``)
        if error is not None:
            failed(error)
            return
        try:
            then(done)
        except Exception as exc:
            failed(exc)

    _then(request, step)


def _quietly(request: Request) -> None:
    """Nobody awaits ``request`` (a grant given back): its error, if any, is not reported as
    never retrieved."""

    def retrieve(done: Request) -> None:
        done.exception()

    _then(request, retrieve)


def _mapped(request: Request, value: Callable[[], Any], description: str) -> Request:
    """A Request that finishes with ``request`` but whose result is ``value()`` (read then)."""
    if request.done():
        error = request.exception()
        return Request.finished(None if error is not None else value(), error, description)
    outcome = OutcomeRequest(description, _drive_progress)
    _chain(request, lambda _done: outcome.succeed(value()), outcome.fail)
    return outcome


def _all(requests: list[Request], description: str) -> Request:
    """A Request that finishes once every one of ``requests`` has (with the first error, if any)."""
    pending = [r for r in requests if not r.done()]
    errors = [error for r in requests if r.done() and (error := r.exception()) is not None]
    if not pending:
        return Request.finished(None, errors[0] if errors else None, description)
    outcome = OutcomeRequest(description, _drive_progress)
    if errors:
        outcome.fail(errors[0])
    left = [len(pending)]

    def one_done(_done: Request) -> None:
        left[0] -= 1
        if not left[0]:
            outcome.succeed()

    for request in pending:
        _chain(request, one_done, outcome.fail)
    return outcome


class _Turns:
    """FIFO turns among this rank's acquires of one object, handed on from callbacks.

    ``enter`` starts the acquire at once when the turn is free, else queues it; ``release`` hands
    the turn to the next queued one; ``withdraw`` takes an abandoned one out of the queue (it never
    started, so nothing but this queue knows of it).  Hand-overs run in a loop, not recursively:
    an acquire that completes at once, releasing its turn, does not nest the next one's start."""

    def __init__(self) -> None:
        self._held = False
        self._queue: deque[tuple[object, Callable[[], None]]] = deque()
        self._releases = 0
        self._handing = False

    def enter(self, key: object, start: Callable[[], None]) -> None:
        if self._held:
            self._queue.append((key, start))
            return
        self._held = True
        start()

    def withdraw(self, key: object) -> None:
        for entry in self._queue:
            if entry[0] is key:
                self._queue.remove(entry)
                return

    def release(self) -> None:
        self._releases += 1
        if self._handing:
            return  # the loop below, further up this call stack, hands it on
        self._handing = True
        try:
            while self._releases:
                self._releases -= 1
                if self._queue:
                    self._queue.popleft()[1]()  # the turn passes directly: _held stays True
                else:
                    self._held = False
        finally:
            self._handing = False


# ------------------------------------------------------------------------------ objects


def _root(comm: Comm, root: Any) -> int:
    if isinstance(root, bool) or not isinstance(root, int | np.integer) or not 0 <= int(root) < comm.size:
        raise RmaUsageError(f"root must be a rank of the Comm (0..{comm.size - 1}), not {root!r}")
    return int(root)


async def _shared_window(comm: Comm, words: int) -> Window:
    win = await comm.win_allocate(words, np.int64)
    await win.lock_all(MODE_NOCHECK)
    return win


def _close(win: Window, description: str) -> Request:
    """End the object's ``lock_all``, then free its window."""
    outcome = OutcomeRequest(description, _drive_progress)

    def unlocked(_done: Request) -> None:
        _chain(win.free(), lambda _freed: outcome.succeed(), outcome.fail)

    _chain(win.unlock_all(), unlocked, outcome.fail)
    return outcome


class _Shared:
    """What every object has: its window, its root, refusal of calls once freed."""

    def __init__(self, win: Window, root: int) -> None:
        self._win, self.root = win, root
        self._freed = False

    def _check_open(self) -> None:
        if self._freed:
            raise WindowFreedError(f"the {type(self).__name__} has been freed")

    def _atomic(self, disp: int, value: int, op: Op, then: Callable[[int], None], failed: Failed) -> None:
        """Fetch-and-op on ``root``'s word ``disp``; ``then(old value)``."""
        old = np.zeros(1, np.int64)
        fetched = self._win.fetch_and_op(np.array([value], np.int64), old, self.root, disp, op)
        _chain(fetched, lambda _done: then(int(old[0])), failed)

    def _swap(self, disp: int, new: int, expected: int, then: Callable[[int], None], failed: Failed) -> None:
        """Compare-and-swap on ``root``'s word ``disp``; ``then(old value)``."""
        old = np.zeros(1, np.int64)
        swap, compare = np.array([new], np.int64), np.array([expected], np.int64)
        swapped = self._win.compare_and_swap(swap, compare, old, self.root, disp)
        _chain(swapped, lambda _done: then(int(old[0])), failed)


class Counter(_Shared):
    """A shared integer on ``root``, starting at ``start``.  ``counter.next(incr)`` adds ``incr``
    and yields the value before, atomically, from any rank (MPI's fetch-and-op)."""

    @classmethod
    async def create(cls, comm: Comm, start: int = 0, root: int = 0) -> Counter:
        """Collective.  ``start`` must be the same on every rank."""
        root = _root(comm, root)
        win = await _shared_window(comm, 1)
        if comm.rank == root:
            win.memory[0] = int(start)
        await comm.barrier()  # the start value is in place before anyone counts
        return cls(win, root)

    def next(self, incr: int = 1) -> Request:
        """Add ``incr`` (an integer, default 1) to the counter, at the call.  The Request's result
        is the counter's value just before this addition (an ``int``); it completes when that
        value is here.  No two calls, from any ranks, see the same value unless ``incr`` is 0.
        A non-integer ``incr`` raises :class:`~aiorma.RmaTypeError` and adds nothing."""
        self._check_open()
        if isinstance(incr, bool | np.bool_) or not isinstance(incr, int | np.integer):
            raise RmaTypeError(f"incr must be an integer, not {incr!r}")
        return self._fetch([incr], SUM, "Counter.next")

    def value(self) -> Request:
        """Read the counter (an atomic read, made at the call).  The Request's result is its
        value (an ``int``)."""
        self._check_open()
        return self._fetch([0], NO_OP, "Counter.value")

    def _fetch(self, operand: list[Any], op: Op, description: str) -> Request:
        old = np.zeros(1, np.int64)
        fetched = self._win.fetch_and_op(operand, old, self.root, 0, op)
        return _mapped(fetched, lambda: int(old[0]), description)

    def free(self) -> Request:
        """Collective: every rank calls it; the Request completes once the window is freed."""
        self._check_open()
        self._freed = True
        return _close(self._win, "Counter.free")


class Mutex(_Shared):
    """A lock across ranks (and the tasks of each), granted first come, first served.

    It is the exclusive lock of a small window on ``root``: the engine's MCS queue lock, so a
    waiting rank is parked until its predecessor hands the lock over, and the hand-over costs one
    write.  ``async with mutex:`` acquires and releases.  Tasks of one rank take turns too (the
    window's lock is held per rank): a rank asks the shared queue once its earlier acquire has
    been released."""

    def __init__(self, win: Window, root: int) -> None:
        super().__init__(win, root)
        self._local = _Turns()
        self._holder: AcquireRequest | None = None

    @classmethod
    async def create(cls, comm: Comm, root: int = 0) -> Mutex:
        """Collective."""
        root = _root(comm, root)
        return cls(await comm.win_allocate(1, np.int64), root)

    def locked(self) -> bool:
        """True while this rank holds it (an acquire granted and not yet released)."""
        return self._holder is not None

    def acquire(self) -> Request:
        """Get in line for the lock, at the call.  The Request completes when the lock is held
        by this rank, for the caller: every earlier acquire (this rank's first, then the other
        ranks' in the order they reached the queue) has been released.  Not awaited, the acquire
        still happens: :meth:`release` it.  Cancelling an await of it abandons it: the lock is
        released as soon as it is granted (see the module docstring)."""
        self._check_open()
        acquisition = AcquireRequest("Mutex.acquire", _drive_progress, self._abandoned)
        self._local.enter(acquisition, lambda: self._lock(acquisition))
        return acquisition

    def _lock(self, acquisition: AcquireRequest) -> None:
        acquisition.started = True

        def failed(error: BaseException) -> None:
            self._local.release()
            acquisition.fail(error)

        try:
            granted = self._win.lock(self.root, LOCK_EXCLUSIVE)
            _chain(granted, lambda _done: self._granted(acquisition), failed)
        except Exception as exc:  # the Comm closed, the window failed
            failed(exc)

    def _granted(self, acquisition: AcquireRequest) -> None:
        if acquisition.abandoned:
            _quietly(self._unlock())  # nobody wants it any more: hand it on
        else:
            self._holder = acquisition
            acquisition.succeed()

    def _abandoned(self, acquisition: AcquireRequest, granted: bool) -> None:
        if not acquisition.started:
            self._local.withdraw(acquisition)
        elif granted and self._holder is acquisition:
            self._holder = None
            _quietly(self._unlock())
        # else: still in the queue; _granted gives it back when it comes

    def release(self) -> Request:
        """Release the lock this rank holds, at the call.  The Request completes once the lock is
        handed on (or free).  Raises :class:`~aiorma.RmaUsageError` if this rank does not hold
        it."""
        self._check_open()
        if self._holder is None:
            raise RmaUsageError("release() of a Mutex this rank does not hold")
        self._holder = None
        return self._unlock()

    def _unlock(self) -> Request:
        """End the lock epoch; this rank's next acquire starts once it has ended."""
        try:
            unlocked = self._win.unlock(self.root)
        except BaseException:
            self._local.release()
            raise
        _then(unlocked, lambda _done: self._local.release())
        return unlocked

    async def __aenter__(self) -> Mutex:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    def free(self) -> Request:
        """Collective; no rank may hold it.  The Request completes once the window is freed."""
        self._check_open()
        self._freed = True
        return self._win.free()


class Semaphore(_Shared):
    """``value`` permits shared by every rank, granted in the order they were asked for.

    State on ``root``: ``TICKETS`` (acquires so far) and ``SERVED`` (permits made available:
    ``value`` plus releases), and one slot per rank.  Acquire takes ticket ``t`` (fetch-and-add);
    ``t < SERVED`` means a permit is free.  Otherwise the rank writes ``(t, its rank)`` into slot
    ``t mod P`` by compare-and-swap and parks on its own ``WAKE`` word.  Release adds one to
    ``SERVED`` and so serves ticket ``s`` (the old value): if slot ``s mod P`` names its owner,
    it signals that rank's ``WAKE``; if the owner has not written the slot yet, it marks the slot
    served (compare-and-swap), and the owner, finding the mark, goes ahead without parking.

    Slots never collide because a rank has at most one unserved ticket: its acquires queue
    locally, and the next takes a ticket only once the previous one was served — even when the
    previous one was abandoned (its permit is then given back once it comes).  Tickets are served
    in order, so with at most ``P`` unserved tickets, ``t`` is served before ``t + P`` is taken.
    So an owner that finds a *later* ticket in its slot was served too (its mark was overwritten
    while its read of the slot travelled): it goes ahead, as a release finding a later ticket
    there knows the owner it serves went ahead."""

    TICKETS, SERVED, WAKE, SLOTS = 0, 1, 2, 3

    def __init__(self, win: Window, root: int) -> None:
        super().__init__(win, root)
        self._size = win.size
        self._local = _Turns()

    @classmethod
    async def create(cls, comm: Comm, value: int = 1, root: int = 0) -> Semaphore:
        """Collective.  ``value`` (permits, >= 0) must be the same on every rank."""
        root = _root(comm, root)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RmaUsageError(f"value must be an integer >= 0, not {value!r}")
        win = await _shared_window(comm, cls.SLOTS + comm.size)
        if comm.rank == root:
            win.memory[cls.SERVED] = value
        await comm.barrier()
        return cls(win, root)

    def _registered(self, ticket: int) -> int:
        return 2 * ((ticket + 1) * self._size + self._win.rank)  # even: a waiting owner

    @staticmethod
    def _served_mark(ticket: int) -> int:
        return 2 * (ticket + 1) + 1  # odd: served before its owner wrote the slot

    def _ticket_of(self, word: int) -> int:
        """The ticket a slot word belongs to (-1: never used)."""
        if word == 0:
            return -1
        if word % 2:
            return (word - 1) // 2 - 1
        return word // 2 // self._size - 1

    def acquire(self) -> Request:
        """Ask for a permit, at the call (the ticket is taken once this rank's earlier acquires
        have been served).  The Request completes when the permit is the caller's: at once if one
        is free, else when a :meth:`release` serves this ticket, tickets being served in the
        order taken.  Not awaited, the permit is still taken: :meth:`release` it.  Cancelling an
        await of it abandons it: the permit is released as soon as it is granted."""
        self._check_open()
        acquisition = AcquireRequest("Semaphore.acquire", _drive_progress, self._abandoned)
        self._local.enter(acquisition, lambda: self._take_ticket(acquisition))
        return acquisition

    def _take_ticket(self, acquisition: AcquireRequest) -> None:
        acquisition.started = True

        def failed(error: BaseException) -> None:
            self._local.release()
            acquisition.fail(error)

        def ticketed(ticket: int) -> None:
            self._atomic(self.SERVED, 0, NO_OP, lambda served: read_served(ticket, served), failed)

        def read_served(ticket: int, served: int) -> None:
            if ticket < served:
                granted()
                return
            slot = self.SLOTS + ticket % self._size
            self._atomic(slot, 0, NO_OP, lambda seen: register(ticket, slot, seen), failed)

        def register(ticket: int, slot: int, seen: int) -> None:
            if seen == self._served_mark(ticket) or self._ticket_of(seen) > ticket:
                # Served before we wrote the slot: it is marked for us — or it already belongs to
                # a later ticket, which cannot have been taken before ours was served (the slot
                # was marked for us and taken over while our read of it was on its way).
                granted()
                return

            def swapped(old: int) -> None:
                if old != seen:
                    register(ticket, slot, old)  # the slot changed under us: look again
                    return
                # Registered: the release that serves our ticket signals our WAKE word.
                _chain(self._win.wait_until(self.WAKE, ">=", ticket + 1), lambda _done: granted(), failed)

            self._swap(slot, self._registered(ticket), seen, swapped, failed)

        def granted() -> None:
            self._local.release()  # our ticket is served: this rank's next acquire may take one
            if acquisition.abandoned:
                self._give_back()
            else:
                acquisition.succeed()

        try:
            self._atomic(self.TICKETS, 1, SUM, ticketed, failed)
        except Exception as exc:  # the Comm closed, the window failed
            failed(exc)

    def _abandoned(self, acquisition: AcquireRequest, granted: bool) -> None:
        if not acquisition.started:
            self._local.withdraw(acquisition)  # no ticket taken: nothing to give back
        elif granted:
            self._give_back()
        # else: its ticket is waiting; granted() gives the permit back when it is served

    def _give_back(self) -> None:
        with contextlib.suppress(WindowFreedError):  # freed meanwhile: no one left to give it to
            _quietly(self.release())

    def release(self) -> Request:
        """Give a permit back, at the call: the oldest waiting ticket is served.  The Request
        completes once that ticket's owner has been told (or no one was waiting)."""
        self._check_open()
        outcome = OutcomeRequest("Semaphore.release", _drive_progress)

        def serve(served: int) -> None:  # ``served`` is the ticket our permit serves
            slot = self.SLOTS + served % self._size
            self._atomic(slot, 0, NO_OP, lambda seen: hand_on(served, slot, seen), outcome.fail)

        def hand_on(served: int, slot: int, seen: int) -> None:
            ticket = self._ticket_of(seen)
            if ticket > served:
                # A later ticket uses the slot: ``served``'s owner saw its permit free and went
                # ahead without registering (its next ticket waits until then: see the class doc).
                outcome.succeed()
            elif ticket == served:  # its owner registered (only we mark ``served``): wake it
                owner = seen // 2 % self._size
                signalled = self._win.signal(owner, self.WAKE, served + 1, SIGNAL_SET)
                _chain(signalled, lambda _written: outcome.succeed(), outcome.fail)
            else:

                def swapped(old: int) -> None:
                    if old == seen:
                        outcome.succeed()  # marked: its owner, registering later, finds the mark
                    else:
                        hand_on(served, slot, old)

                self._swap(slot, self._served_mark(served), seen, swapped, outcome.fail)

        self._atomic(self.SERVED, 1, SUM, serve, outcome.fail)
        return outcome

    async def __aenter__(self) -> Semaphore:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    def free(self) -> Request:
        """Collective; every acquire must have been released.  The Request completes once the
        window is freed; an abandoned acquire still waiting then ends quietly."""
        self._check_open()
        self._freed = True
        return _close(self._win, "Semaphore.free")


class Event(_Shared):
    """A flag every rank's tasks can wait for: :meth:`set` on any rank sets it on every rank (one
    signal each), :meth:`wait` parks until it is set here, :meth:`is_set` reads this rank's copy,
    :meth:`clear` resets every rank's copy.  One rank's calls land in the order made; a ``set``
    and a ``clear`` made at the same time by different ranks may land in either order on each
    rank."""

    @classmethod
    async def create(cls, comm: Comm) -> Event:
        """Collective."""
        return cls(await _shared_window(comm, 1), 0)

    def is_set(self) -> bool:
        """True if this rank's copy is set now: a :meth:`set` from any rank has landed here and no
        later :meth:`clear`.  Reads local memory only; never waits."""
        return bool(self._win.memory[0])

    def wait(self) -> Request:
        """The Request completes once this rank's copy is set (at once if it is now).  Waits
        parked, without polling any remote word.  Cancelling an await of it abandons only the
        wait."""
        self._check_open()
        return self._win.wait_until(0, "!=", 0)

    def set(self) -> Request:
        """Set the event on every rank, at the call (a signal to each).  The Request completes
        when every rank's copy has been written; each rank's waiters are released as its copy
        is."""
        return self._write(1, "Event.set")

    def clear(self) -> Request:
        """Reset the event on every rank, at the call.  The Request completes when every rank's
        copy has been written; a :meth:`wait` made after that waits for the next :meth:`set`."""
        return self._write(0, "Event.clear")

    def _write(self, value: int, description: str) -> Request:
        self._check_open()
        return _all([self._win.signal(rank, 0, value) for rank in range(self._win.size)], description)

    def free(self) -> Request:
        """Collective.  The Request completes once the window is freed."""
        self._check_open()
        self._freed = True
        return _close(self._win, "Event.free")

"""Synchronization objects on window atomics: Counter, Mutex, Semaphore, Event.

The set ``mpi4py.util.sync`` offers as blocking calls, awaitable here.  Each object is made
collectively over a :class:`~aiorma.Comm` (every rank calls ``await X.create(comm, ...)``, in the
same order as the Comm's other collective calls) and freed collectively (``await x.free()``);
in between any rank uses it on its own.  Each keeps its shared state in one small int64 window
on ``root`` under a long-lived ``lock_all``, changed only by atomics there.  A rank that must
wait for another parks: it awaits a word of its *own* memory (:meth:`Window.wait_until`), which
the rank that lets it go writes with :meth:`Window.signal` — no spinning on a remote word.

* :class:`Counter`: a shared integer; ``await counter.next(incr)`` is one fetch-and-add.
* :class:`Mutex`: a FIFO lock across ranks and tasks — the window's exclusive lock on ``root``,
  i.e. the engine's MCS queue lock (one swap to enter, a hand-over to the next in line).
* :class:`Semaphore`: ``value`` permits, granted in the order they were asked for (tickets).
* :class:`Event`: set once, seen by every rank's waiters (``asyncio.Event`` across ranks).

Cancellation: cancelling a task waiting in ``acquire`` abandons the wait, not the request made
for it: the lock or permit is still granted later, and then released at once, so no other rank
waits for it forever.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import anyio
import numpy as np

from .comm import Comm
from .constants import LOCK_EXCLUSIVE, MODE_NOCHECK, NO_OP, SIGNAL_SET, SUM
from .errors import RmaUsageError
from .request import Request
from .window import Window


class _Turns:
    """FIFO turns among the tasks of this rank, under asyncio or trio, and releasable from a
    callback (a cancelled acquire gives its grant back from one)."""

    def __init__(self) -> None:
        self._held = False
        self._queue: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if not self._held and not self._queue:
            self._held = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(turn)
        try:
            await Request(turn)  # awaitable from asyncio and trio tasks alike
        except BaseException:
            if turn.done() and not turn.cancelled():
                self.release()  # our turn came as we gave up: pass it on
            else:
                turn.cancel()  # skipped by release
            raise

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        while self._queue:
            turn = self._queue.popleft()
            if not turn.done():
                turn.set_result(None)  # the turn passes directly: _held stays True
                return
        self._held = False


def _root(comm: Comm, root: Any) -> int:
    if isinstance(root, bool) or not isinstance(root, int | np.integer) or not 0 <= int(root) < comm.size:
        raise RmaUsageError(f"root must be a rank of the Comm (0..{comm.size - 1}), not {root!r}")
    return int(root)


async def _shared_window(comm: Comm, words: int) -> Window:
    win = await comm.win_allocate(words, np.int64)
    await win.lock_all(MODE_NOCHECK)
    return win


async def _close(win: Window) -> None:
    await win.unlock_all()
    await win.free()


class Counter:
    """A shared integer on ``root``, starting at ``start``.  ``await counter.next(incr)`` adds
    ``incr`` and returns the value before, atomically, from any rank (MPI's fetch-and-op)."""

    def __init__(self, win: Window, root: int) -> None:
        self._win, self.root = win, root

    @classmethod
    async def create(cls, comm: Comm, start: int = 0, root: int = 0) -> Counter:
        """Collective.  ``start`` must be the same on every rank."""
        root = _root(comm, root)
        win = await _shared_window(comm, 1)
        if comm.rank == root:
            win.memory[0] = int(start)
        await comm.barrier()  # the start value is in place before anyone counts
        return cls(win, root)

    async def next(self, incr: int = 1) -> int:
        """Add ``incr`` (default 1); the counter's value before the addition."""
        old = np.zeros(1, np.int64)
        await self._win.fetch_and_op(np.array([incr], np.int64), old, self.root, 0, SUM)
        return int(old[0])

    async def value(self) -> int:
        """The counter's current value (an atomic read)."""
        old = np.zeros(1, np.int64)
        await self._win.fetch_and_op(np.zeros(1, np.int64), old, self.root, 0, NO_OP)
        return int(old[0])

    async def free(self) -> None:
        """Collective."""
        await _close(self._win)


class Mutex:
    """A lock across ranks (and the tasks of each), granted first come, first served.

    It is the exclusive lock of a small window on ``root``: the engine's MCS queue lock, so a
    waiting rank is parked until its predecessor hands the lock over, and the hand-over costs one
    write.  ``async with mutex:`` acquires and releases.  Tasks of one rank take turns too."""

    def __init__(self, win: Window, root: int) -> None:
        self._win, self.root = win, root
        self._local = _Turns()  # one epoch per rank at a time: the window's lock is per rank
        self._held = False

    @classmethod
    async def create(cls, comm: Comm, root: int = 0) -> Mutex:
        """Collective."""
        root = _root(comm, root)
        return cls(await comm.win_allocate(1, np.int64), root)

    def locked(self) -> bool:
        """True while a task of this rank holds it."""
        return self._held

    async def acquire(self) -> None:
        """Wait for the lock (parked, in line) and take it."""
        await self._local.acquire()
        try:
            granted = self._win.lock(self.root, LOCK_EXCLUSIVE)
        except BaseException:
            self._local.release()
            raise
        try:
            await granted
        except anyio.get_cancelled_exc_class():
            # The lock request cannot be withdrawn (the queue has us): give the lock back when it
            # comes, so the ranks behind us are not held up for ever.
            granted.add_done_callback(self._abandon)
            raise
        except BaseException:
            self._local.release()
            raise
        self._held = True

    def _abandon(self, granted: Request) -> None:
        if granted.exception() is None:
            self._win.unlock(self.root)
        self._local.release()

    async def release(self) -> None:
        """Release; completes once the lock is handed on (or free)."""
        if not self._held:
            raise RmaUsageError("release() of a Mutex this rank does not hold")
        self._held = False
        try:
            await self._win.unlock(self.root)
        finally:
            self._local.release()

    async def __aenter__(self) -> Mutex:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    async def free(self) -> None:
        """Collective; no rank may hold it."""
        await self._win.free()


class Semaphore:
    """``value`` permits shared by every rank, granted in the order they were asked for.

    State on ``root``: ``TICKETS`` (acquires so far) and ``SERVED`` (permits made available:
    ``value`` plus releases), and one slot per rank.  Acquire takes ticket ``t`` (fetch-and-add);
    ``t < SERVED`` means a permit is free.  Otherwise the rank writes ``(t, its rank)`` into slot
    ``t mod P`` by compare-and-swap and parks on its own ``WAKE`` word.  Release adds one to
    ``SERVED`` and so serves ticket ``s`` (the old value): if slot ``s mod P`` names its owner,
    it signals that rank's ``WAKE``; if the owner has not written the slot yet, it marks the slot
    served (compare-and-swap), and the owner, finding the mark, goes ahead without parking.
    Tasks of one rank queue locally, so a rank has at most one ticket waiting and ``P`` slots
    never collide: tickets are served in order, so ``t`` is served before ``t + P`` is taken."""

    TICKETS, SERVED, WAKE, SLOTS = 0, 1, 2, 3

    def __init__(self, win: Window, root: int) -> None:
        self._win, self.root = win, root
        self._size = win.size
        self._local = _Turns()  # one ticket waiting per rank (see the class docstring)

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

    async def _atomic(self, disp: int, value: int, op: Any) -> int:
        old = np.zeros(1, np.int64)
        await self._win.fetch_and_op(np.array([value], np.int64), old, self.root, disp, op)
        return int(old[0])

    async def _swap(self, disp: int, new: int, expected: int) -> int:
        old = np.zeros(1, np.int64)
        swap, compare = np.array([new], np.int64), np.array([expected], np.int64)
        await self._win.compare_and_swap(swap, compare, old, self.root, disp)
        return int(old[0])

    async def acquire(self) -> None:
        """Take a permit, waiting (parked) for one if none is free."""
        async with self._local:
            ticket = await self._atomic(self.TICKETS, 1, SUM)
            if ticket < await self._atomic(self.SERVED, 0, NO_OP):
                return
            slot = self.SLOTS + ticket % self._size
            seen = await self._atomic(slot, 0, NO_OP)
            while seen != self._served_mark(ticket):
                old = await self._swap(slot, self._registered(ticket), seen)
                if old == seen:  # registered: the release of our ticket will signal us
                    waiting = self._win.wait_until(self.WAKE, ">=", ticket + 1)
                    try:
                        await waiting
                    except anyio.get_cancelled_exc_class():
                        waiting.add_done_callback(lambda _done: self._release_soon())
                        raise
                    return
                seen = old

    def _release_soon(self) -> None:
        asyncio.get_running_loop().create_task(self.release())

    async def release(self) -> None:
        """Give a permit back: the oldest waiting acquire gets it."""
        served = await self._atomic(self.SERVED, 1, SUM)  # serves ticket ``served``
        slot = self.SLOTS + served % self._size
        seen = await self._atomic(slot, 0, NO_OP)
        while True:
            ticket = self._ticket_of(seen)
            if ticket > served:
                # A later ticket uses the slot: ``served``'s owner saw its permit free and went
                # ahead without registering (it cannot still be in acquire: see the class doc).
                return
            if ticket == served:  # its owner registered (only we mark ``served``): wake it
                owner = seen // 2 % self._size
                await self._win.signal(owner, self.WAKE, served + 1, SIGNAL_SET)
                return
            old = await self._swap(slot, self._served_mark(served), seen)
            if old == seen:
                return  # marked: an owner that registers later finds the mark and goes ahead
            seen = old

    def _ticket_of(self, word: int) -> int:
        """The ticket a slot word belongs to (-1: never used)."""
        if word == 0:
            return -1
        if word % 2:
            return (word - 1) // 2 - 1
        return word // 2 // self._size - 1

    async def __aenter__(self) -> Semaphore:
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

    async def free(self) -> None:
        """Collective; every acquire must have been released."""
        await _close(self._win)


class Event:
    """A flag every rank's tasks can wait for: ``await event.set()`` on any rank sets it on every
    rank (one signal each), ``await event.wait()`` parks until it is set here, ``is_set()`` reads
    this rank's copy.  ``clear()`` resets every rank's copy; a ``set`` and a ``clear`` made at
    the same time by different ranks may land in either order on each rank."""

    def __init__(self, win: Window) -> None:
        self._win = win

    @classmethod
    async def create(cls, comm: Comm) -> Event:
        """Collective."""
        return cls(await _shared_window(comm, 1))

    def is_set(self) -> bool:
        return bool(self._win.memory[0])

    async def wait(self) -> None:
        await self._win.wait_until(0, "!=", 0)

    async def set(self) -> None:
        await self._write(1)

    async def clear(self) -> None:
        await self._write(0)

    async def _write(self, value: int) -> None:
        written = [self._win.signal(rank, 0, value) for rank in range(self._win.size)]
        for request in written:
            await request

    async def free(self) -> None:
        """Collective."""
        await _close(self._win)

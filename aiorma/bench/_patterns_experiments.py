"""The experiments of Zounmevo (2014) §5.8 (Figs 5.13–5.22), as per-rank coroutines.

Each experiment body runs on *every* rank of the job, once per repetition.  It may prepare an
epoch (an opening that the experiment is not about), then calls :meth:`Ctx.align` — every rank
leaves it at the same instant, *t0* — and plays its role.  The *victim* rank returns its latency
since t0 in seconds; the others return None.  Every body awaits all of its Requests before it
returns, so repetitions never overlap.  Ranks beyond the experiment's roles only align (and take
part in fences, which involve every rank).

The late peer's delay is CPU-busy on the ``mpi`` transport (a loop on ``time.perf_counter``, no
progress at all, as an MPI process computing).  On the ``local`` transport every rank shares one
thread, so a busy loop would stall all of them; there the delay is ``await asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import numpy as np

import aiorma
from aiorma.constants import LOCK_EXCLUSIVE, MODE_NOCHECK, MODE_NOPRECEDE, MODE_NOSUCCEED
from aiorma.request import Request

KiB = 1024
MiB = 1024 * KiB
DELAY = 1e-3  # the injected delay and early_fence's work: 1000 µs, as in Zounmevo (2014)
BLOCKING = "blocking"
NONBLOCKING = "nonblocking"
FLAG = "nonblocking+flag"
TRANSFER = "transfer"  # early_fence calibration: the closing fence alone, to size the transfer
# Every rank spins towards a start instant broadcast by rank 0 this far ahead (mpi transport).
_ALIGN_MARGIN = 2e-3
_SPIN = 3e-4  # the last part of the wait is a spin, for a precise start


@attrs.define
class Ctx:
    """One rank's view of the benchmark: its Comm, and the mpi4py world on the mpi transport."""

    comm: aiorma.Comm
    mpi: Any | None = None  # mpi4py COMM_WORLD, or None on the local transport
    late_starts: int = 0  # aligns this rank reached after the agreed start instant
    cpus: list[int] | None = None  # CPUs to pin to (see pin); None: never pin

    @property
    def rank(self) -> int:
        return self.comm.rank

    async def align(self) -> float:
        """Return t0, an instant shared by every rank.  Nothing of the previous repetition is
        still pending anywhere once it returns (the aiorma barrier drains it first).

        On the mpi transport rank 0 broadcasts a start instant (``perf_counter`` is the host's
        CLOCK_MONOTONIC, common to every process) and each rank waits for it: the ranks start
        within microseconds of each other, whatever their wake-up latencies.  The broadcast is a
        blocking mpi4py call on the loop thread; it is safe because after the barrier no rank
        needs another's progress.
        """
        await self.comm.barrier()
        if self.mpi is None:
            return time.perf_counter()
        start = self.mpi.bcast(time.perf_counter() + _ALIGN_MARGIN if self.rank == 0 else None, root=0)
        remaining = start - time.perf_counter()
        if remaining < 0:
            self.late_starts += 1
        elif remaining > _SPIN:
            time.sleep(remaining - _SPIN)
        while time.perf_counter() < start:
            os.sched_yield()  # ranks sharing a core must all see the start instant
        return start

    def pin(self, busy_rank: int | None) -> None:
        """Give the rank that computes (the late peer) a core of its own and put every other
        rank on the remaining cores (mpi transport, at least two CPUs; else nothing).

        Zounmevo (2014) ran one process per core.  With more ranks than cores, a peer woken while the
        late rank busy-loops on *its* core waits for that loop to end, and the scheduler's
        placement, not the protocol, decides what propagates.
        """
        if self.mpi is None or self.cpus is None or len(self.cpus) < 2:
            return
        own = {self.cpus[0]} if self.rank == busy_rank else set(self.cpus[1:])
        os.sched_setaffinity(0, own)

    def unpin(self) -> None:
        if self.mpi is not None and self.cpus is not None:
            os.sched_setaffinity(0, set(self.cpus))

    async def busy(self, seconds: float) -> None:
        """The injected delay or work: CPU-busy with no progress (mpi), or a sleep (local)."""
        if seconds <= 0:
            return
        if self.mpi is None:
            await asyncio.sleep(seconds)
            return
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    @staticmethod
    async def granted(win: aiorma.Window, target: int) -> None:
        """Wait until the newest open epoch of ``win`` holds ``target``'s grant.

        For openings that are not what an experiment measures: a fence opening's Request
        completes at activation, before peers' opening notices arrive, and the barrier in
        :meth:`align` does not order those control packets.  Reads the engine (inspection only).
        """
        while True:
            epoch = win.engine.open_epochs()[-1]
            if epoch.access[target].granted:
                return
            aiorma.progress()
            await asyncio.sleep(0)

    @staticmethod
    def since(t0: float) -> float:
        return time.perf_counter() - t0


@attrs.define
class Iteration:
    """One repetition's parameters, and the Requests it holds (nonblocking) until the end."""

    windows: list[aiorma.Window]
    data: np.ndarray  # the origin buffer: ``size`` bytes
    series: str
    delayed: bool  # inject the delay (False: the same run without it, the baseline)
    held: list[Request] = attrs.field(factory=list)

    @property
    def blocking(self) -> bool:
        return self.series in (BLOCKING, TRANSFER)

    @property
    def delay(self) -> float:
        return DELAY if self.delayed else 0.0

    @property
    def size(self) -> int:
        return int(self.data.size)

    async def sync(self, request: Request) -> Request:
        """A synchronization call: awaited at once in the blocking series (the MPI shape), held
        until :meth:`finish` otherwise."""
        if self.blocking:
            await request
        else:
            self.held.append(request)
        return request

    async def finish(self) -> None:
        held, self.held = self.held, []
        for request in held:
            await request


Body = Callable[[Ctx, Iteration], Awaitable[float | None]]


@attrs.frozen
class Experiment:
    name: str
    ranks: int  # processes the set-up needs
    sizes: tuple[int, ...]
    series: tuple[str, ...]
    victim: str  # what is timed, for the docs
    body: Body
    flag: str | None = None  # the Info flag of the "nonblocking+flag" series
    windows: int = 1
    busy_rank: int = 0  # the rank that busy-loops (the late peer, or early_fence's worker)


# ------------------------------------------------------------------ inefficiency patterns


async def late_post(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.13.  Origin 0 → target 1, whose post is late; then a subsequent activity, an
    epoch on another window towards rank 2 (the experiment's third process).  Victim: the subsequent
    activity, finished, since t0, on the origin."""
    win, other = it.windows
    t0 = await ctx.align()
    if ctx.rank == 0:
        await it.sync(win.start([1]))
        win.put(it.data, 1)
        await it.sync(win.complete())
        # NOCHECK: no lock handshake, like the experiment's eager two-sided send to a third process.
        await it.sync(other.lock(2, LOCK_EXCLUSIVE, MODE_NOCHECK))
        other.put(it.data, 2)
        await other.unlock(2)
        victim = ctx.since(t0)
        await it.finish()
        return victim
    if ctx.rank == 1:
        await ctx.busy(it.delay)
        await it.sync(win.post([0]))
        await it.sync(win.wait())
        await it.finish()
    return None


async def late_complete(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.14.  Origin 0 puts into target 1, then works (the delay): blocking MPI code works
    *before* its complete to overlap the transfer; nonblocking code completes first.  The target
    posted, and the origin's start was granted, before t0.  Victim: the target's wait, since t0."""
    (win,) = it.windows
    if ctx.rank == 1:
        await win.post([0])
    elif ctx.rank == 0:
        await win.start([1])  # completes once the target's grant is here
    t0 = await ctx.align()
    if ctx.rank == 0:
        win.put(it.data, 1)
        if it.blocking:
            await ctx.busy(it.delay)
            await win.complete()
        else:
            closing = win.complete()
            await ctx.busy(it.delay)
            await closing
    elif ctx.rank == 1:
        await win.wait()
        return ctx.since(t0)
    return None


async def wait_at_fence(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.16.  A NOPRECEDE/NOSUCCEED fence epoch (opened before t0); origin 0 puts into 1,
    then works (the delay) before (blocking) or after (nonblocking) its closing fence.
    Victim: target 1's closing fence, since t0."""
    (win,) = it.windows
    await win.fence(MODE_NOPRECEDE)
    if ctx.rank == 0:
        await ctx.granted(win, 1)  # the opening is not what is measured
    t0 = await ctx.align()
    if ctx.rank == 0:
        win.put(it.data, 1)
        if it.blocking:
            await ctx.busy(it.delay)
            await win.fence(MODE_NOSUCCEED)
        else:
            closing = win.fence(MODE_NOSUCCEED)
            await ctx.busy(it.delay)
            await closing
        return None
    await win.fence(MODE_NOSUCCEED)
    return ctx.since(t0) if ctx.rank == 1 else None


async def early_fence(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.15.  Origin 0 puts ``size`` bytes (1 byte in the baseline) into target 1 in a
    fence epoch; the target closes its fence early, then works 1000 µs.  Victim: the target's
    fence and work together, since t0.  The ``transfer`` series times the fence alone."""
    (win,) = it.windows
    await win.fence(MODE_NOPRECEDE)
    if ctx.rank == 0:
        await ctx.granted(win, 1)  # the opening is not what is measured
    t0 = await ctx.align()
    if ctx.rank == 0:
        win.put(it.data if it.delayed else it.data[:1], 1)
        await win.fence(MODE_NOSUCCEED)
        return None
    if ctx.rank != 1:
        await win.fence(MODE_NOSUCCEED)
        return None
    if it.series == TRANSFER:
        await win.fence(MODE_NOSUCCEED)
    elif it.blocking:
        await win.fence(MODE_NOSUCCEED)
        await ctx.busy(DELAY)
    else:
        closing = win.fence(MODE_NOSUCCEED)
        await ctx.busy(DELAY)
        await closing
    return ctx.since(t0)


async def late_unlock(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.17.  O0 = 0 holds target 2's exclusive lock (granted before t0), puts, and works
    (the delay) before (blocking) or after (nonblocking) its unlock; O1 = 1 asks for the same
    lock at t0.  Victim: O1's whole lock epoch, since t0."""
    (win,) = it.windows
    if ctx.rank == 0:
        await win.lock(2, LOCK_EXCLUSIVE)
    t0 = await ctx.align()
    if ctx.rank == 0:
        win.put(it.data, 2)
        if it.blocking:
            await ctx.busy(it.delay)
            await win.unlock(2)
        else:
            closing = win.unlock(2)
            await ctx.busy(it.delay)
            await closing
    elif ctx.rank == 1:
        await it.sync(win.lock(2, LOCK_EXCLUSIVE))
        win.put(it.data, 2, it.size)
        await win.unlock(2)
        victim = ctx.since(t0)
        await it.finish()
        return victim
    return None


# ------------------------------------------------------------------------- reorder flags
# Both series are nonblocking; the "+flag" series sets the experiment's Info flag on the window.
# Origins write disjoint parts of a target (the flags' contract, Zounmevo (2014) §5.6.2).


async def access_after_access_gats(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.18.  Origin 0 opens access epochs towards T0 = 1 (late post), then T1 = 2.
    Victim: T1's exposure epoch, since t0."""
    (win,) = it.windows
    t0 = await ctx.align()
    if ctx.rank == 0:
        for target in (1, 2):
            it.held.append(win.start([target]))
            win.put(it.data, target)
            it.held.append(win.complete())
        await it.finish()
    elif ctx.rank == 1:
        await ctx.busy(it.delay)
        win.post([0])
        await win.wait()
    elif ctx.rank == 2:
        win.post([0])
        await win.wait()
        return ctx.since(t0)
    return None


async def access_after_access_lock(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.19.  O0 = 0 holds T0 = 2's lock (granted before t0) and works (the delay) before
    unlocking; O1 = 1 locks T0, then T1 = 3.  Victim: O1's second lock epoch, since t0."""
    (win,) = it.windows
    if ctx.rank == 0:
        await win.lock(2, LOCK_EXCLUSIVE)
    t0 = await ctx.align()
    if ctx.rank == 0:
        win.put(it.data, 2)
        await ctx.busy(it.delay)
        await win.unlock(2)
    elif ctx.rank == 1:
        it.held.append(win.lock(2, LOCK_EXCLUSIVE))
        win.put(it.data, 2, it.size)
        it.held.append(win.unlock(2))
        it.held.append(win.lock(3, LOCK_EXCLUSIVE))
        win.put(it.data, 3)
        await win.unlock(3)
        victim = ctx.since(t0)
        await it.finish()
        return victim
    return None


async def access_after_exposure(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.20.  P2 = 2 is first a target of the late P0 = 0, then an origin towards P1 = 1.
    Victim: P1's exposure epoch, since t0."""
    (win,) = it.windows
    t0 = await ctx.align()
    if ctx.rank == 0:
        await ctx.busy(it.delay)
        win.start([2])
        win.put(it.data, 2)
        await win.complete()
    elif ctx.rank == 1:
        win.post([2])
        await win.wait()
        return ctx.since(t0)
    elif ctx.rank == 2:
        it.held += [win.post([0]), win.wait(), win.start([1])]
        win.put(it.data, 1)
        it.held.append(win.complete())
        await it.finish()
    return None


async def exposure_after_exposure(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.21.  Target T = 2 exposes to the late O0 = 0, then to O1 = 1.  Victim: O1's access
    epoch, since t0."""
    (win,) = it.windows
    t0 = await ctx.align()
    if ctx.rank == 0:
        await ctx.busy(it.delay)
        win.start([2])
        win.put(it.data, 2)
        await win.complete()
    elif ctx.rank == 1:
        win.start([2])
        win.put(it.data, 2, it.size)
        await win.complete()
        return ctx.since(t0)
    elif ctx.rank == 2:
        it.held += [win.post([0]), win.wait(), win.post([1]), win.wait()]
        await it.finish()
    return None


async def exposure_after_access(ctx: Ctx, it: Iteration) -> float | None:
    """Fig 5.22.  P2 = 2 is first an origin towards the late target P0 = 0, then a target of
    P1 = 1.  Victim: P1's access epoch, since t0."""
    (win,) = it.windows
    t0 = await ctx.align()
    if ctx.rank == 0:
        await ctx.busy(it.delay)
        win.post([2])
        await win.wait()
    elif ctx.rank == 1:
        win.start([2])
        win.put(it.data, 2)
        await win.complete()
        return ctx.since(t0)
    elif ctx.rank == 2:
        it.held.append(win.start([0]))
        win.put(it.data, 0)
        it.held += [win.complete(), win.post([1]), win.wait()]
        await it.finish()
    return None


SMALL_LARGE = (1, MiB)
PATTERN_SERIES = (BLOCKING, NONBLOCKING)
REORDER_SERIES = (NONBLOCKING, FLAG)

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "late_post", 3, SMALL_LARGE, PATTERN_SERIES, "origin: the next activity", late_post, windows=2
        ),
        Experiment("late_complete", 2, SMALL_LARGE, PATTERN_SERIES, "target: wait", late_complete),
        Experiment(
            "early_fence",
            2,
            (256 * KiB, MiB),
            PATTERN_SERIES,
            "target: fence + work",
            early_fence,
            busy_rank=1,
        ),
        Experiment("wait_at_fence", 2, SMALL_LARGE, PATTERN_SERIES, "target: closing fence", wait_at_fence),
        Experiment("late_unlock", 3, SMALL_LARGE, PATTERN_SERIES, "2nd origin: its lock epoch", late_unlock),
        Experiment(
            "access_after_access_gats",
            3,
            SMALL_LARGE,
            REORDER_SERIES,
            "2nd target: its exposure",
            access_after_access_gats,
            flag="access_after_access_reorder",
            busy_rank=1,
        ),
        Experiment(
            "access_after_access_lock",
            4,
            SMALL_LARGE,
            REORDER_SERIES,
            "2nd origin: its 2nd lock epoch",
            access_after_access_lock,
            flag="access_after_access_reorder",
        ),
        Experiment(
            "access_after_exposure",
            3,
            SMALL_LARGE,
            REORDER_SERIES,
            "P1: its exposure",
            access_after_exposure,
            flag="access_after_exposure_reorder",
        ),
        Experiment(
            "exposure_after_exposure",
            3,
            SMALL_LARGE,
            REORDER_SERIES,
            "2nd origin: its access",
            exposure_after_exposure,
            flag="exposure_after_exposure_reorder",
        ),
        Experiment(
            "exposure_after_access",
            3,
            SMALL_LARGE,
            REORDER_SERIES,
            "P1: its access",
            exposure_after_access,
            flag="exposure_after_access_reorder",
        ),
    )
}

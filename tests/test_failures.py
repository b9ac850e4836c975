"""A rank that fails on the in-process transport fails its peers' Requests instead of hanging them.

When one rank's ``main`` ends with an exception or is cancelled, every other rank's pending
Requests fail with :class:`aiorma.PeerFailed` (the failed rank and its cause) at once, later calls
raise it, and ``aiorma.run`` raises the first rank's exception.  Every wait here is bounded by
``asyncio.timeout``, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma import LOCK_EXCLUSIVE, PeerFailed, RmaFailure
from aiorma.runtime import run_ranks
from aiorma.transport.local import LocalNetwork

pytestmark = pytest.mark.timeout(30)

BOUND = 2.0  # seconds within which a peer's failure must reach a waiting rank


class Boom(Exception):
    pass


async def outcome(awaitable: Awaitable[Any], seconds: float = BOUND) -> BaseException | None:
    """Await within ``seconds``; the exception it ended with (TimeoutError: it hung)."""
    try:
        async with asyncio.timeout(seconds):
            await awaitable
    except Exception as exc:
        return exc
    return None


def peer_failed(exc: BaseException | None, rank: int, cause: type[BaseException]) -> bool:
    return isinstance(exc, PeerFailed) and exc.rank == rank and isinstance(exc.cause, cause)


def test_peer_failed_is_an_rma_failure_with_rank_and_cause() -> None:
    cause = Boom("x")
    exc = PeerFailed(3, cause)
    assert isinstance(exc, RmaFailure)
    assert (exc.rank, exc.cause) == (3, cause)
    assert "rank 3" in str(exc) and "Boom" in str(exc)


def test_a_window_created_after_the_rank_failed_fails_at_once() -> None:
    """A peer's departure fails every engine of the rank; a window whose collective creation was
    still finishing then was added afterwards and stayed usable: its fence waited forever (seen
    under Open MPI, compiled, by tests/test_departure_mpi.py, 1 run in 4).  An engine added to a
    failed driver fails at once with the same kind of error."""
    from aiorma._core.driver import ProgressDriver
    from aiorma.engine.window_engine import WindowEngine

    network = LocalNetwork(2)
    driver = ProgressDriver(network.endpoints[0])
    driver.peer_departed(1)
    engine = WindowEngine(7, 0, 2)
    driver.add_engine(engine)
    assert isinstance(engine.failure, PeerFailed) and engine.failure.rank == 1
    with pytest.raises(PeerFailed):
        engine.fence()


def test_rank_raising_under_an_exclusive_lock_fails_the_rank_waiting_for_that_lock() -> None:
    """Rank 1 holds rank 0's exclusive lock and raises; rank 2, queued for the same lock with a put
    and a flush behind it, gets PeerFailed on all three; rank 0, in a barrier, gets it too; run
    raises rank 1's own error."""
    seen: dict[str, BaseException | None] = {}
    held = asyncio.Event()

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            win = await comm.win_allocate(4, np.int64)
            await comm.barrier()
            if comm.rank == 1:
                await win.lock(0, LOCK_EXCLUSIVE)
                held.set()
                await asyncio.sleep(0.05)  # rank 2 is queued behind us by now
                raise Boom("rank 1 gives up")
            if comm.rank == 2:
                await held.wait()
                lock = win.lock(0, LOCK_EXCLUSIVE)
                put = win.put(np.ones(1, np.int64), 0, 0)
                flush = win.flush(0)
                started = time.monotonic()
                seen["lock"] = await outcome(lock)
                seen["elapsed"] = time.monotonic() - started  # type: ignore[assignment]
                seen["put"] = await outcome(put, 0.1)
                seen["flush"] = await outcome(flush, 0.1)
                try:  # later calls refuse at once, with the same error
                    win.lock(0, LOCK_EXCLUSIVE)
                except PeerFailed as exc:
                    seen["later"] = exc
                raise seen["lock"] or AssertionError("the lock was granted")
            if comm.rank == 0:
                seen["barrier"] = await outcome(comm.barrier())
                raise seen["barrier"] or AssertionError("the barrier completed")

    with pytest.raises(Boom, match="rank 1 gives up"):
        aiorma.run(main, nprocs=3)
    for what in ("lock", "put", "flush", "later", "barrier"):
        assert peer_failed(seen.get(what), 1, Boom), (what, seen.get(what))
    assert seen["elapsed"] < BOUND  # type: ignore[operator]


def test_rank_cancelled_inside_a_start_epoch_fails_its_targets_wait() -> None:
    """Rank 1 is cancelled inside a start/complete epoch (before complete): rank 0's wait() fails
    with PeerFailed carrying the CancelledError; run raises the CancelledError."""
    seen: dict[str, BaseException | None] = {}

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            win = await comm.win_allocate(4, np.int64)
            await comm.barrier()
            if comm.rank == 1:
                win.start([0])
                win.put(np.ones(1, np.int64), 0, 0)
                task = asyncio.current_task()
                assert task is not None
                task.cancel()
                await asyncio.sleep(5)
            else:
                win.post([1])
                seen["wait"] = await outcome(win.wait())

    with pytest.raises(asyncio.CancelledError):
        aiorma.run(main, nprocs=2)
    assert peer_failed(seen.get("wait"), 1, asyncio.CancelledError), seen


def test_rank_failing_while_its_peers_are_in_a_barrier() -> None:
    seen: dict[int, BaseException | None] = {}

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            await comm.barrier()
            if comm.rank == 1:
                await asyncio.sleep(0.05)
                raise Boom("before the second barrier")
            seen[comm.rank] = await outcome(comm.barrier())
            # the collective stream stays broken: a later collective fails at once
            seen[comm.rank + 10] = await outcome(comm.barrier(), 0.1)

    with pytest.raises(Boom):
        aiorma.run(main, nprocs=3)
    assert peer_failed(seen.get(0), 1, Boom) and peer_failed(seen.get(2), 1, Boom), seen
    for rank in (10, 12):
        assert isinstance(seen.get(rank), RmaFailure) and not isinstance(seen.get(rank), TimeoutError), seen


def test_rank_failing_while_its_peers_create_or_free_a_window() -> None:
    seen: dict[str, BaseException | None] = {}

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            win = await comm.win_allocate(4, np.int64)
            if comm.rank == 1:
                await asyncio.sleep(0.05)
                raise Boom("no more windows")
            if comm.rank == 0:
                seen["create"] = await outcome(comm.win_allocate(4, np.int64))
            else:
                seen["free"] = await outcome(win.free())

    with pytest.raises(Boom):
        aiorma.run(main, nprocs=3)
    assert peer_failed(seen.get("create"), 1, Boom) and peer_failed(seen.get("free"), 1, Boom), seen


def test_a_peer_that_waits_on_something_else_is_cancelled_after_a_grace_period() -> None:
    """A surviving rank that is not waiting on aiorma at all does not keep run() from returning."""
    cancelled: list[int] = []

    async def main(comm: aiorma.Comm) -> None:
        if comm.rank == 1:
            raise Boom("early")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(comm.rank)
            raise

    started = time.monotonic()
    with pytest.raises(Boom):
        aiorma.run(main, nprocs=2)
    assert time.monotonic() - started < 10
    assert cancelled == [0]


def test_the_first_failure_propagates_and_the_others_do_not_replace_it() -> None:
    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            if comm.rank == 2:
                raise Boom("first")
            await comm.barrier()  # fails with PeerFailed on ranks 0 and 1

    with pytest.raises(Boom, match="first"):
        aiorma.run(main, nprocs=3)


async def test_cancelling_run_ranks_from_outside_is_not_a_rank_failure() -> None:
    """An outer timeout cancels every rank and run_ranks ends with the cancellation, promptly."""
    network = LocalNetwork(2)

    async def main(comm: aiorma.Comm) -> None:
        await comm.barrier()
        await asyncio.sleep(3600)

    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await run_ranks(main, (), network)
    assert time.monotonic() - started < 5


def test_a_run_without_failures_still_returns_every_rank_value() -> None:
    async def main(comm: aiorma.Comm) -> int:
        await comm.barrier()
        return comm.rank * 10

    assert aiorma.run(main, nprocs=3) == [0, 10, 20]


def test_collectives_queued_behind_a_blocked_one_fail_too() -> None:
    seen: dict[str, BaseException | None] = {}

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            await comm.barrier()
            if comm.rank == 1:
                await asyncio.sleep(0.05)
                raise Boom("mid-stream")
            buf = np.zeros(4, np.float64)
            first = comm.barrier()
            second = comm.bcast(buf, root=1)
            third = comm.allreduce(np.ones(2), np.zeros(2))
            seen[f"{comm.rank} barrier"] = await outcome(first)
            seen[f"{comm.rank} bcast"] = await outcome(second, 0.1)
            seen[f"{comm.rank} allreduce"] = await outcome(third, 0.1)

    with pytest.raises(Boom):
        aiorma.run(main, nprocs=3)
    assert len(seen) == 6
    for what, exc in seen.items():
        assert isinstance(exc, RmaFailure), (what, exc)
    assert peer_failed(seen["0 barrier"], 1, Boom) and peer_failed(seen["2 bcast"], 1, Boom), seen


def test_a_rank_raising_system_exit_ends_run_with_it() -> None:
    seen: dict[int, BaseException | None] = {}

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(10):
            if comm.rank == 0:
                raise SystemExit(3)
            seen[comm.rank] = await outcome(comm.barrier())

    with pytest.raises(SystemExit):
        aiorma.run(main, nprocs=2)
    # rank 1 either had not started its barrier (a collective after the failure: failed at once,
    # CollectiveStreamBroken naming the PeerFailed) or was in it (PeerFailed)
    assert isinstance(seen.get(1), RmaFailure) and "SystemExit" in str(seen.get(1)), seen


def _failed(exc: BaseException | None) -> str:
    """A collective fails with PeerFailed, or CollectiveStreamBroken naming it, on each rank."""
    return "failed" if isinstance(exc, RmaFailure) else repr(exc)


async def calls_on_a_failed_window(comm: aiorma.Comm, failing: int) -> dict[str, str]:
    """Epochs left open towards ranks that never answer, a wait on own memory pending, then rank
    ``failing`` raises: what each pending wait ends with, and what each later call raises at the
    call ("returned" if it handed back a Request instead).  Used in-process here and under
    mpiexec by tests/mpi_scripts/departure.py."""
    silent = 2  # never posts: rank 0's access to it stays ungranted
    locked = await comm.win_allocate(1, np.int64)
    exposed = await comm.win_allocate(1, np.int64)
    access = await comm.win_allocate(1, np.int64)
    words = await comm.win_allocate(2, np.int64)
    seen: dict[str, str] = {}
    if comm.rank == 0:
        await locked.lock(silent, LOCK_EXCLUSIVE)  # granted: rank 2 is passive
        exposed.post([failing])  # the failing rank never starts
        access.start([silent])  # never granted
        pending = words.wait_until(0, ">=", 1)
    # The failing rank may leave this barrier while a peer's part of it is still on its way:
    # that peer's barrier fails then, which is as good as failing the next one.
    first = await outcome(comm.barrier(), 10)
    if comm.rank == failing:
        raise Boom(f"rank {failing} leaves")
    seen["barrier"] = _failed(first or await outcome(comm.barrier(), 10))
    if comm.rank != 0:
        return seen
    seen["wait_until pending"] = type(await outcome(pending)).__name__
    calls: dict[str, Callable[[], object]] = {
        "wait": exposed.wait,
        "unlock": lambda: locked.unlock(silent),
        "complete": access.complete,
        "put": lambda: locked.put(np.ones(1, np.int64), silent, 0),
        "flush": lambda: locked.flush(silent),
        "wait_until": lambda: words.wait_until(1, ">=", 1),
        "lock": lambda: words.lock(silent),
        "fence": words.fence,
    }
    for name, call in calls.items():
        try:
            call()
        except Exception as exc:
            seen[name] = type(exc).__name__
        else:
            seen[name] = "returned"
    return seen


@pytest.mark.parametrize("inline", [True, False], ids=["inline_on", "inline_off"])
def test_every_call_on_a_failed_window_raises_at_the_call(
    inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a peer failed, a pending wait_until fails with PeerFailed and every later call —
    wait after a post, unlock of a held lock, complete of an ungranted start, RMA, flush,
    wait_until, new epochs — raises PeerFailed at the call, whichever path serves the call."""
    if not inline:
        monkeypatch.setenv("AIORMA_INLINE", "0")
    results: dict[int, dict[str, str]] = {}

    async def main(comm: aiorma.Comm) -> None:
        try:
            results[comm.rank] = await calls_on_a_failed_window(comm, failing=1)
        except Boom:
            raise
        except BaseException as exc:
            results[comm.rank] = {"raised": repr(exc)}
            raise

    with pytest.raises(Boom):
        aiorma.run(main, nprocs=3)
    assert results[2] == {"barrier": "failed"}
    assert results[0] == {"barrier": "failed"} | dict.fromkeys(
        ["wait_until pending", "wait", "unlock", "complete", "put", "flush", "wait_until", "lock", "fence"],
        "PeerFailed",
    ), results[0]


def test_a_collective_some_rank_never_called_ends_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """Ranks 1 and 2 give up on a barrier that rank 0 never calls: leaving run() fails with
    CollectiveMismatch (by rank: how many collectives each called) instead of hanging, and the
    abandoned barrier logs nothing."""
    from .mpi_scripts.collective_skipped import main

    started = time.monotonic()
    with pytest.raises(aiorma.CollectiveMismatch) as raised:
        aiorma.run(main, nprocs=3)
    assert raised.value.counts == [0, 1, 1]
    assert time.monotonic() - started < 10
    assert "never retrieved" not in caplog.text


async def test_a_wait_registered_after_the_failure_fails_too() -> None:
    """A collective step resumed after its peer failed (by something else that finished) and
    registering its next flag wait then: the wait fails at once instead of waiting for the gone
    peer (the soak test found ranks stuck in a barrier this way, 7 rounds in 40)."""
    from aiorma._core.watch import MemoryWatcher

    class Waiter:
        polled = False

        def add_source(self, source: object) -> None: ...

        def remove_source(self, source: object) -> None: ...

        def wake(self) -> None: ...

    watcher = MemoryWatcher(np.zeros(2, np.int64), Waiter())
    pending = watcher.wait(0, 1)
    failure = PeerFailed(1, Boom("gone"))
    assert watcher.fail(failure) == [pending]
    later = watcher.wait(1, 1)
    assert later.done() and later.exception() is failure
    assert watcher.wait(1, 0).exception() is None  # a wait already met is met
    watcher.close()
    with pytest.raises(PeerFailed):
        await pending

"""Multi-rank scenarios, each an ``async def scenario(comm)`` that asserts on every rank.

The same functions are entries of the test registry (tests/registry.py), run by
tests/test_registry.py at each declared size on the ``local`` transport, the simulated network and
the ``mpi`` transport under the mpich wheel's mpiexec, so every transport is held to identical
semantics.  Each names the rule(s) of docs/semantics.md it exercises.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import numpy as np

import aiorma

Scenario = Callable[[aiorma.Comm], Awaitable[None]]
SCENARIOS: dict[str, tuple[Scenario, tuple[int, ...]]] = {}  # name -> (function, rank counts)


def scenario(min_size: int = 1, sizes: tuple[int, ...] = (1, 2, 3, 4, 5)) -> Callable[[Scenario], Scenario]:
    """Register a scenario for the rank counts ``sizes`` of at least ``min_size`` (on every
    transport; see tests/registry.py)."""

    def register(fn: Scenario) -> Scenario:
        SCENARIOS[fn.__name__] = (fn, tuple(n for n in sizes if n >= min_size))
        return fn

    return register


def _neighbours(comm: aiorma.Comm) -> tuple[int, int]:
    return (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size


@scenario()
async def fence_ring_put(comm: aiorma.Comm) -> None:
    """Rule 9: after the closing fence completes, every put of the epoch is visible."""
    left, right = _neighbours(comm)
    win = await comm.win_allocate(comm.size, np.int64)
    await win.fence(aiorma.MODE_NOPRECEDE)
    win.put(np.array([100 + comm.rank]), right, comm.rank)
    await win.fence(aiorma.MODE_NOSUCCEED)
    expected = np.zeros(comm.size, np.int64)
    expected[left] = 100 + left
    assert win.memory.tolist() == expected.tolist()
    await win.free()


@scenario()
async def fence_chain_awaited_only_at_end(comm: aiorma.Comm) -> None:
    """Rules 4, 5, 9: 30 middle fences, none awaited until the end; every epoch's data lands in
    its own slot, and the epochs complete in order."""
    epochs = 30
    left, right = _neighbours(comm)
    win = await comm.win_allocate(epochs, np.int64)
    requests = [win.fence()]
    for k in range(epochs):
        win.put(np.array([k * comm.size + comm.rank]), right, k)
        requests.append(win.fence(aiorma.MODE_NOSUCCEED if k == epochs - 1 else 0))
    finished_order: list[int] = []
    for i, request in enumerate(requests):
        request.add_done_callback(lambda _r, i=i: finished_order.append(i))
    for request in requests:
        await request
    assert finished_order == sorted(finished_order)
    assert win.memory.tolist() == [k * comm.size + left for k in range(epochs)]
    await win.free()


@scenario()
async def gats_symmetric_exchange(comm: aiorma.Comm) -> None:
    """docs/semantics.md, *Epochs open together*: post(G); start(G); put; complete(); wait() on
    every rank at once — the halo-exchange shape — activates access and exposure together instead
    of deadlocking."""
    left, right = _neighbours(comm)
    group = sorted({left, right})
    win = await comm.win_allocate(2, np.float64)
    for step in range(5):
        win.post(group)
        win.start(group)
        win.put(np.array([step + comm.rank + 0.5]), right, 0)
        win.put(np.array([step - comm.rank - 0.5]), left, 1)
        c = win.complete()
        w = win.wait()
        await c
        await w
        assert win.memory[0] == step + left + 0.5
        assert win.memory[1] == step - right - 0.5
    await win.free()


@scenario(min_size=2)
async def start_before_post_50_piled(comm: aiorma.Comm) -> None:
    """Rule 7: origins pile up 50 access epochs before the target posts; epoch k matches the
    target's exposure k (the target sees value k after its k-th wait)."""
    epochs = 50
    win = await comm.win_allocate(comm.size, np.int64)
    origins = list(range(1, comm.size))
    if comm.rank == 0:
        await asyncio.sleep(0.2)  # late target: every origin's epochs are deferred meanwhile
        for k in range(epochs):
            await win.post(origins)
            await win.wait()
            assert win.memory[1:].tolist() == [k] * len(origins), (k, win.memory.tolist())
    else:
        closes = []
        for k in range(epochs):
            win.start([0])
            win.put(np.array([k]), 0, comm.rank)
            closes.append(win.complete())
        for close in closes:
            await close
    await comm.barrier()
    await win.free()


@scenario(min_size=2)
async def target_50_epochs_ahead(comm: aiorma.Comm) -> None:
    """Rule 7: the target opens and closes 50 exposure epochs (none awaited) before any origin
    starts; grants are remembered in one counter per peer and matched in order."""
    epochs = 50
    win = await comm.win_allocate(comm.size, np.int64)
    origins = list(range(1, comm.size))
    if comm.rank == 0:
        waits = []
        for _ in range(epochs):
            win.post(origins)
            waits.append(win.wait())
        for w in waits:
            await w
        assert win.memory[1:].tolist() == [epochs * r for r in origins]
    else:
        await asyncio.sleep(0.2)
        for _ in range(epochs):
            win.start([0])
            win.accumulate(np.array([comm.rank]), 0, comm.rank)
            await win.complete()
    await comm.barrier()
    await win.free()


@scenario(min_size=3)
async def different_target_groups(comm: aiorma.Comm) -> None:
    """Zounmevo (2014) §5.7.3 (rule 7): P0 opens six access epochs towards T0..T5, P1 ∈ T0,T1,T2,T3,T5 and
    P2 ∈ T4,T5: P0's 6th epoch is its 5th towards P1 and its 2nd towards P2."""
    groups = [[1], [1], [1], [1], [2], [1, 2]]
    win = await comm.win_allocate(len(groups), np.int64)
    if comm.rank == 0:
        closes = []
        for k, group in enumerate(groups):
            win.start(group)
            for target in group:
                win.put(np.array([k + 1]), target, k)
            closes.append(win.complete())
        for close in closes:
            await close
    elif comm.rank in (1, 2):
        mine = [k for k, g in enumerate(groups) if comm.rank in g]
        await asyncio.sleep(0.05 * comm.rank)
        for k in mine:
            await win.post([0])
            await win.wait()
            assert win.memory[k] == k + 1, (comm.rank, k, win.memory.tolist())
        assert sorted(np.flatnonzero(win.memory).tolist()) == mine
    await comm.barrier()
    await win.free()


@scenario(min_size=2)
async def lock_contention_no_lost_update(comm: aiorma.Comm) -> None:
    """Exclusive locks exclude every other origin: 15 read-modify-write rounds per rank with a
    get, a flush and a put inside the lock lose no update."""
    rounds = 15
    win = await comm.win_allocate(1, np.int64)
    value = np.zeros(1, np.int64)
    for _ in range(rounds):
        await win.lock(0, aiorma.LOCK_EXCLUSIVE)
        win.get(value, 0, 0)
        await win.flush(0)
        win.put(value + 1, 0, 0)
        await win.unlock(0)
    await comm.barrier()
    if comm.rank == 0:
        assert win.memory[0] == rounds * comm.size
    await win.free()


@scenario(min_size=2)
async def fetch_and_op_tickets_unique(comm: aiorma.Comm) -> None:
    """fetch_and_op is atomic: 10 tickets per rank from one counter are all distinct."""
    per_rank = 10
    counter = await comm.win_allocate(1, np.int64)
    tickets = await comm.win_allocate(per_rank * comm.size, np.int64)
    mine = np.zeros(per_rank, np.int64)
    counter.lock_all()
    for i in range(per_rank):
        counter.fetch_and_op(np.array([1]), mine[i : i + 1], 0, 0, aiorma.SUM)
    await counter.flush_all()
    await counter.unlock_all()
    tickets.lock(0, aiorma.LOCK_SHARED)
    tickets.put(mine, 0, comm.rank * per_rank)
    await tickets.unlock(0)
    await comm.barrier()
    if comm.rank == 0:
        assert sorted(tickets.memory.tolist()) == list(range(per_rank * comm.size))
        assert counter.memory[0] == per_rank * comm.size
    await counter.free()
    await tickets.free()


@scenario(min_size=2)
async def compare_and_swap_one_winner(comm: aiorma.Comm) -> None:
    """compare_and_swap: of all ranks swapping 0 -> rank+1, exactly one wins."""
    flag = await comm.win_allocate(1, np.int64)
    winners = await comm.win_allocate(comm.size, np.int64)
    old = np.zeros(1, np.int64)
    await comm.barrier()
    await flag.lock(0, aiorma.LOCK_SHARED)
    await flag.compare_and_swap(np.array([comm.rank + 1]), np.array([0]), old, 0, 0)
    await flag.unlock(0)
    winners.lock(0, aiorma.LOCK_SHARED)
    winners.put(np.array([1 if old[0] == 0 else 0]), 0, comm.rank)
    await winners.unlock(0)
    await comm.barrier()
    if comm.rank == 0:
        assert winners.memory.sum() == 1
        assert flag.memory[0] == int(np.flatnonzero(winners.memory)[0]) + 1
    await flag.free()
    await winners.free()


@scenario(min_size=2)
async def several_locks_held_at_once(comm: aiorma.Comm) -> None:
    """docs/semantics.md, *Epochs open together*: lock(a); lock(b); put; put; unlock(a);
    unlock(b) — locks open together at application level are acquired together, without waiting
    for each other."""
    win = await comm.win_allocate(comm.size, np.int64)
    others = [r for r in range(comm.size) if r != comm.rank]
    for target in others:
        win.lock(target, aiorma.LOCK_SHARED)
    for target in others:
        win.put(np.array([comm.rank + 1]), target, comm.rank)
    unlocks = [win.unlock(target) for target in others]
    for request in unlocks:
        await request
    await comm.barrier()
    expected = [r + 1 if r != comm.rank else 0 for r in range(comm.size)]
    assert win.memory.tolist() == expected
    await win.free()


@scenario(min_size=2)
async def epochs_as_async_with_blocks(comm: aiorma.Comm) -> None:
    """``async with`` for lock, lock_all, post and start: each block ends with its epoch closed
    and complete, so the data is in place right after it."""
    left, right = _neighbours(comm)
    win = await comm.win_allocate(3 * comm.size, np.int64)
    async with win.lock(right, aiorma.LOCK_EXCLUSIVE):
        win.put(np.array([comm.rank + 1]), right, comm.rank)
    async with win.lock_all():
        win.put(np.array([comm.rank + 1]), right, comm.size + comm.rank)
    await comm.barrier()
    group_out, group_in = [right], [left]
    async with win.post(group_in), win.start(group_out):
        win.put(np.array([comm.rank + 1]), right, 2 * comm.size + comm.rank)
    assert win.engine.open_epochs() == []
    await comm.barrier()  # every rank's passive puts are in (the GATS one is, by its wait)
    for block in range(3):
        assert win.memory[block * comm.size + left] == left + 1, (block, win.memory.tolist())
    await win.free()


@scenario()
async def notified_put_ring(comm: aiorma.Comm) -> None:
    """Notified access: ``put_signal`` to the right neighbour, ``wait_until`` on the left one's
    signal word — no epoch call on the target — and the data is in place once the word is seen;
    ``SIGNAL_ADD`` from every rank into one word loses no addition."""
    left, right = _neighbours(comm)
    rounds = 12
    data = await comm.win_allocate(rounds, np.float64)
    words = await comm.win_allocate(comm.size + 1, np.int64)
    await comm.barrier()
    async with data.lock_all(), words.lock_all():
        for r in range(rounds):
            sent = data.put_signal(np.array([comm.rank + r / 100]), right, r, words, comm.rank, r + 1)
            await words.wait_until(left, ">=", r + 1)
            assert data.memory[r] == left + r / 100, (r, data.memory.tolist())
            await sent  # the signal is written at ``right`` (before the epochs close)
        await words.signal(0, comm.size, 2, aiorma.SIGNAL_ADD)
        if comm.rank == 0:
            await words.wait_until(comm.size, "==", 2 * comm.size)
    await comm.barrier()
    await data.free()
    await words.free()


@scenario()
async def signal_words_ring(comm: aiorma.Comm) -> None:
    """A signal of several words (``signal`` with an int64 array): each word is written whole at
    the right neighbour, after the put issued before it there (data before words), on the inline
    path as on the general one; an array ``SIGNAL_ADD`` from every rank loses no addition."""
    _left, right = _neighbours(comm)
    rounds = 12
    # words: [0] data, [1:4] a three-word signal, [4:6] a two-word SIGNAL_ADD (rank 0's)
    win = await comm.win_allocate(6, np.int64)
    await comm.barrier()
    async with win.lock_all():
        for r in range(rounds):
            # Every value only grows, so ">=" waits cannot miss a round overwritten meanwhile.
            win.put(np.array([100 + r]), right, 0)
            sent = win.signal(right, 1, np.array([r + 1, -(2**62) + r, 2**62 + r]))
            await win.wait_until(1, ">=", r + 1)
            await win.wait_until(2, ">=", -(2**62) + r)
            await win.wait_until(3, ">=", 2**62 + r)
            assert win.memory[0] >= 100 + r, (r, win.memory.tolist())
            await sent  # the words are written at ``right`` (before the epoch closes)
        await win.signal(0, 4, np.array([1, 2]), aiorma.SIGNAL_ADD)
        if comm.rank == 0:
            await win.wait_until(4, "==", comm.size)
            await win.wait_until(5, "==", 2 * comm.size)
    await comm.barrier()
    assert win.memory[1:4].tolist() == [rounds, -(2**62) + rounds - 1, 2**62 + rounds - 1]
    await win.free()


@scenario()
async def notify_ring(comm: aiorma.Comm) -> None:
    """``notify`` (no Request, no order with other words): each round a rank notifies its right
    neighbour — a one-word notice and a three-word one — and waits in its own memory for its left
    neighbour's; every word it sees is one that was written (or 0), never a torn mix.  A flush
    towards the neighbour completes the notices there, and the window's free the ones still in
    flight."""
    _left, right = _neighbours(comm)
    rounds = 40
    win = await comm.win_allocate(4, np.int64)
    await comm.barrier()

    def written(seen: list[int]) -> bool:
        return (
            0 <= seen[0] <= rounds
            and (seen[1] == 0 or 1 <= seen[1] - 2**40 <= rounds)
            and (seen[2] == 0 or 1 <= seen[2] + 2**62 <= rounds)
            and seen[3] % (1 << 33) == 0
            and 0 <= seen[3] >> 33 <= rounds
        )

    last = [rounds, 2**40 + rounds, -(2**62) + rounds, rounds << 33]
    async with win.lock_all():
        for r in range(1, rounds + 1):
            win.notify(right, 0, r)
            win.notify(right, 1, np.array([2**40 + r, -(2**62) + r, r << 33], np.int64))
            await win.wait_until(0, ">=", r)
            await win.wait_until(3, ">=", r << 33)
            assert written(win.memory.tolist()), (r, win.memory.tolist())
        await win.flush(right)  # completes our notices there
        await comm.barrier()
        assert win.memory.tolist() == last
        await comm.barrier()
        win.notify(right, 0, rounds + 1)  # left to the free
    await comm.barrier()
    await win.free()
    assert win.memory.tolist() == [rounds + 1, *last[1:]]


@scenario()
async def passive_flush_family(comm: aiorma.Comm) -> None:
    """flush / flush_local / flush_all / flush_local_all inside lock_all; gets see puts flushed
    before them; everything held (rule 5) and awaited at the end."""
    _left, right = _neighbours(comm)
    win = await comm.win_allocate(4, np.int32)
    await comm.barrier()
    win.lock_all()
    win.put(np.array([7, 8], np.int32), right, 0)
    f1 = win.flush(right)
    await f1
    out = np.zeros(2, np.int32)
    win.get(out, right, 0)
    f2 = win.flush_local(right)
    win.accumulate(np.array([1, 1], np.int32), right, 2, aiorma.SUM)
    f3 = win.flush_all()
    f4 = win.flush_local_all()
    done = win.unlock_all()
    for request in (f2, f3, f4, done):
        await request
    assert out.tolist() == [7, 8]
    await comm.barrier()
    assert win.memory.tolist() == [7, 8, 1, 1]
    await win.free()


@scenario()
async def accumulate_ops_and_ordering(comm: aiorma.Comm) -> None:
    """Rule 6: accumulates from one origin to one location apply in program order; every op."""
    win = await comm.win_allocate(8, np.int64)
    _left, right = _neighbours(comm)
    await win.fence()
    win.accumulate(np.array([5]), right, 0, aiorma.REPLACE)
    win.accumulate(np.array([3]), right, 0, aiorma.SUM)
    win.accumulate(np.array([2]), right, 0, aiorma.PROD)
    win.accumulate(np.array([9]), right, 1, aiorma.MAX)
    win.accumulate(np.array([-4]), right, 2, aiorma.MIN)
    win.accumulate(np.array([6]), right, 3, aiorma.BOR)
    win.accumulate(np.array([3]), right, 3, aiorma.BXOR)
    win.accumulate(np.array([12]), right, 4, aiorma.REPLACE)
    win.accumulate(np.array([10]), right, 4, aiorma.BAND)
    win.accumulate(np.array([1]), right, 5, aiorma.LOR)
    win.accumulate(np.array([1]), right, 6, aiorma.LXOR)
    old = np.zeros(2, np.int64)
    win.get_accumulate(np.array([0, 0]), old, right, 0, aiorma.NO_OP)
    await win.fence(aiorma.MODE_NOSUCCEED)
    assert win.memory.tolist() == [16, 9, -4, 5, 8, 1, 1, 0]
    assert old.tolist() == [16, 9]
    await win.free()


@scenario()
async def win_create_exposes_user_array(comm: aiorma.Comm) -> None:
    """win_create exposes the caller's own array; it stays the caller's after free()."""
    left, right = _neighbours(comm)
    buf = np.zeros((2, 3), np.float32)
    win = await comm.win_create(buf)
    assert win.memory is buf
    await win.fence()
    win.put(np.full(3, comm.rank, np.float32), right, 3)
    await win.fence(aiorma.MODE_NOSUCCEED)
    await win.free()
    assert buf[1].tolist() == [left] * 3 and buf[0].tolist() == [0] * 3
    buf[0, 0] = 42.0  # still ordinary memory
    assert buf[0, 0] == 42.0


@scenario(min_size=2)
async def free_completes_unawaited_epochs(comm: aiorma.Comm) -> None:
    """Rule 10b: free() completes epochs that were closed but never awaited."""
    left, right = _neighbours(comm)
    group = sorted({left, right})
    win = await comm.win_allocate(2, np.int64)
    win.post(group)
    win.start(group)
    win.put(np.array([comm.rank + 1]), right, 0)
    win.put(np.array([comm.rank + 1]), left, 1)
    win.complete()
    win.wait()
    await win.free()
    assert win.memory.tolist() == [left + 1, right + 1]


@scenario(min_size=2)
async def windows_are_independent(comm: aiorma.Comm) -> None:
    """Rule 11: an epoch deferred on one window does not hold back another window."""
    slow = await comm.win_allocate(1, np.int64)
    fast = await comm.win_allocate(2, np.int64)  # [data, "go ahead" signal]
    if comm.rank == 0:
        blocked = slow.start([1])  # rank 1 posts on `slow` only much later
        slow.put(np.array([1]), 1, 0)
        slow_done = slow.complete()
        fast.start([1])
        fast.put(np.array([2]), 1, 0)
        await fast.complete()
        assert not blocked.done() and not slow_done.done()
        fast.lock(1, aiorma.LOCK_SHARED)
        fast.put(np.array([1]), 1, 1)  # tell rank 1 to post on `slow` now
        await fast.unlock(1)
        await slow_done
    elif comm.rank == 1:
        await fast.post([0])
        await fast.wait()
        assert fast.memory[0] == 2
        while fast.memory[1] != 1:
            await asyncio.sleep(0.005)
        await slow.post([0])
        await slow.wait()
        assert slow.memory[0] == 1
    await comm.barrier()
    await slow.free()
    await fast.free()


@scenario(min_size=2, sizes=(2, 4))
async def idle_exposure_costs_little_cpu(comm: aiorma.Comm) -> None:
    """docs/semantics.md, *Requests, cancellation, progress*: a target whose exposure waits 2 s
    for a late origin burns < 0.3 s of CPU."""
    win = await comm.win_allocate(1, np.int64)
    if comm.rank == 0:
        cpu = time.process_time()
        await win.post([1])
        await win.wait()
        spent = time.process_time() - cpu
        assert win.memory[0] == 5
        assert spent < 0.3, f"the waiting target used {spent:.3f} s of CPU"
    elif comm.rank == 1:
        await asyncio.sleep(2.0)
        await win.start([0])
        win.put(np.array([5]), 0, 0)
        await win.complete()
    await comm.barrier()
    await win.free()


@scenario(min_size=2)
async def cancelled_wait_keeps_epoch_going(comm: aiorma.Comm) -> None:
    """Cancelling an await (a timeout) abandons only the wait: the epoch still completes, the
    same Request can be awaited again, and the peer's counters stay in step."""
    win = await comm.win_allocate(1, np.int64)
    if comm.rank == 0:
        win.post([1])
        done = win.wait()
        try:
            async with asyncio.timeout(0.05):
                await done  # the origin is late: this times out
        except TimeoutError:
            pass
        else:  # pragma: no cover - the origin sleeps 0.3 s first
            raise AssertionError("the exposure completed before its origin started")
        assert not done.done()
        await done
        assert win.memory[0] == 11
        await win.post([1])  # the next epoch still matches: counters stayed in step
        await win.wait()
        assert win.memory[0] == 12
    elif comm.rank == 1:
        await asyncio.sleep(0.3)
        for value in (11, 12):
            win.start([0])
            win.put(np.array([value]), 0, 0)
            await win.complete()
    await comm.barrier()
    await win.free()


@scenario()
async def barrier_back_to_back(comm: aiorma.Comm) -> None:
    """Comm.barrier: 200 held barriers in flight at once, then awaited in order."""
    requests = [comm.barrier() for _ in range(200)]
    for request in requests:
        await request
    assert all(r.done() for r in requests)


# ----------------------------------------------------------- cancelled entries into async with
#
# An ``async with`` block whose entry is cancelled while the opening call waits (a lock queued
# behind another rank's, an access whose target has not posted) must close the epoch it opened:
# the opening took effect at the call, so the closing call must too, or the epoch stays open for
# good — granted later and never released.  The peer that holds the epoch up waits for the
# giver-up's word (``signal``), so the wait is sure to be cancelled, on every transport and load.


async def _gave_up(opening: aiorma.EpochRequest) -> None:
    """Enter ``opening``'s block under a deadline that must expire; the block never runs."""
    try:
        async with asyncio.timeout(0.05):
            async with opening:
                raise AssertionError("entered a block whose opening was held up")
    except TimeoutError:
        return
    raise AssertionError("the entry was not cancelled")


async def word_window(comm: aiorma.Comm, words: int = 1) -> aiorma.Window:
    """``words`` signal words per rank, under a long-lived lock_all (signals need a passive
    epoch)."""
    window = await comm.win_allocate(words, np.int64)
    await window.lock_all(aiorma.MODE_NOCHECK)
    return window


async def free_words(words: aiorma.Window) -> None:
    await words.unlock_all()
    await words.free()


@scenario(min_size=2, sizes=(2, 3, 4))
async def cancelled_lock_entry_closes_the_epoch(comm: aiorma.Comm) -> None:
    """A cancelled entry into ``async with win.lock(0)`` (held by rank 0) unlocks: rank 0's
    release grants it, the engine releases it at once, and every rank then locks again."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm)
    giver = comm.size - 1
    for lock_type in (aiorma.LOCK_EXCLUSIVE, aiorma.LOCK_SHARED):
        words.memory[0] = 0
        await comm.barrier()
        if comm.rank == 0:
            held = win.lock(0, aiorma.LOCK_EXCLUSIVE)
            await held
        await comm.barrier()  # rank 0 holds its own lock from here
        if comm.rank == giver:
            await _gave_up(win.lock(0, lock_type))
            await words.signal(0, 0, 1)
        if comm.rank == 0:
            await words.wait_until(0, ">=", 1)
            await win.unlock(0)
        async with win.lock(0, aiorma.LOCK_EXCLUSIVE):
            win.accumulate(np.ones(1, np.int64), 0, 0, aiorma.SUM)
        assert win.engine.open_epochs() == []
        await comm.barrier()
    if comm.rank == 0:
        assert int(win.memory[0]) == 2 * comm.size
    await free_words(words)
    await win.free()


@scenario(min_size=2, sizes=(2, 3))
async def cancelled_lock_all_entry_closes_the_epoch(comm: aiorma.Comm) -> None:
    """A cancelled entry into ``async with win.lock_all()`` while rank 0 holds its own window
    exclusively unlocks all: the next lock_all is granted, and rank 0's lock again."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm)
    giver = comm.size - 1
    if comm.rank == 0:
        await win.lock(0, aiorma.LOCK_EXCLUSIVE)
    await comm.barrier()
    if comm.rank == giver:
        await _gave_up(win.lock_all())
        await words.signal(0, 0, 1)
    if comm.rank == 0:
        await words.wait_until(0, ">=", 1)
        await win.unlock(0)
    async with win.lock_all():
        win.accumulate(np.ones(1, np.int64), 0, 0, aiorma.SUM)
    await comm.barrier()
    async with win.lock(0, aiorma.LOCK_EXCLUSIVE):
        pass
    assert win.engine.open_epochs() == []
    await comm.barrier()
    if comm.rank == 0:
        assert int(win.memory[0]) == comm.size
    await free_words(words)
    await win.free()


@scenario(min_size=2, sizes=(2, 3))
async def cancelled_start_entry_closes_the_epoch(comm: aiorma.Comm) -> None:
    """A cancelled entry into ``async with win.start([0])`` before rank 0 posts completes the
    access epoch: rank 0's post is matched by it, its ``wait`` completes, and the next epochs
    of both still match (the counters stayed in step)."""
    win = await comm.win_allocate(1, np.int64)
    words = await word_window(comm)
    giver = comm.size - 1
    if comm.rank == giver:
        await _gave_up(win.start([0]))
        await words.signal(0, 0, 1)
        async with win.start([0]):
            win.put(np.array([7], np.int64), 0, 0)
    if comm.rank == 0:
        await words.wait_until(0, ">=", 1)
        async with win.post([giver]):
            pass  # the abandoned access epoch (no RMA)
        async with win.post([giver]):
            pass  # the next one carries the put
        assert int(win.memory[0]) == 7
    assert win.engine.open_epochs() == []
    await comm.barrier()
    await free_words(words)
    await win.free()


def _read_only(values: list[int]) -> np.ndarray:
    array = np.array(values, np.int64)
    array.flags.writeable = False  # a constant table, a view of someone else's buffer
    return array


@scenario()
async def read_only_origins(comm: aiorma.Comm) -> None:
    """An origin buffer the program cannot write (a read-only array) is a valid source for put,
    accumulate and get_accumulate into allocated and created memory, on every path a transport
    takes (MPI's get_accumulate wants a writable origin: the transport copies such a one)."""
    left, right = _neighbours(comm)
    base = 3 * comm.rank
    for create in (False, True):
        if create:
            win = await comm.win_create(np.zeros(3 * comm.size, np.int64))
        else:
            win = await comm.win_allocate(3 * comm.size, np.int64)
        async with win.lock_all():
            win.put(_read_only([10 + comm.rank]), right, base)
            win.accumulate(_read_only([20 + comm.rank]), right, base + 1, aiorma.SUM)
            old = np.zeros(1, np.int64)
            await win.get_accumulate(_read_only([30 + comm.rank]), old, right, base + 2, aiorma.SUM)
            assert old.tolist() == [0]
        await comm.barrier()
        mine = win.memory[3 * left : 3 * left + 3].tolist()
        assert mine == [10 + left, 20 + left, 30 + left], (create, mine)
        await win.free()

"""Notified access: ``signal``, ``put_signal`` and ``wait_until`` (in-process; the registry's
``notified_put_ring`` scenario runs the same calls on every transport and under mpiexec)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.runtime import run_ranks

from .tearing_network import TearingNetwork


def run(main: Any, nprocs: int = 2) -> list[Any]:
    return aiorma.run(main, nprocs=nprocs)


@pytest.mark.timeout(60)
def test_bad_calls_raise_at_the_call_and_change_nothing() -> None:
    async def main(comm: aiorma.Comm) -> None:
        words = await comm.win_allocate(2, np.int64)
        floats = await comm.win_allocate(2, np.float64)
        peer = 1 - comm.rank
        with pytest.raises(aiorma.EpochError):
            words.signal(peer, 0, 1)  # no passive epoch
        with pytest.raises(aiorma.EpochError):
            floats.put_signal(np.ones(1), peer, 0, words, 0, 1)
        async with words.lock_all(), floats.lock_all():
            with pytest.raises(aiorma.RmaTypeError):
                floats.signal(peer, 0, 1)  # signal words are int64
            with pytest.raises(aiorma.RmaRangeError):
                words.signal(peer, 2, 1)
            with pytest.raises(aiorma.RmaTypeError):
                words.signal(peer, 0, 2**63)  # does not fit int64
            with pytest.raises(aiorma.RmaUsageError):
                words.signal(peer, 0, 1, aiorma.SUM)  # an Op is not a SignalOp
            with pytest.raises(aiorma.RmaRangeError):
                words.signal(peer, 1, np.array([1, 2]))  # the second word is outside
            with pytest.raises(aiorma.RmaTypeError):
                words.signal(peer, 0, np.array([1.5, 2.0]))  # words are int64
            with pytest.raises(aiorma.RmaTypeError):
                words.signal(peer, 0, [1, 2**63])  # does not fit int64
            with pytest.raises(aiorma.RmaUsageError):
                floats.put_signal(np.ones(1), peer, 0, "words", 0, 1)  # type: ignore[arg-type]
            with pytest.raises(aiorma.RmaRangeError):
                floats.put_signal(np.ones(1), peer, 0, words, 5, 1)
            assert floats.engine.peers[peer].issued_seq == 0  # the put was not made
        with pytest.raises(aiorma.RmaUsageError):
            words.wait_until(0, "=>", 1)
        with pytest.raises(aiorma.RmaRangeError):
            words.wait_until(2, "==", 1)
        with pytest.raises(aiorma.RmaTypeError):
            words.wait_until(0, "==", 1.5)
        await comm.barrier()
        assert words.memory.tolist() == [0, 0] and floats.memory.tolist() == [0.0, 0.0]
        await words.free()
        await floats.free()

    run(main)


@pytest.mark.timeout(60)
def test_wait_until_each_comparison_and_plain_puts_wake_it() -> None:
    """Every comparison; a plain put (no signal call) also finishes a wait promptly."""

    async def main(comm: aiorma.Comm) -> list[str]:
        words = await comm.win_allocate(1, np.int64)
        await comm.barrier()
        seen = []
        if comm.rank == 0:
            for compare, value in (("==", 5), ("!=", 5), (">", 5), (">=", 7), ("<", 0), ("<=", -3)):
                started = time.perf_counter()
                await asyncio.wait_for(words.wait_until(0, compare, value), 5)
                seen.append(compare)
                assert time.perf_counter() - started < 0.04  # poked, not found by the 50 ms guard
                await comm.barrier()
        else:
            for new in (5, 4, 6, 7, -1, -3):
                await asyncio.sleep(0.01)
                async with words.lock(0):
                    words.put(np.array([new]), 0, 0)
                await comm.barrier()
        await words.free()
        return seen

    assert run(main)[0] == ["==", "!=", ">", ">=", "<", "<="]


@pytest.mark.timeout(60)
def test_cancelled_wait_until_abandons_only_that_wait() -> None:
    async def main(comm: aiorma.Comm) -> None:
        words = await comm.win_allocate(1, np.int64)
        await comm.barrier()
        if comm.rank == 0:
            pending = words.wait_until(0, "==", 3)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await pending
            await comm.barrier()  # now rank 1 signals
            await asyncio.wait_for(pending, 5)  # the same Request completes later
        else:
            await comm.barrier()
            async with words.lock_all():
                await words.signal(0, 0, 3)
        await comm.barrier()
        await words.free()

    run(main)


@pytest.mark.timeout(60)
def test_signal_add_from_every_rank_loses_nothing() -> None:
    async def main(comm: aiorma.Comm) -> int:
        words = await comm.win_allocate(1, np.int64)
        await comm.barrier()
        async with words.lock_all():
            for _ in range(25):
                words.signal(0, 0, 1, aiorma.SIGNAL_ADD)
            await words.flush(0)
        if comm.rank == 0:
            await asyncio.wait_for(words.wait_until(0, "==", 25 * comm.size), 5)
        await comm.barrier()
        value = int(words.memory[0])
        await words.free()
        return value

    assert run(main, nprocs=4)[0] == 100


@pytest.mark.timeout(60)
def test_free_fails_a_pending_wait_until() -> None:
    """A wait that can no longer be satisfied ends with the window: WindowFreedError, not a hang
    (and never a look at memory that has been given back)."""

    async def main(comm: aiorma.Comm) -> None:
        words = await comm.win_allocate(1, np.int64)
        pending = words.wait_until(0, "==", 99)
        await comm.barrier()
        await words.free()
        with pytest.raises(aiorma.WindowFreedError):
            await asyncio.wait_for(pending, 5)

    run(main)


@pytest.mark.timeout(60)
def test_a_signal_of_several_words_is_written_inside_the_call() -> None:
    """An int64 array signal takes the one-word signal's path: the put and its flush inside the
    call (what makes multi-word LL messages pay, aiorma/collectives/landing.py), and the caller may
    reuse the array at once."""

    async def main(comm: aiorma.Comm) -> list[int]:
        win = await comm.win_allocate(4, np.int64)
        await comm.barrier()
        async with win.lock_all():
            if comm.rank == 0:
                words = np.array([5, -6, 2**40], np.int64)
                sent = win.signal(1, 1, words)
                assert sent.done() and sent.exception() is None
                words[:] = 0
        await comm.barrier()
        seen = win.memory.tolist()
        await win.free()
        return seen

    assert run(main)[1] == [0, 5, -6, 2**40]


@pytest.mark.timeout(60)
def test_signal_words_to_another_node_are_written_whole() -> None:
    """Towards a peer whose puts may land in pieces that split a word (another node), a signal
    — one word or several — is written by accumulates with REPLACE, applied element by element,
    never a put; the transport declines to write it inside the call.  Every write carries at
    most two words (a longer copy may tear a word even where puts are whole: to itself a rank
    writes puts of two words).  On the tearing network a reader waiting for the words never
    sees one half-written."""
    network = TearingNetwork(2)

    async def main(comm: aiorma.Comm) -> list[int]:
        win = await comm.win_allocate(14, np.int64)
        await comm.barrier()
        async with win.lock_all():
            if comm.rank == 0:
                endpoint = network.endpoints[0]
                endpoint.writes.clear()
                await win.signal(1, 0, 2**33 + 7)
                assert ("accumulate/REPLACE", 1) in endpoint.writes, endpoint.writes
                puts = [kind for kind, _ in endpoint.writes if kind in ("put/REPLACE", "put_flushed")]
                assert not puts, endpoint.writes
                endpoint.writes.clear()
                await win.signal(1, 1, np.array([5, -6, 2**40 + 3], np.int64))
                assert [w for w in endpoint.writes if w[0] == "accumulate/REPLACE"] == [
                    ("accumulate/REPLACE", 2),
                    ("accumulate/REPLACE", 1),
                ], endpoint.writes
                endpoint.writes.clear()
                await win.signal(1, 4, np.arange(10, 20, dtype=np.int64))
                assert endpoint.writes.count(("accumulate/REPLACE", 2)) == 5, endpoint.writes
                endpoint.writes.clear()
                await win.signal(0, 0, np.arange(5, dtype=np.int64))  # to itself: puts are whole
                runs = [n for kind, n in endpoint.writes if kind == "put/REPLACE"]
                assert runs == [2, 2, 1], endpoint.writes
            else:
                # Every word is seen whole: the old value (0) or the new one, never a mix.
                for index, value in ((0, 2**33 + 7), (2, -6), (3, 2**40 + 3), (13, 19)):
                    await win.wait_until(index, "!=", 0)
                    assert win.memory[index] == value, (index, win.memory[index])
        await comm.barrier()
        seen = win.memory.tolist()
        await win.free()
        return seen

    async def both() -> list[list[int]]:
        return await run_ranks(main, (), network)

    assert asyncio.run(both())[1] == [2**33 + 7, 5, -6, 2**40 + 3, *range(10, 20)]


@pytest.mark.timeout(60)
def test_notify_refuses_what_signal_refuses_and_changes_nothing() -> None:
    async def main(comm: aiorma.Comm) -> None:
        words = await comm.win_allocate(2, np.int64)
        floats = await comm.win_allocate(2, np.float64)
        peer = 1 - comm.rank
        with pytest.raises(aiorma.EpochError):
            words.notify(peer, 0, 1)  # no passive epoch
        async with words.lock_all(), floats.lock_all():
            with pytest.raises(aiorma.RmaTypeError):
                floats.notify(peer, 0, 1)  # notice words are int64
            with pytest.raises(aiorma.RmaRangeError):
                words.notify(peer, 2, 1)
            with pytest.raises(aiorma.RmaRangeError):
                words.notify(peer, 1, np.array([1, 2]))  # the second word is outside
            with pytest.raises(aiorma.RmaTypeError):
                words.notify(peer, 0, 2**63)  # does not fit int64
            with pytest.raises(aiorma.RmaTypeError):
                words.notify(peer, 0, np.array([1.5, 2.0]))
            with pytest.raises(aiorma.RmaRangeError):
                words.notify(2, 0, 1)  # no such rank
        await comm.barrier()
        assert words.memory.tolist() == [0, 0] and floats.memory.tolist() == [0.0, 0.0]
        await words.free()
        await floats.free()

    run(main)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tearing", [False, True])
def test_notify_writes_each_word_whole_and_returns_nothing(tearing: bool) -> None:
    """A notice lands (the reader's wait_until sees it) without a Request to await: inside the
    call where the transport stores words whole, otherwise by accumulates with REPLACE (on the
    tearing network, whose puts leave words half-written) — never a put that could tear.  The
    caller may reuse its array at once."""
    network = TearingNetwork(2) if tearing else None

    async def main(comm: aiorma.Comm) -> list[int]:
        win = await comm.win_allocate(6, np.int64)
        await comm.barrier()
        async with win.lock_all():
            if comm.rank == 0:
                words = np.array([5, -6, 2**40 + 3], np.int64)
                assert win.notify(1, 0, 2**33 + 7) is None
                assert win.notify(1, 1, words) is None
                words[:] = 0
                win.notify(1, 5, 11)
                win.notify(1, 5, 12)  # the later write of a word lands later
                if network is not None:
                    kinds = {kind for kind, _ in network.endpoints[0].writes}
                    assert "accumulate/REPLACE" in kinds and "put/REPLACE" not in kinds, kinds
            else:
                for index, value in ((0, 2**33 + 7), (1, 5), (2, -6), (3, 2**40 + 3)):
                    await win.wait_until(index, "!=", 0)
                    assert win.memory[index] == value, (index, win.memory[index])
                await win.wait_until(5, "==", 12)
        await comm.barrier()
        seen = win.memory.tolist()
        await win.free()
        return seen

    if network is None:
        results = run(main)
    else:

        async def all_ranks() -> list[list[int]]:
            return await run_ranks(main, (), network)

        results = asyncio.run(all_ranks())
    assert results[1] == [2**33 + 7, 5, -6, 2**40 + 3, 0, 12]

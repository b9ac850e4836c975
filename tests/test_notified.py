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
from aiorma.transport.base import RmaOp
from aiorma.transport.local import LocalEndpoint, LocalNetwork


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


class _FarEndpoint(LocalEndpoint):
    """A local endpoint whose peers are "on another node": a put may reach them in pieces that
    split a word (as MPICH's network module delivered a large put in one CI run), so it says puts
    do not store words whole there, and it records how signal words were written."""

    def __init__(self, network: LocalNetwork, rank: int) -> None:
        super().__init__(network, rank)
        self.writes: list[tuple[str, int]] = []

    def stores_words_whole(self, target: int) -> bool:
        return target == self.rank

    def put_flushed(self, win_id: int, target: int, disp: int, data: np.ndarray) -> bool:
        self.writes.append(("put_flushed", int(data.size)))
        return super().put_flushed(win_id, target, disp, data)

    def put_words_flushed(self, win_id: int, target: int, disp: int, words: np.ndarray) -> bool:
        if target == self.rank or words.size == 1:
            return self.put_flushed(win_id, target, disp, words)
        self.writes.append(("put_words_flushed", int(words.size)))
        return False  # no inline path: the caller takes the general one

    def issue(self, win_id: int, token: int, op: RmaOp) -> bool:
        self.writes.append((f"{op.kind.value}/{op.op.name}", op.count))
        return super().issue(win_id, token, op)


class _FarNetwork(LocalNetwork):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.endpoints = [_FarEndpoint(self, rank) for rank in range(size)]


@pytest.mark.timeout(60)
def test_signal_words_to_another_node_are_written_whole() -> None:
    """Towards a peer whose puts may split a word, a signal of several words is one put per
    word (each word one small message, delivered whole), not one put of them all — beyond 8
    words one accumulate with REPLACE (applied element by element); one word is one put.  Inside
    the call that is the transport's put_words_flushed (the MPI transport's is checked by the LL
    torn-word check between two emulated nodes, tests/test_ll.py, which found the problem);
    here the transport declines, so the general path must split the words."""
    network = _FarNetwork(2)

    async def main(comm: aiorma.Comm) -> list[int]:
        win = await comm.win_allocate(14, np.int64)
        await comm.barrier()
        async with win.lock_all():
            if comm.rank == 0:
                endpoint = network.endpoints[0]
                endpoint.writes.clear()
                await win.signal(1, 0, 7)
                assert endpoint.writes == [("put_flushed", 1)], endpoint.writes
                endpoint.writes.clear()
                words = np.array([5, -6, 2**40], np.int64)
                await win.signal(1, 1, words)
                assert ("put", 3) not in endpoint.writes and ("put_flushed", 3) not in endpoint.writes
                assert endpoint.writes.count(("put/REPLACE", 1)) == 3, endpoint.writes
                endpoint.writes.clear()
                await win.signal(1, 4, np.arange(10, 20, dtype=np.int64))  # many words: one accumulate
                assert ("accumulate/REPLACE", 10) in endpoint.writes, endpoint.writes
        await comm.barrier()
        seen = win.memory.tolist()
        await win.free()
        return seen

    async def both() -> list[list[int]]:
        return await run_ranks(main, (), network)

    assert asyncio.run(both())[1] == [7, 5, -6, 2**40, *range(10, 20)]

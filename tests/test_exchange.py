"""Exchange programs, checked without any transport.

Every rank's program of a collective is run by a small interpreter written here, independently
of :class:`aiorma.collectives.exchange.Exchange`: messages are FIFO queues per ordered pair, a
round's sends go out at once and its receives are taken as their messages arrive, in any order
of ranks.  The results must be MPI's: an allreduce equals numpy's reduction in rank order (REPLACE
and NO_OP check the order), a bcast delivers the root's bytes everywhere, and a barrier lets no
rank through before every rank has entered.  Then the real Exchange runs the same programs on
an in-process channel, with messages that land late, and must agree.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

import numpy as np
import pytest

from aiorma.collectives.barrier import nway_peers
from aiorma.collectives.bcast import knomial_links
from aiorma.collectives.exchange import OUT, SCRATCH, SOURCE, Program, Receive, Round
from aiorma.collectives.programs import (
    barrier_program,
    binomial_gather_program,
    binomial_reduce_program,
    binomial_scatter_program,
    bruck_allgather_program,
    direct_allgather_program,
    direct_alltoall_program,
    direct_gather_program,
    direct_scatter_program,
    halving_doubling_program,
    pairwise_alltoall_program,
    recursive_doubling_allgather_program,
    recursive_doubling_program,
    ring_allgather_program,
    tree_program,
)
from aiorma.constants import Op

SIZES = range(1, 10)


def _apply(op: Op, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``low op high``, where ``low`` holds the lower ranks' contribution."""
    if op is Op.REPLACE:
        return high.copy()
    if op is Op.NO_OP:
        return low.copy()
    return {Op.SUM: np.add, Op.MAX: np.maximum, Op.PROD: np.multiply}[op](low, high)


def interpret(
    programs: list[Program], buffers: list[list[np.ndarray]], op: Op | None, block: int = 0
) -> list[int]:
    """Run every rank's program to the end; returns the order in which ranks finished.  Raises
    if the programs cannot all finish (a receive with no message on its way).  ``block``: the
    elements of a block, for the sends, receives and copies that name blocks."""

    def view(parts: list[np.ndarray], part: int, blocks: tuple[int, int] | None) -> np.ndarray:
        if blocks is None:
            return parts[part]
        first, count = blocks
        return parts[part][first * block : (first + count) * block]

    queues: dict[tuple[int, int], deque[object]] = {}
    signals: dict[tuple[int, int], int] = {}
    step = [0] * len(programs)
    issued = [False] * len(programs)
    finished: list[int] = []
    while len(finished) < len(programs):
        moved = False
        for rank, program in enumerate(programs):
            if rank in finished:
                continue
            if step[rank] == len(program.rounds):
                parts = buffers[rank]
                if parts:
                    parts[OUT][...] = parts[program.result]
                finished.append(rank)
                moved = True
                continue
            current = program.rounds[step[rank]]
            parts = buffers[rank]
            if not issued[rank]:
                for copy in current.copies:
                    view(parts, copy.target, copy.target_blocks)[...] = view(
                        parts, copy.source, copy.source_blocks
                    )
                for peer in current.signals:
                    signals[(rank, peer)] = signals.get((rank, peer), 0) + 1
                for send in current.sends:
                    queues.setdefault((rank, send.peer), deque()).append(
                        (view(parts, send.part, send.blocks).copy(), send.via_slots)
                    )
                issued[rank] = True
                moved = True
            ready = all(signals.get((peer, rank), 0) > 0 for peer in current.waits) and all(
                queues.get((r.peer, rank)) for r in current.receives
            )
            if not ready:
                continue
            for peer in current.waits:
                signals[(peer, rank)] -= 1
            for r in current.receives:
                incoming, via_slots = queues[(r.peer, rank)].popleft()  # type: ignore[misc]
                assert isinstance(incoming, np.ndarray)
                # Both ends must agree on how the landing carries it: the send says via_slots
                # exactly where the receive combines or says so itself.
                assert via_slots == (r.into is not None or r.via_slots), (rank, r, "send's via_slots")
                if r.into is None:
                    view(parts, r.part, r.blocks)[...] = incoming
                else:
                    assert op is not None
                    mine = view(parts, r.part, r.blocks).copy()
                    low, high = (mine, incoming) if r.incoming_higher else (incoming, mine)
                    view(parts, r.into, r.blocks)[...] = _apply(op, low, high)
                for child in r.forward:
                    forwarded = view(parts, r.part, r.blocks).copy()
                    queues.setdefault((rank, child), deque()).append((forwarded, False))
            step[rank] += 1
            issued[rank] = False
            moved = True
        if not moved:
            raise AssertionError(f"stuck: rounds {step}, finished {finished}")
    assert not any(queues.values()), "a message nobody took"
    assert not any(signals.values()), "a signal nobody waited for"
    return finished


def _parts(source: np.ndarray, in_place: bool) -> list[np.ndarray]:
    out = source if in_place else np.zeros_like(source)
    return [source, out, np.zeros_like(source)]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op", [Op.SUM, Op.MAX, Op.REPLACE, Op.NO_OP])
@pytest.mark.parametrize("in_place", [False, True])
def test_recursive_doubling_reduces_in_rank_order(size: int, op: Op, in_place: bool) -> None:
    group = list(range(size))
    programs = [recursive_doubling_program(group, rank, in_place) for rank in group]
    contributions = [np.array([rank + 2, 10 * rank + 1], dtype=np.int64) for rank in group]
    expected = contributions[0]
    for value in contributions[1:]:
        expected = _apply(op, expected, value)
    buffers = [_parts(value.copy(), in_place) for value in contributions]
    interpret(programs, buffers, op)
    for rank in group:
        assert np.array_equal(buffers[rank][OUT], expected), (rank, buffers[rank][OUT], expected)


@pytest.mark.parametrize("size", SIZES)
def test_recursive_doubling_sends_only_what_it_does_not_overwrite(size: int) -> None:
    """A round never combines into the buffer it sends (the put reads it while the combine
    writes); in place SOURCE and OUT are one buffer."""
    for rank, in_place in itertools.product(range(size), (False, True)):
        program = recursive_doubling_program(list(range(size)), rank, in_place)
        for current in program.rounds:
            sent = {send.part for send in current.sends}
            written = {r.into for r in current.receives if r.into is not None}
            if in_place:
                sent = {OUT if part == SOURCE else part for part in sent}
                written = {OUT if part == SOURCE else part for part in written}
            assert not sent & written, (rank, current)
        assert (
            program.scratch
            == any(SCRATCH in (r.into, r.part) for current in program.rounds for r in current.receives)
            or program.result == SCRATCH
        )


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("k", [2, 3, 4])
def test_tree_delivers_the_roots_bytes_everywhere(size: int, k: int) -> None:
    group = list(range(size))
    for root in group:
        programs = [tree_program(*knomial_links(group, rank, root, k)) for rank in group]
        buffers = [_parts(np.full(3, rank == root, dtype=np.uint8) * 7, True) for rank in group]
        interpret(programs, buffers, None)
        for rank in group:
            assert list(buffers[rank][OUT]) == [7, 7, 7], (root, rank)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_barrier_lets_nobody_through_before_everyone_entered(size: int, n: int) -> None:
    """Hold one rank back (its program starts only after every other rank has run as far as it
    can): no rank may finish before it."""
    group = list(range(size))
    for late in group:
        programs = [barrier_program(nway_peers(group, rank, n)) for rank in group]
        if size > 1:  # the others, with the late rank not there: none of them gets through
            absent = [p if rank != late else Program("absent", ()) for rank, p in enumerate(programs)]
            with pytest.raises(AssertionError, match="stuck"):
                interpret(absent, [[] for _ in group], None)
        finished = interpret(programs, [[] for _ in group], None)
        assert sorted(finished) == group


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op", [Op.SUM, Op.MAX, Op.REPLACE, Op.NO_OP])
def test_binomial_reduce_reduces_in_rank_order_at_the_root_only(size: int, op: Op) -> None:
    """Every root; REPLACE and NO_OP are not commutative (the tree from index 0, then a send to
    the root) and show the order.  The ranks' SOURCE is never written (off the root OUT is
    SOURCE, as the program is bound there)."""
    group = list(range(size))
    commutative = op in (Op.SUM, Op.MAX)
    contributions = [np.array([rank + 2, 10 * rank + 1], dtype=np.int64) for rank in group]
    expected = contributions[0]
    for value in contributions[1:]:
        expected = _apply(op, expected, value)
    for root in group:
        programs = [binomial_reduce_program(group, rank, root, commutative) for rank in group]
        buffers = []
        for rank in group:
            source = contributions[rank].copy()
            out = np.zeros_like(source) if rank == root else source
            buffers.append([source, out, np.zeros_like(source)])
        interpret(programs, buffers, op)
        assert np.array_equal(buffers[root][OUT], expected), (root, buffers[root][OUT], expected)
        for rank in group:
            assert np.array_equal(buffers[rank][SOURCE], contributions[rank]), (root, rank)


BLOCK = 3  # elements per block in the gather family's checks


def _gather_family(
    name: str, size: int, root: int
) -> tuple[list[Program], list[list[np.ndarray]], list[np.ndarray]]:
    """Every rank's program of one collective of the gather family, its buffers (SOURCE, OUT,
    SCRATCH; every element of every contribution distinct) and what OUT must hold after it."""
    group = list(range(size))
    whole = [np.arange(size * BLOCK, dtype=np.int64) + 1000 * rank for rank in group]
    one = [np.arange(BLOCK, dtype=np.int64) + 1000 * rank for rank in group]
    empty = np.zeros(0, np.int64)
    buffers: list[list[np.ndarray]] = []
    if name.startswith("gather"):
        build = binomial_gather_program if name.endswith("binomial") else direct_gather_program
        programs = [build(group, rank, root) for rank in group]
        for rank in group:
            # off the root OUT is SOURCE: the program is bound with out=None there
            source = one[rank].copy()
            buffers.append([source, np.zeros(size * BLOCK, np.int64) if rank == root else source, empty])
        expected = [np.concatenate(one) if rank == root else one[rank] for rank in group]
    elif name.startswith("scatter"):
        build = binomial_scatter_program if name.endswith("binomial") else direct_scatter_program
        programs = [build(group, rank, root) for rank in group]
        buffers = [[whole[rank].copy(), np.zeros(BLOCK, np.int64), empty] for rank in group]
        expected = [whole[root][rank * BLOCK : (rank + 1) * BLOCK] for rank in group]
    elif name.startswith("alltoall"):
        build = pairwise_alltoall_program if name.endswith("pairwise") else direct_alltoall_program
        programs = [build(group, rank) for rank in group]
        buffers = [[whole[rank].copy(), np.zeros(size * BLOCK, np.int64), empty] for rank in group]
        expected = [
            np.concatenate([whole[j][rank * BLOCK : (rank + 1) * BLOCK] for j in group]) for rank in group
        ]
    else:
        builders = {
            "allgather": recursive_doubling_allgather_program,
            "allgather_bruck": bruck_allgather_program,
            "allgather_ring": ring_allgather_program,
            "allgather_direct": direct_allgather_program,
        }
        programs = [builders[name](group, rank) for rank in group]
        buffers = [[one[rank].copy(), np.zeros(size * BLOCK, np.int64), empty] for rank in group]
        expected = [np.concatenate(one) for _ in group]
    for program, parts in zip(programs, buffers, strict=True):
        if program.scratch_blocks is not None:  # SCRATCH of its own size, not like OUT
            parts[SCRATCH] = np.zeros(program.scratch_blocks * BLOCK, np.int64)
    return programs, buffers, expected


GATHER_FAMILY = [
    "gather",
    "gather_binomial",
    "scatter",
    "scatter_binomial",
    "alltoall",
    "alltoall_pairwise",
    "allgather",
    "allgather_bruck",
    "allgather_ring",
    "allgather_direct",
]


@pytest.mark.parametrize("name", GATHER_FAMILY)
@pytest.mark.parametrize("size", SIZES)
def test_gather_family_moves_every_block_to_its_place(name: str, size: int) -> None:
    if name == "allgather" and size & (size - 1):
        with pytest.raises(ValueError, match="power-of-two"):
            recursive_doubling_allgather_program(list(range(size)), 0)
        return
    for root in range(size) if name.startswith(("gather", "scatter")) else [0]:
        programs, buffers, expected = _gather_family(name, size, root)
        interpret(programs, buffers, None, BLOCK)
        for rank in range(size):
            assert np.array_equal(buffers[rank][OUT], expected[rank]), (name, root, rank)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("count", [0, 1, 3, 8, 13])
@pytest.mark.parametrize("op", [Op.SUM, Op.MAX])
def test_halving_doubling_reduces_every_element_leaves_source_alone(size: int, count: int, op: Op) -> None:
    """Every element reduced over the whole group on every rank, for group sizes that are and
    are not powers of two and counts smaller than the group (empty halves); SOURCE unchanged."""
    group = list(range(size))
    programs = [halving_doubling_program(group, rank, count) for rank in group]
    contributions = [np.arange(count, dtype=np.int64) * (rank + 3) % 7 + rank for rank in group]
    expected = contributions[0]
    for value in contributions[1:]:
        expected = _apply(op, expected, value)
    buffers = [_parts(value.copy(), in_place=False) for value in contributions]
    interpret(programs, buffers, op, block=1)
    for rank in group:
        assert np.array_equal(buffers[rank][OUT], expected), (rank, buffers[rank][OUT], expected)
        assert np.array_equal(buffers[rank][SOURCE], contributions[rank]), rank


@pytest.mark.parametrize("size", [1, 2, 4, 8])
def test_halving_doubling_combines_each_element_once_per_step_on_a_power_of_two(size: int) -> None:
    """A rank combines half of its range at each step: (1 - 1/m) of the elements in all, where
    recursive doubling combines all of them at every step."""
    count = 64
    for rank in range(size):
        program = halving_doubling_program(list(range(size)), rank, count)
        combined = sum(r.blocks[1] for step in program.rounds for r in step.receives if r.into is not None)
        assert combined == count - count // size, (rank, combined)


def test_a_receive_that_combines_blocks_needs_whole_elements() -> None:
    program = Program("p", (Round(receives=(Receive(1, SOURCE, into=OUT, blocks=(0, 1)),)),))
    with pytest.raises(ValueError, match="whole elements"):
        program.bind(QueueChannel(0, 2, {}), np.zeros(4), np.zeros(4), Op.SUM, block=4)  # type: ignore[arg-type]


# --------------------------------------------------------------- the real Exchange, in process


class QueueChannel:
    """An in-process channel for :class:`Exchange`: FIFO per pair; every message lands after a
    loop turn or two (``delay``), so receives and signal waits really wait."""

    def __init__(self, rank: int, size: int, net: dict[tuple[int, int], asyncio.Queue[object]]) -> None:
        self.rank, self.size, self._net = rank, size, net
        self._in_flight: set[asyncio.Future[None]] = set()

    def _queue(self, src: int, dst: int) -> asyncio.Queue[object]:
        return self._net.setdefault((src, dst), asyncio.Queue())

    async def _later(self, src: int, dst: int, item: object) -> None:
        await asyncio.sleep(0)
        self._queue(src, dst).put_nowait(item)

    def signal(self, dst: int) -> None:
        landing = asyncio.ensure_future(self._later(self.rank, dst, "signal"))
        self._in_flight.add(landing)
        landing.add_done_callback(self._in_flight.discard)

    async def wait_signal(self, src: int) -> None:
        assert await self._queue(src, self.rank).get() == "signal"

    def send(
        self, dst: int, data: np.ndarray, part_of: int | None = None, via_slots: bool = False
    ) -> asyncio.Future[None]:
        return asyncio.ensure_future(self._later(self.rank, dst, data.copy()))

    def single_copy(self, peer: int, nbytes: int) -> bool:
        return False  # every message is a copy in the queue

    async def recv_with(self, src: int, nbytes: int, consume: object) -> None:
        data = await self._queue(src, self.rank).get()
        assert isinstance(data, np.ndarray) and data.size == nbytes
        consume(data, 0, nbytes)  # type: ignore[operator]


@pytest.mark.parametrize("size", [2, 3, 5, 8])
def test_exchange_runs_halving_doubling_as_the_interpreter_does(size: int) -> None:
    count = 11

    async def main() -> list[np.ndarray]:
        net: dict[tuple[int, int], asyncio.Queue[object]] = {}
        outs = [np.zeros(count) for _ in range(size)]
        runs = []
        for rank in range(size):
            program = halving_doubling_program(list(range(size)), rank, count)
            ch = QueueChannel(rank, size, net)
            source = np.arange(count) + rank * 100.0
            runs.append(program.bind(ch, source, outs[rank], Op.SUM, 8).start())
        await asyncio.wait_for(asyncio.gather(*runs), 10)
        return outs

    outs = asyncio.run(main())
    expected = sum(np.arange(count) + rank * 100.0 for rank in range(size))
    for out in outs:
        assert np.array_equal(out, expected)


@pytest.mark.parametrize("size", [2, 3, 5, 8])
def test_exchange_runs_recursive_doubling_as_the_interpreter_does(size: int) -> None:
    async def main() -> list[np.ndarray]:
        net: dict[tuple[int, int], asyncio.Queue[object]] = {}
        outs = [np.zeros(2) for _ in range(size)]
        runs = []
        for rank in range(size):
            program = recursive_doubling_program(list(range(size)), rank, in_place=False)
            ch = QueueChannel(rank, size, net)
            runs.append(program.bind(ch, np.array([rank + 1.0, 2.0**rank]), outs[rank], Op.SUM).start())
        await asyncio.wait_for(asyncio.gather(*runs), 10)
        return outs

    outs = asyncio.run(main())
    expected = [sum(range(1, size + 1)), float(2**size - 1)]
    for out in outs:
        assert list(out) == expected


@pytest.mark.parametrize("size", [1, 2, 4, 7])
def test_exchange_barrier_and_bcast_on_the_in_process_channel(size: int) -> None:
    async def main() -> list[np.ndarray]:
        net: dict[tuple[int, int], asyncio.Queue[object]] = {}
        bufs = [np.full(4, rank == 2 % size, dtype=np.uint8) * 9 for rank in range(size)]
        runs = []
        for rank in range(size):
            ch = QueueChannel(rank, size, net)
            barrier = barrier_program(nway_peers(list(range(size)), rank, 2)).bind(ch).start()
            tree = tree_program(*knomial_links(list(range(size)), rank, 2 % size, 2)).bind(ch, bufs[rank])

            async def both(barrier=barrier, tree=tree) -> None:  # type: ignore[no-untyped-def]
                await barrier
                await tree.start()
                await tree.start()  # a bound program runs again

            runs.append(both())
        await asyncio.wait_for(asyncio.gather(*runs), 10)
        return bufs

    for buf in asyncio.run(main()):
        assert list(buf) == [9] * 4


@pytest.mark.parametrize("name", GATHER_FAMILY)
@pytest.mark.parametrize("size", [2, 3, 4])
def test_exchange_runs_the_gather_family_as_the_interpreter_does(name: str, size: int) -> None:
    """The programs bound with their block in bytes, run twice (a bound program runs again)."""
    if name == "allgather" and size == 3:
        return
    root = size - 1

    async def main() -> list[list[np.ndarray]]:
        net: dict[tuple[int, int], asyncio.Queue[object]] = {}
        programs, buffers, _ = _gather_family(name, size, root)
        runs = []
        for rank, (program, parts) in enumerate(zip(programs, buffers, strict=True)):
            out = None if parts[OUT] is parts[SOURCE] else parts[OUT]
            bound = program.bind(QueueChannel(rank, size, net), parts[SOURCE], out, block=BLOCK * 8)

            async def twice(bound=bound) -> None:  # type: ignore[no-untyped-def]
                await bound.start()
                await bound.start()

            runs.append(twice())
        await asyncio.wait_for(asyncio.gather(*runs), 10)
        return buffers

    buffers = asyncio.run(main())
    expected = _gather_family(name, size, root)[2]
    for rank in range(size):
        assert np.array_equal(buffers[rank][OUT], expected[rank]), (name, rank)


def test_an_error_in_a_round_is_raised_once_the_round_has_finished() -> None:
    class Failing(QueueChannel):
        def send(
            self, dst: int, data: np.ndarray, part_of: int | None = None, via_slots: bool = False
        ) -> asyncio.Future[None]:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.set_exception(RuntimeError("send failed"))
            return future

    async def main() -> None:
        net: dict[tuple[int, int], asyncio.Queue[object]] = {(1, 0): asyncio.Queue()}
        net[(1, 0)].put_nowait(np.ones(1).view(np.uint8).copy())  # rank 1's half, already landed
        program = recursive_doubling_program([0, 1], 0, in_place=False)
        out = np.zeros(1)
        run = program.bind(Failing(0, 2, net), np.ones(1), out, Op.SUM).start()
        with pytest.raises(RuntimeError, match="send failed"):
            await asyncio.wait_for(run, 10)
        assert net[(1, 0)].empty()  # the round's receive was taken before the error surfaced

    asyncio.run(main())


def test_an_error_of_a_receive_stepped_in_place_is_raised() -> None:
    """A lone landing coroutine is stepped by the Exchange itself: its error must surface."""

    class BadReceive(QueueChannel):
        async def recv_with(self, src: int, nbytes: int, consume: object) -> None:
            await asyncio.sleep(0)
            raise RuntimeError("peer failed")

    async def main() -> None:
        program = tree_program(1, ())
        with pytest.raises(RuntimeError, match="peer failed"):
            await asyncio.wait_for(program.bind(BadReceive(0, 2, {}), np.zeros(4, np.uint8)).start(), 10)

    asyncio.run(main())

"""Collectives on the in-process ``local`` transport: every collective against numpy at 1..9 ranks,
several outstanding at once, 1000 back-to-back, bad input, tiny landing slots (chunking and
credits), the schedules and the runner as pure logic.

The multi-rank checks are the battery in tests/mpi_scripts/collectives_check.py, run at every
size on every transport through the registry (tests/registry.py, tests/test_registry.py); here it
runs again with tiny landing slots.
"""

from __future__ import annotations

import asyncio
import functools
import math
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.collectives import landing, select
from aiorma.collectives.landing import LandingConfig
from aiorma.collectives.model import DEFAULT_MPI, LogGP, barrier_nway, best_nway, nway_rounds
from aiorma.collectives.runner import CollectiveStreamBroken, SerialRunner
from aiorma.collectives.schedules import (
    binomial_subtree,
    check_tree,
    knomial_children,
    knomial_parent,
    node_groups,
    nway_distances,
    split,
)

from .mpi_scripts.collectives_check import QUICK, Guarded, run_checks


def run(size: int, names: list[str]) -> list[list[str]]:
    return aiorma.run(functools.partial(run_checks, names=names), nprocs=size)


# ---------------------------------------------------------------------- the battery, tiny slots
#
# The battery itself at every size and transport is tests/test_registry.py.

# K = 4 and 8: messages of more than a slot travel in wide chunks of 2 and 4 slots.
TINY_SLOTS = [(3, 16, 1), (4, 64, 2), (7, 32, 3), (4, 16, 4), (5, 32, 8)]
TINY_CASES = [(n, slot, slots, name) for n, slot, slots in TINY_SLOTS for name in [*QUICK, "bcast_large"]]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("size", "slot", "slots", "name"),
    TINY_CASES,
    ids=[f"{size}-{slot}x{slots}-{name}" for size, slot, slots, name in TINY_CASES],
)
def test_tiny_landing_slots(
    monkeypatch: pytest.MonkeyPatch, size: int, slot: int, slots: int, name: str
) -> None:
    """With slots of 16–64 bytes nearly every message is chunked and every chunk waits for a
    credit: each check of the battery must still agree with numpy."""
    monkeypatch.setattr(landing, "DEFAULT_CONFIG", LandingConfig(slot_bytes=slot, slots_per_peer=slots))
    assert run(size, [name]) == [[name]] * size


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.float64, np.complex128])
def test_guard_elements_catch_writes_outside_the_buffer(dtype: Any) -> None:
    """The battery's receive-buffer guards: writes inside pass, one element either side fails."""
    inside = Guarded(5, dtype)
    inside.buf[...] = 1
    inside.check("inside")
    for offset in (-1, 5):
        guarded = Guarded(5, dtype)
        whole = guarded.buf.base
        assert whole is not None
        start = int((guarded.buf.ctypes.data - whole.ctypes.data) // np.dtype(dtype).itemsize)
        whole[start + offset] = 0 if np.dtype(dtype).kind == "b" else 7
        with pytest.raises(AssertionError, match=r"wrote (before|past) it"):
            guarded.check(f"offset {offset}")


# ---------------------------------------------------------------------- API behaviour


@pytest.mark.timeout(60)
def test_calls_return_requests_and_start_inside_the_call() -> None:
    """The first step runs inside the call: the moment rank 0's barrier() returns — before rank
    0 yields to the event loop — its round-0 signal is in rank 1's flag memory."""
    comms: dict[int, aiorma.Comm] = {}

    async def main(comm: aiorma.Comm) -> int:
        comms[comm.rank] = comm
        await asyncio.sleep(0.01)  # both ranks registered
        if comm.rank == 0:
            peer = comms[1].collectives.landing
            before = int(peer.watcher.memory[peer.SIG + 0])
            request = comm.barrier(algorithm="dissemination")
            assert isinstance(request, aiorma.Request) and not asyncio.iscoroutine(request)
            after = int(peer.watcher.memory[peer.SIG + 0])
            await request
            return after - before
        await asyncio.sleep(0.05)
        await comm.barrier(algorithm="dissemination")
        return 0

    assert aiorma.run(main, nprocs=2)[0] == 1


@pytest.mark.timeout(60)
def test_algorithm_selection_is_recorded_and_overridable() -> None:
    async def main(comm: aiorma.Comm) -> list[str]:
        state = comm.collectives
        out = np.zeros(4)
        await comm.allreduce(np.ones(4), out)
        await comm.allreduce(np.ones(4), out, algorithm="ring")
        await comm.allreduce(np.ones(4), out, nodes=[0, 0, 1, 1, 1, 2])
        await comm.barrier(n=3)
        await comm.bcast(out, 0, algorithm="knomial", k=3)
        assert (out == comm.size).all()
        return state.trace[-5:]

    traces = aiorma.run(main, nprocs=6)
    assert traces[0] == [
        "allreduce:recursive_doubling",
        "allreduce:ring",
        "allreduce:hierarchical",
        "barrier:nway3",
        "bcast:knomial",
    ]
    assert all(t == traces[0] for t in traces)


@pytest.mark.timeout(60)
def test_failed_collective_breaks_only_later_collectives() -> None:
    """An error inside a running collective fails its Request and every later one of that Comm
    (the ranks' message counts no longer match); it never hangs."""

    async def main(comm: aiorma.Comm) -> tuple[str, str]:
        state = comm.collectives

        async def boom() -> None:
            raise ValueError("inside the collective")

        failed = state.submit(boom, "boom")
        later = comm.barrier()
        errors = []
        for request in (failed, later):
            try:
                await request
            except Exception as exc:
                errors.append(type(exc).__name__)
        return errors[0], errors[1]

    assert aiorma.run(main, nprocs=1) == [("ValueError", "CollectiveStreamBroken")]


def test_not_started_comm_refuses_collectives() -> None:
    from aiorma.transport.local import LocalNetwork

    async def main() -> None:
        comm = aiorma.Comm(LocalNetwork(1).endpoints[0])
        with pytest.raises(aiorma.RmaUsageError):
            comm.barrier()
        with pytest.raises(aiorma.RmaUsageError):
            comm.bcast(np.zeros(1), 0)

    asyncio.run(main())


# ---------------------------------------------------------------------- pure logic


@pytest.mark.parametrize("n", range(1, 9))
def test_nway_dissemination_reaches_everyone_in_ceil_log_rounds(n: int) -> None:
    """Hoefler et al. (2006): ceil(log_{n+1} P) rounds, and after them every rank has heard (transitively)
    from every other one."""
    for size in range(1, 80):
        rounds = nway_distances(size, n)
        expected = 0 if size == 1 else math.ceil(math.log(size) / math.log(n + 1) - 1e-9)
        assert len(rounds) == expected == nway_rounds(size, n), (size, n)
        heard = [{p} for p in range(size)]
        for distances in rounds:
            assert all(0 < d < size for d in distances) and len(set(distances)) == len(distances)
            heard = [heard[p].union(*(heard[(p - d) % size] for d in distances)) for p in range(size)]
        assert all(len(h) == size for h in heard), (size, n)


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_knomial_tree_spans_every_index_once(k: int) -> None:
    for size in range(1, 70):
        reached = {0}
        frontier = [0]
        while frontier:
            nxt = []
            for v in frontier:
                for c in knomial_children(v, size, k):
                    assert knomial_parent(c, k) == v and c not in reached
                    reached.add(c)
                    nxt.append(c)
            frontier = nxt
        assert reached == set(range(size))


def test_binomial_subtrees_are_contiguous_blocks() -> None:
    for size in range(1, 70):
        for v in range(size):
            block = {v}
            for c in knomial_children(v, size, 2):
                block |= set(range(c, c + binomial_subtree(c, size)))
            assert block == set(range(v, v + binomial_subtree(v, size))), (size, v)


def test_split_and_node_groups() -> None:
    assert split(10, 4) == ([0, 3, 6, 8], [3, 3, 2, 2])
    assert split(2, 4) == ([0, 1, 2, 2], [1, 1, 0, 0])
    assert node_groups(["a", "b", "a", "c", "b"]) == [[0, 2], [1, 4], [3]]


def test_check_tree_refuses_bad_trees() -> None:
    assert check_tree({0: [1, 2], 2: [3]}, 0, 4) == {0: [1, 2], 1: [], 2: [3], 3: []}
    bad: list[tuple[Any, type[Exception]]] = [
        ({0: [1]}, aiorma.RmaUsageError),  # rank 2 unreached
        ({0: [1, 2], 1: [2]}, aiorma.RmaUsageError),  # reached twice
        ({0: [1, 2], 2: [0]}, aiorma.RmaUsageError),  # the root as a child
        ({0: [1, 2, 3]}, aiorma.RmaRangeError),  # rank 3 outside a Comm of 3
        ({0: ["1", 2]}, aiorma.RmaUsageError),
        ([0, 1, 2], aiorma.RmaUsageError),
    ]
    for tree, error in bad:
        with pytest.raises(error):
            check_tree(tree, 0, 3)


def test_model_picks_n_and_algorithms_deterministically() -> None:
    for size in (2, 3, 8, 27, 100, 1024):
        n = best_nway(DEFAULT_MPI, size)
        assert barrier_nway(DEFAULT_MPI, size, n) <= min(
            barrier_nway(DEFAULT_MPI, size, m) for m in range(1, 9)
        )
    # when sends are nearly free, sending to many peers at once pays: fewer, wider rounds
    cheap_sends = LogGP(L=50e-6, o=0.1e-6, g=0.1e-6, G=1e-9)
    assert best_nway(cheap_sends, 64) > 1

    def allreduce(nbytes: int, commutative: bool, groups: list[list[int]] | None) -> str:
        case = select.Case(8, nbytes, 0, commutative, select.useful_hierarchy(groups))
        return select.choose("allreduce", DEFAULT_MPI, case)[0]

    assert allreduce(8, True, None) == "recursive_doubling"
    assert allreduce(4 << 20, True, None) == "direct"
    assert allreduce(4 << 20, False, None) == "recursive_doubling"  # REPLACE: rank order matters
    assert allreduce(8, True, [[0, 1], [2, 3, 4, 5, 6, 7]]) == "hierarchical"
    assert allreduce(8, True, [list(range(8))]) == "recursive_doubling"
    # large blocks: the one-round algorithms, whose messages overlap, over the ones whose rounds
    # (or tree levels) wait for each other's whole messages
    for size in (4, 8):
        for name in ("allgather", "gather", "scatter"):
            assert select.choose(name, DEFAULT_MPI, select.Case(size, 1 << 20, 1 << 20))[0] == "direct"
        small = select.Case(size, 8, 1 << 20)
        assert select.choose("allgather", DEFAULT_MPI, small)[0] == "recursive_doubling"
    # the barrier's n is the model's best
    assert select.choose("barrier", DEFAULT_MPI, select.Case(64)) == ("nway", best_nway(DEFAULT_MPI, 64))


def test_every_algorithm_name_has_one_table_entry_with_a_schedule() -> None:
    for collective, table in select.TABLES.items():
        for name, algorithm in table.items():
            assert algorithm.run is not None or (collective, name) == ("barrier", "fence")
            assert algorithm.cost is not None or not algorithm.tune[1:], (collective, name)


def test_landing_config_sizes() -> None:
    assert LandingConfig().resolve(8) == (512 << 10, 4)
    # 2 ranks: slots at their largest with half the budget left, so twice as many of them
    assert LandingConfig().resolve(2) == (1 << 20, 8)
    assert LandingConfig().resolve(3) == (1 << 20, 4)  # 5 would fit; a power of two is kept
    assert LandingConfig(slots_per_peer=2).resolve(2) == (1 << 20, 4)  # at most twice as many
    assert LandingConfig().resolve(4096) == (4 << 10, 4)
    assert LandingConfig(slot_bytes=64, slots_per_peer=1).resolve(3) == (64, 1)
    with pytest.raises(ValueError):
        LandingConfig(slot_bytes=100).resolve(2)


@pytest.mark.timeout(60)
def test_wide_chunks_keep_order_and_never_wait_for_an_owed_credit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slots of 16 bytes, K = 4: messages of more than a slot go in chunks of 2 slots that start
    at an even ordinal.  Three one-slot messages leave the receiver owing credit 3 (it reports
    every 4); the wide chunk then needs credit 2 and would wait for it forever unless the receiver
    reports before waiting.  Mixed sizes also check the skipped ordinals agree on both sides."""
    monkeypatch.setattr(landing, "DEFAULT_CONFIG", LandingConfig(slot_bytes=16, slots_per_peer=4))
    sizes = [8, 8, 8, 40, 8, 24, 100, 16, 17, 8, 8, 8, 33, 64, 5, 200]

    async def main(comm: aiorma.Comm) -> list[bytes]:
        ch = comm.collectives.landing
        assert ch.widest == 2 and [ch.span(n) for n in (16, 17, 32, 33, 200)] == [1, 2, 2, 2, 2]
        got = []
        for i, n in enumerate(sizes):
            payload = (np.arange(n) * 7 + i).astype(np.uint8)
            if comm.rank == 0:
                await ch.send(1, payload)
            else:
                out = np.zeros(n, np.uint8)
                await ch.recv(0, out)
                assert (out == payload).all(), (i, n)
                got.append(out.tobytes())
        return got

    assert len(aiorma.run(main, nprocs=2)[1]) == len(sizes)


def test_landing_span_widths() -> None:
    """The widest chunk divides K and is at most K/2 (1 when K < 4)."""
    for slots, widest in ((1, 1), (2, 1), (3, 1), (4, 2), (6, 2), (8, 4), (12, 4)):
        config = LandingConfig(slot_bytes=16, slots_per_peer=slots)

        async def main(comm: aiorma.Comm, widest: int = widest) -> None:
            assert comm.collectives.landing.widest == widest

        monkeypatch_config = pytest.MonkeyPatch()
        monkeypatch_config.setattr(landing, "DEFAULT_CONFIG", config)
        try:
            aiorma.run(main, nprocs=1)
        finally:
            monkeypatch_config.undo()


def test_runner_runs_in_order_and_steps_inside_submit() -> None:
    async def main() -> list[str]:
        runner = SerialRunner(asyncio.get_running_loop())
        log: list[str] = []
        gate = asyncio.get_running_loop().create_future()

        async def first() -> int:
            log.append("first:start")
            await gate
            log.append("first:end")
            return 1

        async def second() -> int:
            log.append("second:start")
            await asyncio.sleep(0)
            return 2

        one = runner.submit(first)
        assert log == ["first:start"]  # ran inside submit
        two = runner.submit(second)
        assert log == ["first:start"]  # waits for the first
        gate.set_result(None)
        assert await one == 1 and await two == 2
        assert runner.idle
        return log

    assert asyncio.run(main()) == ["first:start", "first:end", "second:start"]


def test_runner_start_makes_a_future_only_when_one_is_needed() -> None:
    """A job that runs to its end inside ``start`` and returns None makes no future (None);
    one that waits, returns a value, fails at once, or queues behind another gets its future."""

    async def main() -> None:
        runner = SerialRunner(asyncio.get_running_loop())
        gate = asyncio.get_running_loop().create_future()

        async def quick() -> None:
            return None

        async def valued() -> int:
            return 7

        async def waits() -> str:
            await gate
            return "waited"

        async def fails() -> None:
            raise KeyError("at once")

        assert runner.start(quick) is None and runner.idle
        future = runner.start(valued)
        assert future is not None and future.done() and future.result() == 7
        waiting = runner.start(waits)
        assert waiting is not None and not waiting.done()
        queued = runner.start(quick)  # behind the waiting job: queued, with a future
        assert queued is not None and not queued.done()
        gate.set_result(None)
        assert await waiting == "waited" and await queued is None
        await runner.drain()
        failed = runner.start(fails)
        assert failed is not None and isinstance(failed.exception(), KeyError)
        assert runner.submitted == 5

    asyncio.run(main())


def test_runner_failure_fails_later_jobs() -> None:
    async def main() -> None:
        runner = SerialRunner(asyncio.get_running_loop())

        async def bad() -> None:
            await asyncio.sleep(0)
            raise KeyError("x")

        async def good() -> None:
            return None

        first, second = runner.submit(bad), runner.submit(good)
        with pytest.raises(KeyError):
            await first
        with pytest.raises(CollectiveStreamBroken):
            await second
        with pytest.raises(CollectiveStreamBroken):
            await runner.submit(good)

    asyncio.run(main())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_a_kept_binding_serves_only_the_same_arrays(nprocs: int) -> None:
    """Plain calls keep their last bound program for the next call with the very same arrays:
    alternating two sets of arrays, and changing the contents between calls, every call must
    still read the arrays it is given, as they are at that call."""

    async def main(comm: aiorma.Comm) -> None:
        size, rank = comm.size, comm.rank
        sets = [
            {
                "one": np.zeros(2),
                "blocks": np.zeros(2 * size),
                "out": np.zeros(2 * size),
                "small": np.zeros(2),
            }
            for _ in range(2)
        ]
        for call in range(6):
            arrays = sets[call % 2]
            tag = 100.0 * call + rank
            arrays["one"][...] = [tag, -tag]
            arrays["blocks"][...] = tag + np.arange(2 * size)
            await comm.allgather(arrays["one"], arrays["out"])
            expected = np.array([[100.0 * call + r, -(100.0 * call + r)] for r in range(size)]).ravel()
            assert np.array_equal(arrays["out"], expected), ("allgather", call)
            await comm.gather(arrays["one"], arrays["out"] if rank == 0 else None, 0)
            if rank == 0:
                assert np.array_equal(arrays["out"], expected), ("gather", call)
            await comm.scatter(arrays["blocks"], arrays["small"], 0)
            assert np.array_equal(arrays["small"], 100.0 * call + np.arange(2 * rank, 2 * rank + 2)), (
                "scatter",
                call,
            )
            await comm.alltoall(arrays["blocks"], arrays["out"])
            swapped = np.array(
                [100.0 * call + r + np.arange(2 * rank, 2 * rank + 2) for r in range(size)]
            ).ravel()
            assert np.array_equal(arrays["out"], swapped), ("alltoall", call)
            arrays["small"][...] = tag
            await comm.bcast(arrays["small"], call % size)
            assert (arrays["small"] == 100.0 * call + call % size).all(), ("bcast", call)
            await comm.allreduce(arrays["one"], arrays["small"])
            assert arrays["small"][0] == sum(100.0 * call + r for r in range(size)), ("allreduce", call)

    aiorma.run(main, nprocs=nprocs)

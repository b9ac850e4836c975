"""Collectives checked against numpy, on every rank: the same battery for every transport.

Each check is an entry of the test registry (tests/registry.py), run by tests/test_registry.py at
each of its sizes in-process, on the simulated network and under mpiexec; tests/test_collectives.py
runs it again with tiny landing slots.

Every check asserts on every rank; data is a deterministic function of (rank, salt), so each rank
can compute every other rank's contribution and the expected result itself.  Every receive buffer
is a :class:`Guarded` one: sentinel elements just before and after it must come out untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma import Op

Check = Callable[[aiorma.Comm], Awaitable[None]]
CHECKS: dict[str, Check] = {}


def check(fn: Check) -> Check:
    CHECKS[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------------- data and references


def data(rank: int, count: int, dtype: Any, salt: int = 0) -> np.ndarray:
    """Rank ``rank``'s contribution: small values, so that products of 9 of them stay finite."""
    dtype = np.dtype(dtype)
    i = np.arange(count)
    if dtype.kind == "b":
        return ((i + rank + salt) % 3 == 0).astype(dtype)
    if dtype.kind in "iu":
        return ((i * 7 + rank * 13 + salt) % 11 + 1).astype(dtype)
    if dtype.kind == "f":
        return ((i % 5) * 0.5 + rank * 0.25 + 1 + salt * 0.125).astype(dtype)
    return ((i % 5) * 0.5 + rank * 0.25 + 1 + 1j * ((rank + i + salt) % 3 - 1) * 0.5).astype(dtype)


_UFUNC = {
    Op.SUM: np.add,
    Op.PROD: np.multiply,
    Op.MIN: np.minimum,
    Op.MAX: np.maximum,
    Op.BAND: np.bitwise_and,
    Op.BOR: np.bitwise_or,
    Op.BXOR: np.bitwise_xor,
}


def reference(op: Op, arrays: list[np.ndarray]) -> np.ndarray:
    """MPI's ``x0 op x1 op … op x(P-1)``, computed with numpy."""
    stack = np.stack(arrays)
    dtype = stack.dtype
    if len(arrays) == 1:
        return arrays[0].copy()  # one process: MPI applies no operation (LAND does not normalise)
    if op is Op.REPLACE:
        return arrays[-1].copy()
    if op is Op.NO_OP:
        return arrays[0].copy()
    if op in (Op.LAND, Op.LOR, Op.LXOR):
        ufunc = {Op.LAND: np.logical_and, Op.LOR: np.logical_or, Op.LXOR: np.logical_xor}[op]
        return ufunc.reduce(stack.astype(bool), axis=0).astype(dtype)
    return _UFUNC[op].reduce(stack, axis=0, dtype=dtype)


def same(result: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert result.dtype == expected.dtype, (what, result.dtype, expected.dtype)
    if result.dtype.kind in "fc":
        tolerance = float(np.finfo(result.dtype).resolution) * 100  # rounding differs with the order
        assert np.allclose(result, expected, rtol=tolerance, atol=tolerance), (what, result, expected)
    else:
        assert np.array_equal(result, expected), (what, result, expected)


#: Sentinel elements on each side of every receive buffer (see :class:`Guarded`).
GUARD_ELEMENTS = 3


class Guarded:
    """A receive buffer inside a larger allocation, with :data:`GUARD_ELEMENTS` sentinel elements
    just before and just after it.  A collective is given only ``buf``; one that writes outside the
    region it was given (an off-by-one offset, a chunk too long, a count of the wrong dtype) changes
    a sentinel, which :meth:`check` reports.  Sentinels are compared as bytes, so any write shows,
    whatever the dtype; bool sentinels are True (a valid bool) and the rest the byte 0xA5."""

    def __init__(self, shape: int | tuple[int, ...], dtype: Any, fill: np.ndarray | None = None) -> None:
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        self._whole = np.zeros(count + 2 * GUARD_ELEMENTS, dtype)
        raw = self._whole.view(np.uint8)
        edge = GUARD_ELEMENTS * dtype.itemsize
        sentinel = 1 if dtype.kind == "b" else 0xA5
        raw[:edge] = sentinel
        raw[raw.size - edge :] = sentinel
        self._expected = raw.copy()
        self.buf = self._whole[GUARD_ELEMENTS : GUARD_ELEMENTS + count].reshape(shape)
        if fill is not None:
            self.buf[...] = fill

    @classmethod
    def copy_of(cls, array: np.ndarray) -> Guarded:
        """A guarded buffer holding a copy of ``array`` (a root's send-and-receive buffer)."""
        return cls(array.shape, array.dtype, fill=array)

    def check(self, what: str) -> None:
        """Assert that both sentinel regions still hold exactly what was put there."""
        raw = self._whole.view(np.uint8)
        edge = GUARD_ELEMENTS * self._whole.dtype.itemsize
        head, tail = slice(0, edge), slice(raw.size - edge, raw.size)
        assert np.array_equal(raw[head], self._expected[head]), f"{what}: wrote before it: {raw[head]}"
        assert np.array_equal(raw[tail], self._expected[tail]), f"{what}: wrote past it: {raw[tail]}"


def guarded_zeros(shape: int | tuple[int, ...], dtype: Any = np.float64) -> Guarded:
    return Guarded(shape, dtype)


def slot_bytes(comm: aiorma.Comm) -> int:
    """The landing slot size of this Comm (messages above it are chunked)."""
    return comm.collectives.landing.slot_bytes


def roots(size: int) -> list[int]:
    return sorted({0, size - 1, size // 2})


# Combinations of (op, dtypes) that MPI allows; every op and several dtypes per op.
OP_DTYPES: list[tuple[Op, tuple[Any, ...]]] = [
    (Op.SUM, (np.float64, np.int32, np.complex128, np.uint8, np.float32, np.int8)),
    (Op.PROD, (np.float64, np.int64, np.complex64)),
    (Op.MIN, (np.float32, np.int16, np.uint64)),
    (Op.MAX, (np.float64, np.int8, np.uint16)),
    (Op.BAND, (np.uint8, np.int32, np.bool_)),
    (Op.BOR, (np.int64, np.bool_)),
    (Op.BXOR, (np.uint32, np.int8)),
    (Op.LAND, (np.int32, np.bool_)),
    (Op.LOR, (np.uint8, np.bool_)),
    (Op.LXOR, (np.int64, np.bool_)),
    (Op.REPLACE, (np.float64, np.int32)),
    (Op.NO_OP, (np.float64, np.uint8)),
]


def nodes_map(size: int) -> list[int]:
    """A made-up placement on ceil(size/3) nodes, not contiguous (cyclic with a twist)."""
    count = max(1, (size + 2) // 3)
    return [(r * 2 + r // 4) % count for r in range(size)]


def random_tree(size: int, root: int, seed: int) -> dict[int, list[int]]:
    """A random spanning tree rooted at ``root`` (each rank's parent is an earlier one)."""
    rng = np.random.default_rng(seed)
    order = [root, *rng.permutation([r for r in range(size) if r != root]).tolist()]
    tree: dict[int, list[int]] = {r: [] for r in range(size)}
    for i, rank in enumerate(order[1:], start=1):
        tree[order[int(rng.integers(0, i))]].append(rank)
    return tree


# ---------------------------------------------------------------------- checks


@check
async def barrier_semantics(comm: aiorma.Comm) -> None:
    """No rank leaves a barrier before the last one entered it, for every algorithm."""
    variants: list[dict[str, Any]] = [
        {},
        {"algorithm": "dissemination"},
        {"algorithm": "nway", "n": 2},
        {"algorithm": "nway", "n": 3},
        {"algorithm": "fence"},
    ]
    for round_, kwargs in enumerate(variants):
        await asyncio.sleep(0.002 * ((comm.rank + round_) % comm.size))
        entered = time.monotonic()
        await comm.barrier(**kwargs)
        left = time.monotonic()
        times = guarded_zeros(comm.size)
        await comm.allgather(np.array([entered]), times.buf)
        times.check(f"allgather after barrier {kwargs}")
        assert left >= times.buf.max(), (kwargs, left, times.buf)


@check
async def bcast_all_algorithms(comm: aiorma.Comm) -> None:
    size = comm.size
    cases: list[dict[str, Any]] = [
        {},
        {"algorithm": "binomial"},
        {"algorithm": "knomial", "k": 3},
        {"algorithm": "scatter_allgather"},
        {"algorithm": "scatter_allgather_direct"},
        {"algorithm": "hierarchical", "nodes": nodes_map(size)},
        {"algorithm": "hierarchical"},  # node map from host names
    ]
    salt = 0
    for kwargs in cases:
        for root in roots(size):
            for dtype, count in (
                (np.float64, 37),
                (np.int8, 5),
                (np.complex64, 1),
                (np.bool_, 11),
                (np.float16, 0),
            ):
                salt += 1
                what = f"bcast {kwargs} root {root} {np.dtype(dtype)}"
                if comm.rank == root:
                    buf = Guarded.copy_of(data(root, count, dtype, salt))
                else:
                    buf = guarded_zeros(count, dtype)
                request = comm.bcast(buf.buf, root, **kwargs)
                assert isinstance(request, aiorma.Request)
                await request
                same(buf.buf, data(root, count, dtype, salt), what)
                buf.check(what)
    # a 2-D buffer and an explicit (random) tree
    for root in roots(size):
        tree = random_tree(size, root, seed=root + 7 * size)
        buf = Guarded((3, 4), np.float64, fill=np.full((3, 4), root + 1.5) if comm.rank == root else None)
        await comm.bcast(buf.buf, root, tree=tree)
        assert (buf.buf == root + 1.5).all()
        buf.check(f"2-D bcast on tree {tree}")


@check
async def bcast_topology_tree(comm: aiorma.Comm) -> None:
    """The topology-/speed-aware tree of aiorma.collectives.topology drives the broadcast."""
    from aiorma.collectives.topology import Topology

    size = comm.size
    nodes = nodes_map(size)
    count = max(nodes) + 1
    topology = Topology(
        nodes, [n % 2 for n in range(count)], node_speed=[1e9 * (1 + n % 3) for n in range(count)]
    )
    for root in roots(size):
        buf = Guarded(64, np.int64, fill=np.arange(64) * (root + 1) if comm.rank == root else None)
        await comm.bcast(buf.buf, root, topology=topology)
        assert (buf.buf == np.arange(64) * (root + 1)).all()
        buf.check(f"topology bcast root {root}")


@check
async def bcast_large(comm: aiorma.Comm) -> None:
    """Larger than one landing slot: chunked and pipelined (a slot is at most 1 MiB)."""
    n = min(300_000, 50 * slot_bytes(comm) // 8)  # up to 2.4 MB of float64
    for algorithm in ("binomial", "scatter_allgather", "scatter_allgather_direct"):
        root = comm.size - 1
        buf = Guarded(n, np.float64, fill=np.arange(n, dtype=np.float64) if comm.rank == root else None)
        await comm.bcast(buf.buf, root, algorithm=algorithm)
        assert (buf.buf == np.arange(n)).all(), algorithm
        buf.check(f"large bcast {algorithm}")


@check
async def reduce_ops_dtypes(comm: aiorma.Comm) -> None:
    size = comm.size
    salt = 0
    for op, dtypes in OP_DTYPES:
        algorithms: list[str | None] = [None, "binomial"]
        if op not in (Op.REPLACE, Op.NO_OP):
            algorithms += ["reduce_scatter_gather", "hierarchical"]
        for algorithm in algorithms:
            for dtype in dtypes:
                salt += 1
                root = roots(size)[salt % len(roots(size))]
                count = 1 + salt % 17
                send = data(comm.rank, count, dtype, salt)
                recv = guarded_zeros(count, dtype) if comm.rank == root else None
                nodes = nodes_map(size) if algorithm == "hierarchical" else None
                into = None if recv is None else recv.buf
                await comm.reduce(send, into, op, root, algorithm=algorithm, nodes=nodes)
                if recv is not None:
                    what = f"reduce {op.name} {np.dtype(dtype)} {algorithm} root {root}"
                    expected = reference(op, [data(r, count, dtype, salt) for r in range(size)])
                    same(recv.buf, expected, what)
                    recv.check(what)


@check
async def allreduce_ops_dtypes(comm: aiorma.Comm) -> None:
    size = comm.size
    salt = 0
    for op, dtypes in OP_DTYPES:
        algorithms: list[str | None] = [None, "recursive_doubling"]
        if op not in (Op.REPLACE, Op.NO_OP):
            algorithms += ["ring", "direct", "halving_doubling", "hierarchical"]
        for algorithm in algorithms:
            for dtype in dtypes:
                salt += 1
                count = (1, size - 1, 13, 2 * size + 1)[salt % 4]
                send = data(comm.rank, count, dtype, salt)
                recv = guarded_zeros(count, dtype)
                nodes = nodes_map(size) if algorithm == "hierarchical" else None
                await comm.allreduce(send, recv.buf, op, algorithm=algorithm, nodes=nodes)
                what = f"allreduce {op.name} {np.dtype(dtype)} {algorithm} n={count}"
                expected = reference(op, [data(r, count, dtype, salt) for r in range(size)])
                same(recv.buf, expected, what)
                recv.check(what)
    # in place (send is recv), 2-D, and large enough to take several slots' worth on the ring
    grid = Guarded((3, 4), np.float64, fill=data(comm.rank, 12, np.float64, 5).reshape(3, 4))
    await comm.allreduce(grid.buf, grid.buf)
    expected = reference(Op.SUM, [data(r, 12, np.float64, 5) for r in range(size)]).reshape(3, 4)
    same(grid.buf, expected, "in place")
    grid.check("in-place allreduce")
    n = min(200_000, 40 * slot_bytes(comm) // 8)  # several slots' worth, whatever the slot size
    for algorithm in ("ring", "direct", "halving_doubling", "recursive_doubling"):
        send = np.full(n, comm.rank + 1, np.int64)
        recv = guarded_zeros(n, np.int64)
        await comm.allreduce(send, recv.buf, Op.SUM, algorithm=algorithm)
        assert (recv.buf == size * (size + 1) // 2).all(), algorithm
        recv.check(f"large allreduce {algorithm}")


@check
async def allgather_all_algorithms(comm: aiorma.Comm) -> None:
    size = comm.size
    algorithms: list[str | None] = [None, "ring", "direct", "bruck", "hierarchical"]
    if size & (size - 1) == 0:
        algorithms.append("recursive_doubling")
    salt = 0
    for algorithm in algorithms:
        for dtype, count in (
            (np.int32, 3),
            (np.float64, 1),
            (np.complex128, 4),
            (np.bool_, 9),
            (np.uint16, 0),
        ):
            salt += 1
            recv = guarded_zeros(count * size, dtype)
            nodes = nodes_map(size) if algorithm == "hierarchical" else None
            send = data(comm.rank, count, dtype, salt)
            await comm.allgather(send, recv.buf, algorithm=algorithm, nodes=nodes)
            expected = np.concatenate([data(r, count, dtype, salt) for r in range(size)])
            same(recv.buf, expected, f"allgather {algorithm} {np.dtype(dtype)}")
            recv.check(f"allgather {algorithm} {np.dtype(dtype)}")


@check
async def gather_scatter(comm: aiorma.Comm) -> None:
    size = comm.size
    salt = 0
    for algorithm in (None, "direct", "binomial"):
        for root in roots(size):
            for dtype, count in ((np.float32, 5), (np.int64, 1), (np.uint8, 0)):
                salt += 1
                recv = guarded_zeros(count * size, dtype) if comm.rank == root else None
                send = data(comm.rank, count, dtype, salt)
                await comm.gather(send, None if recv is None else recv.buf, root, algorithm=algorithm)
                if recv is not None:
                    expected = np.concatenate([data(r, count, dtype, salt) for r in range(size)])
                    same(recv.buf, expected, f"gather {algorithm} root {root}")
                    recv.check(f"gather {algorithm} root {root}")
                whole = np.concatenate([data(r, count, dtype, salt) for r in range(size)])
                mine = guarded_zeros(count, dtype)
                await comm.scatter(whole if comm.rank == root else None, mine.buf, root, algorithm=algorithm)
                same(mine.buf, data(comm.rank, count, dtype, salt), f"scatter {algorithm} root {root}")
                mine.check(f"scatter {algorithm} root {root}")


@check
async def alltoall_all_algorithms(comm: aiorma.Comm) -> None:
    size = comm.size
    for algorithm in (None, "direct", "pairwise"):
        for dtype, block in ((np.int64, 1), (np.float64, 5), (np.complex64, 3)):
            send = np.concatenate([data(comm.rank * size + d, block, dtype) for d in range(size)])
            recv = guarded_zeros(size * block, dtype)
            await comm.alltoall(send, recv.buf, algorithm=algorithm)
            expected = np.concatenate([data(s * size + comm.rank, block, dtype) for s in range(size)])
            same(recv.buf, expected, f"alltoall {algorithm} {np.dtype(dtype)}")
            recv.check(f"alltoall {algorithm} {np.dtype(dtype)}")


@check
async def many_outstanding(comm: aiorma.Comm) -> None:
    """Ten different collectives in flight at once, awaited in reverse order."""
    size, rank = comm.size, comm.rank
    bcast_buf = Guarded(6, np.float64, fill=np.arange(6.0) if rank == size - 1 else None)
    allreduce_out = guarded_zeros(4, np.int64)
    allgather_out = guarded_zeros(2 * size, np.int32)
    reduce_out = guarded_zeros(3, np.float64) if rank == 0 else None
    alltoall_out = guarded_zeros(size, np.int64)
    gather_out = guarded_zeros(size, np.int64) if rank == size // 2 else None
    scatter_out = guarded_zeros(2, np.int16)
    second_out = guarded_zeros(4, np.int64)
    requests = [
        comm.barrier(),
        comm.bcast(bcast_buf.buf, size - 1),
        comm.allreduce(np.full(4, rank, np.int64), allreduce_out.buf, Op.MAX),
        comm.allgather(np.full(2, rank, np.int32), allgather_out.buf),
        comm.reduce(np.full(3, rank + 1.0), None if reduce_out is None else reduce_out.buf, Op.PROD, 0),
        comm.alltoall(np.arange(size, dtype=np.int64) + 10 * rank, alltoall_out.buf),
        comm.gather(np.array([rank * rank]), None if gather_out is None else gather_out.buf, size // 2),
        comm.scatter(np.arange(2 * size, dtype=np.int16) if rank == 0 else None, scatter_out.buf, 0),
        comm.barrier(algorithm="fence"),
        comm.allreduce(np.full(4, 1, np.int64), second_out.buf),
    ]
    assert all(isinstance(r, aiorma.Request) for r in requests)
    for request in reversed(requests):
        await request
    assert (bcast_buf.buf == np.arange(6.0)).all()
    assert (allreduce_out.buf == size - 1).all()
    assert (allgather_out.buf == np.repeat(np.arange(size), 2)).all()
    if reduce_out is not None:
        assert np.allclose(reduce_out.buf, float(np.prod(np.arange(1, size + 1))))
    assert (alltoall_out.buf == 10 * np.arange(size) + rank).all()
    if gather_out is not None:
        assert (gather_out.buf == np.arange(size) ** 2).all()
    assert (scatter_out.buf == [2 * rank, 2 * rank + 1]).all()
    assert (second_out.buf == size).all()
    for name, buffer in [
        ("bcast", bcast_buf),
        ("allreduce", allreduce_out),
        ("allgather", allgather_out),
        ("reduce", reduce_out),
        ("alltoall", alltoall_out),
        ("gather", gather_out),
        ("scatter", scatter_out),
        ("second allreduce", second_out),
    ]:
        if buffer is not None:
            buffer.check(f"{name} among ten outstanding")


@check
async def back_to_back_1000(comm: aiorma.Comm) -> None:
    """1000 barriers held at once, then 1000 small allreduces, never a barrier in between."""
    barriers = [comm.barrier() for _ in range(1000)]
    for request in barriers:
        await request
    outs = [guarded_zeros(2, np.int64) for _ in range(1000)]
    requests = [comm.allreduce(np.array([i, comm.rank], np.int64), outs[i].buf) for i in range(1000)]
    for request in requests:
        await request
    total = comm.size * (comm.size - 1) // 2
    for i, out in enumerate(outs):
        assert out.buf.tolist() == [i * comm.size, total], (i, out.buf)
        out.check(f"allreduce {i} of 1000")


@check
async def persistent_allreduce_bcast(comm: aiorma.Comm) -> None:
    """Persistent collectives (``allreduce_init``, ``bcast_init``, ``reduce_init``): each start
    uses the buffers' contents at that start, starts interleave with plain calls, a start while
    the previous one is active is refused at the call, and a bad argument is refused at init."""
    size, rank = comm.size, comm.rank
    send = np.zeros(3, np.int64)
    recv = guarded_zeros(3, np.int64)
    total = comm.allreduce_init(send, recv.buf)
    ordered = comm.allreduce_init(send, recv.buf, Op.REPLACE, algorithm="recursive_doubling")
    root = size - 1
    buf = Guarded(5, np.float64)
    bcast = comm.bcast_init(buf.buf, root)
    at_root = guarded_zeros(3, np.int64)
    reduced = comm.reduce_init(send, at_root.buf if rank == root else None, Op.MAX, root)
    for i in range(30):
        send[:] = [i, rank, i * rank]
        await total.start()
        same(recv.buf, np.array([i * size, size * (size - 1) // 2, i * size * (size - 1) // 2]), f"start {i}")
        await ordered.start()
        same(recv.buf, np.array([i, size - 1, i * (size - 1)]), f"REPLACE start {i}")
        if rank == root:
            buf.buf[:] = np.arange(5.0) + i
        await bcast.start()
        same(buf.buf, np.arange(5.0) + i, f"bcast start {i}")
        await reduced.start()
        if rank == root:
            same(at_root.buf, np.array([i, size - 1, i * (size - 1)]), f"reduce start {i}")
        await comm.allreduce(send, recv.buf)  # a plain call between starts
    recv.check("persistent allreduce")
    at_root.check("persistent reduce")
    buf.check("persistent bcast")
    running = total.start()
    if not running.done():
        with contextlib.suppress(aiorma.RmaUsageError):
            total.start()
            raise AssertionError("a second start of an active persistent allreduce was accepted")
    await running
    wrong_size, no_such_root = np.zeros(4, np.int64), size
    for bad in (
        lambda: comm.allreduce_init(send, wrong_size),
        lambda: comm.bcast_init(buf.buf, no_such_root),
    ):
        with contextlib.suppress(aiorma.RmaUsageError):
            bad()
            raise AssertionError("a bad persistent collective was accepted at init")


@check
async def persistent_gathers_barrier(comm: aiorma.Comm) -> None:
    """Persistent ``barrier_init`` (default, dissemination, fence), ``allgather_init``,
    ``gather_init``, ``scatter_init`` and ``alltoall_init``: each start uses the buffers' contents
    at that start, starts interleave with plain calls and with each other's kinds, and a bad
    argument is refused at init."""
    size, rank = comm.size, comm.rank
    root = size // 2
    barriers = [
        comm.barrier_init(),
        comm.barrier_init(algorithm="dissemination"),
        comm.barrier_init(algorithm="fence"),
    ]
    mine = np.zeros(3, np.int64)
    everyone = guarded_zeros(3 * size, np.int64)
    allgathered = comm.allgather_init(mine, everyone.buf)
    at_root = guarded_zeros(3 * size, np.int64)
    gathered = comm.gather_init(mine, at_root.buf if rank == root else None, root, algorithm="binomial")
    blocks = np.zeros(2 * size, np.float64)
    part = guarded_zeros(2, np.float64)
    scattered = comm.scatter_init(blocks if rank == root else None, part.buf, root)
    outgoing = np.zeros(size, np.int32)
    incoming = guarded_zeros(size, np.int32)
    exchanged = comm.alltoall_init(outgoing, incoming.buf, algorithm="pairwise")
    for i in range(20):
        mine[:] = [i, rank, i * rank]
        expected = np.array([[i, r, i * r] for r in range(size)], np.int64).reshape(-1)
        await allgathered.start()
        same(everyone.buf, expected, f"allgather start {i}")
        await gathered.start()
        if rank == root:
            same(at_root.buf, expected, f"gather start {i}")
        if rank == root:
            blocks[:] = np.arange(2.0 * size) + i
        await scattered.start()
        same(part.buf, np.array([2.0 * rank, 2.0 * rank + 1]) + i, f"scatter start {i}")
        outgoing[:] = [1000 * rank + 10 * dst + i for dst in range(size)]
        await exchanged.start()
        same(
            incoming.buf,
            np.array([1000 * src + 10 * rank + i for src in range(size)], np.int32),
            f"alltoall {i}",
        )
        await barriers[i % 3].start()
        await comm.allgather(mine, everyone.buf)  # a plain call between starts
    for guarded, what in (
        (everyone, "allgather"),
        (at_root, "gather"),
        (part, "scatter"),
        (incoming, "alltoall"),
    ):
        guarded.check(f"persistent {what}")
    if size > 1:
        # Every rank arrives at the barrier's start only after rank 0 wrote its flag, never before.
        flag = await comm.win_allocate(1, np.int64)
        if rank == 0:
            await asyncio.sleep(0.05)
            async with flag.lock_all():
                for peer in range(size):
                    await flag.signal(peer, 0, 1)
        await barriers[0].start()
        assert flag.memory[0] == 1 or rank == 0, "a persistent barrier returned before rank 0 arrived"
        await comm.barrier()
        await flag.free()
    for bad in (
        lambda: comm.allgather_init(mine, np.zeros(3 * size + 1, np.int64)),
        lambda: comm.gather_init(mine, at_root.buf, size),
        lambda: comm.scatter_init(blocks, np.zeros(2).view(), root, algorithm="nope"),
        lambda: comm.alltoall_init(outgoing, np.zeros(size, np.int64)),
        lambda: comm.barrier_init(algorithm="fence", n=2),
    ):
        with contextlib.suppress(aiorma.RmaUsageError):
            bad()
            raise AssertionError("a bad persistent collective was accepted at init")


@check
async def held_requests_progress(comm: aiorma.Comm) -> None:
    """A collective that nobody awaits still runs: the root starts a bcast, does not await it,
    and waits (through a second, awaited collective) until every other rank has the data."""
    buf = Guarded(8, np.float64, fill=np.arange(8.0) if comm.rank == 0 else None)
    held = comm.bcast(buf.buf, 0)
    if comm.rank != 0:
        await held
    await comm.barrier()
    assert (buf.buf == np.arange(8.0)).all()
    await held
    buf.check("held bcast")


@check
async def bad_input_raises_at_call(comm: aiorma.Comm) -> None:
    """Every bad argument raises at the call and changes nothing: a correct collective right
    after the refused ones still matches on every rank."""
    from aiorma import RmaRangeError, RmaTypeError, RmaUsageError

    size = comm.size
    f8 = np.zeros(4)
    refused: list[tuple[type[Exception], Callable[[], object]]] = [
        (RmaTypeError, lambda: comm.collectives.bcast([1.0, 2.0], 0)),  # comm.bcast: an object
        (RmaTypeError, lambda: comm.bcast(np.zeros(4, object), 0)),
        (RmaTypeError, lambda: comm.bcast(np.zeros((4, 4))[:, 1], 0)),
        (RmaTypeError, lambda: comm.bcast(f8[::2], 0)),
        (RmaRangeError, lambda: comm.bcast(f8, size)),
        (RmaRangeError, lambda: comm.bcast(f8, -1)),
        (RmaRangeError, lambda: comm.bcast(f8, True)),
        (RmaRangeError, lambda: comm.bcast(f8, "0")),
        (RmaUsageError, lambda: comm.bcast(f8, 0, algorithm="quantum")),
        (RmaUsageError, lambda: comm.bcast(f8, 0, algorithm="tree")),
        (RmaUsageError, lambda: comm.bcast(f8, 0, tree={0: [0]})),
        (RmaRangeError, lambda: comm.bcast(f8, 0, tree={0: [size]})),
        (RmaUsageError, lambda: comm.bcast(f8, 0, k=1)),
        (RmaUsageError, lambda: comm.bcast(f8, 0, nodes=[0] * (size + 1))),
        (RmaUsageError, lambda: comm.bcast(f8, 0, algorithm="binomial", tree={0: list(range(1, size))})),
        (RmaTypeError, lambda: comm.allreduce(f8, np.zeros(4, np.float32))),
        (RmaTypeError, lambda: comm.allreduce(f8, np.zeros(5))),
        (RmaTypeError, lambda: comm.allreduce(f8, np.zeros(8)[::2])),
        (RmaTypeError, lambda: comm.allreduce(f8, np.zeros(4, np.float64).view(np.int64))),
        (RmaTypeError, lambda: comm.allreduce(f8, f8.copy(), Op.BXOR)),
        (RmaUsageError, lambda: comm.allreduce(f8, f8.copy(), 99)),
        (RmaUsageError, lambda: comm.allreduce(f8, f8.copy(), Op.REPLACE, algorithm="ring")),
        (RmaUsageError, lambda: comm.reduce(f8, f8.copy(), Op.NO_OP, 0, algorithm="hierarchical")),
        (RmaRangeError, lambda: comm.reduce(f8, f8.copy(), Op.SUM, size + 3)),
        (RmaTypeError, lambda: comm.allgather(f8, np.zeros(4 * size + 1))),
        (RmaTypeError, lambda: comm.alltoall(np.zeros(size * 2), np.zeros(size * 2 + 1))),
        (RmaUsageError, lambda: comm.scatter(None, np.zeros(2), 0, algorithm="x")),
        (RmaUsageError, lambda: comm.barrier(algorithm="fence", n=2)),
        (RmaUsageError, lambda: comm.barrier(n=0)),
        (RmaUsageError, lambda: comm.barrier(algorithm="spin")),
    ]
    if size > 1:
        refused.append((RmaTypeError, lambda: comm.alltoall(np.zeros(size * 2 + 1), np.zeros(size * 2 + 1))))
    if size & (size - 1):
        refused.append(
            (RmaUsageError, lambda: comm.allgather(f8, np.zeros(4 * size), algorithm="recursive_doubling"))
        )
    if comm.rank == 0:
        refused.append((RmaTypeError, lambda: comm.gather(f8, np.zeros(4 * size - 1), 0)))
        refused.append((RmaTypeError, lambda: comm.reduce(f8, None, Op.SUM, 0)))
        refused.append((RmaTypeError, lambda: comm.scatter(np.zeros(3), np.zeros(2), 0)))
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    refused.append((RmaTypeError, lambda: comm.allreduce(f8, frozen)))
    for index, (error, call) in enumerate(refused):
        try:
            call()
        except error:
            continue
        except Exception as exc:
            raise AssertionError(f"case {index}: expected {error.__name__}, got {exc!r}") from exc
        raise AssertionError(f"case {index}: expected {error.__name__} at the call")
    out = np.zeros(2, np.int64)
    await comm.allreduce(np.array([1, comm.rank], np.int64), out)
    assert out.tolist() == [size, size * (size - 1) // 2]


@check
async def calibrate_model(comm: aiorma.Comm) -> None:
    """calibrate() measures the model on this transport; every rank gets rank 0's numbers."""
    from aiorma.collectives import LogGP, calibrate

    model = await calibrate(comm, pings=8, big_bytes=64 << 10)
    assert isinstance(model, LogGP)
    values = model.as_array()
    assert np.isfinite(values).all() and (values >= 0).all(), values
    everyone = guarded_zeros(6 * comm.size)
    await comm.allgather(values, everyone.buf)
    assert (everyone.buf.reshape(comm.size, 6) == values).all()
    everyone.check("allgather of the model")
    if comm.size > 1:
        assert model.o > 0 and model.L + 2 * model.o > 0
    await comm.barrier()  # the Comm now chooses with the calibrated model


QUICK = [
    "barrier_semantics",
    "bcast_all_algorithms",
    "bcast_topology_tree",
    "reduce_ops_dtypes",
    "allreduce_ops_dtypes",
    "allgather_all_algorithms",
    "gather_scatter",
    "alltoall_all_algorithms",
    "many_outstanding",
    "held_requests_progress",
    "bad_input_raises_at_call",
    "persistent_allreduce_bcast",
    "persistent_gathers_barrier",
]


async def run_checks(comm: aiorma.Comm, names: list[str]) -> list[str]:
    """Run the named checks in turn on this rank; the names of those that passed (all of them, or
    an exception)."""
    passed = []
    for name in names:
        async with asyncio.timeout(240):
            await CHECKS[name](comm)
        passed.append(name)
    return passed

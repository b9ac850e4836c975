"""Object collectives (mpi4py's lowercase form) checked on every rank, for every transport.

tests/test_object_collectives.py runs every check in-process at 1-4 ranks and under mpiexec at
2-4 ranks (this file as the script).  Every rank knows every rank's contribution (a deterministic
function of the rank), so each checks the whole result itself.  Under MPI the pairwise semantics
of every op are also compared with mpi4py's own ops applied to the same Python values.
"""

from __future__ import annotations

import asyncio
import functools
import math
import operator
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma import Op

Check = Callable[[aiorma.Comm], Awaitable[None]]
CHECKS: dict[str, Check] = {}
MIB = 1 << 20


def check(fn: Check) -> Check:
    CHECKS[fn.__name__] = fn
    return fn


def blob(rank: int, salt: int = 0) -> dict[str, Any]:
    """A different object on every rank, of a different size: ``rank * 1000 + salt`` bytes of
    payload and a nested structure."""
    return {
        "rank": rank,
        "salt": salt,
        "bytes": bytes([rank % 256]) * (rank * 1000 + salt),
        "list": [rank] * rank,
    }


#: Objects with nothing in them, and None: each must travel as itself.
EMPTIES: list[Any] = [None, [], (), {}, "", b"", set(), 0, False]


# ---------------------------------------------------------------------- bcast


@check
async def bcast_every_root(comm: aiorma.Comm) -> None:
    """Root's object everywhere, for every root; a copy also at the root; ignored off the root."""
    for root in range(comm.size):
        mine = blob(root, 7) if comm.rank == root else "ignored off the root"
        got = await comm.bcast(mine, root)
        assert got == blob(root, 7), (root, comm.rank)
        assert got is not mine
        for empty in EMPTIES:
            got = await comm.bcast(empty if comm.rank == root else 12345, root=root)
            assert got == empty and type(got) is type(empty), (root, empty, got)


@check
async def bcast_one_mib(comm: aiorma.Comm) -> None:
    """A 1 MiB object crosses several landing slots and chunks."""
    root = comm.size - 1
    big = bytes(range(256)) * (MIB // 256)
    got = await comm.bcast(big if comm.rank == root else None, root)
    assert got == big
    array = np.arange(MIB // 8, dtype=np.float64) if comm.rank == 0 else None
    got = await comm.objects.bcast(array, 0)  # an array as an object: explicit form
    assert isinstance(got, np.ndarray) and np.array_equal(got, np.arange(MIB // 8, dtype=np.float64))


@check
async def bcast_array_is_the_buffer_form(comm: aiorma.Comm) -> None:
    """A numpy array (or a buffer spec) keeps bcast's buffer meaning: in place, result None."""
    buf = np.arange(5, dtype=np.int32) * (comm.rank + 1)
    assert await comm.bcast(buf, 0) is None
    assert buf.tolist() == list(range(5))
    assert await comm.bcast(buf.tolist(), 0) == list(range(5))  # a list is an object


# ---------------------------------------------------------------------- gathers


@check
async def gather_every_root(comm: aiorma.Comm) -> None:
    """The list of every rank's object (sizes differ per rank) at the root, None elsewhere."""
    everyone = [blob(r, 3) for r in range(comm.size)]
    for root in range(comm.size):
        got = await comm.gather(blob(comm.rank, 3), root)
        assert got == (everyone if comm.rank == root else None), (root, comm.rank)
        got = await comm.gather(EMPTIES[comm.rank % len(EMPTIES)], root=root)
        expected = [EMPTIES[r % len(EMPTIES)] for r in range(comm.size)]
        assert got == (expected if comm.rank == root else None)


@check
async def allgather_sizes_differ(comm: aiorma.Comm) -> None:
    """Every rank's object on every rank, rank 0's 1 MiB and the others' small, None or empty."""

    def contribution(rank: int) -> Any:
        return b"\x01" * MIB if rank == 0 else EMPTIES[rank % len(EMPTIES)] if rank % 2 else blob(rank)

    got = await comm.allgather(contribution(comm.rank))
    assert got == [contribution(r) for r in range(comm.size)]
    assert await comm.allgather(None) == [None] * comm.size


@check
async def scatter_every_root(comm: aiorma.Comm) -> None:
    """Item ``i`` of root's sequence on rank ``i``, for every root; the sequence is ignored off
    the root; items of different sizes, None, empty and 1 MiB."""
    for root in range(comm.size):
        items = [blob(r, root) for r in range(comm.size)]
        got = await comm.scatter(items if comm.rank == root else None, root)
        assert got == blob(comm.rank, root)
        items = [EMPTIES[r % len(EMPTIES)] for r in range(comm.size)]
        got = await comm.scatter(tuple(items) if comm.rank == root else "ignored", root=root)
        assert got == EMPTIES[comm.rank % len(EMPTIES)]
    big = [b"\x02" * (MIB if r == comm.size - 1 else r) for r in range(comm.size)]
    assert await comm.scatter(big if comm.rank == 0 else None) == big[comm.rank]


@check
async def alltoall_sizes_differ(comm: aiorma.Comm) -> None:
    """Item ``j`` of rank ``i`` becomes item ``i`` at rank ``j``; the sizes differ per pair, one
    item is 1 MiB and some are None or empty."""

    def item(src: int, dst: int) -> Any:
        if (src, dst) == (0, comm.size - 1):
            return b"\x03" * MIB
        if (src + dst) % 3 == 0:
            return EMPTIES[(src * 7 + dst) % len(EMPTIES)]
        return {"from": src, "to": dst, "pad": "y" * (src * 100 + dst * 10)}

    got = await comm.alltoall([item(comm.rank, d) for d in range(comm.size)])
    assert got == [item(s, comm.rank) for s in range(comm.size)]


# ---------------------------------------------------------------------- reductions

#: Per op, a contribution per rank and the expected result at ``size`` ranks, each written out
#: independently of aiorma's combine table.
CASES: list[tuple[Op, Callable[[int], Any], Callable[[int], Any]]] = [
    (Op.SUM, lambda r: r + 1, lambda n: n * (n + 1) // 2),
    (Op.SUM, lambda r: [r], lambda n: list(range(n))),  # not commutative: rank order
    (Op.SUM, lambda r: str(r), lambda n: "".join(map(str, range(n)))),
    (Op.SUM, lambda r: 0.5 * r, lambda n: 0.25 * n * (n - 1)),
    (Op.PROD, lambda r: r + 1, lambda n: math.factorial(n)),
    (Op.PROD, lambda r: r, lambda n: 0),
    (Op.MAX, lambda r: (r * 5) % 7, lambda n: max((r * 5) % 7 for r in range(n))),
    (Op.MAX, lambda r: "abcd"[r], lambda n: "abcd"[n - 1]),
    (Op.MIN, lambda r: (r * 5) % 7 - 3, lambda n: min((r * 5) % 7 - 3 for r in range(n))),
    (Op.MIN, lambda r: [3 - r], lambda n: [4 - n]),
    (Op.LAND, lambda r: r + 1, lambda n: True),
    (Op.LAND, lambda r: r, lambda n: False),
    (Op.LAND, lambda r: [r] if r < 3 else [], lambda n: n <= 3),
    (Op.LOR, lambda r: 0, lambda n: False),
    (Op.LOR, lambda r: "x" if r == n_last[0] else "", lambda n: True),
    (Op.LXOR, lambda r: r % 2, lambda n: (n // 2) % 2 == 1),
    (Op.LXOR, lambda r: 1, lambda n: n % 2 == 1),
    (Op.BAND, lambda r: 0b1111 ^ (1 << r), lambda n: 0b1111 & ~((1 << n) - 1)),
    (Op.BOR, lambda r: 1 << r, lambda n: (1 << n) - 1),
    (Op.BXOR, lambda r: r + 1, lambda n: functools.reduce(operator.xor, range(1, n + 1))),
    (Op.BOR, lambda r: {r}, lambda n: set(range(n))),
    (Op.REPLACE, lambda r: r * 10, lambda n: (n - 1) * 10),
    (Op.NO_OP, lambda r: r * 10, lambda n: 0),
]
n_last = [0]  # the highest rank, set per run (the LOR case makes only it truthy)


@check
async def reduce_every_op_every_root(comm: aiorma.Comm) -> None:
    """Every op on Python values, mpi4py's way, at every root: the result at the root, None
    elsewhere; and allreduce on every rank.  The default op is SUM."""
    n_last[0] = comm.size - 1
    for op, contribution, expected in CASES:
        # one rank: its object comes back as it is (no op applied, as in mpi4py)
        want = contribution(0) if comm.size == 1 else expected(comm.size)
        got = await comm.allreduce(contribution(comm.rank), op)
        assert got == want and type(got) is type(want), (op.name, got, want)
        for root in range(comm.size):
            got = await comm.reduce(contribution(comm.rank), op, root)
            assert got == (want if comm.rank == root else None), (op.name, root, got, want)
    assert await comm.allreduce(comm.rank + 1) == comm.size * (comm.size + 1) // 2
    assert await comm.reduce([comm.rank], root=comm.size - 1) == (
        list(range(comm.size)) if comm.rank == comm.size - 1 else None
    )
    assert await comm.allreduce(None, Op.MAX if comm.size == 1 else Op.LOR) in (None, False)


@check
async def ops_match_mpi4py(comm: aiorma.Comm) -> None:
    """Under MPI: aiorma's pairwise combination of Python values is mpi4py's (``MPI.SUM(x, y)``
    and so on), on values where the ops differ most (mixed truthiness, ties, strings, sets)."""
    if "mpi4py.MPI" not in sys.modules:
        return
    from mpi4py import MPI

    from aiorma.collectives.objects import COMBINE

    pairs = [
        (0, 1),
        (1, 0),
        (2, 3),
        (3, 3),
        ([1], [2]),
        ("a", ""),
        ("", "a"),
        (None, 1),
        ({1}, {2}),
        (0.5, 2),
        (True, False),
        ((1,), (2,)),
        (-1, 2),
        (float("nan"), 1.0),
        (1.0, float("nan")),
    ]
    for op in Op:
        theirs = getattr(MPI, op.name)
        for x, y in pairs:
            want: Any
            try:
                want = theirs(x, y)
            except TypeError:
                want = TypeError
            try:
                got = COMBINE[op](x, y)
            except TypeError:
                got = TypeError
            same = got is want or got == want or (got != got and want != want)
            assert same and type(got) is type(want), (op.name, x, y, got, want)


@check
async def op_errors_fail_one_request(comm: aiorma.Comm) -> None:
    """A value the op cannot combine (``None + 1``) fails that Request with the op's own error,
    on the ranks that combine; the ranks' message counts still match, so the next collective
    runs."""
    if comm.size > 1:
        try:
            await comm.allreduce(None if comm.rank == 0 else 1)
        except TypeError:
            pass
        else:
            raise AssertionError("None + 1 combined")
        if comm.rank == 0:
            try:
                await comm.reduce(None if comm.rank == 0 else 1, Op.SUM, 0)
            except TypeError:
                pass
            else:
                raise AssertionError("None + 1 combined at the root")
        else:
            assert await comm.reduce(1, Op.SUM, 0) is None
    assert await comm.allgather(comm.rank) == list(range(comm.size))


# ---------------------------------------------------------------------- forms, order, bad input


@check
async def object_and_buffer_forms_in_flight(comm: aiorma.Comm) -> None:
    """Object and buffer collectives issued back to back without awaiting run in call order,
    each taking effect at its call (the object is pickled then: later changes do not travel)."""
    mine = [comm.rank]
    first = comm.allgather(mine)
    mine.append("changed after the call")
    send = np.full(3, comm.rank + 1.0)
    out = np.zeros(3)
    second = comm.allreduce(send, out)
    third = comm.gather(blob(comm.rank), 0)
    fourth = comm.bcast({"n": comm.size} if comm.rank == 0 else None)
    assert await fourth == {"n": comm.size}
    assert await third == ([blob(r) for r in range(comm.size)] if comm.rank == 0 else None)
    assert await second is None and out.tolist() == [comm.size * (comm.size + 1) / 2] * 3
    assert await first == [[r] for r in range(comm.size)]
    arrays = await comm.gather(np.arange(3) + comm.rank, 0)  # an int second argument: the root
    if comm.rank == 0:
        assert [a.tolist() for a in arrays] == [[r, r + 1, r + 2] for r in range(comm.size)]
    else:
        assert arrays is None


def _raises(kind: type[BaseException], call: Callable[[], Any]) -> None:
    try:
        call()
    except kind:
        return
    raise AssertionError(f"{call} did not raise {kind.__name__}")


@check
async def bad_input_raises_at_call(comm: aiorma.Comm) -> None:
    """Bad arguments raise at the call, on the calling rank, and change nothing: the next
    collectives match up on every rank."""
    n, rank = comm.size, comm.rank
    if rank == 0:  # only the root looks at the sequence: only it raises
        _raises(aiorma.RmaTypeError, lambda: comm.scatter([1] * (n + 1), 0))
        _raises(aiorma.RmaTypeError, lambda: comm.scatter("abc"[:n], 0))
        _raises(aiorma.RmaTypeError, lambda: comm.scatter(None, 0))
    _raises(aiorma.RmaTypeError, lambda: comm.alltoall([1] * (n + 2)))
    _raises(aiorma.RmaTypeError, lambda: comm.alltoall(42))
    _raises(aiorma.RmaTypeError, lambda: comm.allgather(lambda: None))  # does not pickle
    if rank == 0:  # only the root pickles
        _raises(aiorma.RmaTypeError, lambda: comm.bcast(lambda: None, 0))
    _raises(aiorma.RmaUsageError, lambda: comm.allreduce(1, "sum"))
    _raises(aiorma.RmaUsageError, lambda: comm.reduce(1, op=99))
    _raises(aiorma.RmaRangeError, lambda: comm.gather(1, n))
    _raises(aiorma.RmaRangeError, lambda: comm.reduce(1, Op.SUM, -1))
    _raises(aiorma.RmaUsageError, lambda: comm.gather(1, 0, 0))  # a root twice
    _raises(aiorma.RmaUsageError, lambda: comm.bcast("obj", 0, algorithm="binomial"))
    _raises(aiorma.RmaUsageError, lambda: comm.allgather("obj", algorithm="ring"))
    # nothing was sent: the next calls pair up on every rank
    assert await comm.scatter(list(range(n)) if rank == 0 else None) == rank
    assert await comm.alltoall(list(range(n))) == [rank] * n


async def run_checks(comm: aiorma.Comm, names: list[str] | None = None) -> list[str]:
    """Run the named checks (default all) in turn; the names of those that passed."""
    passed = []
    for name in names or list(CHECKS):
        async with asyncio.timeout(120):
            await CHECKS[name](comm)
        passed.append(name)
    return passed


if __name__ == "__main__":
    from mpi4py import MPI  # noqa: F401  (the reference ops of ops_match_mpi4py)

    from tests.mpi_harness import write_rank_result

    async def mpi_main(comm: aiorma.Comm) -> None:
        write_rank_result(comm.rank, await run_checks(comm))

    aiorma.run(mpi_main)
    sys.exit(0)

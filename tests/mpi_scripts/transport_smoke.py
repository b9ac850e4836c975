"""MpiEndpoint smoke test, run on every rank by tests/test_transport_mpi.py.

Each rank does every kind of RMA op into its right neighbour on a win_create window and a
win_allocate window, flushes, then sends the neighbour a "done" packet (data before flag); each
rank checks, after its left neighbour's packet arrives, exactly what landed in its memory.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
from mpi4py import MPI

from aiorma.constants import Op
from aiorma.engine.packets import ControlPacket, PacketKind
from aiorma.errors import RmaTypeError
from aiorma.transport.base import RmaKind, RmaOp
from aiorma.transport.mpi import MpiEndpoint

CREATED, ALLOCATED, MISMATCHED = 1, 2, 3


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.packets: list[tuple[int, ControlPacket]] = []

    def packet_received(self, src: int, packet: ControlPacket) -> None:
        self.packets.append((src, packet))

    def op_completed(self, win_id: int, token: int) -> None:
        self.events.append(("op", win_id, token))

    def flushed(self, win_id: int, target: int, upto: int) -> None:
        self.events.append(("flushed", win_id, target, upto))


async def poll_until(ep: MpiEndpoint, done, timeout: float = 60.0) -> None:
    """Poll with a short sleep back-off (ranks may outnumber cores) until ``done()``."""
    deadline = time.monotonic() + timeout
    delay = 1e-5
    while not done():
        assert time.monotonic() < deadline, "timed out polling"
        if ep.poll():
            delay = 1e-5
        else:
            await asyncio.sleep(delay)
            delay = min(2 * delay, 1e-3)


def arr(values, dtype) -> np.ndarray:
    return np.array(values, dtype=dtype)


async def main() -> None:
    ep = MpiEndpoint(MPI.COMM_WORLD)
    sink = RecordingSink()
    ep.attach(sink)
    rank, size = ep.rank, ep.size
    right, left = (rank + 1) % size, (rank - 1) % size
    assert ep.wants_polling()

    # Differing dtypes fail on every rank, before any window exists; the endpoint stays usable.
    try:
        await ep.create_window(MISMATCHED, None, 4, np.dtype("i8" if rank % 2 else "i4"))
    except RmaTypeError:
        pass
    else:
        raise AssertionError("dtype mismatch not detected")

    user = np.arange(16, dtype="i8") + 100 * rank
    layout1 = await ep.create_window(CREATED, user, user.size, user.dtype)
    assert layout1.memory is user and layout1.counts == (16,) * size
    layout2 = await ep.create_window(ALLOCATED, None, 6 + rank, np.dtype("f8"))
    assert layout2.counts == tuple(6 + r for r in range(size))
    assert layout2.memory.dtype == np.dtype("f8") and layout2.memory.size == 6 + rank
    assert (layout2.memory == 0).all()

    t = right  # what the right neighbour's user window holds before anyone writes
    base = np.arange(16, dtype="i8") + 100 * t
    i8, f8 = np.dtype("i8"), np.dtype("f8")
    res = {
        name: np.full(n, -1, dtype=i8)
        for name, n in [
            ("get", 2),
            ("gacc", 1),
            ("fop", 1),
            ("noop", 1),
            ("cas", 1),
            ("cas_no", 1),
            ("gacc_noop", 2),
        ]
    }
    res_f = np.full(2, -1.0)
    ops1 = [
        RmaOp(RmaKind.PUT, t, 0, origin=arr([rank * 1000 + 1, rank * 1000 + 2], i8)),
        RmaOp(RmaKind.GET, t, 2, result=res["get"]),
        RmaOp(RmaKind.ACCUMULATE, t, 4, origin=arr([5, 5], i8), op=Op.SUM),
        RmaOp(RmaKind.GET_ACCUMULATE, t, 6, origin=arr([7], i8), result=res["gacc"], op=Op.SUM),
        RmaOp(RmaKind.FETCH_AND_OP, t, 7, origin=arr([1], i8), result=res["fop"], op=Op.SUM),
        RmaOp(RmaKind.FETCH_AND_OP, t, 8, result=res["noop"], op=Op.NO_OP),
        RmaOp(
            RmaKind.COMPARE_AND_SWAP,
            t,
            9,
            origin=arr([rank + 555], i8),
            compare=arr([base[9]], i8),
            result=res["cas"],
        ),
        RmaOp(
            RmaKind.COMPARE_AND_SWAP,
            t,
            10,
            origin=arr([-7], i8),
            compare=arr([-1], i8),
            result=res["cas_no"],
        ),
        RmaOp(RmaKind.GET_ACCUMULATE, t, 11, result=res["gacc_noop"], op=Op.NO_OP),
        RmaOp(RmaKind.ACCUMULATE, t, 13, origin=arr([rank, rank], i8), op=Op.MIN),
    ]
    ops2 = [
        RmaOp(RmaKind.PUT, t, 0, origin=arr([rank + 0.5, rank + 0.25], f8)),
        RmaOp(RmaKind.ACCUMULATE, t, 2, origin=arr([1.5], f8), op=Op.SUM),
        RmaOp(RmaKind.GET_ACCUMULATE, t, 3, origin=arr([2.0, 3.0], f8), result=res_f, op=Op.REPLACE),
    ]
    for token, op in enumerate(ops1):
        ep.issue(CREATED, token, op)
    for token, op in enumerate(ops2):
        ep.issue(ALLOCATED, token, op)
    ep.flush(CREATED, t, len(ops1))
    ep.flush(ALLOCATED, t, len(ops2))
    assert sink.events == [], "sink called from issue/flush"

    flushed = {("flushed", CREATED, t, len(ops1)), ("flushed", ALLOCATED, t, len(ops2))}
    await poll_until(ep, lambda: flushed <= set(sink.events))
    # Every op completed exactly once, and before its window's flush.
    for win_id, ops in [(CREATED, ops1), (ALLOCATED, ops2)]:
        mine = [e for e in sink.events if e[1] == win_id]
        assert sorted(e[2] for e in mine[:-1]) == list(range(len(ops))), mine
        assert mine[-1] == ("flushed", win_id, t, len(ops)), mine

    assert res["get"].tolist() == base[2:4].tolist()
    assert res["gacc"].tolist() == [base[6]]
    assert res["fop"].tolist() == [base[7]]
    assert res["noop"].tolist() == [base[8]]
    assert res["cas"].tolist() == [base[9]]
    assert res["cas_no"].tolist() == [base[10]]
    assert res["gacc_noop"].tolist() == base[11:13].tolist()
    assert res_f.tolist() == [0.0, 0.0]

    # Data before flag: the packet goes out only after the flush was reported.
    done = ControlPacket(PacketKind.GATS_DONE, CREATED, 1)
    seen = len(sink.packets)  # the left neighbour's packet may already be here
    ep.send(right, done)
    ep.send(rank, ControlPacket(PacketKind.FENCE, ALLOCATED, 7, 8))  # to self
    assert len(sink.packets) == seen, "sink called from send"
    await poll_until(ep, lambda: len(sink.packets) == 2)
    assert (left, done) in sink.packets
    assert (rank, ControlPacket(PacketKind.FENCE, ALLOCATED, 7, 8)) in sink.packets

    # What the left neighbour did to this rank's memory.
    mine = np.arange(16, dtype="i8") + 100 * rank
    expect = mine.copy()
    expect[0:2] = [left * 1000 + 1, left * 1000 + 2]
    expect[4:6] += 5
    expect[6] += 7
    expect[7] += 1
    expect[9] = left + 555
    expect[13:15] = np.minimum(expect[13:15], left)
    assert user.tolist() == expect.tolist(), (user, expect)
    expect_f = np.zeros(6 + rank)
    expect_f[0:5] = [left + 0.5, left + 0.25, 1.5, 2.0, 3.0]
    assert layout2.memory.tolist() == expect_f.tolist(), (layout2.memory, expect_f)

    assert await ep.free_window(CREATED) is None
    copy = await ep.free_window(ALLOCATED)
    assert copy is not None and copy.tolist() == expect_f.tolist()
    assert not ep.poll()
    await ep.close()
    await ep.close()  # idempotent
    print(f"OK {rank}/{size}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())

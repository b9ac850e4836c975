"""MpiEndpoint smoke test, run on every rank by tests/test_transport_mpi.py.

Each rank does every kind of RMA op into its right neighbour on a win_create window and a
win_allocate window, flushes, then raises a word of the neighbour's control region (data before
flag); each rank checks, once its left neighbour's word has risen, exactly what landed in its
memory.  Control fetches (swap, compare-and-swap, sum) are checked on a word every rank hits.

Started as ``mpiexec -n N python transport_smoke.py OUT_DIR``; each rank that gets to the end writes
``OUT_DIR/rank<r>.json`` (``{"rank", "size", "passed": true}``); a failing rank writes nothing and
exits non-zero, which ends the job.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from aiorma.constants import Op
from aiorma.engine.control import AtomicOp
from aiorma.errors import RmaTypeError
from aiorma.transport.base import RmaKind, RmaOp
from aiorma.transport.mpi import MpiEndpoint

CREATED, ALLOCATED, MISMATCHED, UNWATCHED = 1, 2, 3, 4
#: MPICH answers Win_shared_query for Win_allocate windows (a peer of this node's memory mapped
#: here); Open MPI's one-sided components used here do not, and the transport then calls MPI.
MAPS_MEMORY = "MPICH" in MPI.Get_library_version()


class RecordingWin:
    """An MPI window that records the names of the methods called on it."""

    def __init__(self, win: MPI.Win) -> None:
        self.win = win
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.win, name)
        if not callable(attr):
            return attr

        def call(*args: object, **kwargs: object) -> object:
            self.calls.append(name)
            return attr(*args, **kwargs)

        return call


class RecordingMemory:
    """A peer's memory as mapped here, recording how many elements each store writes."""

    def __init__(self, memory: np.ndarray) -> None:
        self.memory = memory
        self.dtype = memory.dtype
        self.stores: list[int] = []

    def __setitem__(self, key: int | slice, value: object) -> None:
        self.stores.append(1 if isinstance(key, int) else key.stop - key.start)
        self.memory[key] = value


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.changed: list[int] = []
        self.fetches: dict[int, int] = {}

    def control_changed(self, win_id: int) -> None:
        self.changed.append(win_id)

    def fetched(self, win_id: int, token: int, old: int) -> None:
        self.fetches[token] = old

    def op_completed(self, win_id: int, token: int) -> None:
        self.events.append(("op", win_id, token))

    def flushed(self, win_id: int, target: int, upto: int) -> None:
        self.events.append(("flushed", win_id, target, upto))

    def peer_departed(self, rank: int, cause: BaseException | None = None) -> None:
        self.events.append(("departed", rank))


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


async def main(out_dir: Path) -> None:
    ep = MpiEndpoint(MPI.COMM_WORLD)
    sink = RecordingSink()
    ep.attach(sink)
    rank, size = ep.rank, ep.size
    right, left = (rank + 1) % size, (rank - 1) % size
    assert ep.polled

    # Differing dtypes fail on every rank, before any window exists; the endpoint stays usable.
    try:
        await ep.create_window(MISMATCHED, None, 4, np.dtype("i8" if rank % 2 else "i4"), 4)
    except RmaTypeError:
        pass
    else:
        raise AssertionError("dtype mismatch not detected")

    user = np.arange(16, dtype="i8") + 100 * rank
    layout1 = await ep.create_window(CREATED, user, user.size, user.dtype, 4)
    assert layout1.memory is user and layout1.counts == (16,) * size
    assert layout1.control.tolist() == [0] * 4
    layout2 = await ep.create_window(ALLOCATED, None, 6 + rank, np.dtype("f8"), 4)
    assert layout2.counts == tuple(6 + r for r in range(size))
    assert layout2.memory.dtype == np.dtype("f8") and layout2.memory.size == 6 + rank
    assert (layout2.memory == 0).all()
    # A window whose control region no peer is meant to write: poll never looks at it.
    layout4 = await ep.create_window(UNWATCHED, None, 5, np.dtype("i8"), 4, watch_control=False)
    # Peers may write into our windows as soon as create_window returns on their side: hold them
    # until every rank has looked at its fresh memory (under load this rank may look late).
    await asyncio.get_running_loop().run_in_executor(None, MPI.COMM_WORLD.Barrier)

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
    got_f = np.full(1, -1.0)
    ops2 = [
        RmaOp(RmaKind.GET, t, 5, result=got_f),  # (element 5 stays 0.0: nobody writes it)
        RmaOp(RmaKind.PUT, t, 0, origin=arr([rank + 0.5, rank + 0.25], f8)),
        RmaOp(RmaKind.ACCUMULATE, t, 2, origin=arr([1.5], f8), op=Op.SUM),
        RmaOp(RmaKind.GET_ACCUMULATE, t, 3, origin=arr([2.0, 3.0], f8), result=res_f, op=Op.REPLACE),
    ]
    allocated = ep._windows[ALLOCATED]
    allocated.win = RecordingWin(allocated.win)
    for win_id, ops in [(CREATED, ops1), (ALLOCATED, ops2)]:
        for token, op in enumerate(ops):
            if ep.issue(win_id, token, op):  # locally complete at once: reported by nobody
                sink.op_completed(win_id, token)
        if ep.flush(win_id, t, len(ops)):
            sink.flushed(win_id, t, len(ops))
    # Out of allocated memory of a rank on this node, mapped here, a get is a copy and a small put
    # word stores (where the build left the C extension that makes them): no MPI call
    # (accumulates are MPI's).
    if allocated.shared[t] is not None:
        stored = ep._store_words is not None
        assert "Rget" not in allocated.win.calls, allocated.win.calls
        assert ("Rput" in allocated.win.calls) is not stored, (stored, allocated.win.calls)
    allocated.win = allocated.win.win

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
    assert got_f.tolist() == [0.0]

    # Data before flag: the word is raised only after the flush was reported.
    control = layout1.control
    window = ep._windows[CREATED]
    ctrl, window.ctrl = window.ctrl, RecordingWin(window.ctrl)
    ep.control_write(CREATED, right, 0, AtomicOp.MAX, 7)
    ep.control_write(CREATED, right, 0, AtomicOp.MAX, 3)  # max: never lowers it
    # On this node a max (a word with one writer) is the CPU's own atomic where every control
    # word is (no MPI call), else a store into the peer's control region, mapped here, between
    # two Win_sync: no MPI atomic.
    on_node = window.shared_control[right] is not None
    if right != rank and MAPS_MEMORY:  # mapped exactly when the peer is on this node
        assert on_node == (os.environ.get("MPIR_CVAR_NOLOCAL") != "1"), window.shared_control
    if window.control_addresses is not None:
        assert window.ctrl.calls == [], window.ctrl.calls
    elif on_node:
        assert window.ctrl.calls == ["Sync"] * 4, window.ctrl.calls
    ep.control_write(CREATED, rank, 1, AtomicOp.SUM, 2)  # to self
    ep.control_write(CREATED, rank, 1, AtomicOp.SUM, 2)
    # A control word is read while peers write it: towards another node, whose network may
    # land a put's bytes in pieces, it is never written by a put (an accumulate lands whole).
    if not ep.stores_words_whole(right):
        assert "Put" not in window.ctrl.calls, window.ctrl.calls
    window.ctrl = ctrl
    # The memory may change before poll reports it; poll must report it.
    await poll_until(ep, lambda: control[0] == 7 and control[1] == 4 and CREATED in sink.changed)
    # ... except on a window created with watch_control=False: the word lands, and polls that
    # follow report nothing (a poll scans only the watched windows).
    ep.control_write(UNWATCHED, right, 0, AtomicOp.MAX, 9)
    await poll_until(ep, lambda: layout4.control[0] == 9)
    for _ in range(3):
        ep.poll()
    assert UNWATCHED not in sink.changed, sink.changed
    # Words a peer reads while they land go in runs of at most WHOLE_RUN words (a long copy may
    # tear a word even in shared memory), and only where a put keeps them whole at all.
    # On this node the words are stored into the peer's memory, mapped here (no Put at all),
    # one aligned 8-byte store each (a numpy copy of two words was seen tearing one): the C
    # extension's store_words where the build left it, else one element store each.
    window = ep._windows[UNWATCHED]
    win, window.win = window.win, RecordingWin(window.win)
    shared = window.shared[right]
    store_words = ep._store_words
    word_stores: list[tuple[int, list[int]]] = []
    if shared is not None and store_words is not None:

        def recording_store_words(
            destination: np.ndarray, offset: int, source: np.ndarray, fence: bool = False
        ) -> None:
            word_stores.append((offset, source.tolist()))
            store_words(destination, offset, source, fence)

        ep._store_words = recording_store_words
    elif shared is not None:
        window.shared[right] = RecordingMemory(shared)
    words = np.arange(5, dtype="i8") + 1000 * rank
    written = ep.put_words_flushed(UNWATCHED, right, 0, words)
    if shared is not None and store_words is not None:
        # The word stores and their barrier in one C call: no Win_sync.
        assert written and window.win.calls == [], window.win.calls
        assert word_stores == [(0, words.tolist())], word_stores
        ep._store_words = store_words
    elif shared is not None:
        stores = window.shared[right].stores
        assert written and window.win.calls == ["Sync"] and stores == [1] * 5, (window.win.calls, stores)
        window.shared[right] = shared
    elif ep.stores_words_whole(right):
        assert written and window.win.calls.count("Put") == 3, window.win.calls
    else:
        assert not written and window.win.calls == [], window.win.calls
    if right != rank and MAPS_MEMORY:  # a peer's memory is mapped here exactly when it is on this node
        assert (shared is not None) == (os.environ.get("MPIR_CVAR_NOLOCAL") != "1"), shared
    window.win = win
    MPI.COMM_WORLD.Barrier()  # every rank's words are in (or were declined)
    if ep.stores_words_whole(left):
        assert layout4.memory.tolist() == (np.arange(5) + 1000 * left).tolist(), layout4.memory
    # One word given as an int (a signal's value): one locked exchange where the CPU serves the
    # window's accumulates (no MPI call), else one element store into mapped memory and Win_sync,
    # else a put as above; declined where no put keeps a word whole.
    MPI.COMM_WORLD.Barrier()  # every rank has looked at the words above
    window.win = RecordingWin(win)
    written = ep.put_word_flushed(UNWATCHED, right, 4, -7 - 1000 * rank)
    if shared is not None and window.data_addresses is not None:
        assert written and window.win.calls == [], window.win.calls
    elif shared is not None:
        assert written and window.win.calls == ["Sync"], window.win.calls
    elif ep.stores_words_whole(right):
        assert written and window.win.calls.count("Put") == 1, window.win.calls
    else:
        assert not written and window.win.calls == [], window.win.calls
    window.win = win
    MPI.COMM_WORLD.Barrier()
    if ep.stores_words_whole(left):
        assert int(layout4.memory[4]) == -7 - 1000 * left, layout4.memory

    # Fetching atomics on rank 0's word 2 (swap, sum, compare-and-swap), from every rank.  A read
    # of a rank on this node is a load, no atomic.
    window = ep._windows[ALLOCATED]
    ctrl, window.ctrl = window.ctrl, RecordingWin(window.ctrl)
    answers = {}
    for token, (op, value, compare) in enumerate(
        [(AtomicOp.SUM, 1, 0), (AtomicOp.NO_OP, 0, 0), (AtomicOp.CAS, -1, -2)]
    ):
        old = ep.control_fetch(ALLOCATED, token, 0, 2, op, value, compare)
        if old is not None:
            answers[token] = old
        if op is AtomicOp.NO_OP and window.shared_control[0] is not None:
            assert old is not None and window.ctrl.calls[-1:] == ["Sync"], window.ctrl.calls
    window.ctrl = ctrl
    await poll_until(ep, lambda: len(answers) + len(sink.fetches) == 3)
    answers.update(sink.fetches)
    assert 0 <= answers[0] < size and answers[1] >= answers[0] + 1 and answers[2] >= 1, answers
    MPI.COMM_WORLD.Barrier()  # every rank's sum is in
    if rank == 0:
        await poll_until(ep, lambda: layout2.control[2] == size)

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
    await ep.close()
    await ep.close()  # idempotent
    (out_dir / f"rank{rank}.json").write_text(json.dumps({"rank": rank, "size": size, "passed": True}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))

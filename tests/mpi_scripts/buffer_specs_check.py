"""mpi4py buffer specs in RMA calls and collectives: ``mpiexec -n 2 python buffer_specs_check.py``,
or ``python buffer_specs_check.py --local`` (two in-process ranks).

A separate process because the specs hold ``mpi4py.MPI`` datatypes, and importing ``mpi4py.MPI``
initialises MPI, which the test process must not do.  The unambiguous forms (``[buf, MPI.X]``,
``(buf, MPI.X)``, ``[buf, count, MPI.X]`` with X the array's own type) move the same data as the
bare array; every other spec raises RmaTypeError naming what to pass and changes nothing (the
engine's state and the window memory).  Each rank prints ``OK <rank>`` when every check passed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma import SUM, RmaTypeError
from tests.engine_net import snapshot


def refused(win: aiorma.Window, says: str, call: object, *args: object) -> None:
    """``call`` raises RmaTypeError whose message contains ``says``; nothing changed."""
    before, memory = snapshot(win.engine), win.memory.copy()
    try:
        call(*args)  # type: ignore[operator]
    except RmaTypeError as exc:
        assert says in str(exc), f"{call.__name__}: {exc!r} does not say {says!r}"  # type: ignore[attr-defined]
        assert snapshot(win.engine) == before and np.array_equal(win.memory, memory)
        return
    raise AssertionError(f"{call}{args} was accepted")


async def rma(comm: aiorma.Comm) -> None:
    o = 1 - comm.rank
    win = await comm.win_allocate(8, np.float64)
    data = np.arange(4.0) + 10 * comm.rank
    await win.lock_all()
    # Accepted: the whole array, or its first count elements, exactly as the bare array.
    win.put([data, MPI.DOUBLE], o, 0)
    win.put((data[:2], MPI.DOUBLE), o, 4)
    win.accumulate([data, 2, MPI.DOUBLE], o, 6, SUM)
    await win.flush(o)
    await comm.barrier()
    got = np.zeros(8)
    request = win.get([got, MPI.DOUBLE], comm.rank, 0)
    assert await request is got  # the array the spec names, as for a bare array
    await win.flush(comm.rank)
    theirs = np.arange(4.0) + 10 * o
    assert got.tolist() == [*theirs, *theirs[:2], *theirs[:2]], got
    await comm.barrier()  # both read their own window before either updates the other's
    fetched, old = np.zeros(1), np.zeros(3)
    win.fetch_and_op([np.ones(1), MPI.DOUBLE], [fetched, MPI.DOUBLE], o, 7)
    win.get_accumulate([np.ones(3), MPI.DOUBLE], [old, 3, MPI.DOUBLE], o, 0, SUM)
    await win.flush(o)
    assert fetched[0] == data[1] and old.tolist() == data[:3].tolist(), (fetched, old)
    await comm.barrier()

    # Refused, naming what to pass; nothing changes.
    alone = "pass the array alone (its dtype gives the type) or [array, MPI.DOUBLE]"
    refused(win, alone, win.put, [data, MPI.FLOAT], o)
    refused(win, "MPI.INT64_T is not the type of the float64 array", win.get, [got, MPI.INT64_T], o)
    refused(win, "derived MPI datatypes", win.accumulate, [data, MPI.DOUBLE.Create_vector(2, 1, 2)], o)
    refused(win, "pass buf[displ:displ + count]", win.put, [data, (2, 1), MPI.DOUBLE], o)
    refused(win, "count 5 outside", win.put, [data, 5, MPI.DOUBLE], o)
    refused(win, "count True", win.put, [data, True, MPI.DOUBLE], o)
    refused(win, "pass the numpy array alone", win.put, [data, "d"], o)
    refused(win, "not bytearray", win.put, [bytearray(32), MPI.DOUBLE], o)
    refused(win, "[buf, count, datatype]", win.put, [data, 1, 2, MPI.DOUBLE], o)
    refused(win, "C-contiguous", win.get, [np.zeros(8)[::2], 2, MPI.DOUBLE], o)
    single = [np.ones(1, np.float32), MPI.FLOAT]  # a consistent spec; the window's type differs
    refused(win, "does not match window float64", win.fetch_and_op, single, fetched, o)
    # The peer's unlock raises counters in this window's memory: not while this rank checks.
    await comm.barrier()
    await win.unlock_all()
    await win.free()

    ints = await comm.win_allocate(2, np.int64)  # both names of a 64-bit integer are its type
    await ints.fence()
    ints.put([np.array([7], np.int64), MPI.INT64_T], o, 0)
    ints.put([np.array([8], np.int64), MPI.LONG], o, 1)
    await ints.fence()
    assert ints.memory.tolist() == [7, 8], ints.memory
    await ints.free()


async def collectives(comm: aiorma.Comm) -> None:
    send = np.arange(3.0) + comm.rank
    total = np.zeros(3)
    await comm.allreduce([send, MPI.DOUBLE], [total, MPI.DOUBLE], SUM)
    assert total.tolist() == (2 * np.arange(3.0) + 1).tolist(), total
    buf = np.full(4, float(comm.rank))
    await comm.bcast([buf, 2, MPI.DOUBLE], root=1)  # the first two elements only
    assert buf.tolist() == [1.0, 1.0, comm.rank, comm.rank], buf
    gathered = np.zeros(2 * comm.size)
    await comm.allgather((send[:2], MPI.DOUBLE), (gathered, MPI.DOUBLE))
    assert gathered.tolist() == [0.0, 1.0, 1.0, 2.0], gathered
    for call, args, says in (
        (comm.bcast, ([buf, MPI.FLOAT],), "[array, MPI.DOUBLE]"),
        (comm.allreduce, ([send, MPI.DOUBLE], [total, MPI.INT32_T], SUM), "MPI.INT32_T is not the type"),
        (comm.allgather, ([send, (2, 0), MPI.DOUBLE], gathered), "buf[displ:displ + count]"),
    ):
        before = (buf.copy(), total.copy(), gathered.copy())
        try:
            call(*args)
        except RmaTypeError as exc:
            assert says in str(exc), exc
        else:
            raise AssertionError(f"{call.__name__}{args} was accepted")
        after = (buf, total, gathered)
        assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    await comm.barrier()  # every collective above was refused on every rank: none is in flight


async def main(comm: aiorma.Comm) -> None:
    await rma(comm)
    await collectives(comm)
    print(f"OK {comm.rank}", flush=True)


if __name__ == "__main__":
    if "--local" in sys.argv:
        aiorma.run(main, nprocs=2, transport="local")
    else:
        aiorma.run(main)

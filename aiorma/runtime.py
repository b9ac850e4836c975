"""aiorma.run: start ranks on a transport and run the application's ``main(comm)`` on each."""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from . import trace as _trace
from .comm import Comm
from .transport.local import LocalNetwork, NoticeDelay, OpDelay

T = TypeVar("T")
Main = Callable[..., Awaitable[T]]


def run(
    main: Main[T],
    *args: Any,
    nprocs: int | None = None,
    transport: str | None = None,
    notice_delay: NoticeDelay | None = None,
    op_delay: OpDelay | None = None,
) -> Any:
    """Run ``main(comm, *args)`` on every rank and return its value.

    * ``transport="mpi"`` (the default without ``nprocs``): one rank per process, under
      ``mpiexec -n N python app.py``.  Returns this rank's value.  An exception on any rank
      prints its traceback and aborts the whole job, so no rank waits forever for a dead peer.
    * ``transport="local"`` (the default with ``nprocs``): ``nprocs`` ranks as tasks of one event
      loop in this process.  Returns the list of values, one per rank.  If a rank raises, the
      others are cancelled and the first exception propagates.  ``notice_delay`` and ``op_delay``
      inject delays (see :mod:`aiorma.transport.local`).
    """
    if transport is None:
        transport = "local" if nprocs is not None else "mpi"
    if transport == "local":
        network = LocalNetwork(nprocs or 1, notice_delay=notice_delay, op_delay=op_delay)
        return asyncio.run(run_ranks(main, args, network))
    if transport == "mpi":
        if notice_delay is not None or op_delay is not None:
            raise ValueError("delay injection is a feature of the local transport")
        return _run_mpi(main, args, nprocs)
    raise ValueError(f"unknown transport {transport!r}; use 'local' or 'mpi'")


async def run_ranks(main: Main[T], args: tuple[Any, ...], network: LocalNetwork) -> list[T]:
    """Run ``main(comm, *args)`` on every rank of an in-process ``network`` (the local transport,
    or a subclass such as the simulated network) inside the running loop; the values, per rank."""
    comms = [Comm(endpoint) for endpoint in network.endpoints]
    await asyncio.gather(*(comm._start() for comm in comms))
    recorders = _trace.attach_all(comms)  # AIORMA_TRACE / aiorma.trace.enable(); else nothing

    async def rank_main(comm: Comm) -> T:
        result = await main(comm, *args)
        await comm._close()
        return result

    tasks = [asyncio.create_task(rank_main(comm), name=f"rank {comm.rank}") for comm in comms]
    try:
        done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        _trace.flush(recorders, per_rank=False)


def _run_mpi(main: Main[T], args: tuple[Any, ...], nprocs: int | None) -> T:
    from mpi4py import MPI

    from .transport.mpi import MpiEndpoint

    world = MPI.COMM_WORLD
    if nprocs is not None and nprocs != world.Get_size():
        raise ValueError(f"nprocs={nprocs}, but mpiexec started {world.Get_size()} ranks")

    async def rank_main() -> T:
        comm = Comm(MpiEndpoint(world))
        await comm._start()
        recorders = _trace.attach_all([comm])
        try:
            result = await main(comm, *args)
            await comm._close()
        finally:
            _trace.flush(recorders, per_rank=True)
        return result

    try:
        return asyncio.run(rank_main())
    except BaseException:
        if world.Get_size() == 1:
            raise
        traceback.print_exc()
        sys.stderr.flush()
        world.Abort(1)
        os._exit(1)  # Abort does not return; this is only a guard

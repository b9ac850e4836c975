"""Open aiorma inside the caller's running event loop: ``connect`` (MPI) and ``connect_local``.

``async with aiorma.connect(mpi_comm) as comm`` is how a program that already exists — an asyncio
service, an mpi4py code with its own communicators — adopts aiorma for as long as it needs it.
:func:`aiorma.run` is a thin wrapper over these two for programs that aiorma starts.

Life of a connection:

* entering: MPI start-up of the transport (collective over ``mpi_comm``; it runs in a worker
  thread, so the caller's other tasks keep running while late peers arrive), then the Comm's own
  windows (its sync window and the collectives' windows);
* the block: windows, epochs and collectives, progressed by the caller's loop;
* leaving normally: collective — every rank leaves the block.  Windows still open are freed, the
  Comm's own windows too, the duplicated communicators are freed, the worker threads and the
  doorbell socket are closed; a Request still pending then fails with
  :class:`~aiorma.CommClosedError`, and later calls raise it;
* leaving by an exception (or cancellation): nothing collective is attempted, because the peers
  may not be leaving.  Pending Requests fail with :class:`~aiorma.TransportError`, threads and
  sockets are closed, and the MPI objects are left for ``MPI_Finalize``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from . import trace as _trace
from ._core.context import process
from ._core.host import HostedContext
from ._core.settings import Settings
from .comm import Comm, abandon_comm, close_comm, start_comm
from .errors import AlreadyConnectedError, CommunicatorError, MpiStateError, RmaUsageError
from .transport.base import Endpoint
from .transport.local import LocalNetwork, NoticeDelay, OpDelay

if TYPE_CHECKING:  # mpi4py is imported only when MPI is used: importing it initialises MPI
    from mpi4py import MPI


def connect(mpi_comm: MPI.Intracomm | None = None) -> contextlib.AbstractAsyncContextManager[Comm]:
    """``async with connect(mpi_comm) as comm:`` — aiorma on the ranks of ``mpi_comm``.

    ``mpi_comm`` is any mpi4py intracommunicator (default ``MPI.COMM_WORLD``): a ``Split`` or
    ``Dup`` result works as well; ``comm.rank`` and ``comm.size`` are this rank's place in it.
    Entering and leaving are collective over ``mpi_comm``: every rank of it enters, and every rank
    leaves, in the same order as its other collectives.  aiorma works on duplicates of
    ``mpi_comm``, so its traffic never matches the caller's own messages or collectives.

    Checked at the call, before anything collective: MPI must be initialised (with
    ``MPI_THREAD_MULTIPLE``, mpi4py's default) and not finalised; ``mpi_comm`` must be an
    intracommunicator (``Merge`` an intercommunicator first) without another open ``connect`` in
    this process (a ``Dup`` of it is a different communicator and may be connected at the same
    time).  Else :class:`~aiorma.MpiStateError`, :class:`~aiorma.CommunicatorError` or
    :class:`~aiorma.AlreadyConnectedError` (all :class:`~aiorma.RmaUsageError`).
    """
    from mpi4py import MPI  # here, not at import: a local-only program must not start MPI

    if mpi_comm is None:
        mpi_comm = MPI.COMM_WORLD
    if not isinstance(mpi_comm, MPI.Comm):
        raise CommunicatorError(f"connect needs an mpi4py communicator, not {type(mpi_comm).__name__}")
    if MPI.Is_finalized():
        raise MpiStateError("connect: MPI is already finalized")
    if not MPI.Is_initialized():
        raise MpiStateError(
            "connect: MPI is not initialised (mpi4py.rc.initialize is False); call MPI.Init_thread() "
            "with MPI.THREAD_MULTIPLE first"
        )
    if MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        raise MpiStateError(
            "connect: aiorma needs MPI initialised with MPI_THREAD_MULTIPLE (mpi4py's default; "
            "do not lower mpi4py.rc.thread_level)"
        )
    if mpi_comm == MPI.COMM_NULL:
        raise CommunicatorError("connect: the communicator is MPI.COMM_NULL (a rank outside a Split?)")
    if mpi_comm.Is_inter():
        raise CommunicatorError("connect: an intercommunicator; Merge() it into an intracommunicator first")
    with process.connected_lock:
        _check_not_connected(mpi_comm)
    return HostedContext(_mpi_connection(mpi_comm))


def _check_not_connected(mpi_comm: MPI.Intracomm) -> None:
    """Raise AlreadyConnectedError when ``mpi_comm`` has an open connect in this process (the
    caller holds ``process.connected_lock``)."""
    if any(mpi_comm == open_comm for open_comm in process.connected):
        raise AlreadyConnectedError(
            "connect: this communicator already has an open aiorma.connect in this process; "
            "use that Comm, or connect a Dup() of the communicator"
        )


@contextlib.asynccontextmanager
async def _mpi_connection(mpi_comm: MPI.Intracomm) -> AsyncIterator[Comm]:
    from .transport.mpi import MpiEndpoint

    with process.connected_lock:  # (connects may run in several threads: MPI's is the process)
        _check_not_connected(mpi_comm)  # again: another task may have entered since the call
        process.connected.append(mpi_comm)
    try:
        settings = Settings.from_environment()  # the connection's switches, read once, here
        endpoint = await _in_thread(MpiEndpoint, mpi_comm, settings)
        async with comm_session([endpoint], per_rank_trace=True, settings=settings) as (comm,):
            yield comm
    finally:
        with process.connected_lock:
            process.connected.remove(mpi_comm)


def connect_local(
    nprocs: int, *, notice_delay: NoticeDelay | None = None, op_delay: OpDelay | None = None
) -> contextlib.AbstractAsyncContextManager[list[Comm]]:
    """``async with connect_local(n) as comms:`` — ``n`` ranks of the in-process transport inside
    the running loop, for tests and notebooks; ``comms[r]`` is rank ``r``.

    Run each rank's code as a task (``asyncio.gather(*(main(c) for c in comms))`` or a task
    group); leaving the block is every rank leaving, as for :func:`connect`: windows still open
    are freed and a Request still pending fails with :class:`~aiorma.CommClosedError`
    (docs/embedding.md, *What connect does*).  Unlike :func:`aiorma.run`, a rank's exception does
    not fail its peers here: the caller owns the tasks.  ``notice_delay`` and ``op_delay`` inject
    delays, as in :func:`aiorma.run`.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise RmaUsageError(f"connect_local needs a positive number of ranks, not {nprocs!r}")
    network = LocalNetwork(nprocs, notice_delay=notice_delay, op_delay=op_delay)
    return HostedContext(comm_session(network.endpoints, per_rank_trace=False))


@contextlib.asynccontextmanager
async def comm_session(
    endpoints: Sequence[Endpoint], *, per_rank_trace: bool, settings: Settings | None = None
) -> AsyncIterator[list[Comm]]:
    """Comms on ``endpoints`` (this process's ranks), started, traced when tracing is configured,
    and closed on the way out: collectively after a normal exit, locally after an exception.
    ``settings``: the connection's switches, which the endpoints were made with; without them
    (the in-process transport) the environment's are read on entering."""
    if settings is None:
        settings = Settings.from_environment()
    comms = [Comm(endpoint, settings=settings) for endpoint in endpoints]
    try:
        await asyncio.gather(*(start_comm(comm) for comm in comms))
    except BaseException as exc:
        await _abandon(comms, exc)
        raise
    recorders = _trace.attach_all(comms, settings)  # AIORMA_TRACE / aiorma.trace.enable(); else nothing
    try:
        try:
            yield comms
        except BaseException as exc:
            await _abandon(comms, exc)
            raise
        try:
            await asyncio.gather(*(close_comm(comm) for comm in comms))
        except BaseException as exc:  # a failed close (CollectiveMismatch, a peer's failure): alone
            await _abandon(comms, exc)
            raise
    finally:
        _trace.flush(recorders, per_rank=per_rank_trace, settings=settings)


async def _abandon(comms: list[Comm], cause: BaseException) -> None:
    """Stop the ranks' progress without anything collective (the peers may not be leaving),
    telling them why (``cause``)."""
    for comm in comms:
        await abandon_comm(comm, cause)


async def _in_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a worker thread.  MPI start-up is collective: if the caller is cancelled
    while peers are late, the thread still finishes it, and its endpoint is then abandoned."""
    future = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:

        def abandon(done: asyncio.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None:
                done.result().abandon()

        future.add_done_callback(abandon)
        raise

"""aiorma.run: start ranks on a transport and run the application's ``main(comm)`` on each.

A thin wrapper over :func:`aiorma.connect` for programs that aiorma starts (it owns the loop).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from ._core.host import HostedContext
from ._core.settings import prepare_mpi_environment
from .comm import Comm
from .errors import PeerFailed
from .request import mark_retrieved
from .session import comm_session, connect
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
    backend: str = "asyncio",
) -> Any:
    """Run ``main(comm, *args)`` on every rank and return its value.

    ``backend``: the event loop that runs ``main`` — ``"asyncio"`` (default) or ``"trio"``
    (``pip install 'aiorma[trio]'``; ``main`` is then a trio program, and aiorma's own asyncio
    machinery is hosted inside the trio run: docs/embedding.md, *In a trio program*).

    * ``transport="mpi"`` (the default without ``nprocs``): one rank per process, under
      ``mpiexec -n N python app.py``.  Returns this rank's value.  An exception on any rank
      prints its traceback and aborts the whole job, so no rank waits forever for a dead peer.
    * ``transport="local"`` (the default with ``nprocs``): ``nprocs`` ranks as tasks of one event
      loop in this process.  Returns the list of values, one per rank.  If a rank raises or is
      cancelled, every other rank's pending Requests fail with :class:`~aiorma.PeerFailed` at
      once (and so do its later calls); ranks still running a moment later are cancelled, and
      the first rank's exception propagates.  Two hooks inject delays, for testing a program
      against late peers: ``notice_delay(src, dest, notice) -> seconds`` applies a
      synchronization write (a grant, a "done", a fence notice, a lock hand-off) from rank
      ``src`` to rank ``dest`` only that much later (writes between one pair of ranks still land
      in order); ``op_delay(origin, op) -> seconds`` applies an RMA operation to the target's
      memory only that much later, and flushes towards that target wait for it (accumulates from
      one origin to one target still apply in call order).
    """
    if backend not in ("asyncio", "trio"):
        raise ValueError(f"unknown backend {backend!r}; use 'asyncio' or 'trio'")
    if transport is None:
        transport = "local" if nprocs is not None else "mpi"
    if transport == "local":
        network = LocalNetwork(nprocs or 1, notice_delay=notice_delay, op_delay=op_delay)
        return _run_loop(backend, run_ranks, main, args, network)
    if transport == "mpi":
        if notice_delay is not None or op_delay is not None:
            raise ValueError("delay injection is a feature of the local transport")
        return _run_mpi(main, args, nprocs, backend)
    raise ValueError(f"unknown transport {transport!r}; use 'local' or 'mpi'")


def _run_loop(backend: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``fn(*args)`` in a new event loop of ``backend``."""
    if backend == "trio":
        try:
            import trio
        except ImportError:
            raise ValueError("backend='trio' needs trio: pip install 'aiorma[trio]'") from None
        return trio.run(fn, *args)
    return asyncio.run(fn(*args))  # type: ignore[arg-type]


#: After a rank fails, how long the other ranks may take to end by themselves (their pending
#: Requests have failed with PeerFailed at once); a rank still running then, waiting on something
#: other than aiorma, is cancelled.
FAILURE_GRACE = 1.0


async def run_ranks(main: Main[T], args: tuple[Any, ...], network: LocalNetwork) -> list[T]:
    """Run ``main(comm, *args)`` on every rank of an in-process ``network`` (the local transport,
    or a subclass such as the simulated network) inside the running loop; the values, per rank.

    The ranks are the tasks of one anyio task group.  A rank that ends with an exception or is
    cancelled fails every other rank at once (:func:`_fail_peers`: their pending Requests and
    later calls raise :class:`~aiorma.PeerFailed`); ranks still running after
    :data:`FAILURE_GRACE` seconds are cancelled, and the first rank's exception is raised.
    Cancelling the caller cancels every rank."""
    async with HostedContext(comm_session(network.endpoints, per_rank_trace=False)) as comms:
        results: list[Any] = [None] * len(comms)
        failures: list[BaseException] = []  # what failed ranks ended with, in the order they ended
        running = len(comms)

        async with anyio.create_task_group() as group:
            scope = group.cancel_scope

            async def rank_main(comm: Comm) -> None:
                nonlocal running
                try:
                    results[comm.rank] = await main(comm, *args)
                except BaseException as exc:  # SystemExit too: it is raised from here, at the end
                    if scope.cancel_called and isinstance(exc, anyio.get_cancelled_exc_class()):
                        raise  # the caller cancelled run_ranks, or the grace period ran out
                    failures.append(exc)
                    if len(failures) == 1:
                        _fail_peers(comms, network, comm.rank, exc)
                        group.start_soon(_cancel_after, scope, FAILURE_GRACE, name="failure grace")
                finally:
                    running -= 1
                    if running == 0 and failures:
                        scope.cancel()  # only the grace timer is left

            for comm in comms:
                group.start_soon(rank_main, comm, name=f"rank {comm.rank}")
        if failures:
            raise failures[0]  # leaving the session by an exception: no collective close
    return results


async def _cancel_after(scope: anyio.CancelScope, seconds: float) -> None:
    await anyio.sleep(seconds)
    scope.cancel()


def _fail_peers(comms: list[Comm], network: LocalNetwork, rank: int, cause: BaseException) -> None:
    """Rank ``rank`` ended with ``cause``: fail every rank's windows, collectives and collective
    steps with :class:`PeerFailed`, so that nothing waits for the failed rank.

    Every window spans every rank, so every rank depends on the failed one.  Each engine (the
    failed rank's too: nothing of its own should linger) is failed as ``WindowEngine._guarded``
    fails one on an internal error (h11's habit): each pending token gets a ``CompleteRequest``
    with the error, and later calls raise it."""

    def error() -> PeerFailed:
        failure = PeerFailed(rank, cause)
        failure.__cause__ = cause
        return failure

    network.fail(error)  # window creation and free, now waiting or later
    for comm in comms:
        _fail_rank(comm, error)


def _fail_rank(comm: Comm, error: Callable[[], PeerFailed]) -> None:
    """Fail one rank's Requests (each its own PeerFailed: an exception object raised in many
    places would gather every traceback), its later window calls, and its collectives."""
    comm.world.driver.fail(error)
    # Many of these are internal (a landing flush, an epoch nobody awaits): the original
    # exception propagates from run(), so an unawaited one is not worth a log line at exit.
    mark_retrieved(comm.collectives.fail(error))


def _run_mpi(main: Main[T], args: tuple[Any, ...], nprocs: int | None, backend: str = "asyncio") -> T:
    if "mpi4py.MPI" not in sys.modules:  # MPI not initialised yet: MPI_Init reads it
        prepare_mpi_environment()
    from mpi4py import MPI  # here, not at import: a local-only program must not start MPI

    world = MPI.COMM_WORLD
    if nprocs is not None and nprocs != world.Get_size():
        raise ValueError(f"nprocs={nprocs}, but mpiexec started {world.Get_size()} ranks")

    async def rank_main() -> T:
        async with connect(world) as comm:
            return await main(comm, *args)

    try:
        return _run_loop(backend, rank_main)
    except BaseException as error:
        if world.Get_size() == 1:
            raise
        if _caused_by_a_peer(error):
            # The peer that failed first is aborting the job itself, its traceback first: give it
            # the time to (this rank is normally ended by that abort during the wait).
            time.sleep(_PEER_ABORT_GRACE)
        traceback.print_exc()
        _drain_output()
        world.Abort(1)
        os._exit(1)  # Abort does not return; this is only a guard


#: How long a rank that failed only because a peer did waits for that peer's MPI_Abort.
_PEER_ABORT_GRACE = 5.0


def _caused_by_a_peer(error: BaseException) -> bool:
    """True when ``error`` is, or was caused by, another rank's failure (PeerFailed)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, PeerFailed):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def _drain_output(patience: float = 2.0) -> None:
    """Flush stdout and stderr, then wait (at most ``patience`` seconds) until whatever reads
    them — mpiexec's proxy, when they are pipes — has taken every byte: MPI_Abort ends the job at
    once, and a traceback still in the pipe was lost or cut short (seen under load)."""
    deadline = time.monotonic() + patience
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or odd stream, no FIONREAD: nothing to wait for
            stream.flush()
            import fcntl  # POSIX only, like MPI_Abort's callers here
            import termios

            fd = stream.fileno()
            unread = array.array("i", [0])
            while time.monotonic() < deadline:
                fcntl.ioctl(fd, termios.FIONREAD, unread)  # bytes still in the pipe (Linux)
                if unread[0] == 0:
                    break
                time.sleep(0.001)

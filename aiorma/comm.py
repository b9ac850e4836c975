"""Comm: one rank's handle on a group of ranks; creates windows and runs collectives."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Concatenate, ParamSpec

import numpy as np

from ._host import hosted
from .collectives.api import Collectives
from .engine.actions import EpochEvent
from .errors import EpochError, RmaMemoryError, RmaTypeError, RmaUsageError
from .info import Info, as_info
from .ops import check_window_dtype
from .request import Request
from .transport.base import Endpoint
from .window import Window
from .world import World


def _physical_memory() -> int | None:
    """Bytes of physical memory on this machine, None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


P = ParamSpec("P")


def _forward(
    method: Callable[Concatenate[Collectives, P], Request],
) -> Callable[Concatenate[Comm, P], Request]:
    """``comm.<collective>(...)`` is ``comm.collectives.<collective>(...)``: same signature and
    docstring (``functools.wraps``), one definition."""

    @functools.wraps(method)
    def call(comm: Comm, /, *args: P.args, **kwargs: P.kwargs) -> Request:
        return method(comm.collectives, *args, **kwargs)

    return call


class Comm:
    """A rank's view of its group: ``rank``, ``size``, window creation and collectives.

    Window creation and ``free`` are collective: every rank makes the same calls in the same order,
    as in MPI.  Obtain a Comm from :func:`aiorma.connect` (or :func:`aiorma.run`).

    The collectives (:meth:`barrier`, :meth:`bcast`, :meth:`reduce`, :meth:`allreduce`,
    :meth:`allgather`, :meth:`gather`, :meth:`scatter`, :meth:`alltoall`) are collective over the
    Comm — every rank calls them, in the same order — and run on RMA windows (docs/collectives.md).
    Each takes effect at the call and returns a :class:`~aiorma.Request` that completes when this
    rank's part is done: its receive buffer is filled and its send buffer may be reused.  Any
    number may be in flight.  Buffers are numpy arrays (or mpi4py buffer specs), ``recv`` holding
    ``size`` blocks where MPI's would; a wrong buffer, op, root or algorithm raises an
    :class:`~aiorma.RmaUsageError` subclass at the call, on the calling rank, and changes nothing.
    A rank that failed fails the collectives waiting on it with :class:`~aiorma.PeerFailed`.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        #: This rank's place in the group: progress, window creation (the layer below).
        self.world = World(endpoint)
        self.rank = self.world.rank
        self.size = self.world.size
        # A creation whose waiter was cancelled: (the call, its still running task); see
        # _collective_window.
        self._unclaimed: tuple[tuple[object, ...], asyncio.Future[Window]] | None = None
        self._collectives: Collectives | None = None

    @property
    def history(self) -> bool:
        """Keep epoch events in new windows' engines (tests)."""
        return self.world.history

    @history.setter
    def history(self, keep: bool) -> None:
        self.world.history = keep

    @property
    def observer(self) -> Callable[[int, EpochEvent], None] | None:
        """Called as ``observer(win_id, event)`` for every epoch event of windows created after
        it is set (tracing); it runs inside engine calls and must not call aiorma."""
        return self.world.observer

    @observer.setter
    def observer(self, observer: Callable[[int, EpochEvent], None] | None) -> None:
        self.world.observer = observer

    @property
    def collectives(self) -> Collectives:
        """The collectives' state on this rank (landing windows, cost model, queue)."""
        if self._collectives is None:
            raise RmaUsageError("this Comm is not started; obtain it from aiorma.connect or aiorma.run")
        return self._collectives

    @hosted
    async def win_create(self, buf: np.ndarray, info: Info | Mapping[str, object] | None = None) -> Window:
        """Collective: expose the caller's array ``buf`` (any shape, C-contiguous, writeable) as a
        :class:`~aiorma.Window`, returned once every rank has created it.  ``disp`` counts
        elements of ``buf.dtype`` in C order.  The array stays the caller's after free.  Raises
        :class:`~aiorma.RmaTypeError` for anything but such an array, for a dtype no window may
        hold (object, see docs/datatypes.md), or for dtypes that differ between ranks."""
        self._check_open()
        if not isinstance(buf, np.ndarray):
            raise RmaTypeError(f"win_create needs a numpy array, not {type(buf).__name__}")
        if not buf.flags.c_contiguous or not buf.flags.writeable:
            raise RmaTypeError("win_create needs a writeable, C-contiguous array")
        check_window_dtype(buf.dtype)
        info = as_info(info)
        call = ("win_create", id(buf), info)
        create = self.world.create_window
        return await self._collective_window(call, lambda: create(buf, buf.size, buf.dtype, info))

    @hosted
    async def win_allocate(
        self,
        count: int,
        dtype: np.dtype | type = np.float64,
        info: Info | Mapping[str, object] | None = None,
    ) -> Window:
        """Allocate ``count`` zeroed elements of ``dtype`` (every byte zero); ``win.memory`` is
        the local array.  Raises :class:`RmaTypeError` at the call for a dtype no window may hold
        (object, see docs/datatypes.md).

        Raises :class:`RmaMemoryError` at the call, before anything collective happens, when
        ``count * itemsize`` exceeds this machine's physical memory (``os.sysconf``): the check
        depends only on the arguments and the machine, so ranks making the same call on alike
        machines all raise it and none is left waiting in the collective creation.  (Ranks that
        pass different counts, or run on machines of different sizes, may disagree; then the
        others wait for the refused rank, as in any collective call some ranks skip.)"""
        self._check_open()
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise RmaUsageError(f"count must be a non-negative integer, not {count!r}")
        count = int(count)
        try:
            dtype = np.dtype(dtype)
        except (TypeError, ValueError):
            raise RmaTypeError(f"{dtype!r} is not a numpy dtype") from None
        check_window_dtype(dtype)
        physical = _physical_memory()
        if physical is not None and count * dtype.itemsize > physical:
            raise RmaMemoryError(
                f"win_allocate({count}, {dtype}) needs {count * dtype.itemsize} bytes; "
                f"this machine has {physical}"
            )
        info = as_info(info)
        call = ("win_allocate", count, dtype, info)
        return await self._collective_window(call, lambda: self.world.create_window(None, count, dtype, info))

    async def _collective_window(
        self, call: tuple[object, ...], create: Callable[[], Coroutine[Any, Any, Window]]
    ) -> Window:
        """Run a collective window creation whose waiter may be cancelled.

        Contract: a collective call cannot be withdrawn — the peers are already in it — so
        cancelling the task that awaits ``win_create``/``win_allocate`` abandons the wait only.
        The creation completes in the background and its window stays *unclaimed*: the next
        ``win_create``/``win_allocate`` on this Comm must be the same call (same arguments), and
        returns that window instead of creating another, so every rank still makes the same
        sequence of collective calls.  Any other creation call meanwhile raises
        :class:`EpochError` and changes nothing.
        """
        pending = self._unclaimed
        if pending is not None:
            pending_call, task = pending
            if pending_call != call:
                raise EpochError(
                    f"an earlier {pending_call[0]} on this Comm was cancelled while its peers were in it; "
                    "make the same call again to claim its window first"
                )
            self._unclaimed = None
        else:
            task = asyncio.ensure_future(create())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            self._unclaimed = (call, task)
            raise

    def _check_open(self) -> None:
        self.world.check_open()

    # ------------------------------------------------------------------ collectives
    #
    # Every collective takes effect when called and returns a Request; any number may be in
    # flight, and they run in call order (the same on every rank).  They are built only on RMA:
    # landing windows, puts, flushes and monotonic flags (aiorma/collectives, docs/collectives.md).
    # Bad arguments raise at the call (RmaTypeError for buffers, RmaRangeError for a root,
    # RmaUsageError for options) and change nothing.  ``algorithm=`` overrides the choice of the
    # LogGP model; ``nodes=`` (one node label per rank) enables the node-leader algorithms.

    # Each is defined once, on Collectives (signature, checks, docstring); the Comm forwards.
    barrier = _forward(Collectives.barrier)
    bcast = _forward(Collectives.bcast)
    reduce = _forward(Collectives.reduce)
    allreduce = _forward(Collectives.allreduce)
    allgather = _forward(Collectives.allgather)
    gather = _forward(Collectives.gather)
    scatter = _forward(Collectives.scatter)
    alltoall = _forward(Collectives.alltoall)

    async def _start(self) -> None:
        await self.world.start()
        self._collectives = await Collectives.start(self.world)

    async def _close(self) -> None:
        if self._collectives is not None:
            collectives, self._collectives = self._collectives, None
            await collectives.close()
        await self.world.close()

    def __repr__(self) -> str:
        return f"<Comm rank {self.rank} of {self.size}>"

"""Comm: one rank's handle on a group of ranks; creates windows and runs collectives."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from ._core.host import hosted
from ._core.settings import Settings
from ._core.world import World
from .collectives.api import Collectives
from .collectives.objects import ObjectCollectives, is_buffer
from .constants import Op
from .engine.actions import EpochEvent
from .errors import (
    CollectiveMismatch,
    EpochError,
    RmaMemoryError,
    RmaTypeError,
    RmaUsageError,
    TransportError,
)
from .ops import check_window_dtype
from .request import Request, mark_retrieved
from .transport.base import Endpoint
from .win_info import Info, as_info
from .window import Window


def _physical_memory() -> int | None:
    """Bytes of physical memory on this machine, None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


P = ParamSpec("P")
R = TypeVar("R")


class _Missing:
    """The default of the arguments whose presence chooses the object or the buffer form."""

    def __repr__(self) -> str:
        return "<not given>"


MISSING: Any = _Missing()


def _object_args(what: str, given: list[Any], defaults: list[Any], options: dict[str, Any]) -> list[Any]:
    """The object form's arguments after the first, from the buffer form's slots.

    ``given`` holds the slots after the first (the receive buffer's first), MISSING where not
    passed.  The object form has no receive buffer, so what was passed positionally in its slot
    is the object form's next argument (``gather(obj, 1)``: root 1): the passed values, in slot
    order, are the object form's arguments in order, then the defaults fill the rest."""
    for name, value in options.items():
        if value is not None:
            raise RmaUsageError(f"{name}= applies to the buffer form of {what}, not to its object form")
    if given[0] is MISSING:
        values = given[1:]
    else:
        values = [v for v in given if v is not MISSING]
        if len(values) > len(defaults):
            raise RmaUsageError(f"{what} of an object takes {len(defaults)} arguments after the object")
        values += [MISSING] * (len(defaults) - len(values))
    return [default if value is MISSING else value for value, default in zip(values, defaults, strict=True)]


def _given(value: Any, default: Any) -> Any:
    return default if value is MISSING else value


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _forward(
    method: Callable[Concatenate[Collectives, P], R],
) -> Callable[Concatenate[Comm, P], R]:
    """``comm.<collective>(...)`` is ``comm.collectives.<collective>(...)``: same signature and
    docstring (``functools.wraps``), one definition."""

    @functools.wraps(method)
    def call(comm: Comm, /, *args: P.args, **kwargs: P.kwargs) -> R:
        # The attribute itself when started (every collective call passes here); the property
        # only to refuse a Comm that is not.
        return method(comm._collectives or comm.collectives, *args, **kwargs)

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
    number may be in flight.  Each has two forms, as in mpi4py: called with a receive buffer
    (numpy arrays or mpi4py buffer specs, ``recv`` holding ``size`` blocks where MPI's would;
    for ``bcast`` a numpy array, filled in place) it is the buffer form (mpi4py's uppercase
    methods) and its Request's result is None; called without one (``gather(obj, root)``,
    ``allreduce(obj, op)``, ``bcast(obj, root)`` for anything but an array) it takes Python objects
    and its Request's result is the object(s), as mpi4py's lowercase methods (:attr:`objects` forces
    that form; docs/collectives.md).  A wrong buffer, object, op, root or algorithm raises an
    :class:`~aiorma.RmaUsageError` subclass at the call, on the calling rank, and changes nothing.
    A rank that failed fails the collectives waiting on it with :class:`~aiorma.PeerFailed`.
    """

    def __init__(self, endpoint: Endpoint, *, settings: Settings | None = None) -> None:
        # ``settings``: the connection's switches, read where it started (default: the
        # environment's now).
        #: This rank's place in the group: progress, window creation (the layer below).
        self.world = World(endpoint, settings)
        self.rank = self.world.rank
        self.size = self.world.size
        # A creation whose waiter was cancelled: (the call, its still running task); see
        # _collective_window.
        self._unclaimed: tuple[tuple[object, ...], asyncio.Future[Window]] | None = None
        self._collectives: Collectives | None = None
        self._objects: ObjectCollectives | None = None

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

    # Each buffer form is defined once, on Collectives (signature, checks, docstring); the object
    # forms once, on ObjectCollectives.  The Comm's methods choose between them by their arguments.
    barrier = _forward(Collectives.barrier)
    # Persistent collectives (MPI-4's *_init): buffer form only, arguments checked once.
    allreduce_init = _forward(Collectives.allreduce_init)
    bcast_init = _forward(Collectives.bcast_init)
    reduce_init = _forward(Collectives.reduce_init)
    barrier_init = _forward(Collectives.barrier_init)
    allgather_init = _forward(Collectives.allgather_init)
    gather_init = _forward(Collectives.gather_init)
    scatter_init = _forward(Collectives.scatter_init)
    alltoall_init = _forward(Collectives.alltoall_init)

    @property
    def objects(self) -> ObjectCollectives:
        """The object form of every collective, whatever the arguments' types:
        ``comm.objects.bcast(array, 0)`` broadcasts a numpy array as a pickled object (where
        ``comm.bcast(array, 0)`` would broadcast into it in place)."""
        if self._objects is None:
            self._objects = ObjectCollectives(self.collectives)
        return self._objects

    def bcast(
        self,
        buf: Any,
        root: int = 0,
        *,
        algorithm: str | None = None,
        k: int | None = None,
        tree: Any = None,
        topology: Any = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Broadcast from ``root``: the buffer form for a numpy array (or an mpi4py buffer spec),
        the object form for anything else.

        * ``bcast(array, root)``: root's array is copied into ``array`` on every rank, in place
          (:meth:`aiorma.collectives.Collectives.bcast`, which lists ``algorithm=``, ``k=``,
          ``tree=``, ``topology=`` and ``nodes=``); the result is None.
        * ``bcast(obj, root)``: the result is root's ``obj`` (unpickled: a copy) on every rank;
          ``obj`` is ignored elsewhere.

        Every rank must choose the same form: mpi4py's ``bcast(array if rank == 0 else None)``
        mixes them; write ``comm.objects.bcast(...)`` for an array as an object."""
        if is_buffer(buf):
            return self.collectives.bcast(
                buf, root, algorithm=algorithm, k=k, tree=tree, topology=topology, nodes=nodes
            )
        options = {"algorithm": algorithm, "k": k, "tree": tree, "topology": topology, "nodes": nodes}
        (root,) = _object_args("bcast", [root], [0], options)
        return self.objects.bcast(buf, root)

    def reduce(
        self,
        send: Any,
        recv: Any = MISSING,
        op: Any = MISSING,
        root: Any = MISSING,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Combine every rank's contribution with ``op`` (default SUM) in rank order at ``root``.

        * ``reduce(send, recv, op, root)`` (``recv`` an array, or None off the root): the buffer
          form (:meth:`aiorma.collectives.Collectives.reduce`); the result is None.
        * ``reduce(obj, op=SUM, root=0)``, no receive buffer: the object form; the result is
          ``obj0 op obj1 op …`` (Python values, as mpi4py combines them) at ``root``, None
          elsewhere."""
        if recv is not MISSING and (recv is None or is_buffer(recv)):
            return self.collectives.reduce(
                send, recv, _given(op, Op.SUM), _given(root, 0), algorithm=algorithm, nodes=nodes
            )
        op, root = _object_args(
            "reduce", [recv, op, root], [Op.SUM, 0], {"algorithm": algorithm, "nodes": nodes}
        )
        return self.objects.reduce(send, op, root)

    def allreduce(
        self,
        send: Any,
        recv: Any = MISSING,
        op: Any = MISSING,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Combine every rank's contribution with ``op`` (default SUM) in rank order, on every rank.

        * ``allreduce(send, recv, op)``: the buffer form
          (:meth:`aiorma.collectives.Collectives.allreduce`); the result is None.
        * ``allreduce(obj, op=SUM)``, no receive buffer: the object form; the result is
          ``obj0 op obj1 op …`` on every rank."""
        if recv is not MISSING and is_buffer(recv):
            return self.collectives.allreduce(
                send, recv, _given(op, Op.SUM), algorithm=algorithm, nodes=nodes
            )
        (op,) = _object_args("allreduce", [recv, op], [Op.SUM], {"algorithm": algorithm, "nodes": nodes})
        return self.objects.allreduce(send, op)

    def allgather(
        self,
        send: Any,
        recv: Any = MISSING,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Every rank's contribution on every rank.

        * ``allgather(send, recv)``: the buffer form
          (:meth:`aiorma.collectives.Collectives.allgather`); the result is None.
        * ``allgather(obj)``: the object form; the result is the list of every rank's ``obj``."""
        if recv is not MISSING:
            return self.collectives.allgather(send, recv, algorithm=algorithm, nodes=nodes)
        _object_args("allgather", [recv], [], {"algorithm": algorithm, "nodes": nodes})
        return self.objects.allgather(send)

    def gather(
        self, send: Any, recv: Any = MISSING, root: Any = MISSING, *, algorithm: str | None = None
    ) -> Request:
        """Every rank's contribution at ``root``.

        * ``gather(send, recv, root)`` (``recv`` an array, or None off the root): the buffer form
          (:meth:`aiorma.collectives.Collectives.gather`); the result is None.
        * ``gather(obj, root=0)``, no receive buffer (an integer second argument is the root):
          the object form; the result is the list of every rank's ``obj`` at ``root``, None
          elsewhere."""
        if recv is not MISSING and not _is_int(recv):
            return self.collectives.gather(send, recv, _given(root, 0), algorithm=algorithm)
        (root,) = _object_args("gather", [recv, root], [0], {"algorithm": algorithm})
        return self.objects.gather(send, root)

    def scatter(
        self, send: Any, recv: Any = MISSING, root: Any = MISSING, *, algorithm: str | None = None
    ) -> Request:
        """Root's ``size`` pieces, one to each rank.

        * ``scatter(send, recv, root)``: the buffer form
          (:meth:`aiorma.collectives.Collectives.scatter`); the result is None.
        * ``scatter(seq, root=0)``, no receive buffer (an integer second argument is the root):
          the object form; rank ``i``'s result is ``seq[i]`` of root's ``seq`` (``size`` items;
          ignored elsewhere)."""
        if recv is not MISSING and not _is_int(recv):
            return self.collectives.scatter(send, recv, _given(root, 0), algorithm=algorithm)
        (root,) = _object_args("scatter", [recv, root], [0], {"algorithm": algorithm})
        return self.objects.scatter(send, root)

    def alltoall(self, send: Any, recv: Any = MISSING, *, algorithm: str | None = None) -> Request:
        """Piece ``j`` of rank ``i``'s contribution to rank ``j``, as its piece ``i``.

        * ``alltoall(send, recv)``: the buffer form
          (:meth:`aiorma.collectives.Collectives.alltoall`); the result is None.
        * ``alltoall(seq)``: the object form (``size`` items on every rank); the result is the
          list of the items sent to this rank, in rank order."""
        if recv is not MISSING:
            return self.collectives.alltoall(send, recv, algorithm=algorithm)
        _object_args("alltoall", [recv], [], {"algorithm": algorithm})
        return self.objects.alltoall(send)

    def __repr__(self) -> str:
        return f"<Comm rank {self.rank} of {self.size}>"


async def start_comm(comm: Comm) -> None:
    """Collective.  Start ``comm``'s World and its collectives (the session that made it)."""
    await comm.world.start()
    comm._collectives = await Collectives.start(comm.world)


async def close_comm(comm: Comm) -> None:
    """Collective: close ``comm`` (the session that made it).  Every rank first learns how many
    collectives each called: when they differ, some collective can never complete (a rank gave
    up awaiting one its peers never called), and the close raises :class:`CollectiveMismatch` on
    every rank instead of waiting for ever; the caller then leaves without anything collective."""
    collectives, comm._collectives = comm._collectives, None
    counts = await comm.world.closing(collectives.runner.submitted if collectives is not None else 0)
    if len(set(counts)) > 1:
        if collectives is not None:  # unfinished, and nobody may await them any more
            mark_retrieved(collectives.fail(lambda: CollectiveMismatch(counts)))
        raise CollectiveMismatch(counts)
    if collectives is not None:
        await collectives.close()
    await comm.world.close()


async def abandon_comm(comm: Comm, cause: BaseException) -> None:
    """Leave without anything collective, after ``cause`` (the peers may not be leaving):
    the unfinished collectives fail quietly (nobody may await them any more), then the
    World stops its progress and tells the peers."""
    if comm._collectives is not None:
        mark_retrieved(
            comm._collectives.fail(lambda: TransportError("aiorma was left while this was pending"))
        )
    await comm.world.abandon(cause)

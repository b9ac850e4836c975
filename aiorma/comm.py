"""Comm: one rank's handle on a group of ranks; creates windows and runs collectives."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import numpy as np

from .collectives.api import Collectives
from .constants import MODE_NOSUCCEED, Op
from .engine.actions import EpochEvent
from .engine.control import ControlLayout
from .engine.window_engine import WindowEngine
from .errors import CommClosedError, EpochError, RmaMemoryError, RmaTypeError, RmaUsageError
from .info import Info, as_info
from .progress import ProgressDriver
from .request import Request
from .transport.base import Endpoint
from .window import Window


def _physical_memory() -> int | None:
    """Bytes of physical memory on this machine, None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


class Comm:
    """A rank's view of its group: ``rank``, ``size``, window creation and collectives.

    Window creation and ``free`` are collective: every rank makes the same calls in the same order,
    as in MPI.  Obtain a Comm from :func:`aiorma.run`.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._driver = ProgressDriver(endpoint, getattr(endpoint, "ranks_on_node", 1))
        self.rank = endpoint.rank
        self.size = endpoint.size
        self._next_win_id = 1
        # A creation whose waiter was cancelled: (the call, its still running task); see
        # _collective_window.
        self._unclaimed: tuple[tuple[object, ...], asyncio.Future[Window]] | None = None
        self._sync_window: Window | None = None
        self._collectives: Collectives | None = None
        self.history = False  # keep epoch events in new windows' engines (tests)
        #: Called as ``observer(win_id, event)`` for every epoch event of windows created after it
        #: is set (tracing); it runs inside engine calls and must not call aiorma.
        self.observer: Callable[[int, EpochEvent], None] | None = None

    async def win_create(self, buf: np.ndarray, info: Info | Mapping[str, object] | None = None) -> Window:
        """Expose the caller's array ``buf`` (any shape, C-contiguous, writeable).  ``disp``
        counts elements of ``buf.dtype`` in C order.  The array stays the caller's after free."""
        self._check_open()
        if not isinstance(buf, np.ndarray):
            raise RmaTypeError(f"win_create needs a numpy array, not {type(buf).__name__}")
        if not buf.flags.c_contiguous or not buf.flags.writeable:
            raise RmaTypeError("win_create needs a writeable, C-contiguous array")
        info = as_info(info)
        call = ("win_create", id(buf), info)
        return await self._collective_window(call, lambda: self._create(buf, buf.size, buf.dtype, info))

    async def win_allocate(
        self,
        count: int,
        dtype: np.dtype | type = np.float64,
        info: Info | Mapping[str, object] | None = None,
    ) -> Window:
        """Allocate ``count`` zeroed elements of ``dtype``; ``win.memory`` is the local array.

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
        physical = _physical_memory()
        if physical is not None and count * dtype.itemsize > physical:
            raise RmaMemoryError(
                f"win_allocate({count}, {dtype}) needs {count * dtype.itemsize} bytes; "
                f"this machine has {physical}"
            )
        info = as_info(info)
        call = ("win_allocate", count, dtype, info)
        return await self._collective_window(call, lambda: self._create(None, count, dtype, info))

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
        # _close frees the Comm's own window and drops every engine from the driver.
        sync = self._sync_window
        if sync is not None and self._driver.engines.get(sync.win_id) is not sync.engine:
            raise CommClosedError("this Comm is closed (its aiorma.run returned)")

    async def _create(
        self,
        buf: np.ndarray | None,
        count: int,
        dtype: np.dtype,
        info: Info,
        *,
        win_id: int | None = None,
        notify: bool = False,
    ) -> Window:
        if win_id is None:  # internal windows (the collectives' landing windows) bring their own id
            win_id = self._next_win_id
            self._next_win_id += 1
        observer = self.observer
        # The control region exists on every rank before any engine acts: window creation is
        # collective and zeroes it, so a faster peer's writes cannot be lost.
        words = ControlLayout(self.size).words
        layout = await self._endpoint.create_window(win_id, buf, count, dtype, words, notify=notify)
        engine = WindowEngine(
            win_id,
            self.rank,
            self.size,
            info,
            control=layout.control,
            history=self.history,
            observer=(lambda event: observer(win_id, event)) if observer is not None else None,
        )
        self._driver.add_engine(engine)
        engine.control_changed()  # a faster peer may have written already
        return Window(self, engine, layout.memory, layout.counts)

    # ------------------------------------------------------------------ collectives
    #
    # Every collective takes effect when called and returns a Request; any number may be in
    # flight, and they run in call order (the same on every rank).  They are built only on RMA:
    # landing windows, puts, flushes and monotonic flags (aiorma/collectives, docs/collectives.md).
    # Bad arguments raise at the call (RmaTypeError for buffers, RmaRangeError for a root,
    # RmaUsageError for options) and change nothing.  ``algorithm=`` overrides the choice of the
    # LogGP model; ``nodes=`` (one node label per rank) enables the node-leader algorithms.

    def barrier(self, *, algorithm: str | None = None, n: int | None = None) -> Request:
        """Completes once every rank has called barrier (as many times).  ``algorithm``:
        ``"nway"`` (n-way dissemination, ``n`` from the cost model unless given),
        ``"dissemination"`` (n = 1) or ``"fence"`` (a middle fence on an internal window)."""
        return self._collectives_state().barrier(algorithm=algorithm, n=n)

    def bcast(
        self,
        buf: np.ndarray,
        root: int = 0,
        *,
        algorithm: str | None = None,
        k: int | None = None,
        tree: Mapping[int, Sequence[int]] | None = None,
        topology: object = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Copy ``buf`` of ``root`` into ``buf`` everywhere.  ``algorithm``: ``"binomial"``,
        ``"knomial"`` (``k``), ``"scatter_allgather"``, ``"tree"`` (``tree={rank: [children]}``
        or ``topology=`` an :class:`aiorma.collectives.topology.Topology`), ``"hierarchical"``."""
        return self._collectives_state().bcast(
            buf, root, algorithm=algorithm, k=k, tree=tree, topology=topology, nodes=nodes
        )

    def reduce(
        self,
        send: np.ndarray,
        recv: np.ndarray | None,
        op: Op = Op.SUM,
        root: int = 0,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """``recv`` at ``root`` = every rank's ``send`` combined with ``op`` in rank order."""
        return self._collectives_state().reduce(send, recv, op, root, algorithm=algorithm, nodes=nodes)

    def allreduce(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        op: Op = Op.SUM,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """``recv`` everywhere = every rank's ``send`` combined with ``op`` in rank order."""
        return self._collectives_state().allreduce(send, recv, op, algorithm=algorithm, nodes=nodes)

    def allgather(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Block ``i`` of ``recv`` (``size`` blocks of ``send.size``) = rank ``i``'s ``send``."""
        return self._collectives_state().allgather(send, recv, algorithm=algorithm, nodes=nodes)

    def gather(
        self, send: np.ndarray, recv: np.ndarray | None, root: int = 0, *, algorithm: str | None = None
    ) -> Request:
        """Block ``i`` of ``recv`` at ``root`` = rank ``i``'s ``send``."""
        return self._collectives_state().gather(send, recv, root, algorithm=algorithm)

    def scatter(
        self, send: np.ndarray | None, recv: np.ndarray, root: int = 0, *, algorithm: str | None = None
    ) -> Request:
        """``recv`` on rank ``i`` = block ``i`` of ``send`` at ``root``."""
        return self._collectives_state().scatter(send, recv, root, algorithm=algorithm)

    def alltoall(self, send: np.ndarray, recv: np.ndarray, *, algorithm: str | None = None) -> Request:
        """Block ``j`` of ``send`` on rank ``i`` becomes block ``i`` of ``recv`` on rank ``j``."""
        return self._collectives_state().alltoall(send, recv, algorithm=algorithm)

    def _collectives_state(self) -> Collectives:
        if self._collectives is None:
            raise RmaUsageError("this Comm is not started (or already closed); obtain it from aiorma.run()")
        return self._collectives

    async def _start(self) -> None:
        self._sync_window = await self.win_allocate(0, np.uint8)
        self._sync_window.fence()
        self._collectives = await Collectives.start(self)

    async def _close(self) -> None:
        if self._collectives is not None:
            collectives, self._collectives = self._collectives, None
            await collectives.close()
        if self._sync_window is not None and not self._sync_window.freed:
            await self._sync_window.fence(MODE_NOSUCCEED)
            await self._sync_window.free()
        await self._driver.close()

    def __repr__(self) -> str:
        return f"<Comm rank {self.rank} of {self.size}>"

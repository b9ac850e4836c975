"""Comm: one rank's handle on a group of ranks; creates windows and runs collectives."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .constants import MODE_NOSUCCEED
from .engine.actions import EpochEvent
from .engine.window_engine import WindowEngine
from .errors import RmaTypeError, RmaUsageError
from .info import Info, as_info
from .progress import ProgressDriver
from .request import Request
from .transport.base import Endpoint
from .window import Window


class Comm:
    """A rank's view of its group: ``rank``, ``size``, window creation and collectives.

    Window creation and ``free`` are collective: every rank makes the same calls in the same order,
    as in MPI.  Obtain a Comm from :func:`aiorma.run`.
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._driver = ProgressDriver(endpoint)
        self.rank = endpoint.rank
        self.size = endpoint.size
        self._next_win_id = 1
        self._sync_window: Window | None = None
        self.history = False  # keep epoch events in new windows' engines (tests)
        #: Called as ``observer(win_id, event)`` for every epoch event of windows created after it
        #: is set (tracing); it runs inside engine calls and must not call aiorma.
        self.observer: Callable[[int, EpochEvent], None] | None = None

    async def win_create(self, buf: np.ndarray, info: Info | Mapping[str, object] | None = None) -> Window:
        """Expose the caller's array ``buf`` (any shape, C-contiguous, writeable).  ``disp``
        counts elements of ``buf.dtype`` in C order.  The array stays the caller's after free."""
        if not isinstance(buf, np.ndarray):
            raise RmaTypeError(f"win_create needs a numpy array, not {type(buf).__name__}")
        if not buf.flags.c_contiguous or not buf.flags.writeable:
            raise RmaTypeError("win_create needs a writeable, C-contiguous array")
        return await self._create(buf, buf.size, buf.dtype, as_info(info))

    async def win_allocate(
        self,
        count: int,
        dtype: np.dtype | type = np.float64,
        info: Info | Mapping[str, object] | None = None,
    ) -> Window:
        """Allocate ``count`` zeroed elements of ``dtype``; ``win.memory`` is the local array."""
        if not isinstance(count, int | np.integer) or count < 0:
            raise RmaUsageError(f"count must be a non-negative integer, not {count!r}")
        return await self._create(None, int(count), np.dtype(dtype), as_info(info))

    async def _create(self, buf: np.ndarray | None, count: int, dtype: np.dtype, info: Info) -> Window:
        win_id = self._next_win_id
        self._next_win_id += 1
        # The engine exists before the collective finishes: a faster peer may already send
        # packets for this window, and they must not be dropped as stale.
        observer = self.observer
        engine = WindowEngine(
            win_id,
            self.rank,
            self.size,
            info,
            history=self.history,
            observer=(lambda event: observer(win_id, event)) if observer is not None else None,
        )
        self._driver.add_engine(engine)
        try:
            layout = await self._endpoint.create_window(win_id, buf, count, dtype)
        except BaseException:
            self._driver.remove_engine(win_id)
            raise
        return Window(self, engine, layout.memory, layout.counts)

    # ------------------------------------------------------------------ collectives

    def barrier(self) -> Request:
        """Completes once every rank has called barrier (as many times).  It is a middle fence
        on an internal window whose fence epoch stays open between barriers: the engine's fence
        barrier semantics, one packet per peer, and any number may be in flight."""
        if self._sync_window is None:
            raise RmaUsageError("this Comm is not started; obtain it from aiorma.run()")
        return self._sync_window.fence()

    async def _start(self) -> None:
        self._sync_window = await self.win_allocate(0, np.uint8)
        self._sync_window.fence()

    async def _close(self) -> None:
        if self._sync_window is not None and not self._sync_window.freed:
            await self._sync_window.fence(MODE_NOSUCCEED)
            await self._sync_window.free()
        await self._driver.close()

    def __repr__(self) -> str:
        return f"<Comm rank {self.rank} of {self.size}>"

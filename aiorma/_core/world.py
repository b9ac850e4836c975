"""World: one rank's place in a group, below both the Comm and the collectives.

It owns what every window of the rank shares — the transport endpoint, the progress driver — and
makes windows: the application's (through :class:`~aiorma.Comm`) and the internal ones (the
Comm's sync window, the collectives' landing windows, which bring fixed ids).  The Comm and the
collectives use it through these public methods; neither imports the other's internals.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..constants import MODE_NOSUCCEED
from ..engine.actions import EpochEvent
from ..engine.control import ControlLayout
from ..engine.window_engine import WindowEngine
from ..errors import CommClosedError
from ..transport.base import Endpoint
from ..win_info import Info
from ..window import Window
from .driver import ProgressDriver
from .settings import Settings


class World:
    """One rank of a group: ``rank``, ``size``, the progress ``driver``, window creation.
    ``settings`` are the connection's switches (default: the environment's now)."""

    def __init__(self, endpoint: Endpoint, settings: Settings | None = None) -> None:
        self.endpoint = endpoint
        self.driver = ProgressDriver(endpoint, getattr(endpoint, "ranks_on_node", 1), settings)
        self.rank: int = endpoint.rank
        self.size: int = endpoint.size
        #: Whether the transport must be polled for progress (MPI) or reports by itself (local).
        self.polled: bool = endpoint.polled
        self._next_win_id = 1
        #: A window of one word per rank, under fence epochs: the Comm's barrier-by-fence, the
        #: mark of an open World (see :meth:`check_open`) and the count of collective calls
        #: compared at close (:meth:`closing`).  Created by :meth:`start`.
        self.sync_window: Window | None = None
        self.history = False  # keep epoch events in new windows' engines (tests)
        #: Called as ``observer(win_id, event)`` for every epoch event of windows created after it
        #: is set (tracing); it runs inside engine calls and must not call aiorma.
        self.observer: Callable[[int, EpochEvent], None] | None = None

    async def start(self) -> None:
        """Collective: create the sync window and open its first fence epoch."""
        # One word per rank: at close, every rank puts its number of collective calls there.
        self.sync_window = await self.create_window(None, self.size, np.dtype(np.int64), Info())
        self.sync_window.fence()

    def check_open(self) -> None:
        """Raise :class:`CommClosedError` once :meth:`close` or :meth:`abandon` has run."""
        sync = self.sync_window
        if sync is not None and self.driver.engines.get(sync.win_id) is not sync.engine:
            raise CommClosedError("this Comm is closed (its aiorma.run or connect block ended)")

    async def create_window(
        self,
        buf: np.ndarray | None,
        count: int,
        dtype: np.dtype,
        info: Info,
        *,
        win_id: int | None = None,
        notify: bool = False,
        peers_write_control: bool = True,
    ) -> Window:
        """Collective: a window over ``buf`` (``win_create``) or ``count`` new elements of
        ``dtype``.  Internal windows pass their fixed ``win_id`` (application windows count from
        1); ``notify`` rings a target after each flush towards it (flag windows);
        ``peers_write_control=False`` promises lock and lock_all with MODE_NOCHECK only (the
        engine refuses other epochs), so the transport never scans the control region."""
        if win_id is None:
            win_id = self._next_win_id
            self._next_win_id += 1
        observer = self.observer
        # The control region exists on every rank before any engine acts: window creation is
        # collective and zeroes it, so a faster peer's writes cannot be lost.
        words = ControlLayout(self.size).words
        layout = await self.endpoint.create_window(
            win_id, buf, count, dtype, words, notify=notify, watch_control=peers_write_control
        )
        engine = WindowEngine(
            win_id,
            self.rank,
            self.size,
            info,
            control=layout.control,
            history=self.history,
            observer=(lambda event: observer(win_id, event)) if observer is not None else None,
            io=self.driver.engine_io(win_id),
            peers_write_control=peers_write_control,
        )
        self.driver.add_engine(engine)
        engine.control_changed()  # a faster peer may have written already
        return Window(self.driver, self.endpoint, engine, layout.memory, layout.counts)

    async def closing(self, collectives_called: int) -> list[int]:
        """Collective, the first step of closing: close the sync window's fence epoch with this
        rank's number of collective calls put into every rank's word of it.  Completes once every
        rank has reached its close; returns each rank's number, by rank."""
        sync = self.sync_window
        assert sync is not None, "closing() after start()"
        called = np.array([collectives_called], np.int64)
        for peer in range(self.size):
            sync.put(called, peer, self.rank)
        await sync.fence(MODE_NOSUCCEED)
        return [int(n) for n in sync.memory]

    async def close(self) -> None:
        """Collective, after :meth:`closing`: free the sync window, then what the endpoint still
        holds, and stop progress (see :meth:`ProgressDriver.close`)."""
        sync = self.sync_window
        if sync is not None and not sync.freed:
            await sync.free()
        await self.driver.close()

    async def abandon(self, cause: BaseException | None = None) -> None:
        """Stop progress without anything collective (after a failure: ``cause``, which the
        peers are told)."""
        await self.driver.abandon(cause)

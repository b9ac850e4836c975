"""The ``local`` transport on a simulated cluster: RMA operations complete, and control writes are
noticed, at the times the cost model (:mod:`aiorma.sim.cost`) gives, on the virtual clock
(:mod:`aiorma.sim.clock`).  Real aiorma ranks (Comm, windows, the engine) run on it unchanged.
"""

from __future__ import annotations

import asyncio

import numpy as np

from ..collectives.topology import Topology
from ..engine.control import AtomicOp
from ..transport.base import RmaKind, RmaOp
from ..transport.local import LocalNetwork
from .clock import EventQueue
from .cost import CONTROL_BYTES, NetworkModel, NetworkParams, RankCounters


class SimNetwork(LocalNetwork):
    """The ``local`` transport on a simulated cluster: RMA operations complete, and control
    writes are noticed, at the times :class:`NetworkModel` gives.  Run ranks on it with
    :func:`run_simulated` (it needs a :class:`VirtualClockLoop` for meaningful times)."""

    def __init__(self, topology: Topology, params: NetworkParams | None = None) -> None:
        self.model = NetworkModel(topology, params)
        super().__init__(topology.size, op_delay=self._op_delay)
        self.events = EventQueue()

    @property
    def counters(self) -> list[RankCounters]:
        return self.model.counters

    def _op_delay(self, origin: int, op: RmaOp) -> float:
        now = asyncio.get_running_loop().time()
        # never 0: local.py applies zero-delay ops inside issue(), we want them on the clock
        return max(self.model.rma(origin, op, now) - now, 1e-12)

    def control_write(self, src: int, dest: int, win_id: int, index: int, op: AtomicOp, value: int) -> None:
        """A one-sided control write: it lands after the model's wire time, and the destination's
        engine acts on it once the destination's CPU has spent ``o`` noticing it."""
        now = asyncio.get_running_loop().time()
        self.model.counters[src].packets += 1
        arrival = self.model.send(src, dest, CONTROL_BYTES, now)
        self.events.at_fifo((src, dest, 0), arrival, self._landed, dest, win_id, index, op, value)

    def _landed(self, dest: int, win_id: int, index: int, op: AtomicOp, value: int) -> None:
        self._apply_write(dest, win_id, index, op, value, report=False)
        seen = self.model.receive(dest, asyncio.get_running_loop().time())
        self.events.at(seen, self._report_change, dest, win_id)

    def control_fetch(
        self, src: int, dest: int, win_id: int, token: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> int | None:
        """A fetching atomic on a control word costs what a fetch_and_op of one word costs."""
        now = asyncio.get_running_loop().time()
        word = np.zeros(1, np.int64)
        done = self.model.rma(src, RmaOp(RmaKind.FETCH_AND_OP, dest, 0, origin=word, result=word), now)
        self.events.at(done, self._fetch_done, src, dest, win_id, token, index, op, value, compare)
        return None

    def _fetch_done(
        self, src: int, dest: int, win_id: int, token: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> None:
        if self._control_of(dest, win_id) is None:
            return  # freed meanwhile
        old = self.apply_fetch(dest, win_id, index, op, value, compare)
        sink = self.endpoints[src].sink
        if sink is not None:
            sink.fetched(win_id, token, old)

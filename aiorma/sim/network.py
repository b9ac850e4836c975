"""A simulated network for the ``local`` transport, on a virtual clock.

Three parts, each small:

* :class:`NetworkParams` and :class:`NetworkModel` — a LogGP cost model of a two-level switched
  cluster (:class:`~aiorma.collectives.topology.Topology`: ranks on nodes, nodes on switches, link
  speeds) with per-rank counters.  The model only does arithmetic on times; it never sleeps.
* :class:`SimNetwork` — a :class:`~aiorma.transport.local.LocalNetwork` whose RMA operations and
  control writes take the model's time, so real aiorma ranks (the engine, windows, epochs) run on
  the simulated cluster: :func:`run_simulated`.
* :class:`VirtualClockLoop` — an asyncio event loop whose ``time()`` is virtual: when nothing is
  ready it jumps straight to the next timer.  Python work costs no simulated time; time passes only
  through the model's delays, so the CPU overhead ``o`` is charged explicitly.  Runs are
  deterministic: same program, same seed, same times.

The cost of one message of ``k`` bytes from rank ``p`` to rank ``q``, issued at time ``t``:

1. *send overhead*: ``p``'s CPU is busy for ``o`` (first come, first served):
   ``s = max(t, cpu[p])``, ``cpu[p] = s + o``.
2. same node: the data is in ``q``'s memory at ``s + o + L_intra_node + k * G_intra_node``.
3. otherwise the node's NIC injects it at ``i = max(s + o, nic[node p])`` and is busy for
   ``max(g, k / speed of p's link)``; it reaches ``q``'s memory at ``i + k / bottleneck + latency``,
   with latency ``L`` within a switch and ``L_inter_switch`` between switches and the bottleneck the
   slowest link on the path.  The fabric itself never queues (non-blocking switches).  Messages
   between one pair of ranks never overtake each other.
4. *receive overhead*: a rank learns of a message (handles a control packet, or sees a flag it
   polls) only after its CPU spent ``o`` on it, starting when it arrives: ``seen = max(arrival,
   cpu[q]) + o``.  This is charged at the arrival, in simulated-time order.

RMA operations need no receive overhead (the target CPU is not involved): a put or accumulate is
complete at its arrival; a get or a fetching atomic when the response is back (the target's NIC
answers at once).  A constant-cost multicast (seed 002) costs the sender ``o`` and one injection
and reaches every other rank ``multicast_latency`` later, each copy lost with probability
``multicast_loss`` drawn from the model's seeded generator.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import selectors
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import attrs
import numpy as np

from ..collectives.topology import Topology
from ..engine.control import AtomicOp
from ..runtime import run_ranks
from ..transport.base import RmaKind, RmaOp
from ..transport.local import LocalNetwork

T = TypeVar("T")

#: Bytes of a control write on the wire (one int64 word and its address).
CONTROL_BYTES = 16
#: Bytes of a get request or of a fetching atomic's response header.
REQUEST_BYTES = 16

_ATOMIC_KINDS = (
    RmaKind.ACCUMULATE,
    RmaKind.GET_ACCUMULATE,
    RmaKind.FETCH_AND_OP,
    RmaKind.COMPARE_AND_SWAP,
)
_FETCHING_KINDS = (RmaKind.GET_ACCUMULATE, RmaKind.FETCH_AND_OP, RmaKind.COMPARE_AND_SWAP)


def _non_negative(_instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, not {value!r}")


def _probability(_instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0 <= value < 1:
        raise ValueError(f"{attribute.name} must be in [0, 1), not {value!r}")


@attrs.frozen
class NetworkParams:
    """LogGP parameters (seconds, seconds per byte) of the simulated cluster.

    Defaults are InfiniBand-like: ``L`` and ``L_inter_switch`` follow seed 004's Table II (1.57 µs
    within a leaf switch, 2.45 µs across the spine).  ``G`` is the per-byte time of a link whose
    speed the topology does not give (12.5 GB/s).
    """

    L: float = attrs.field(default=1.5e-6, validator=_non_negative)
    o: float = attrs.field(default=0.4e-6, validator=_non_negative)
    g: float = attrs.field(default=0.6e-6, validator=_non_negative)
    G: float = attrs.field(default=0.08e-9, validator=_non_negative)
    L_inter_switch: float = attrs.field(default=2.5e-6, validator=_non_negative)
    L_intra_node: float = attrs.field(default=0.3e-6, validator=_non_negative)
    G_intra_node: float = attrs.field(default=0.05e-9, validator=_non_negative)
    multicast_latency: float = attrs.field(default=2.5e-6, validator=_non_negative)
    multicast_loss: float = attrs.field(default=0.0, validator=_probability)
    seed: int = 0


@attrs.define
class RankCounters:
    """What one rank sent: RMA operations by kind, control writes (``packets``), multicasts, bytes."""

    puts: int = 0
    gets: int = 0
    atomics: int = 0
    packets: int = 0
    multicasts: int = 0
    multicast_copies_lost: int = 0
    bytes_sent: int = 0


class NetworkModel:
    """The cost model's state: when each rank's CPU and each node's NIC are next free, the
    multicast loss generator, and per-rank counters.  All methods take the current simulated time
    ``now`` and return times; none of them waits.

    :meth:`send` may be called for any message at the moment it is issued; :meth:`receive` must be
    called at the moment the message arrives (it books the receiver's CPU in time order).
    """

    def __init__(self, topology: Topology, params: NetworkParams | None = None) -> None:
        self.topology = topology
        self.params = params or NetworkParams()
        self.size = topology.size
        self.cpu = [0.0] * self.size
        self.nic = [0.0] * topology.nodes
        self.counters = [RankCounters() for _ in range(self.size)]
        self.rng = np.random.default_rng(self.params.seed)
        self._last_arrival: dict[tuple[int, int], float] = {}
        nominal = math.inf if self.params.G == 0 else 1.0 / self.params.G
        self._link = [min(nominal, topology.link_speed(n)) for n in range(topology.nodes)]

    # ------------------------------------------------------------------ messages

    def send(self, src: int, dest: int, nbytes: int, now: float) -> float:
        """Book one message; return when its data is in ``dest``'s memory."""
        p = self.params
        self.counters[src].bytes_sent += nbytes
        start = max(now, self.cpu[src])
        posted = start + p.o
        self.cpu[src] = posted
        arrival = self._wire(src, dest, nbytes, posted)
        # Messages of one pair never overtake each other (one path, FIFO queues).
        key = (src, dest)
        arrival = max(arrival, self._last_arrival.get(key, 0.0))
        self._last_arrival[key] = arrival
        return arrival

    def _wire(self, src: int, dest: int, nbytes: int, posted: float) -> float:
        p, topo = self.params, self.topology
        a, b = topo.node(src), topo.node(dest)
        if a == b:
            return posted + p.L_intra_node + nbytes * p.G_intra_node
        inject = max(posted, self.nic[a])
        self.nic[a] = inject + max(p.g, nbytes / self._link[a])
        speed = min(self._link[a], self._link[b])
        same_switch = topo.switch_of_node[a] == topo.switch_of_node[b]
        if not same_switch:
            speed = min(
                speed, topo.spine_speed(topo.switch_of_node[a]), topo.spine_speed(topo.switch_of_node[b])
            )
        return inject + nbytes / speed + (p.L if same_switch else p.L_inter_switch)

    def receive(self, dest: int, now: float) -> float:
        """A message reached ``dest`` at ``now``: book ``o`` of its CPU; return when it is seen."""
        seen = max(now, self.cpu[dest]) + self.params.o
        self.cpu[dest] = seen
        return seen

    def multicast(self, src: int, dests: Sequence[int], nbytes: int, now: float) -> list[tuple[int, float]]:
        """Book one unreliable multicast; return ``(dest, arrival)`` for the copies not lost
        (seed 002: constant cost, whatever the group size)."""
        p = self.params
        counters = self.counters[src]
        counters.multicasts += 1
        counters.bytes_sent += nbytes
        start = max(now, self.cpu[src])
        posted = start + p.o
        self.cpu[src] = posted
        node = self.topology.node(src)
        inject = max(posted, self.nic[node])
        self.nic[node] = inject + max(p.g, nbytes / self._link[node])
        arrival = inject + nbytes / self._link[node] + p.multicast_latency
        draws = self.rng.random(len(dests))
        delivered = [(d, arrival) for d, x in zip(dests, draws, strict=True) if x >= p.multicast_loss]
        counters.multicast_copies_lost += len(dests) - len(delivered)
        return delivered

    # ------------------------------------------------------------------------ RMA

    def rma(self, origin: int, op: RmaOp, now: float) -> float:
        """Book one RMA operation issued at ``now``; return when it is complete (put/accumulate:
        data at the target; get and fetching atomics: result back at the origin)."""
        counters = self.counters[origin]
        if op.kind is RmaKind.PUT:
            counters.puts += 1
        elif op.kind is RmaKind.GET:
            counters.gets += 1
        elif op.kind in _ATOMIC_KINDS:
            counters.atomics += 1
        data = op.origin if op.origin is not None else op.result
        nbytes = int(data.nbytes) if data is not None else 0
        if op.kind is RmaKind.GET:
            at_target = self.send(origin, op.target, REQUEST_BYTES, now)
            return at_target + self._response(op.target, origin, nbytes)
        at_target = self.send(origin, op.target, nbytes, now)
        if op.kind in _FETCHING_KINDS:
            return at_target + self._response(op.target, origin, nbytes + REQUEST_BYTES)
        return at_target

    def _response(self, src: int, dest: int, nbytes: int) -> float:
        """Time for the target's NIC to return ``nbytes`` (no CPU, no queueing: see module doc)."""
        p, topo = self.params, self.topology
        a, b = topo.node(src), topo.node(dest)
        if a == b:
            return p.L_intra_node + nbytes * p.G_intra_node
        speed = min(self._link[a], self._link[b], topo.path_speed(src, dest))
        same_switch = topo.switch_of_node[a] == topo.switch_of_node[b]
        return nbytes / speed + (p.L if same_switch else p.L_inter_switch)

    def reset_counters(self) -> None:
        self.counters = [RankCounters() for _ in range(self.size)]


class EventQueue:
    """Simulated-time callbacks on one heap, driven by a single event-loop timer.

    Callbacks run in order of time, then of submission, so equal times keep FIFO order (asyncio's
    own timer heap does not promise that).  One heap of tuples is also much cheaper than one
    asyncio timer per message.  :meth:`at_fifo` additionally keeps a channel's callbacks in
    submission order even if a later one asks for an earlier time.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = math.inf
        self._last: dict[Any, float] = {}

    def at(self, when: float, callback: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), callback, args))
        if when < self._timer_when:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_when = when
            self._timer = asyncio.get_running_loop().call_at(when, self._fire)

    def at_fifo(self, channel: Any, when: float, callback: Callable[..., None], *args: Any) -> None:
        when = max(when, self._last.get(channel, when))
        self._last[channel] = when
        self.at(when, callback, *args)

    def _fire(self) -> None:
        self._timer, self._timer_when = None, math.inf
        heap = self._heap
        now = asyncio.get_running_loop().time()
        while heap and heap[0][0] <= now:
            _, _, callback, args = heapq.heappop(heap)
            callback(*args)  # may call at(), which arms the timer for its own time
        # the earliest pending event may precede whatever a callback armed the timer for
        if heap and heap[0][0] < self._timer_when:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_when = heap[0][0]
            self._timer = asyncio.get_running_loop().call_at(self._timer_when, self._fire)


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


# ------------------------------------------------------------------------- virtual clock


class SimulationStalled(RuntimeError):
    """The simulated program waits for something that can never happen: nothing is ready and no
    timer is pending (a deadlock).  Raised out of the event loop instead of hanging."""


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time.  ``time()`` starts at 0 and only moves when no callback
    is ready: then it jumps to the earliest timer.  Real I/O is still polled (without waiting).

    Our own ~20 lines rather than the ``looptime`` package: looptime's pytest plugin patches every
    pytest-asyncio loop of the whole test suite once installed, it spins no-op cycles before each
    jump, and when nothing is scheduled it waits in real time; here a deadlock raises
    :class:`SimulationStalled` at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0
        self._real_select = self._selector.select
        self._selector.select = self._select  # type: ignore[method-assign]

    def time(self) -> float:
        return self._virtual_now

    def _select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._real_select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise SimulationStalled("every task waits and no timer is pending: the simulation is deadlocked")
        self._virtual_now += timeout  # the loop asked to sleep until its next timer: be there now
        return events


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh :class:`VirtualClockLoop` and return its value."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(main)


def run_simulated(main: Callable[..., Awaitable[T]], network: SimNetwork, *args: Any) -> list[T]:
    """Run ``main(comm, *args)`` on every rank of ``network`` (real aiorma ranks: Comm, windows,
    engine) on a virtual clock; return the values, one per rank.  Like ``aiorma.run(...,
    transport="local")``: if a rank raises, the others are cancelled and the error propagates."""

    return run_virtual(run_ranks(main, args, network))

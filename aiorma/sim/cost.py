"""The cost model of the simulated cluster: LogGP parameters, and a two-level switched network
(:class:`~aiorma.collectives.topology.Topology`: ranks on nodes, nodes on switches, link speeds)
with per-rank counters.  The model only does arithmetic on times; it never sleeps.
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
answers at once).  A constant-cost multicast (Hoefler, Siebert and Rehm 2007) costs the sender ``o``
and one injection and reaches every other rank ``multicast_latency`` later, each copy lost with probability
``multicast_loss`` drawn from the model's seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ..collectives.model import LogGP
from ..collectives.topology import Topology
from ..transport.base import RmaKind, RmaOp

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

    Defaults are InfiniBand-like: ``L`` and ``L_inter_switch`` follow Table II of Subramoni et al. 2011
    (1.57 µs within a leaf switch, 2.45 µs across the spine).  ``G`` is the per-byte time of a link whose
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

    def loggp(self, flag_bytes: int = 8) -> LogGP:
        """These parameters as the library's one analytic cost model
        (:class:`aiorma.collectives.model.LogGP`, which the collectives select algorithms with),
        for ranks one per node within a switch: the latency includes a ``flag_bytes`` flag's time
        on the wire, a data message's extra cost ``d`` is 0 (its bytes cost ``G`` each)."""
        return LogGP(L=self.L + flag_bytes * self.G, o=self.o, g=self.g, G=self.G, d=0.0)


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
        (Hoefler, Siebert and Rehm (2007): constant cost, whatever the group size)."""
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

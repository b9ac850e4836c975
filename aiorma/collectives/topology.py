"""Cluster topology and topology-/speed-aware broadcast trees (Subramoni et al. (2011) and Mamidala (2008)).

Pure and free of I/O: a :class:`Topology` says where each rank runs (its node, each node's switch)
and how fast the links are; :func:`build_bcast_tree` turns it into a broadcast tree that a
collective walks, and :func:`count_inter_switch_edges` measures how much of a tree crosses switches.

A tree is a ``dict[int, list[int]]``: every rank of the tree is a key, mapped to its children in the
order the parent should send to them (largest subtree first).  Leaves map to ``[]``.

The aware tree is hierarchical (Mamidala's (2008) node leaders, one level up for switches): the root sends
to one leader per other switch, each switch leader to one leader per node of its switch, each node
leader to the other ranks of its node.  Every level is a binomial tree, so the depth stays
logarithmic, and the tree crosses between switches exactly ``switches - 1`` times — the fewest
possible.  Within a level the positions that forward the most (largest subtrees) go to the fastest
links and the slowest links end up at leaves (the speed-aware mapping of Subramoni et al. 2011:
the critical part of the tree gets the fastest links).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence

import attrs

Tree = dict[int, list[int]]


def _as_int_tuple(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _as_speeds(values: Iterable[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


@attrs.frozen
class Topology:
    """Where ranks run and how fast their links are (a two-level switched cluster).

    * ``node_of_rank[r]``: the node (host) of rank ``r``; ranks on one node share memory.
    * ``switch_of_node[n]``: the leaf switch that node ``n`` is cabled to; switches are joined by
      a spine, so a message between switches crosses more hops than one within a switch.
    * ``node_speed[n]``: speed of node ``n``'s link to its switch, in bytes per second (``None``:
      all links equal).  A message is as fast as the slowest link it crosses.
    * ``uplink_speed[s]``: speed of switch ``s``'s link to the spine (``None``: not a bottleneck).

    Raises ValueError at construction for inconsistent descriptions.
    """

    node_of_rank: tuple[int, ...] = attrs.field(converter=_as_int_tuple)
    switch_of_node: tuple[int, ...] = attrs.field(converter=_as_int_tuple)
    node_speed: tuple[float, ...] | None = attrs.field(default=None, converter=_as_speeds)
    uplink_speed: tuple[float, ...] | None = attrs.field(default=None, converter=_as_speeds)

    def __attrs_post_init__(self) -> None:
        if not self.node_of_rank:
            raise ValueError("a topology needs at least one rank")
        nodes = len(self.switch_of_node)
        bad = [n for n in self.node_of_rank if not 0 <= n < nodes]
        if bad:
            raise ValueError(f"node_of_rank names nodes {sorted(set(bad))} outside 0..{nodes - 1}")
        if any(s < 0 for s in self.switch_of_node):
            raise ValueError("switch numbers must be non-negative")
        if self.node_speed is not None:
            if len(self.node_speed) != nodes:
                raise ValueError(f"node_speed has {len(self.node_speed)} entries for {nodes} nodes")
            if not all(s > 0 and math.isfinite(s) for s in self.node_speed):
                raise ValueError("node speeds must be positive and finite")
        if self.uplink_speed is not None:
            if len(self.uplink_speed) != self.switches:
                raise ValueError(
                    f"uplink_speed has {len(self.uplink_speed)} entries for {self.switches} switches"
                )
            if not all(s > 0 for s in self.uplink_speed):
                raise ValueError("uplink speeds must be positive")

    @classmethod
    def flat(cls, size: int) -> Topology:
        """``size`` ranks, one per node, all nodes on one switch, equal links."""
        return cls(range(size), [0] * size)

    @property
    def size(self) -> int:
        """Number of ranks described."""
        return len(self.node_of_rank)

    @property
    def nodes(self) -> int:
        return len(self.switch_of_node)

    @property
    def switches(self) -> int:
        return max(self.switch_of_node) + 1

    def node(self, rank: int) -> int:
        return self.node_of_rank[rank]

    def switch(self, rank: int) -> int:
        return self.switch_of_node[self.node_of_rank[rank]]

    def link_speed(self, node: int) -> float:
        """Bytes per second of ``node``'s link to its switch (infinite when not described)."""
        return math.inf if self.node_speed is None else self.node_speed[node]

    def spine_speed(self, switch: int) -> float:
        return math.inf if self.uplink_speed is None else self.uplink_speed[switch]

    def path_speed(self, src: int, dest: int) -> float:
        """Bottleneck speed between two ranks: the slowest link on the way (infinite on one node)."""
        a, b = self.node(src), self.node(dest)
        if a == b:
            return math.inf
        speed = min(self.link_speed(a), self.link_speed(b))
        sa, sb = self.switch_of_node[a], self.switch_of_node[b]
        if sa != sb:
            speed = min(speed, self.spine_speed(sa), self.spine_speed(sb))
        return speed


# ------------------------------------------------------------------------------ tree helpers


def binomial_tree(order: Sequence[int]) -> Tree:
    """Binomial tree over ``order``; ``order[0]`` is the root.  Position ``v`` sends to
    ``v + 2^k`` for each ``k`` below the lowest set bit of ``v``, largest ``k`` (largest subtree)
    first — the classic MPI binomial broadcast on relative ranks."""
    m = len(order)
    tree: Tree = {rank: [] for rank in order}
    if len(tree) != m:
        raise ValueError("a tree's ranks must be distinct")
    top = 1
    while top < m:
        top *= 2
    for v in range(m):
        step = top // 2
        while step >= 1:
            if v % (2 * step) == 0 and v + step < m:
                tree[order[v]].append(order[v + step])
            step //= 2
    return tree


def default_bcast_tree(root: int, ranks: Iterable[int]) -> Tree:
    """The topology-blind tree: binomial on rank order, rotated so that ``root`` is first."""
    order = sorted(set(ranks))
    if root not in order:
        raise ValueError(f"root {root} is not one of the tree's ranks")
    i = order.index(root)
    return binomial_tree(order[i:] + order[:i])


def _subtree_sizes(m: int) -> list[int]:
    """Size of each position's subtree in a binomial tree over ``m`` positions."""
    sizes = [1] * m
    tree = binomial_tree(list(range(m)))
    for v in range(m - 1, -1, -1):
        sizes[v] += sum(sizes[c] for c in tree[v])
    return sizes


def _speed_ranked_binomial(first: int, others: Sequence[int], speed: Mapping[int, float]) -> Tree:
    """Binomial tree rooted at ``first`` over ``first`` and ``others``, where the positions with the
    largest subtrees (the ones that forward most, and early) get the fastest members and the
    slowest members become leaves.  Ties keep the given order, so equal speeds give the plain
    binomial tree on the given order."""
    m = len(others) + 1
    sizes = _subtree_sizes(m)
    # positions 1..m-1, most forwarding first (ties: the one nearer the root in the send order)
    positions = sorted(range(1, m), key=lambda v: (-sizes[v], v))
    order = [first] + [0] * (m - 1)
    taken = 0
    for value in sorted({speed[x] for x in others}, reverse=True):
        group = [x for x in others if speed[x] == value]  # equal speeds keep the given order
        slots = sorted(positions[taken : taken + len(group)])
        for pos, member in zip(slots, group, strict=True):
            order[pos] = member
        taken += len(group)
    return binomial_tree(order)


def _members(topology: Topology, root: int, ranks: Iterable[int] | None) -> list[int]:
    members = list(range(topology.size)) if ranks is None else [int(r) for r in ranks]
    if len(set(members)) != len(members):
        raise ValueError("ranks must be distinct")
    if not members:
        raise ValueError("a tree needs at least one rank")
    outside = [r for r in members if not 0 <= r < topology.size]
    if outside:
        raise ValueError(f"ranks {outside[:5]} are not in the topology of {topology.size} ranks")
    if root not in members:
        raise ValueError(f"root {root} is not one of the tree's ranks")
    return sorted(members)


def _group(topology: Topology, members: list[int]) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Ranks by node and nodes by switch, ascending (deterministic)."""
    ranks_of_node: dict[int, list[int]] = {}
    for r in members:
        ranks_of_node.setdefault(topology.node(r), []).append(r)
    nodes_of_switch: dict[int, list[int]] = {}
    for node in sorted(ranks_of_node):
        nodes_of_switch.setdefault(topology.switch_of_node[node], []).append(node)
    return ranks_of_node, nodes_of_switch


@attrs.frozen
class TreeCosts:
    """The cost model the builder plans with (seconds, bytes per second), LogGP-like.

    A parent that starts sending to a child at ``t`` can start its next send at ``t + busy`` —
    ``overhead`` (its CPU), at least ``gap`` between two messages leaving one node and, for a
    message of ``nbytes`` between nodes, ``nbytes / speed`` of its node's link — and the child holds
    the data at ``t + overhead + latency + nbytes / bottleneck speed`` (``latency_node`` on one
    node, ``latency_switch`` within a leaf switch, ``latency_inter_switch`` across the spine;
    include the receiver's own overhead in them).  ``bandwidth`` stands for links whose speed the
    topology does not give.  Defaults follow Subramoni et al.'s (2011) Table II (1.57 µs within a leaf switch,
    2.45 µs across the spine); a transport calibrates its own (see :mod:`aiorma.sim.bcast_topology`).
    """

    overhead: float = 0.5e-6
    gap: float = 0.5e-6
    latency_node: float = 0.3e-6
    latency_switch: float = 1.57e-6
    latency_inter_switch: float = 2.45e-6
    bandwidth: float = math.inf

    def _speed(self, topology: Topology, node: int) -> float:
        return min(self.bandwidth, topology.link_speed(node))

    def busy(self, topology: Topology, parent: int, child: int, nbytes: int) -> float:
        """How long sending to ``child`` keeps ``parent`` from sending again."""
        a = topology.node(parent)
        if a == topology.node(child):
            return self.overhead
        return max(self.overhead, self.gap, nbytes / self._speed(topology, a))

    def flight(self, topology: Topology, parent: int, child: int, nbytes: int) -> float:
        """From ``parent`` starting the send until ``child`` holds the data."""
        a, b = topology.node(parent), topology.node(child)
        if a == b:
            return self.overhead + self.latency_node
        same = topology.switch_of_node[a] == topology.switch_of_node[b]
        latency = self.latency_switch if same else self.latency_inter_switch
        speed = min(self.bandwidth, topology.path_speed(parent, child))
        return self.overhead + latency + nbytes / speed


def predicted_bcast_time(
    tree: Mapping[int, Sequence[int]],
    topology: Topology,
    root: int,
    nbytes: int = 0,
    costs: TreeCosts | None = None,
) -> float:
    """When the last rank holds the data, under :class:`TreeCosts` (parents send in list order)."""
    costs = costs or TreeCosts()
    ready = {root: 0.0}
    frontier = [root]
    while frontier:
        nxt = []
        for parent in frontier:
            t = ready[parent]
            for child in tree[parent]:
                ready[child] = t + costs.flight(topology, parent, child, nbytes)
                t += costs.busy(topology, parent, child, nbytes)
                nxt.append(child)
        frontier = nxt
    return max(ready.values())


def greedy_bcast_tree(
    topology: Topology,
    root: int,
    ranks: Iterable[int] | None = None,
    nbytes: int = 0,
    costs: TreeCosts | None = None,
) -> Tree:
    """A postal-model schedule with topology constraints.  Every rank that holds the data keeps
    sending, in time order, each time to the farthest region still without data: first a switch
    none of whose ranks has it (its fastest node), then a node of its own switch (fastest first),
    then a rank of its own node.  A switch and a node are each entered once, so the tree has the
    fewest possible inter-switch and inter-node edges; the fan-out adapts to latency versus
    overhead (high latency: wide trees) and slow links end up late and as leaves."""
    costs = costs or TreeCosts()
    members = _members(topology, root, ranks)
    ranks_of_node, nodes_of_switch = _group(topology, members)
    waiting = {n: [r for r in rs if r != root] for n, rs in ranks_of_node.items()}  # per node, ascending
    speed = {n: topology.link_speed(n) for n in ranks_of_node}
    root_node = topology.node(root)
    # nodes of each switch not entered yet, fastest first
    closed = {
        w: sorted((n for n in nodes if n != root_node), key=lambda n: (-speed[n], n))
        for w, nodes in nodes_of_switch.items()
    }
    open_switches = {topology.switch_of_node[root_node]}
    tree: Tree = {r: [] for r in members}
    queue: list[tuple[float, int, int]] = [(0.0, 0, root)]  # (free at, tie-break, rank)
    order = 1
    left = len(members) - 1
    while left and queue:
        free, _, sender = heapq.heappop(queue)
        target = _next_target(topology, sender, waiting, closed, open_switches, free, nbytes, costs)
        if target is None:
            continue  # nothing left that this rank may serve
        node = topology.node(target)
        if node != topology.node(sender):
            open_switches.add(topology.switch_of_node[node])
            closed[topology.switch_of_node[node]].remove(node)
        waiting[node].remove(target)
        tree[sender].append(target)
        left -= 1
        heapq.heappush(queue, (free + costs.busy(topology, sender, target, nbytes), order, sender))
        heapq.heappush(queue, (free + costs.flight(topology, sender, target, nbytes), order + 1, target))
        order += 2
    return tree


def _next_target(
    topology: Topology,
    sender: int,
    waiting: Mapping[int, list[int]],
    closed: Mapping[int, list[int]],
    open_switches: set[int],
    free: float,
    nbytes: int,
    costs: TreeCosts,
) -> int | None:
    """The rank ``sender`` serves next: farthest region first (see :func:`greedy_bcast_tree`)."""
    best: tuple[float, int] | None = None
    for switch, nodes in closed.items():
        if switch in open_switches or not nodes:
            continue
        candidate = waiting[nodes[0]][0]
        arrival = free + costs.flight(topology, sender, candidate, nbytes)
        if best is None or (arrival, candidate) < best:
            best = (arrival, candidate)
    if best is not None:
        return best[1]
    own = closed[topology.switch(sender)]
    if own:
        return waiting[own[0]][0]
    mates = waiting[topology.node(sender)]
    return mates[0] if mates else None


def build_bcast_tree(
    topology: Topology,
    root: int,
    ranks: Iterable[int] | None = None,
    *,
    nbytes: int = 0,
    costs: TreeCosts | None = None,
) -> Tree:
    """Topology- and speed-aware broadcast tree over ``ranks`` (default: every rank) rooted at
    ``root``, for messages of ``nbytes``.  Every rank of ``ranks`` appears exactly once; children
    lists are in send order.  Each switch and each node is entered by exactly one edge, so the
    tree crosses switches ``switches - 1`` times.

    Of :func:`greedy_bcast_tree` and :func:`hierarchical_bcast_tree` it returns the one that
    :func:`predicted_bcast_time` finds faster under ``costs`` (the hierarchical one on a tie).
    Raises ValueError, building nothing, when ``root`` or a rank is not in the topology or ranks
    repeat.
    """
    costs = costs or TreeCosts()
    hierarchical = hierarchical_bcast_tree(topology, root, ranks)
    greedy = greedy_bcast_tree(topology, root, ranks, nbytes, costs)
    if predicted_bcast_time(greedy, topology, root, nbytes, costs) < predicted_bcast_time(
        hierarchical, topology, root, nbytes, costs
    ):
        return greedy
    return hierarchical


def hierarchical_bcast_tree(topology: Topology, root: int, ranks: Iterable[int] | None = None) -> Tree:
    """Subramoni et al.'s (2011) mapping on Mamidala's (2008) hierarchy: root → one leader per other
    switch → one leader per other node of that switch → the other ranks of that node, a binomial
    tree at each level.
    The root leads its own node and switch; elsewhere a node's leader is its lowest rank and a
    switch's leader its fastest node.  Within a level the positions with the largest subtrees go
    to the fastest links.  A leader sends to its farthest children first."""
    members = _members(topology, root, ranks)
    ranks_of_node, nodes_of_switch = _group(topology, members)

    root_node = topology.node(root)
    root_switch = topology.switch_of_node[root_node]
    node_leader = {n: (root if n == root_node else rs[0]) for n, rs in ranks_of_node.items()}
    node_speed = {n: topology.link_speed(n) for n in ranks_of_node}

    def switch_leader_node(switch: int) -> int:
        if switch == root_switch:
            return root_node
        # fastest node of the switch (min() keeps the lowest-numbered among equals)
        return min(nodes_of_switch[switch], key=lambda n: (-node_speed[n], n))

    tree: Tree = {r: [] for r in members}

    # Level 1: between switches.  A switch's speed towards the others is its uplink, bounded by
    # its leader node's own link.
    switch_leaders = {s: switch_leader_node(s) for s in nodes_of_switch}
    others = [s for s in sorted(nodes_of_switch) if s != root_switch]
    reach = {s: min(topology.spine_speed(s), node_speed[switch_leaders[s]]) for s in nodes_of_switch}
    for parent, kids in _speed_ranked_binomial(root_switch, others, reach).items():
        tree[node_leader[switch_leaders[parent]]].extend(node_leader[switch_leaders[k]] for k in kids)

    # Level 2: between the nodes of one switch.
    for switch, nodes in nodes_of_switch.items():
        lead = switch_leaders[switch]
        rest = [n for n in nodes if n != lead]
        for parent, kids in _speed_ranked_binomial(lead, rest, node_speed).items():
            tree[node_leader[parent]].extend(node_leader[k] for k in kids)

    # Level 3: within a node (shared memory: all equally fast).
    for node, node_ranks in ranks_of_node.items():
        lead = node_leader[node]
        rest = [r for r in node_ranks if r != lead]
        for parent, kids in binomial_tree([lead, *rest]).items():
            tree[parent].extend(kids)
    return tree


def validate_tree(tree: Mapping[int, Sequence[int]], root: int, ranks: Iterable[int]) -> None:
    """Raise ValueError unless ``tree`` spans exactly ``ranks`` from ``root``: every rank is a key,
    every rank but the root is some rank's child exactly once, and all are reachable from the root."""
    expected = set(ranks)
    if set(tree) != expected:
        raise ValueError("the tree's keys are not exactly the ranks")
    if root not in expected:
        raise ValueError(f"root {root} is not one of the ranks")
    parents: dict[int, int] = {}
    for parent, children in tree.items():
        for child in children:
            if child not in expected:
                raise ValueError(f"child {child} of {parent} is not one of the ranks")
            if child == root or child in parents:
                raise ValueError(f"rank {child} is reached more than once")
            parents[child] = parent
    seen, frontier = {root}, [root]
    while frontier:
        nxt = [c for p in frontier for c in tree[p]]
        seen.update(nxt)
        frontier = nxt
    if seen != expected:
        raise ValueError(f"ranks {sorted(expected - seen)[:5]} are not reachable from the root")


def count_inter_switch_edges(tree: Mapping[int, Sequence[int]], topology: Topology) -> int:
    """Number of parent→child edges whose two ranks sit on different switches."""
    return sum(
        1
        for parent, children in tree.items()
        for child in children
        if topology.switch(parent) != topology.switch(child)
    )


def count_inter_node_edges(tree: Mapping[int, Sequence[int]], topology: Topology) -> int:
    """Number of parent→child edges whose two ranks sit on different nodes."""
    return sum(
        1
        for parent, children in tree.items()
        for child in children
        if topology.node(parent) != topology.node(child)
    )


def tree_depth(tree: Mapping[int, Sequence[int]], root: int) -> int:
    """Number of edges on the longest root-to-leaf path."""
    depth, frontier = 0, list(tree[root])
    while frontier:
        depth += 1
        frontier = [c for p in frontier for c in tree[p]]
    return depth

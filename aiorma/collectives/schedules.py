"""Communication schedules of the collective algorithms: pure functions of indices, no I/O.

Algorithms work on a *group*: a sequence of distinct global ranks (the whole Comm, a node, the
node leaders).  Positions in the group are "indices"; trees are rooted at an index and numbered
by *relative* index ``v = (index - root) mod m``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import RmaRangeError, RmaUsageError


def nway_distances(size: int, n: int) -> list[list[int]]:
    """Peer distances of the n-way dissemination barrier (Hoefler et al., 2006), one list per round.

    In round ``r`` rank ``p`` signals ``p + i·(n+1)^r`` and waits for ``p − i·(n+1)^r``
    (mod ``size``) for ``i = 1..n``; a distance ``≥ size`` would only repeat news and is left
    out.  There are ``ceil(log_{n+1} size)`` rounds; ``n = 1`` is the dissemination barrier.
    """
    if n < 1:
        raise RmaUsageError(f"n-way dissemination needs n >= 1, not {n}")
    rounds = []
    span = 1
    while span < size:
        rounds.append([i * span for i in range(1, n + 1) if i * span < size])
        span *= n + 1
    return rounds


def knomial_parent(v: int, k: int) -> int | None:
    """Parent of relative index ``v`` in a k-nomial tree (``v`` with its lowest non-zero
    base-``k`` digit cleared); None for the root."""
    if v == 0:
        return None
    span = 1
    while v % (span * k) == 0:
        span *= k
    return v - ((v // span) % k) * span


def knomial_children(v: int, size: int, k: int) -> list[int]:
    """Children of relative index ``v`` in a k-nomial tree over ``size`` indices, largest
    subtree first (the order in which to send)."""
    spans = []
    span = 1
    while span < size and v % (span * k) == 0:
        spans.append(span)
        span *= k
    return [v + d * s for s in reversed(spans) for d in range(1, k) if v + d * s < size]


def binomial_subtree(v: int, size: int) -> int:
    """Number of indices in the binomial (k=2) subtree of relative index ``v``: ``[v, v+n)``."""
    if v == 0:
        return size
    return min(v & -v, size - v)


def split(total: int, parts: int) -> tuple[list[int], list[int]]:
    """Split ``total`` items into ``parts`` nearly equal blocks: (offsets, counts)."""
    base, extra = divmod(total, parts)
    counts = [base + (1 if i < extra else 0) for i in range(parts)]
    offsets = [0] * parts
    for i in range(1, parts):
        offsets[i] = offsets[i - 1] + counts[i - 1]
    return offsets, counts


def largest_power_of_two(n: int) -> int:
    """The largest power of two ``<= n`` (n >= 1)."""
    return 1 << (n.bit_length() - 1)


def tree_parent_children(
    tree: Mapping[int, Sequence[int]], root: int, rank: int
) -> tuple[int | None, list[int]]:
    """This rank's parent and children in an explicit tree (children lists per rank)."""
    parent = None
    for node, children in tree.items():
        if rank in children:
            parent = node
            break
    return parent, [int(c) for c in tree.get(rank, ())]


def check_tree(tree: object, root: int, size: int) -> dict[int, list[int]]:
    """Validate a broadcast tree given as ``{rank: [children...]}`` spanning ranks ``0..size-1``
    from ``root``; return it normalised (every rank a key, plain ints).  Raises RmaUsageError
    (RmaRangeError for ranks outside the Comm) without side effects."""
    if not isinstance(tree, Mapping):
        raise RmaUsageError(f"tree must be a mapping {{rank: [children]}}, not {type(tree).__name__}")
    normal: dict[int, list[int]] = {r: [] for r in range(size)}
    parents: dict[int, int] = {}
    for node, children in tree.items():
        node = _rank_in(node, size, "tree node")
        try:
            kids = [_rank_in(c, size, "tree child") for c in children]
        except TypeError:
            raise RmaUsageError(f"children of {node} must be a sequence of ranks") from None
        for child in kids:
            if child == root or child in parents:
                raise RmaUsageError(f"rank {child} is reached more than once in the tree")
            parents[child] = node
        normal[node] = normal[node] + kids
    seen, frontier = {root}, [root]
    while frontier:
        frontier = [c for p in frontier for c in normal[p]]
        seen.update(frontier)
    if len(seen) != size:
        missing = sorted(set(range(size)) - seen)
        raise RmaUsageError(f"ranks {missing[:8]} are not reached from root {root} by the tree")
    return normal


def _rank_in(value: object, size: int, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise RmaUsageError(f"{what} {value!r} is not an integer rank")
    rank = int(value)  # type: ignore[call-overload]
    if not 0 <= rank < size:
        raise RmaRangeError(f"{what} {rank} is outside the Comm of {size} ranks")
    return rank


def node_groups(nodes: Sequence[object]) -> list[list[int]]:
    """Ranks grouped by node label, each group in rank order, groups ordered by their lowest rank.
    The first rank of a group is that node's leader."""
    groups: dict[object, list[int]] = {}
    for rank, label in enumerate(nodes):
        groups.setdefault(label, []).append(rank)
    return list(groups.values())

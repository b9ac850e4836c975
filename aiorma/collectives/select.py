"""Which algorithm a collective uses when the caller does not say.

Flat algorithms are ranked by the LogGP model (:mod:`.model`) for the message size and the
number of ranks; the cheapest eligible one wins (ties go to the first listed).  Node-leader
algorithms are not in the model — it has one latency for every pair — so they are chosen by
rule: whenever the node map is known (``nodes=`` given, or discovered earlier by an explicit
``algorithm="hierarchical"`` call) and has at least two nodes, one of which holds two or more
ranks; that is when seed 000's hierarchy saves inter-node messages.

Selection runs when the collective *starts* on a rank (after every earlier collective of the
Comm), from parameters that are identical on every rank, so all ranks pick the same algorithm.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from . import model as m
from .model import LogGP
from .reduce_ops import is_commutative

BARRIER = ("nway", "dissemination", "fence")
BCAST = ("binomial", "knomial", "scatter_allgather", "tree", "hierarchical")
REDUCE = ("binomial", "reduce_scatter_gather", "hierarchical")
ALLREDUCE = ("recursive_doubling", "ring", "hierarchical")
ALLGATHER = ("ring", "recursive_doubling", "bruck", "hierarchical")
GATHER = ("direct", "binomial")
SCATTER = ("direct", "binomial")
ALLTOALL = ("direct", "pairwise")

#: Algorithms that need a commutative op (every op but REPLACE and NO_OP).
NEEDS_COMMUTATIVE = {"ring", "reduce_scatter_gather", "hierarchical"}


def useful_hierarchy(groups: Sequence[Sequence[int]] | None) -> bool:
    return groups is not None and len(groups) > 1 and any(len(g) > 1 for g in groups)


def _cheapest(options: dict[str, Callable[[], float]]) -> str:
    best, best_cost = "", float("inf")
    for name, cost in options.items():
        value = cost()
        if value < best_cost:
            best, best_cost = name, value
    return best


def barrier(p: LogGP, size: int) -> int:
    """The ``n`` of the n-way dissemination barrier."""
    return m.best_nway(p, size)


def bcast(
    p: LogGP, size: int, nbytes: int, slot: int, groups: Sequence[Sequence[int]] | None
) -> tuple[str, int]:
    """(algorithm, k) for a broadcast."""
    if useful_hierarchy(groups):
        return "hierarchical", 2
    return _flat_bcast(p, size, nbytes, slot)


@functools.lru_cache(maxsize=1024)
def _flat_bcast(p: LogGP, size: int, nbytes: int, slot: int) -> tuple[str, int]:
    options: dict[str, Callable[[], float]] = {
        f"knomial{k}": (lambda k=k: m.bcast_knomial(p, size, nbytes, k, slot)) for k in (2, 3, 4)
    }
    if size > 2:
        options["scatter_allgather"] = lambda: m.bcast_scatter_allgather(p, size, nbytes, slot)
    name = _cheapest(options)
    if name.startswith("knomial"):
        return "knomial", int(name.removeprefix("knomial"))
    return name, 2


def reduce(
    p: LogGP, size: int, nbytes: int, slot: int, op: object, groups: Sequence[Sequence[int]] | None
) -> str:
    commutative = is_commutative(op)  # type: ignore[arg-type]
    if commutative and useful_hierarchy(groups):
        return "hierarchical"
    options: dict[str, Callable[[], float]] = {"binomial": lambda: m.reduce_binomial(p, size, nbytes, slot)}
    if commutative and size > 2:
        options["reduce_scatter_gather"] = lambda: m.reduce_scatter_gather(p, size, nbytes, slot)
    return _cheapest(options)


def allreduce(p: LogGP, size: int, nbytes: int, op: object, groups: Sequence[Sequence[int]] | None) -> str:
    commutative = is_commutative(op)  # type: ignore[arg-type]
    if commutative and useful_hierarchy(groups):
        return "hierarchical"
    return _flat_allreduce(p, size, nbytes, commutative)


@functools.lru_cache(maxsize=1024)
def _flat_allreduce(p: LogGP, size: int, nbytes: int, commutative: bool) -> str:
    options: dict[str, Callable[[], float]] = {
        "recursive_doubling": lambda: m.allreduce_recursive_doubling(p, size, nbytes)
    }
    if commutative and size > 2:
        options["ring"] = lambda: m.allreduce_ring(p, size, nbytes)
    return _cheapest(options)


def allgather(p: LogGP, size: int, block: int, slot: int, groups: Sequence[Sequence[int]] | None) -> str:
    if useful_hierarchy(groups):
        return "hierarchical"
    options: dict[str, Callable[[], float]] = {}
    if size & (size - 1) == 0:
        options["recursive_doubling"] = lambda: m.allgather_recursive_doubling(p, size, block)
    options["bruck"] = lambda: m.allgather_bruck(p, size, block)
    options["ring"] = lambda: m.allgather_ring(p, size, block, slot)
    return _cheapest(options)


def gather(p: LogGP, size: int, block: int) -> str:
    return _cheapest(
        {
            "direct": lambda: m.gather_direct(p, size, block),
            "binomial": lambda: m.gather_binomial(p, size, block),
        }
    )


def alltoall(p: LogGP, size: int, block: int) -> str:
    return _cheapest(
        {
            "direct": lambda: m.alltoall_direct(p, size, block),
            "pairwise": lambda: m.alltoall_pairwise(p, size, block),
        }
    )

"""The algorithms of each collective, as one table per collective, and how one is chosen.

Each table maps an algorithm's name (what ``algorithm=`` accepts) to an :class:`Algorithm`: the
schedule that runs it, its LogGP cost (:mod:`.model`), and when it applies.  The same table
serves validation (the names), selection (:func:`choose`) and dispatch (``table[name].run``).

Choosing, when the caller does not say: node-leader algorithms are not in the model — it has one
latency for every pair — so ``"hierarchical"`` wins by rule whenever it is eligible: the node map
is known (``nodes=`` given, or discovered by an earlier explicit ``algorithm="hierarchical"``
call) and has at least two nodes, one of which holds two or more ranks, which is when Mamidala's (2008)
hierarchy saves inter-node messages.  Otherwise the cheapest eligible algorithm with a cost wins
(ties go to the first listed); algorithms without a cost run only on request.

Selection runs when the collective *starts* on a rank (after every earlier collective of the
Comm), from a :class:`Case` that is identical on every rank, so all ranks pick the same algorithm.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import numpy as np

from . import model as m
from .barrier import nway_barrier
from .bcast import (
    hierarchical_bcast,
    knomial_bcast,
    scatter_allgather_bcast,
    scatter_allgather_direct_bcast,
    tree_bcast,
)
from .exchange import Program
from .gather import (
    binomial_gather,
    binomial_scatter,
    bruck_allgather,
    direct_allgather,
    direct_alltoall,
    direct_gather,
    direct_scatter,
    hierarchical_allgather,
    pairwise_alltoall,
    recursive_doubling_allgather,
    ring_allgather,
)
from .landing import Landing
from .model import LogGP
from .programs import (
    binomial_gather_program,
    binomial_scatter_program,
    bruck_allgather_program,
    direct_allgather_program,
    direct_alltoall_program,
    direct_gather_program,
    direct_scatter_program,
    pairwise_alltoall_program,
    recursive_doubling_allgather_program,
    ring_allgather_program,
)
from .reduce import (
    binomial_reduce,
    direct_allreduce,
    halving_doubling_allreduce,
    hierarchical_allreduce,
    hierarchical_reduce,
    recursive_doubling_allreduce,
    reduce_scatter_gather,
    ring_allreduce,
)

Groups = Sequence[Sequence[int]]


@attrs.frozen
class Case:
    """What the choice depends on; identical on every rank."""

    size: int
    nbytes: int = 0  #: the message (bcast, reduce, allreduce) or one block (gathers, alltoall)
    slot: int = 0  #: landing slot bytes
    commutative: bool = True
    hierarchy: bool = False  #: a useful node map is known (see :func:`useful_hierarchy`)


@attrs.frozen
class Call:
    """Everything but the buffers that a schedule needs: passed to ``Algorithm.run``."""

    landing: Landing
    everyone: list[int]
    root: int = 0
    op: Any = None
    groups: Groups | None = None
    k: int = 2  #: the tree's fan-out, or the barrier's n
    links: tuple[Any, ...] = ()  #: (parent, children) of an explicit bcast tree


def _always(case: Case) -> bool:
    return True


@attrs.frozen
class Algorithm:
    """One algorithm of a collective.

    ``run(call, *buffers)`` runs it (the buffers are the collective's own, see each table);
    ``cost(model, case, k)`` predicts its time (None: never chosen by the model); ``tune``
    lists the fan-outs ``k`` worth trying (the cheapest is used); ``eligible(case)`` says
    whether the model may choose it; ``commutative``: it combines out of rank order;
    ``program(group, rank, root)``: its exchange program, for the gather family's algorithms
    that are one (the Comm binds and runs it without ``run``'s wrapper)."""

    run: Callable[..., Awaitable[None]] | None
    cost: Callable[[LogGP, Case, int], float] | None = None
    eligible: Callable[[Case], bool] = _always
    tune: tuple[int, ...] = (2,)
    commutative: bool = False
    program: Callable[[Sequence[int], int, int], Program] | None = None


def useful_hierarchy(groups: Groups | None) -> bool:
    return groups is not None and len(groups) > 1 and any(len(g) > 1 for g in groups)


def _hierarchical(case: Case) -> bool:
    return case.hierarchy


def _more_than_two(case: Case) -> bool:
    return case.size > 2


def _commutative_and(condition: Callable[[Case], bool]) -> Callable[[Case], bool]:
    return lambda case: case.commutative and condition(case)


def _power_of_two(case: Case) -> bool:
    return case.size & (case.size - 1) == 0


# --------------------------------------------------------------------------------- the tables
# run(call) for the barrier; run(call, view) for bcast (the buffer as bytes); run(call, acc) for
# reduce (combined in place); run(call, src, out) for allreduce; run(call, out, block) for
# allgather; run(call, out, mine) for gather; run(call, src, mine) for scatter;
# run(call, src, out, block) for alltoall.

BARRIER: dict[str, Algorithm] = {
    "nway": Algorithm(
        lambda c: nway_barrier(c.landing, c.k),
        cost=lambda p, case, n: m.barrier_nway(p, case.size, n),
        tune=tuple(range(1, 9)),
    ),
    "dissemination": Algorithm(lambda c: nway_barrier(c.landing, 1)),
    "fence": Algorithm(None),  # a middle fence on the sync window, run by the API itself
}


async def _allreduce_in_place(
    schedule: Callable[..., Awaitable[None]], c: Call, src: np.ndarray, out: np.ndarray, *args: Any
) -> None:
    if not np.may_share_memory(src, out):
        out[...] = src  # the ring and the node reduce combine in place, in ``out``
    await schedule(c.landing, out, c.op, *args)


BCAST: dict[str, Algorithm] = {
    "binomial": Algorithm(lambda c, v: knomial_bcast(c.landing, v, c.everyone, c.root, 2)),
    "knomial": Algorithm(
        lambda c, v: knomial_bcast(c.landing, v, c.everyone, c.root, c.k),
        cost=lambda p, case, k: m.bcast_knomial(p, case.size, case.nbytes, k, case.slot),
        tune=(2, 3, 4),
    ),
    "scatter_allgather": Algorithm(
        lambda c, v: scatter_allgather_bcast(c.landing, v, c.everyone, c.root),
        cost=lambda p, case, k: m.bcast_scatter_allgather(p, case.size, case.nbytes, case.slot),
        eligible=_more_than_two,
    ),
    "scatter_allgather_direct": Algorithm(
        lambda c, v: scatter_allgather_direct_bcast(c.landing, v, c.everyone, c.root),
        eligible=_more_than_two,
    ),
    "tree": Algorithm(lambda c, v: tree_bcast(c.landing, v, *c.links)),
    "hierarchical": Algorithm(
        lambda c, v: hierarchical_bcast(c.landing, v, c.groups, c.root, c.k), eligible=_hierarchical
    ),
}

REDUCE: dict[str, Algorithm] = {
    "binomial": Algorithm(
        lambda c, acc: binomial_reduce(c.landing, acc, c.op, c.everyone, c.root),
        cost=lambda p, case, k: m.reduce_binomial(p, case.size, case.nbytes, case.slot),
    ),
    "reduce_scatter_gather": Algorithm(
        lambda c, acc: reduce_scatter_gather(c.landing, acc, c.op, c.everyone, c.root),
        cost=lambda p, case, k: m.reduce_scatter_gather(p, case.size, case.nbytes, case.slot),
        eligible=_commutative_and(_more_than_two),
        commutative=True,
    ),
    "hierarchical": Algorithm(
        lambda c, acc: hierarchical_reduce(c.landing, acc, c.op, c.groups, c.root),
        eligible=_commutative_and(_hierarchical),
        commutative=True,
    ),
}

ALLREDUCE: dict[str, Algorithm] = {
    "recursive_doubling": Algorithm(
        lambda c, src, out: recursive_doubling_allreduce(c.landing, src, out, c.op, c.everyone),
        cost=lambda p, case, k: m.allreduce_recursive_doubling(p, case.size, case.nbytes),
    ),
    "ring": Algorithm(
        lambda c, src, out: _allreduce_in_place(ring_allreduce, c, src, out, c.everyone),
        cost=lambda p, case, k: m.allreduce_ring(p, case.size, case.nbytes),
        eligible=_commutative_and(_more_than_two),
        commutative=True,
    ),
    # On request only: on this project's 2-core machine it was the best at 2 and 4 ranks and lost
    # at 8 (docs/benchmarks.md), and the model, which charges nothing for ranks sharing a core,
    # would pick it at 8 ranks and 1 MiB, where it lost, and not at 4 ranks and 4 MiB.
    "halving_doubling": Algorithm(
        lambda c, src, out: halving_doubling_allreduce(c.landing, src, out, c.op, c.everyone),
        eligible=_commutative_and(_more_than_two),
        commutative=True,
    ),
    "direct": Algorithm(
        lambda c, src, out: _allreduce_in_place(direct_allreduce, c, src, out, c.everyone),
        cost=lambda p, case, k: m.allreduce_direct(p, case.size, case.nbytes),
        eligible=_commutative_and(_more_than_two),
        commutative=True,
    ),
    "hierarchical": Algorithm(
        lambda c, src, out: _allreduce_in_place(hierarchical_allreduce, c, src, out, c.groups, 2),
        eligible=_commutative_and(_hierarchical),
        commutative=True,
    ),
}

ALLGATHER: dict[str, Algorithm] = {
    "recursive_doubling": Algorithm(
        lambda c, out, block: recursive_doubling_allgather(c.landing, out, block, c.everyone),
        cost=lambda p, case, k: m.allgather_recursive_doubling(p, case.size, case.nbytes),
        eligible=_power_of_two,
        program=lambda group, rank, _root: recursive_doubling_allgather_program(group, rank),
    ),
    "bruck": Algorithm(
        lambda c, out, block: bruck_allgather(c.landing, out, block, c.everyone),
        cost=lambda p, case, k: m.allgather_bruck(p, case.size, case.nbytes),
        program=lambda group, rank, _root: bruck_allgather_program(group, rank),
    ),
    "ring": Algorithm(
        lambda c, out, block: ring_allgather(c.landing, out, block, c.everyone),
        cost=lambda p, case, k: m.allgather_ring(p, case.size, case.nbytes, case.slot),
        program=lambda group, rank, _root: ring_allgather_program(group, rank),
    ),
    "direct": Algorithm(
        lambda c, out, block: direct_allgather(c.landing, out, block, c.everyone),
        cost=lambda p, case, k: m.allgather_direct(p, case.size, case.nbytes),
        program=lambda group, rank, _root: direct_allgather_program(group, rank),
    ),
    "hierarchical": Algorithm(
        lambda c, out, block: hierarchical_allgather(c.landing, out, block, c.groups, 2),
        eligible=_hierarchical,
    ),
}

GATHER: dict[str, Algorithm] = {
    "direct": Algorithm(
        lambda c, out, mine: direct_gather(c.landing, out, mine, c.everyone, c.root),
        cost=lambda p, case, k: m.gather_direct(p, case.size, case.nbytes),
        program=direct_gather_program,
    ),
    "binomial": Algorithm(
        lambda c, out, mine: binomial_gather(c.landing, out, mine, c.everyone, c.root),
        cost=lambda p, case, k: m.gather_binomial(p, case.size, case.nbytes),
        program=binomial_gather_program,
    ),
}

# A scatter is a gather run backwards: the same costs.
SCATTER: dict[str, Algorithm] = {
    "direct": Algorithm(
        lambda c, src, mine: direct_scatter(c.landing, src, mine, c.everyone, c.root),
        cost=GATHER["direct"].cost,
        program=direct_scatter_program,
    ),
    "binomial": Algorithm(
        lambda c, src, mine: binomial_scatter(c.landing, src, mine, c.everyone, c.root),
        cost=GATHER["binomial"].cost,
        program=binomial_scatter_program,
    ),
}

ALLTOALL: dict[str, Algorithm] = {
    "direct": Algorithm(
        lambda c, src, out, block: direct_alltoall(c.landing, src, out, block, c.everyone),
        cost=lambda p, case, k: m.alltoall_direct(p, case.size, case.nbytes),
        program=lambda group, rank, _root: direct_alltoall_program(group, rank),
    ),
    "pairwise": Algorithm(
        lambda c, src, out, block: pairwise_alltoall(c.landing, src, out, block, c.everyone),
        cost=lambda p, case, k: m.alltoall_pairwise(p, case.size, case.nbytes),
        program=lambda group, rank, _root: pairwise_alltoall_program(group, rank),
    ),
}

TABLES: dict[str, dict[str, Algorithm]] = {
    "barrier": BARRIER,
    "bcast": BCAST,
    "reduce": REDUCE,
    "allreduce": ALLREDUCE,
    "allgather": ALLGATHER,
    "gather": GATHER,
    "scatter": SCATTER,
    "alltoall": ALLTOALL,
}


@functools.lru_cache(maxsize=4096)
def choose(collective: str, p: LogGP, case: Case) -> tuple[str, int]:
    """(algorithm, k) for ``collective`` in ``case``: ``"hierarchical"`` when eligible, else
    the cheapest eligible algorithm with a cost, at its cheapest ``k``."""
    table = TABLES[collective]
    hierarchical = table.get("hierarchical")
    if hierarchical is not None and hierarchical.eligible(case):
        return "hierarchical", 2
    best, best_k, best_cost = "", 2, float("inf")
    for name, algorithm in table.items():
        if algorithm.cost is None or not algorithm.eligible(case):
            continue
        for k in algorithm.tune:
            value = algorithm.cost(p, case, k)
            if value < best_cost:
                best, best_k, best_cost = name, k, value
    return best, best_k

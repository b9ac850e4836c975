"""Barrier: n-way dissemination (Hoefler et al., 2006) with flag-only messages.

Each round is one batch of signals — :meth:`Window.signal` of a per-pair monotonic count into the
peer's flag window — and a wait for as many signals from the mirrored peers.  No data, so no
landing slot and no credit: a barrier costs ``k`` RMA calls per round and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from .exchange import Channel, Exchange
from .programs import barrier_program
from .schedules import nway_distances


def nway_barrier(ch: Channel, n: int, group: Sequence[int] | None = None) -> Exchange:
    """Round ``r``: signal ``i + j·(n+1)^r`` and wait for ``i − j·(n+1)^r`` for ``j = 1..n``
    (indices mod ``m``); ``ceil(log_{n+1} m)`` rounds.  ``n = 1`` is the classic dissemination
    barrier.  Awaitable (:class:`.exchange.Exchange`)."""
    ranks = list(group) if group is not None else list(range(ch.size))
    return barrier_program(nway_peers(ranks, ch.rank, n), f"barrier:nway{n}").bind(ch).start()


def nway_peers(ranks: Sequence[int], rank: int, n: int) -> list[tuple[list[int], list[int]]]:
    """``rank``'s rounds of the n-way barrier over ``ranks``: (peers to signal, peers to wait
    for) per round."""
    size = len(ranks)
    me = ranks.index(rank)
    return [
        ([ranks[(me + d) % size] for d in distances], [ranks[(me - d) % size] for d in distances])
        for distances in nway_distances(size, n)
    ]

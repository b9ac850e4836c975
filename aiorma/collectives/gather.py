"""Allgather (ring, direct, recursive doubling, Bruck, node leaders), gather and scatter (direct,
binomial) and alltoall (direct puts with arrival counters, pairwise).

``out`` is the receive buffer as 1-D bytes holding ``m`` blocks of ``block`` bytes, block ``i``
belonging to group index ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .bcast import await_all, knomial_bcast
from .exchange import Exchange, Program
from .landing import Landing
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


def _blocks(buf: np.ndarray, block: int, first: int, count: int) -> np.ndarray:
    return buf[first * block : (first + count) * block]


# ---------------------------------------------------------------------- allgather


def _allgather(program: Program, ch: Landing, out: np.ndarray, block: int, group: Sequence[int]) -> Exchange:
    """A run of an allgather ``program`` on ``out``, which holds our own block already (the
    program's SOURCE is that block)."""
    me = group.index(ch.rank)
    return program.bind(ch, _blocks(out, block, me, 1), out, block=block).start()


def ring_allgather(ch: Landing, out: np.ndarray, block: int, group: Sequence[int]) -> Exchange:
    """``m−1`` steps around a ring: :func:`.programs.ring_allgather_program`.  Awaitable."""
    return _allgather(ring_allgather_program(group, ch.rank), ch, out, block, group)


def direct_allgather(ch: Landing, out: np.ndarray, block: int, group: Sequence[int]) -> Exchange:
    """One round: :func:`.programs.direct_allgather_program`.  Awaitable."""
    return _allgather(direct_allgather_program(group, ch.rank), ch, out, block, group)


def recursive_doubling_allgather(ch: Landing, out: np.ndarray, block: int, group: Sequence[int]) -> Exchange:
    """Power-of-two groups: :func:`.programs.recursive_doubling_allgather_program`.  Awaitable."""
    return _allgather(recursive_doubling_allgather_program(group, ch.rank), ch, out, block, group)


def bruck_allgather(ch: Landing, out: np.ndarray, block: int, group: Sequence[int]) -> Exchange:
    """Any group size: :func:`.programs.bruck_allgather_program`.  Awaitable."""
    return _allgather(bruck_allgather_program(group, ch.rank), ch, out, block, group)


async def hierarchical_allgather(
    ch: Landing, out: np.ndarray, block: int, groups: Sequence[Sequence[int]], k: int
) -> None:
    """Mamidala's (2008) node-leader allgather: each node's blocks are gathered at its leader (lowest
    rank), the leaders pass whole nodes' bundles around a ring, and each leader broadcasts the
    full result within its node.  Blocks are placed by global rank (``out`` is over the Comm)."""
    my_node = next(members for members in groups if ch.rank in members)
    leader = my_node[0]
    if ch.rank != leader:
        await ch.send(leader, _blocks(out, block, ch.rank, 1))
    else:
        await await_all([ch.recv(r, _blocks(out, block, r, 1)) for r in my_node[1:]])
        leaders = [members[0] for members in groups]
        count = len(leaders)
        me = leaders.index(leader)
        right, left = leaders[(me + 1) % count], leaders[(me - 1) % count]

        def pack(node: Sequence[int]) -> np.ndarray:
            return np.concatenate([_blocks(out, block, r, 1) for r in node])

        for step in range(count - 1):
            out_node, in_node = groups[(me - step) % count], groups[(me - step - 1) % count]
            bundle = np.empty(len(in_node) * block, np.uint8)
            await await_all([ch.send(right, pack(out_node)), ch.recv(left, bundle)])
            for j, r in enumerate(in_node):
                out[r * block : (r + 1) * block] = bundle[j * block : (j + 1) * block]
    if len(my_node) > 1:
        await knomial_bcast(ch, out, list(my_node), 0, k)


# ---------------------------------------------------------------------- gather / scatter


def direct_gather(
    ch: Landing, out: np.ndarray | None, mine: np.ndarray, group: Sequence[int], root: int
) -> Exchange:
    """Every index puts its block to the root, which takes them as they land:
    :func:`.programs.direct_gather_program`.  Awaitable."""
    program = direct_gather_program(group, ch.rank, root)
    return program.bind(ch, mine, mine if out is None else out, block=int(mine.size)).start()


def binomial_gather(
    ch: Landing, out: np.ndarray | None, mine: np.ndarray, group: Sequence[int], root: int
) -> Exchange:
    """Blocks climb a binomial tree numbered relative to the root, one message per edge:
    :func:`.programs.binomial_gather_program`.  Awaitable."""
    program = binomial_gather_program(group, ch.rank, root)
    return program.bind(ch, mine, mine if out is None else out, block=int(mine.size)).start()


def direct_scatter(
    ch: Landing, src: np.ndarray | None, mine: np.ndarray, group: Sequence[int], root: int
) -> Exchange:
    """The root puts each index's block straight into its landing slots:
    :func:`.programs.direct_scatter_program`.  Awaitable."""
    program = direct_scatter_program(group, ch.rank, root)
    return program.bind(ch, mine if src is None else src, mine, block=int(mine.size)).start()


def binomial_scatter(
    ch: Landing, src: np.ndarray | None, mine: np.ndarray, group: Sequence[int], root: int
) -> Exchange:
    """The reverse of :func:`binomial_gather`: each edge carries the child's subtree's blocks
    (:func:`.programs.binomial_scatter_program`).  Awaitable."""
    program = binomial_scatter_program(group, ch.rank, root)
    return program.bind(ch, mine if src is None else src, mine, block=int(mine.size)).start()


# ---------------------------------------------------------------------- alltoall


def direct_alltoall(
    ch: Landing, src: np.ndarray, out: np.ndarray, block: int, group: Sequence[int]
) -> Exchange:
    """Every block is put at once towards its destination's landing slots (staggered start
    ``i+1, i+2, …`` so not everyone hits the same rank first); each rank takes blocks as they
    land: :func:`.programs.direct_alltoall_program`.  Awaitable."""
    return direct_alltoall_program(group, ch.rank).bind(ch, src, out, block=block).start()


def pairwise_alltoall(
    ch: Landing, src: np.ndarray, out: np.ndarray, block: int, group: Sequence[int]
) -> Exchange:
    """``m−1`` steps, one peer each way per step: :func:`.programs.pairwise_alltoall_program`.
    Awaitable."""
    return pairwise_alltoall_program(group, ch.rank).bind(ch, src, out, block=block).start()

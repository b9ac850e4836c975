"""Broadcast algorithms: k-nomial tree, explicit tree, scatter + allgather, node leaders.

Buffers are 1-D uint8 views of the user's array.  A tree forwards every chunk as soon as it has
landed (a chunk is one landing slot), so large messages pipeline down the tree.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence

import numpy as np

from .exchange import Channel, Exchange
from .landing import Landing
from .programs import tree_program
from .schedules import binomial_subtree, knomial_children, knomial_parent, split


def tree_bcast(ch: Channel, buf: np.ndarray, parent: int | None, children: Sequence[int]) -> Exchange:
    """Receive ``buf`` from ``parent`` (unless we are the root) and pass it on to ``children``
    (global ranks, in send order), chunk by chunk as chunks arrive.  Awaitable
    (:class:`.exchange.Exchange`)."""
    return tree_program(parent, children).bind(ch, buf).start()


def knomial_bcast(ch: Channel, buf: np.ndarray, group: Sequence[int], root: int, k: int) -> Exchange:
    """k-nomial tree over ``group`` (global ranks) rooted at index ``root`` (k=2: binomial)."""
    return tree_bcast(ch, buf, *knomial_links(group, ch.rank, root, k))


def knomial_links(group: Sequence[int], rank: int, root: int, k: int) -> tuple[int | None, list[int]]:
    """``rank``'s parent (None at the root) and children, in send order, in the k-nomial tree
    over ``group`` (global ranks) rooted at index ``root``."""
    size = len(group)
    v = (group.index(rank) - root) % size
    parent_v = knomial_parent(v, k)
    parent = None if parent_v is None else group[(parent_v + root) % size]
    return parent, [group[(c + root) % size] for c in knomial_children(v, size, k)]


async def scatter_allgather_bcast(ch: Landing, buf: np.ndarray, group: Sequence[int], root: int) -> None:
    """Van de Geijn's broadcast for large messages: a binomial scatter of ``m`` blocks (block
    ``v`` for relative index ``v``), then a ring allgather of the blocks."""
    size = len(group)
    me = group.index(ch.rank)
    v = (me - root) % size
    offsets, counts = split(int(buf.size), size)

    def span(first: int, count: int) -> np.ndarray:
        last = first + count
        return buf[offsets[first] : offsets[last - 1] + counts[last - 1]]

    def rank_of(u: int) -> int:
        return group[(u + root) % size]

    # scatter: v receives the blocks of its subtree [v, v + n) and hands each child its share
    own = binomial_subtree(v, size)
    parent_v = knomial_parent(v, 2)
    if parent_v is not None:
        await ch.recv(rank_of(parent_v), span(v, own))
    await await_all(
        [ch.send(rank_of(c), span(c, binomial_subtree(c, size))) for c in knomial_children(v, size, 2)]
    )
    # ring allgather on relative indices: step s passes block v − s to the right
    right, left = rank_of((v + 1) % size), rank_of((v - 1) % size)
    for step in range(size - 1):
        out_block = (v - step) % size
        in_block = (v - step - 1) % size
        await await_all([ch.send(right, span(out_block, 1)), ch.recv(left, span(in_block, 1))])


async def scatter_allgather_direct_bcast(
    ch: Landing, buf: np.ndarray, group: Sequence[int], root: int
) -> None:
    """Van de Geijn's broadcast with both phases in one round each: the root puts block ``v`` to
    relative index ``v`` and its own block 0 to everyone at once; each index, once its block has
    landed, puts it to every index but the root and takes the others' blocks as they land.  Two
    rounds instead of ``log2 m + m − 1``: where ranks share cores, a round that waits for a block
    another rank forwards waits for that rank to be scheduled (see :func:`.gather.direct_allgather`)."""
    size = len(group)
    me = group.index(ch.rank)
    v = (me - root) % size
    offsets, counts = split(int(buf.size), size)

    def block(u: int) -> np.ndarray:
        return buf[offsets[u] : offsets[u] + counts[u]]

    def rank_of(u: int) -> int:
        return group[(u + root) % size]

    if v == 0:
        # per peer: its own block first, then block 0 (the order it receives them in)
        others = range(1, size)
        await await_all(
            [ch.send(rank_of(u), block(u)) for u in others] + [ch.send(rank_of(u), block(0)) for u in others]
        )
        return
    root_rank = rank_of(0)
    await ch.recv(root_rank, block(v))
    peers = [u for u in ((v + s) % size for s in range(1, size)) if u != 0]
    sources = [u for u in ((v - s) % size for s in range(1, size)) if u != 0]
    await await_all(
        [ch.send(rank_of(u), block(v)) for u in peers]
        + [ch.recv(root_rank, block(0))]
        + [ch.recv(rank_of(u), block(u)) for u in sources]
    )


async def hierarchical_bcast(
    ch: Landing, buf: np.ndarray, groups: Sequence[Sequence[int]], root: int, k: int
) -> None:
    """Mamidala's (2008) node-leader broadcast: the root sends to one leader per other node (a k-nomial
    tree over the leaders), then each leader broadcasts within its node."""
    leaders = [root if root in members else members[0] for members in groups]
    my_node = next(members for members in groups if ch.rank in members)
    my_leader = root if root in my_node else my_node[0]
    if ch.rank == my_leader and len(leaders) > 1:
        await knomial_bcast(ch, buf, leaders, leaders.index(root), k)
    if len(my_node) > 1:
        node = [my_leader, *(r for r in my_node if r != my_leader)]
        await knomial_bcast(ch, buf, node, 0, k)


async def await_all(awaitables: Sequence[Awaitable[None]]) -> None:
    """Await several transfers at once; the first error propagates once all have finished."""
    # Messages sent inside their call come back as finished futures: leave them out, so that a
    # step with one transfer left to wait for awaits it directly (no task, no loop turn).
    awaitables = [a for a in awaitables if not (isinstance(a, asyncio.Future) and _succeeded(a))]
    if len(awaitables) == 1:
        await awaitables[0]
    elif awaitables:
        results = await asyncio.gather(*awaitables, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result


def _succeeded(future: asyncio.Future[None]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None

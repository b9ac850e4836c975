"""Reduce and allreduce: binomial tree, recursive doubling, ring, direct or halving-doubling
reduce-scatter + allgather, reduce-scatter + gather, node leaders.

``acc`` is a 1-D typed array holding this rank's contribution; each algorithm leaves the result
in it (at the root for reduce, everywhere for allreduce).  Combining keeps rank order where the
algorithm can (tree and recursive doubling), so REPLACE and NO_OP give MPI's ordered result;
ring-based algorithms need a commutative op and the selector never gives them others.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._core.memcopy import byte_view
from ..constants import Op
from .bcast import await_all, knomial_bcast
from .exchange import Exchange
from .landing import Landing
from .programs import halving_doubling_program, recursive_doubling_program
from .reduce_ops import is_commutative
from .schedules import split


async def binomial_reduce(ch: Landing, acc: np.ndarray, op: Op, group: Sequence[int], root: int) -> None:
    """Binomial tree towards index ``root``, pipelined chunk by chunk: a rank combines chunk
    ``c`` from each child, then passes it to its parent while the next chunk arrives.

    With a commutative op the tree is numbered relative to the root.  Otherwise it is rooted at
    index 0 so that every subtree is a contiguous, ascending block of ranks, and index 0 then
    sends the result to the root."""
    size = len(group)
    me = group.index(ch.rank)
    ordered = not is_commutative(op)
    base = 0 if ordered else root
    v = (me - base) % size

    def rank_of(u: int) -> int:
        return group[(u + base) % size]

    children = []
    parent = None
    mask = 1
    while mask < size:
        if v & mask:
            parent = rank_of(v - mask)
            break
        if v + mask < size:
            children.append(rank_of(v + mask))
        mask <<= 1
    step = max(1, ch.slot_bytes // acc.dtype.itemsize)
    sends = []
    for lo in range(0, acc.size, step):
        part = acc[lo : lo + step]
        for child in children:
            await ch.recv_reduce(child, part, op, incoming_higher=True)
        if parent is not None:
            sends.append(ch.send(parent, byte_view(part), via_slots=True))
    await await_all(sends)
    if ordered and root != 0:
        if me == 0:
            await ch.send(group[root], byte_view(acc))
        elif me == root:
            await ch.recv(group[0], byte_view(acc))


async def reduce_scatter_gather(
    ch: Landing, acc: np.ndarray, op: Op, group: Sequence[int], root: int
) -> None:
    """For large messages (commutative ops): a ring reduce-scatter leaves block ``i`` reduced
    on index ``i``, then every index sends its block straight to the root."""
    size = len(group)
    me = group.index(ch.rank)
    offsets, counts = split(acc.size, size)
    await _ring_reduce_scatter(ch, acc, op, group, me, offsets, counts)
    if me == root:
        await await_all(
            [
                ch.recv(group[i], byte_view(acc[offsets[i] : offsets[i] + counts[i]]))
                for i in range(size)
                if i != root
            ]
        )
    else:
        await ch.send(group[root], byte_view(acc[offsets[me] : offsets[me] + counts[me]]))


def recursive_doubling_allreduce(
    ch: Landing, source: np.ndarray, out: np.ndarray, op: Op, group: Sequence[int]
) -> Exchange:
    """Recursive doubling from ``source`` into ``out`` (1-D, same dtype and size; they may be the
    same array): :func:`.programs.recursive_doubling_program`.  Awaitable."""
    program = recursive_doubling_program(group, ch.rank, np.may_share_memory(source, out))
    return program.bind(ch, source.reshape(-1), out.reshape(-1), op).start()


async def direct_allreduce(ch: Landing, acc: np.ndarray, op: Op, group: Sequence[int]) -> None:
    """Reduce-scatter then allgather (commutative ops), each phase in one round: every index puts
    block ``j`` of ``acc`` to index ``j`` at once and combines the blocks it receives into its own
    block as they land, then puts its reduced block to everyone and takes theirs.  The bytes of
    the ring, in two rounds instead of ``2·(m−1)``: where ranks share cores, each round that waits
    for another rank's forwarded block waits for that rank to be scheduled.

    Block ``me`` is combined in arrival order, which differs from run to run; it is combined on
    one rank only and then copied, so every rank still ends with the same result."""
    size = len(group)
    me = group.index(ch.rank)
    offsets, counts = split(acc.size, size)

    def block(i: int) -> np.ndarray:
        return acc[offsets[i] : offsets[i] + counts[i]]

    peers = [(me + s) % size for s in range(1, size)]
    sources = [(me - s) % size for s in range(1, size)]
    # Only block ``me`` is written in this phase, and it is never sent in it.
    await await_all(
        [ch.send(group[j], byte_view(block(j)), via_slots=True) for j in peers]
        + [ch.recv_reduce(group[i], block(me), op, incoming_higher=i > me) for i in sources]
    )
    await await_all(
        [ch.send(group[j], byte_view(block(me))) for j in peers]
        + [ch.recv(group[i], byte_view(block(i))) for i in sources]
    )


def halving_doubling_allreduce(
    ch: Landing, source: np.ndarray, out: np.ndarray, op: Op, group: Sequence[int]
) -> Exchange:
    """Rabenseifner's allreduce (*Optimization of Collective Reduction Operations*, 2004) from
    ``source`` into ``out`` (1-D, same dtype and size; they may be the same array), commutative
    ops: :func:`.programs.halving_doubling_program`.  Each rank combines ``(1 − 1/m)·n``
    elements and sends as many twice, where recursive doubling combines and sends all ``n`` at
    each of its ``log2 m`` steps.  Awaitable."""
    source, out = source.reshape(-1), out.reshape(-1)
    program = halving_doubling_program(group, ch.rank, source.size)
    return program.bind(ch, source, out, op, source.dtype.itemsize).start()


async def ring_allreduce(ch: Landing, acc: np.ndarray, op: Op, group: Sequence[int]) -> None:
    """Reduce-scatter then allgather, both around a ring (commutative ops): each rank sends and
    receives ``2·(m−1)`` blocks of ``n/m`` elements — bandwidth-optimal for large messages."""
    size = len(group)
    me = group.index(ch.rank)
    offsets, counts = split(acc.size, size)
    await _ring_reduce_scatter(ch, acc, op, group, me, offsets, counts)
    # rank i now holds block i fully reduced; pass blocks around the ring
    right, left = group[(me + 1) % size], group[(me - 1) % size]

    def block(i: int) -> np.ndarray:
        return byte_view(acc[offsets[i] : offsets[i] + counts[i]])

    for step in range(size - 1):
        await await_all(
            [ch.send(right, block((me - step) % size)), ch.recv(left, block((me - step - 1) % size))]
        )


async def _ring_reduce_scatter(
    ch: Landing,
    acc: np.ndarray,
    op: Op,
    group: Sequence[int],
    me: int,
    offsets: list[int],
    counts: list[int],
) -> None:
    """After ``m−1`` steps index ``i`` holds block ``i`` reduced over the whole group."""
    size = len(group)
    right, left = group[(me + 1) % size], group[(me - 1) % size]
    for step in range(size - 1):
        # the block sent and the block combined into are different: no copy needed
        out_block = (me - step - 1) % size
        in_block = (me - step - 2) % size
        outgoing = acc[offsets[out_block] : offsets[out_block] + counts[out_block]]
        incoming = acc[offsets[in_block] : offsets[in_block] + counts[in_block]]
        await await_all(
            [
                ch.send(right, byte_view(outgoing), via_slots=True),
                ch.recv_reduce(left, incoming, op, incoming_higher=True),
            ]
        )


async def hierarchical_allreduce(
    ch: Landing, acc: np.ndarray, op: Op, groups: Sequence[Sequence[int]], k: int
) -> None:
    """Mamidala's (2008) node-leader allreduce (commutative ops): reduce within each node to its leader
    (lowest rank), recursive doubling among the leaders, broadcast within each node."""
    leaders = [members[0] for members in groups]
    my_node = next(members for members in groups if ch.rank in members)
    if len(my_node) > 1:
        await binomial_reduce(ch, acc, op, my_node, 0)
    if ch.rank == my_node[0] and len(leaders) > 1:
        await recursive_doubling_allreduce(ch, acc, acc, op, leaders)
    if len(my_node) > 1:
        await knomial_bcast(ch, byte_view(acc), my_node, 0, k)


async def hierarchical_reduce(
    ch: Landing, acc: np.ndarray, op: Op, groups: Sequence[Sequence[int]], root: int
) -> None:
    """Node-leader reduce (commutative ops): within each node to its leader (the root leads its
    own node), then a binomial reduce over the leaders towards the root."""
    leaders = [root if root in members else members[0] for members in groups]
    my_node = next(members for members in groups if ch.rank in members)
    my_leader = root if root in my_node else my_node[0]
    if len(my_node) > 1:
        node = [my_leader, *(r for r in my_node if r != my_leader)]
        await binomial_reduce(ch, acc, op, node, 0)
    if ch.rank == my_leader and len(leaders) > 1:
        await binomial_reduce(ch, acc, op, leaders, leaders.index(root))

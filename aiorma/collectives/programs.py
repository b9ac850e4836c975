"""The collectives' exchange programs (:mod:`.exchange`), one pure builder per algorithm: what one
rank does, as rounds, given the group (global ranks), its rank and the root.  ``tests/test_exchange.py``
runs every rank's program through an interpreter of its own and compares with numpy."""

from __future__ import annotations

from collections.abc import Sequence

from .exchange import OUT, SCRATCH, SOURCE, Copy, Program, Receive, Round, Send
from .schedules import binomial_subtree, knomial_children, knomial_parent, largest_power_of_two


def barrier_program(rounds: Sequence[tuple[Sequence[int], Sequence[int]]], name: str = "barrier") -> Program:
    """A barrier's rounds as (peers to signal, peers whose signal to wait for) (see
    :func:`.barrier.nway_peers`)."""
    return Program(name, tuple(Round(signals=tuple(s), waits=tuple(w)) for s, w in rounds))


def tree_program(parent: int | None, children: Sequence[int], name: str = "bcast") -> Program:
    """A tree broadcast of SOURCE: take it from ``parent`` (unless the root), forwarding each
    chunk to ``children`` as it lands; the root sends it to ``children`` in order."""
    if parent is None:
        return Program(name, (Round(sends=tuple(Send(c, SOURCE) for c in children)),), result=SOURCE)
    return Program(
        name, (Round(receives=(Receive(parent, SOURCE, forward=tuple(children)),)),), result=SOURCE
    )


def recursive_doubling_program(group: Sequence[int], rank: int, in_place: bool) -> Program:
    """Recursive-doubling allreduce from SOURCE into OUT over ``group`` (global ranks);
    ``in_place``: the two share memory.  For a non-power-of-two group the first ``2·rem``
    indices fold pairwise first (even into odd) and get the result back at the end.  Exchanged
    blocks are always contiguous rank ranges, combined lower-first, so the result is the same on
    every rank.  Each step sends the current buffer while combining it with the partner's data
    straight from the landing slots into another buffer (OUT or SCRATCH), chosen so that the
    last step lands in OUT: at two ranks no copy is made at all."""
    size = len(group)
    me = group.index(rank)
    pof2 = largest_power_of_two(size)
    rem = size - pof2
    name = "allreduce:recursive_doubling"
    if me < 2 * rem and me % 2 == 0:
        partner = group[me + 1]
        return Program(
            name,
            (Round(sends=(Send(partner, SOURCE, via_slots=True),)), Round(receives=(Receive(partner, OUT),))),
        )
    new = me // 2 if me < 2 * rem else me - rem

    def real(index: int) -> int:
        return 2 * index + 1 if index < rem else index + rem

    def same(a: int, b: int) -> bool:
        return a == b or (in_place and {a, b} == {SOURCE, OUT})

    def other(current: int, left: int) -> int:
        """Where a step's result goes: OUT on the last step (or an odd number of steps before
        it), else SCRATCH; never the buffer being sent."""
        if left % 2 == 1 and not same(OUT, current):
            return OUT
        return SCRATCH if current != SCRATCH else OUT

    rounds: list[Round] = []
    current, left = SOURCE, (pof2.bit_length() - 1) + (1 if me < 2 * rem else 0)
    if me < 2 * rem:  # odd index of a folded pair: take the even neighbour's data first
        target = other(current, left)
        rounds.append(Round(receives=(Receive(group[me - 1], current, into=target, incoming_higher=False),)))
        current, left = target, left - 1
    mask = 1
    while mask < pof2:
        partner = real(new ^ mask)
        target = other(current, left)
        rounds.append(
            Round(
                sends=(Send(group[partner], current, via_slots=True),),
                receives=(Receive(group[partner], current, into=target, incoming_higher=partner > me),),
            )
        )
        current, left = target, left - 1
        mask <<= 1
    if me < 2 * rem:
        rounds.append(Round(sends=(Send(group[me - 1], current),)))
    return Program(name, tuple(rounds), result=current)


def halving_doubling_program(group: Sequence[int], rank: int, count: int) -> Program:
    """Rabenseifner's allreduce (commutative ops) of ``count`` elements from SOURCE into OUT,
    bound with one element per block: a reduce-scatter by recursive halving — at each of
    ``log2 m`` steps a rank keeps half of its current range, sends the other half to the
    partner across that step's bit and combines the partner's copy of the kept half — then an
    allgather by recursive doubling back up the same steps, the partners swapping their reduced
    halves.  The first step reads SOURCE and writes OUT, so SOURCE is never written and needs no
    copy.  With ``m`` not a power of two the ``r`` indices beyond the largest power of two hand
    their data to index ``i − 2^k`` first and get the result back at the end.  Each range is
    combined on one rank only and then copied, so every rank ends with the same result whatever
    the order its contributions arrived in."""
    size = len(group)
    me = group.index(rank)
    pof2 = largest_power_of_two(size)
    name = "allreduce:halving_doubling"
    if me >= pof2:
        partner = group[me - pof2]
        return Program(
            name,
            (Round(sends=(Send(partner, SOURCE, via_slots=True),)), Round(receives=(Receive(partner, OUT),))),
        )
    rounds: list[Round] = []
    current = SOURCE
    if me + pof2 < size:
        rounds.append(Round(receives=(Receive(group[me + pof2], SOURCE, into=OUT, incoming_higher=True),)))
        current = OUT
    lo, hi = 0, count
    steps: list[tuple[int, tuple[int, int], tuple[int, int]]] = []  # (partner, kept, given)
    mask = pof2 >> 1
    while mask:
        mid = lo + (hi - lo) // 2
        low, high = (lo, mid - lo), (mid, hi - mid)
        kept, given = (high, low) if me & mask else (low, high)
        partner = group[me ^ mask]
        rounds.append(
            Round(
                sends=(Send(partner, current, given, via_slots=True),),
                receives=(Receive(partner, current, into=OUT, blocks=kept, incoming_higher=me ^ mask > me),),
            )
        )
        steps.append((partner, kept, given))
        current = OUT
        lo, hi = kept[0], kept[0] + kept[1]
        mask >>= 1
    if current == SOURCE:  # a group of one
        rounds.append(Round(copies=(Copy(SOURCE, None, OUT, None),)))
    for partner, kept, given in reversed(steps):
        rounds.append(
            Round(sends=(Send(partner, OUT, kept),), receives=(Receive(partner, OUT, blocks=given),))
        )
    if me + pof2 < size:
        rounds.append(Round(sends=(Send(group[me + pof2], OUT),)))
    return Program(name, tuple(rounds))


def binomial_reduce_program(group: Sequence[int], rank: int, root: int, commutative: bool) -> Program:
    """Reduce of SOURCE into OUT at group index ``root`` along a binomial tree, one message per
    edge (the pipelined coroutine :func:`.reduce.binomial_reduce` takes messages of several
    chunks).  A rank combines its children's data in turn, lowest subtree first — each child's
    subtree holds the ranks just above its own, so the result keeps rank order — then sends the
    partial result up.  With a commutative op the tree is numbered from the root; otherwise from
    index 0, which then sends the result to the root.  The user's SOURCE is never written: off
    the root partial results go to SCRATCH, at the root to OUT (the program is bound with no
    OUT off the root, so ``result`` OUT is SOURCE there and nothing is copied)."""
    size = len(group)
    me = group.index(rank)
    base = root if commutative else 0
    v = (me - base) % size
    children: list[int] = []
    parent = None
    mask = 1
    while mask < size:
        if v & mask:
            parent = group[(v - mask + base) % size]
            break
        if v + mask < size:
            children.append(group[(v + mask + base) % size])
        mask <<= 1
    partial = OUT if me == root else SCRATCH
    rounds: list[Round] = []
    current = SOURCE
    for child in children:
        rounds.append(Round(receives=(Receive(child, current, into=partial, incoming_higher=True),)))
        current = partial
    if parent is not None:
        rounds.append(Round(sends=(Send(parent, current, via_slots=True),)))
    if not commutative and root != 0:
        if me == 0:
            rounds.append(Round(sends=(Send(group[root], current),)))
        elif me == root:
            rounds.append(Round(receives=(Receive(group[0], OUT),)))
            current = OUT
    # A root with nothing to combine (a group of one) ends with its own data, copied into OUT.
    return Program("reduce:binomial", tuple(rounds), result=current if me == root else OUT)


def direct_gather_program(group: Sequence[int], rank: int, root: int) -> Program:
    """Gather of one block of SOURCE per rank into OUT at group index ``root``: every other
    index sends its block to the root, which takes them as they land (blocks placed by group
    index) and copies its own."""
    me = group.index(rank)
    name = "gather:direct"
    if me != root:
        return Program(name, (Round(sends=(Send(group[root], SOURCE, via_slots=True),)),), result=SOURCE)
    receives = tuple(
        Receive(group[i], OUT, blocks=(i, 1), via_slots=True) for i in range(len(group)) if i != root
    )
    return Program(name, (Round(copies=(Copy(SOURCE, None, OUT, (root, 1)),), receives=receives),))


def binomial_gather_program(group: Sequence[int], rank: int, root: int) -> Program:
    """Gather along a binomial tree numbered from group index ``root``: a subtree's blocks are
    contiguous in that numbering, so each rank collects its subtree's blocks in one buffer (the
    children's arrive at once, each one message) and sends it to its parent as one message.  At
    root 0 the buffer is OUT itself; at another root the numbering is rotated, and the blocks are
    copied into place at the end."""
    size = len(group)
    me = group.index(rank)
    v = (me - root) % size
    span = binomial_subtree(v, size)
    work = OUT if v == 0 and root == 0 else SCRATCH
    receives = tuple(
        Receive(group[(c + root) % size], work, blocks=(c - v, binomial_subtree(c, size)), via_slots=True)
        for c in knomial_children(v, size, 2)
    )
    rounds = [Round(copies=(Copy(SOURCE, None, work, (0, 1)),), receives=receives)]
    parent = knomial_parent(v, 2)
    if parent is not None:
        rounds.append(Round(sends=(Send(group[(parent + root) % size], work, (0, span), via_slots=True),)))
    elif work == SCRATCH:  # relative order back to absolute
        head = size - root
        rotate = (Copy(SCRATCH, (0, head), OUT, (root, head)), Copy(SCRATCH, (head, root), OUT, (0, root)))
        rounds.append(Round(copies=rotate))
    return Program("gather:binomial", tuple(rounds), scratch_blocks=span)


def binomial_scatter_program(group: Sequence[int], rank: int, root: int) -> Program:
    """The reverse of :func:`binomial_gather_program`: each rank takes its subtree's blocks from
    its parent in one message and sends each child its subtree's, then keeps its own block.  Root
    0 sends straight from SOURCE; another root first copies SOURCE into the rotated order."""
    size = len(group)
    me = group.index(rank)
    v = (me - root) % size
    span = binomial_subtree(v, size)
    rounds: list[Round] = []
    copies: tuple[Copy, ...] = ()
    work = SCRATCH
    if v == 0 and root == 0:
        work = SOURCE
    elif v == 0:
        head = size - root
        copies = (
            Copy(SOURCE, (root, head), SCRATCH, (0, head)),
            Copy(SOURCE, (0, root), SCRATCH, (head, root)),
        )
    else:
        parent = knomial_parent(v, 2)
        assert parent is not None
        rounds.append(Round(receives=(Receive(group[(parent + root) % size], SCRATCH, blocks=(0, span)),)))
    sends = tuple(
        Send(group[(c + root) % size], work, (c - v, binomial_subtree(c, size)))
        for c in knomial_children(v, size, 2)
    )
    rounds.append(Round(copies=(*copies, Copy(work, (0, 1), OUT, None)), sends=sends))
    return Program("scatter:binomial", tuple(rounds), scratch_blocks=span)


def direct_scatter_program(group: Sequence[int], rank: int, root: int) -> Program:
    """Scatter of SOURCE's blocks at group index ``root`` into each index's OUT (one block): the
    root sends block ``i`` straight to index ``i`` and copies its own."""
    me = group.index(rank)
    name = "scatter:direct"
    if me != root:
        return Program(name, (Round(receives=(Receive(group[root], OUT),)),))
    sends = tuple(Send(group[i], SOURCE, (i, 1)) for i in range(len(group)) if i != root)
    return Program(name, (Round(copies=(Copy(SOURCE, (root, 1), OUT, None),), sends=sends),))


def direct_alltoall_program(group: Sequence[int], rank: int) -> Program:
    """Alltoall from SOURCE's blocks into OUT's: block ``j`` goes to index ``j`` at once, in a
    staggered order (``i+1, i+2, ...``, so not every rank sends to the same one first), and the
    blocks are taken as they land."""
    size = len(group)
    me = group.index(rank)
    later = [(me + s) % size for s in range(1, size)]
    earlier = [(me - s) % size for s in range(1, size)]
    return Program(
        "alltoall:direct",
        (
            Round(
                copies=(Copy(SOURCE, (me, 1), OUT, (me, 1)),),
                sends=tuple(Send(group[j], SOURCE, (j, 1)) for j in later),
                receives=tuple(Receive(group[j], OUT, blocks=(j, 1)) for j in earlier),
            ),
        ),
    )


def ring_allgather_program(group: Sequence[int], rank: int) -> Program:
    """Allgather of SOURCE (one block) into OUT around a ring: own block first, then in step
    ``s`` index ``i`` passes block ``i - s`` to the right and takes block ``i - s - 1`` from the
    left."""
    size = len(group)
    me = group.index(rank)
    right, left = group[(me + 1) % size], group[(me - 1) % size]
    own = (Copy(SOURCE, None, OUT, (me, 1)),)
    rounds = [
        Round(
            copies=own if step == 0 else (),
            sends=(Send(right, OUT, ((me - step) % size, 1)),),
            receives=(Receive(left, OUT, blocks=((me - step - 1) % size, 1)),),
        )
        for step in range(size - 1)
    ]
    return Program("allgather:ring", tuple(rounds) or (Round(copies=own),))


def direct_allgather_program(group: Sequence[int], rank: int) -> Program:
    """Allgather of SOURCE (one block) into OUT in one round: our block goes to every other
    index at once (staggered, as :func:`direct_alltoall_program`), theirs are taken as they land.
    The bytes of the ring, but no step waits for a block another rank forwarded — where ranks
    share cores, each such hand-off waits for that rank to be scheduled."""
    size = len(group)
    me = group.index(rank)
    return Program(
        "allgather:direct",
        (
            Round(
                copies=(Copy(SOURCE, None, OUT, (me, 1)),),
                sends=tuple(Send(group[(me + s) % size], SOURCE) for s in range(1, size)),
                receives=tuple(
                    Receive(group[(me - s) % size], OUT, blocks=((me - s) % size, 1)) for s in range(1, size)
                ),
            ),
        ),
    )


def recursive_doubling_allgather_program(group: Sequence[int], rank: int) -> Program:
    """Allgather of SOURCE (one block) into OUT over a power-of-two group: own block first, then
    in round ``r`` the ``2^r`` blocks gathered so far go to the partner ``i xor 2^r`` while its
    ``2^r`` arrive (each side's blocks are contiguous: one message each way)."""
    size = len(group)
    if size & (size - 1):
        raise ValueError(f"recursive doubling needs a power-of-two group, not {size}")
    me = group.index(rank)
    own = (Copy(SOURCE, None, OUT, (me, 1)),)
    rounds = []
    mask = 1
    while mask < size:
        partner = me ^ mask
        mine, theirs = me & ~(mask - 1), partner & ~(mask - 1)
        rounds.append(
            Round(
                copies=own if mask == 1 else (),
                sends=(Send(group[partner], OUT, (mine, mask)),),
                receives=(Receive(group[partner], OUT, blocks=(theirs, mask)),),
            )
        )
        mask <<= 1
    return Program("allgather:recursive_doubling", tuple(rounds) or (Round(copies=own),))


def bruck_allgather_program(group: Sequence[int], rank: int) -> Program:
    """Bruck et al.'s allgather of SOURCE (one block) into OUT, any group size, ``ceil(log2 m)``
    rounds: in SCRATCH, rotated so that our own block is first, round ``r`` sends the first
    ``min(2^r, m - 2^r)`` blocks to index ``i - 2^r`` and receives as many from ``i + 2^r``
    behind them (never the blocks being sent); the end rotates them into OUT."""
    size = len(group)
    me = group.index(rank)
    own = (Copy(SOURCE, None, SCRATCH, (0, 1)),)
    rounds = []
    have = 1
    while have < size:
        count = min(have, size - have)
        rounds.append(
            Round(
                copies=own if have == 1 else (),
                sends=(Send(group[(me - have) % size], SCRATCH, (0, count)),),
                receives=(Receive(group[(me + have) % size], SCRATCH, blocks=(have, count)),),
            )
        )
        have += count
    # SCRATCH block j is index me + j's
    head = size - me
    rotate = (Copy(SCRATCH, (0, head), OUT, (me, head)), Copy(SCRATCH, (head, me), OUT, (0, me)))
    rounds.append(Round(copies=rotate if size > 1 else (*own, *rotate)))
    return Program("allgather:bruck", tuple(rounds), scratch_blocks=size)


def pairwise_alltoall_program(group: Sequence[int], rank: int) -> Program:
    """Alltoall in ``m - 1`` steps: in step ``s`` block ``i + s`` of SOURCE goes to index
    ``i + s`` while block ``i - s`` of OUT comes from index ``i - s`` (fewer landing slots in use
    than the direct program's, for large blocks)."""
    size = len(group)
    me = group.index(rank)
    own = (Copy(SOURCE, (me, 1), OUT, (me, 1)),)
    rounds = [
        Round(
            copies=own if step == 1 else (),
            sends=(Send(group[(me + step) % size], SOURCE, ((me + step) % size, 1)),),
            receives=(Receive(group[(me - step) % size], OUT, blocks=((me - step) % size, 1)),),
        )
        for step in range(1, size)
    ]
    return Program("alltoall:pairwise", tuple(rounds) or (Round(copies=own),))

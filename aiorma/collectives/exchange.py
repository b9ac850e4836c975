"""Exchange programs: a collective's schedule as data, run by one state machine, no coroutine.

A *program* is what one rank does in one collective, as rounds.  In a round it raises signals
and sends messages, then waits for signals and takes messages — copied into a buffer, combined
with one (a reduction), or copied and forwarded on as they land (a tree); the next round starts
once everything of the round is sent and taken.  Programs are frozen values made by pure
functions of the group, the rank and the buffers' aliasing (:func:`barrier_program`,
:func:`tree_program`, :func:`recursive_doubling_program`), so a Comm caches them per collective,
size and root, and tests check them without any transport.

:meth:`Program.bind` ties a program to the call's buffers (byte views, the combining functions) —
once per call, or once per init for a persistent collective — and :meth:`Bound.start` makes an
:class:`Exchange`: one run.  An Exchange is awaitable like a coroutine, and the Comm's runner
steps it directly as a job, so a small collective runs inside its call, and from the poll that
finds its messages, without a coroutine frame per algorithm, per step or per message.  Its
states:

=========  ==============================================  ======================================
state      what ``send()`` does                             next
=========  ==============================================  ======================================
issue      raise the round's signals, issue its sends and   wait (something is pending), issue
           receives (each finished inside the call when     (round done, more rounds), done
           the landing allows: :mod:`.landing`)
wait       step the one pending awaitable in place, or      wait (yields the future), issue,
           yield the first unfinished future; then admit    done, failed
           the forwards that receives made
done       copy the result into the output buffer           — (``StopIteration``)
failed     raise the first error, once every message of     — (the error)
           the round has finished (as ``asyncio.gather``
           with ``return_exceptions``)
=========  ==============================================  ======================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from .._core.memcopy import copy_bytes
from ..constants import Op
from .reduce_ops import combiner
from .schedules import binomial_subtree, knomial_children, knomial_parent, largest_power_of_two

Consume = Callable[[np.ndarray, int, int], None]

#: The buffers a program names.  SOURCE: what this rank contributes (a bcast's only buffer);
#: OUT: where the result goes; SCRATCH: a work array like OUT, made at bind when a program needs one.
SOURCE, OUT, SCRATCH = 0, 1, 2


class Channel(Protocol):
    """What a program runs on: :class:`~.landing.Landing` (or the simulator's lite landing)."""

    rank: int
    size: int

    def signal(self, dst: int) -> None: ...

    def wait_signal(self, src: int) -> Awaitable[None]: ...

    def send(self, dst: int, data: np.ndarray, part_of: int | None = None) -> Awaitable[None]: ...

    def recv_with(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]: ...


#: Some blocks of a buffer: (first, count), in blocks of the size the program is bound with
#: (a gather's block is one rank's contribution); None: the whole buffer.
Blocks = tuple[int, int] | None


@attrs.frozen
class Send:
    """Send buffer ``part`` (or only its ``blocks``) to global rank ``peer``."""

    peer: int
    part: int
    blocks: Blocks = None


def _copies_only(receive: Receive, _attribute: object, blocks: Blocks) -> None:
    if blocks is not None and receive.into is not None:
        raise ValueError("a receive that combines takes whole buffers, not blocks")


@attrs.frozen
class Receive:
    """Take a message from ``peer`` the size of buffer ``part`` (or of its ``blocks``).
    ``into=None``: copy it into ``part`` (and, with ``forward``, send each chunk on to those
    ranks as it lands).  Otherwise combine it with ``part`` into buffer ``into`` with the call's
    op; ``incoming_higher`` says the message holds higher ranks' data (the order REPLACE and
    NO_OP depend on)."""

    peer: int
    part: int
    into: int | None = None
    incoming_higher: bool = False
    forward: tuple[int, ...] = ()
    blocks: Blocks = attrs.field(default=None, validator=_copies_only)


@attrs.frozen
class Copy:
    """Copy blocks of one of this rank's buffers into another (a gather's own block)."""

    source: int
    source_blocks: Blocks
    target: int
    target_blocks: Blocks


@attrs.frozen
class Round:
    copies: tuple[Copy, ...] = ()  #: made first, before anything is sent
    signals: tuple[int, ...] = ()
    sends: tuple[Send, ...] = ()
    waits: tuple[int, ...] = ()  #: peers whose next signal this round waits for
    receives: tuple[Receive, ...] = ()


@attrs.frozen
class Program:
    """One rank's rounds; ``result``: the buffer holding the result at the end (copied into OUT
    when it is another array)."""

    name: str
    rounds: tuple[Round, ...]
    result: int = OUT
    #: SCRATCH's size in blocks (bytes, as many blocks as bound with); None: an array like OUT.
    scratch_blocks: int | None = None
    #: Whether the program uses SCRATCH (bind makes the array).
    scratch: bool = attrs.field(init=False)

    @scratch.default
    def _uses_scratch(self) -> bool:
        parts = {self.result}
        for step in self.rounds:
            parts.update(send.part for send in step.sends)
            parts.update(r.part if r.into is None else r.into for r in step.receives)
            parts.update(part for copy in step.copies for part in (copy.source, copy.target))
        return SCRATCH in parts

    def bind(
        self,
        ch: Channel,
        source: np.ndarray | None = None,
        out: np.ndarray | None = None,
        op: Op | None = None,
        block: int = 0,
    ) -> Bound:
        """Tie the program to 1-D buffers (``out`` defaults to ``source``; a bcast has one, a
        barrier none), to ``op`` for its receives that combine, and to the size in bytes of
        the blocks its sends, receives and copies name."""
        return Bound(self, ch, source, source if out is None else out, op, block)


class Bound:
    """A program tied to its buffers: byte views and combining functions made once.  Runs of one
    Bound must not overlap (a persistent collective is not started again while active)."""

    __slots__ = ("channel", "copy_out", "count", "parts", "program", "rounds")

    def __init__(
        self,
        program: Program,
        ch: Channel,
        source: np.ndarray | None,
        out: np.ndarray | None,
        op: Op | None,
        block: int = 0,
    ) -> None:
        self.program = program
        self.channel = ch
        parts: list[np.ndarray] = []
        if source is not None and out is not None:
            scratch = out
            if program.scratch:
                blocks = program.scratch_blocks
                scratch = np.empty_like(out) if blocks is None else np.empty(blocks * block, np.uint8)
            parts = [source, out, scratch]
        self.parts = parts
        raw = [part.reshape(-1).view(np.uint8) for part in parts]

        def view(part: int, blocks: Blocks) -> np.ndarray:
            if blocks is None:
                return raw[part]
            return raw[part][blocks[0] * block : (blocks[0] + blocks[1]) * block]

        self.rounds = [_bind_round(step, ch, parts, view, op) for step in program.rounds]
        self.count = len(self.rounds)
        #: (result, out) when the result ends in another array than OUT: copied at the end.
        self.copy_out = (
            None if not parts or parts[program.result] is parts[OUT] else (parts[program.result], parts[OUT])
        )

    def start(self) -> Exchange:
        return Exchange(self)


_BoundReceive = tuple[int, int, Consume, "list[asyncio.Future[None]] | None"]


class _BoundRound:
    __slots__ = ("copies", "receives", "sends", "signals", "waits")

    def __init__(
        self,
        copies: list[tuple[np.ndarray, np.ndarray]],
        signals: tuple[int, ...],
        sends: list[tuple[int, np.ndarray]],
        waits: tuple[int, ...],
        receives: list[_BoundReceive],
    ) -> None:
        self.copies = copies  # (target, source) byte views
        self.signals = signals
        self.sends = sends
        self.waits = waits
        self.receives = receives


def _bind_round(
    step: Round,
    ch: Channel,
    parts: list[np.ndarray],
    view: Callable[[int, Blocks], np.ndarray],
    op: Op | None,
) -> _BoundRound:
    receives: list[_BoundReceive] = []
    for r in step.receives:
        forwards: list[asyncio.Future[None]] | None = None
        into = view(r.part, r.blocks)
        if r.into is not None:
            if op is None:
                raise ValueError(f"{r} combines, and the program was bound without an op")
            consume = combiner(op, parts[r.part].reshape(-1), r.incoming_higher, parts[r.into].reshape(-1))
        elif r.forward:
            forwards = []
            consume = _forwarder(ch, into, r.forward, forwards)
        else:
            consume = _copier(into)
        receives.append((r.peer, int(into.size), consume, forwards))
    copies = [(view(c.target, c.target_blocks), view(c.source, c.source_blocks)) for c in step.copies]
    sends = [(s.peer, view(s.part, s.blocks)) for s in step.sends]
    return _BoundRound(copies, step.signals, sends, step.waits, receives)


def _copier(out: np.ndarray) -> Consume:
    def copy(slot: np.ndarray, lo: int, hi: int) -> None:
        copy_bytes(out[lo:hi], slot)

    return copy


def _forwarder(
    ch: Channel, buf: np.ndarray, children: tuple[int, ...], forwards: list[asyncio.Future[None]]
) -> Consume:
    """Copy each chunk in and send it on to ``children`` at once, so a large message pipelines
    down a tree (each forward is a chunk of the whole message: ``part_of``)."""
    nbytes = int(buf.size)

    def land(slot: np.ndarray, lo: int, hi: int) -> None:
        copy_bytes(buf[lo:hi], slot)
        for child in children:
            forwards.append(asyncio.ensure_future(ch.send(child, buf[lo:hi], part_of=nbytes)))

    return land


class Exchange(Coroutine[Any, Any, None]):
    """One run of a bound program (the module's table).  ``await`` it, or let the runner step
    it: :meth:`send` advances as far as the messages allow and returns the future to wait for
    before calling it again; ``StopIteration`` when the collective is done on this rank."""

    __slots__ = ("_bound", "_error", "_forwards", "_inner", "_next", "_pending")

    def __init__(self, bound: Bound) -> None:
        self._bound = bound
        self._next = 0  # the round to issue next
        self._pending: list[asyncio.Future[Any]] = []
        self._inner: Generator[Any, None, Any] | None = None  # the one pending awaitable, stepped in place
        self._forwards: list[list[asyncio.Future[None]]] = []  # forward lists of the round's receives
        self._error: BaseException | None = None

    def __await__(self) -> Generator[Any, None, None]:
        return self  # type: ignore[return-value]  # an iterator with send/throw, as a generator is

    def __iter__(self) -> Exchange:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, _value: object) -> Any:
        bound = self._bound
        pending = self._pending
        while True:
            if self._inner is not None:
                try:
                    return self._inner.send(None)
                except StopIteration:
                    self._inner = None
                except (Exception, asyncio.CancelledError) as exc:
                    self._inner = None
                    self._error = self._error or exc
            while pending:
                future = pending[-1]
                if not future.done():
                    future._asyncio_future_blocking = True  # as Future.__await__ yields it
                    return future
                pending.pop()
                self._check(future)
            if self._forwards:
                # Every receive of the round has finished, so its forwards are all made (each
                # a future: :func:`_forwarder`).
                for made in self._forwards:
                    pending.extend(made)
                    made.clear()
                self._forwards = []
                continue
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self._next == bound.count:
                if bound.copy_out is not None:
                    result, out = bound.copy_out
                    out[...] = result
                raise StopIteration
            step = bound.rounds[self._next]
            self._next += 1
            # Issue the round (inline here: one call less per round of every small collective).
            ch = bound.channel
            for target, source in step.copies:
                copy_bytes(target, source)
            for peer in step.signals:
                ch.signal(peer)
            issued: list[Awaitable[None]] = []
            for peer, data in step.sends:
                issued.append(ch.send(peer, data))
            for peer in step.waits:
                issued.append(ch.wait_signal(peer))
            for peer, nbytes, consume, forwarded in step.receives:
                issued.append(ch.recv_with(peer, nbytes, consume))
                if forwarded is not None:
                    self._forwards.append(forwarded)
            self._admit(issued)

    def throw(self, typ: Any, value: Any = None, traceback: Any = None) -> Any:
        """An exception thrown in while waiting (cancellation): into the awaitable stepped in
        place, else raised here; the messages already issued stay issued (the Comm's stream is
        broken by a collective that fails half-way: :mod:`.runner`)."""
        exc = typ if isinstance(typ, BaseException) else (typ() if value is None else value)
        if self._inner is not None:
            inner, self._inner = self._inner, None
            thrower = getattr(inner, "throw", None)
            if thrower is not None:
                try:
                    return thrower(exc)
                except StopIteration:
                    return self.send(None)
        raise exc

    def close(self) -> None:
        inner, self._inner = self._inner, None
        closer = getattr(inner, "close", None)
        if closer is not None:
            closer()

    def _admit(self, issued: list[Awaitable[None]]) -> None:
        """Keep what a round issued and is not finished: futures to wait for, and one other
        awaitable (a landing coroutine) alone stepped in place — no task, no loop turn — as
        ``await`` would; with others beside it each becomes a task, so that all of them progress
        while we wait for one (a receive's credits may be what a peer's send to us waits for)."""
        pending = self._pending
        others: list[Awaitable[None]] | None = None
        for item in issued:
            if isinstance(item, asyncio.Future):
                if item.done():
                    try:
                        failed = item.exception() is not None
                    except asyncio.CancelledError:
                        failed = True
                    if failed:
                        self._check(item)
                else:
                    pending.append(item)
            elif others is None:
                others = [item]
            else:
                others.append(item)
        if others is None:
            return
        if len(others) == 1 and not pending:
            self._inner = others[0].__await__()
            return
        for item in others:
            pending.append(asyncio.ensure_future(item))

    def _check(self, future: asyncio.Future[Any]) -> None:
        """A finished future: keep the round's first error (raised once the whole round has
        finished, as ``asyncio.gather`` with ``return_exceptions`` would)."""
        try:
            error = future.exception()
        except asyncio.CancelledError as cancelled:
            error = cancelled
        if error is not None and self._error is None:
            self._error = error


# ------------------------------------------------------------------------------ the programs


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
            name, (Round(sends=(Send(partner, SOURCE),)), Round(receives=(Receive(partner, OUT),)))
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
                sends=(Send(group[partner], current),),
                receives=(Receive(group[partner], current, into=target, incoming_higher=partner > me),),
            )
        )
        current, left = target, left - 1
        mask <<= 1
    if me < 2 * rem:
        rounds.append(Round(sends=(Send(group[me - 1], current),)))
    return Program(name, tuple(rounds), result=current)


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
        rounds.append(Round(sends=(Send(parent, current),)))
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
        return Program(name, (Round(sends=(Send(group[root], SOURCE),)),), result=SOURCE)
    receives = tuple(Receive(group[i], OUT, blocks=(i, 1)) for i in range(len(group)) if i != root)
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
        Receive(group[(c + root) % size], work, blocks=(c - v, binomial_subtree(c, size)))
        for c in knomial_children(v, size, 2)
    )
    rounds = [Round(copies=(Copy(SOURCE, None, work, (0, 1)),), receives=receives)]
    parent = knomial_parent(v, 2)
    if parent is not None:
        rounds.append(Round(sends=(Send(group[(parent + root) % size], work, (0, span)),)))
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


class BoundCache:
    """A bound program kept for the next run with the same arguments, so that run skips the
    binding: a persistent collective's (its buffers never change), or a Comm's last plain call of
    a collective (a loop passes the same arrays again).  The arguments are compared by identity —
    a referenced numpy array keeps its memory — together with what the plan was chosen from (the
    cost model, the node map), so a new plan binds anew."""

    __slots__ = ("_arguments", "bound")

    def __init__(self) -> None:
        self.bound: Bound | None = None
        self._arguments: tuple[object, ...] = ()

    def find(self, arguments: tuple[object, ...]) -> Bound | None:
        """The kept Bound if it was bound with these very ``arguments``, else None."""
        kept = self._arguments
        if len(kept) != len(arguments):
            return None
        for old, new in zip(kept, arguments, strict=True):
            if old is not new:
                return None
        return self.bound

    def keep(self, bound: Bound, arguments: tuple[object, ...]) -> Bound:
        self.bound, self._arguments = bound, arguments
        return bound

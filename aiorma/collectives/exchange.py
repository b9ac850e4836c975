"""Exchange programs: a collective's schedule as data, run by one state machine, no coroutine.

A *program* is what one rank does in one collective, as rounds.  In a round it copies blocks
between its own buffers, raises signals and sends messages (whole buffers or runs of blocks),
then waits for signals and takes messages — copied into a buffer, combined with one (a
reduction), or copied and forwarded on as they land (a tree); the next round starts once
everything of the round is sent and taken.  Programs are frozen values made by pure functions of
the group, the rank, the root and the buffers' aliasing (:mod:`.programs` makes them), so a Comm
caches them per collective, size and root, and tests check them without any transport.

:meth:`Program.bind` ties a program to the call's buffers (byte views, the combining functions) —
once per call, or once per init for a persistent collective — and :meth:`Bound.start` makes an
:class:`Exchange`: one run.  An Exchange is awaitable like a coroutine, and the Comm's runner
steps it directly as a job, so a small collective runs inside its call, and from the poll that
finds its messages, without a coroutine frame per algorithm, per step or per message.  Its
states:

=========  ==============================================  ======================================
state      what ``send()`` does                             next
=========  ==============================================  ======================================
issue      make the round's copies, raise its signals,      wait (something is pending), issue
           issue its sends and receives (each finished      (round done, more rounds), done
           inside the call when the landing allows)
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
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol

import attrs
import numpy as np

from .._core.memcopy import byte_view, copy_bytes
from ..constants import Op
from .landing import Into, LLReceive
from .reduce_ops import combiner
from .runner import FINISHED

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

    def send(
        self, dst: int, data: np.ndarray, part_of: int | None = None, via_slots: bool = False
    ) -> Awaitable[None]: ...

    def recv_with(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]: ...

    def single_copy(self, peer: int, nbytes: int) -> bool: ...


#: Some blocks of a buffer: (first, count), in blocks of the size the program is bound with
#: (a gather's block is one rank's contribution); None: the whole buffer.
Blocks = tuple[int, int] | None


@attrs.frozen
class Send:
    """Send buffer ``part`` (or only its ``blocks``) to global rank ``peer``; ``via_slots``: through
    the landing slots even where it could travel in one copy (``Landing.send``) — set exactly
    where the peer's :class:`Receive` combines (``into``) or says ``via_slots``."""

    peer: int
    part: int
    blocks: Blocks = None
    via_slots: bool = False


@attrs.frozen
class Receive:
    """Take a message from ``peer`` the size of buffer ``part`` (or of its ``blocks``).
    ``into=None``: copy it into ``part`` (and, with ``forward``, send each chunk on to those
    ranks as it lands).  Otherwise combine it with ``part`` into buffer ``into`` (the same
    ``blocks`` of both, which must be whole elements; ``into`` may be ``part``) with the call's
    op; ``incoming_higher`` says the message holds higher ranks' data (the order REPLACE and
    NO_OP depend on)."""

    peer: int
    part: int
    into: int | None = None
    incoming_higher: bool = False
    forward: tuple[int, ...] = ()
    blocks: Blocks = None
    #: Take it from the landing slots even where it could travel in one copy (a gather's root,
    #: which takes many messages at once: senders filling slots in parallel beat the root reading
    #: each sender in turn); the matching :class:`Send` says so too.  A receive that combines
    #: always takes the slots.
    via_slots: bool = False


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

    @property
    def scratch(self) -> bool:
        """Whether the program uses SCRATCH (bind makes the array)."""
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
        raw = [byte_view(part) for part in parts]

        def view(part: int, blocks: Blocks) -> np.ndarray:
            if blocks is None:
                return raw[part]
            return raw[part][blocks[0] * block : (blocks[0] + blocks[1]) * block]

        def typed(part: int, blocks: Blocks) -> np.ndarray:
            flat = parts[part].reshape(-1)
            if blocks is None:
                return flat
            itemsize = flat.dtype.itemsize
            if block % itemsize:
                raise ValueError(f"blocks of {block} bytes are not whole elements of {flat.dtype}")
            return flat[blocks[0] * block // itemsize : (blocks[0] + blocks[1]) * block // itemsize]

        self.rounds = [_bind_round(step, ch, view, typed, op) for step in program.rounds]
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
        sends: list[tuple[int, np.ndarray, bool]],
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
    view: Callable[[int, Blocks], np.ndarray],
    typed: Callable[[int, Blocks], np.ndarray],
    op: Op | None,
) -> _BoundRound:
    """``view``: a part's (blocks') bytes; ``typed``: its 1-D elements."""
    receives: list[_BoundReceive] = []
    for r in step.receives:
        forwards: list[asyncio.Future[None]] | None = None
        into = view(r.part, r.blocks)
        if r.into is not None:
            if op is None:
                raise ValueError(f"{r} combines, and the program was bound without an op")
            consume = combiner(op, typed(r.part, r.blocks), r.incoming_higher, typed(r.into, r.blocks))
        elif r.forward:
            forwards = []
            consume = _forwarder(ch, into, r.forward, forwards)
        elif r.via_slots:
            consume = _slot_copier(into)
        else:
            consume = _copier(into)
        receives.append((r.peer, int(into.size), consume, forwards))
    copies = [(view(c.target, c.target_blocks), view(c.source, c.source_blocks)) for c in step.copies]
    sends = [(s.peer, view(s.part, s.blocks), s.via_slots) for s in step.sends]
    return _BoundRound(copies, step.signals, sends, step.waits, receives)


def _copier(out: np.ndarray) -> Consume:
    return Into(out)


def _slot_copier(out: np.ndarray) -> Consume:
    """A copy out of the slots that is not an :class:`~.landing.Into`: the landing then never
    takes the message in one copy."""

    def copy(slot: np.ndarray, lo: int, hi: int) -> None:
        copy_bytes(out[lo:hi], slot)

    return copy


def _forwarder(
    ch: Channel, buf: np.ndarray, children: tuple[int, ...], forwards: list[asyncio.Future[None]]
) -> Consume:
    """Copy each chunk in and send it on to ``children`` at once, so a large message pipelines
    down a tree (each forward is a chunk of the whole message: ``part_of``); a child that takes
    the message in one copy (``single_copy``) gets it whole, once all of it is here."""
    nbytes = int(buf.size)
    whole = tuple(child for child in children if ch.single_copy(child, nbytes))
    pieces = tuple(child for child in children if child not in whole)

    def landed(lo: int, hi: int) -> None:
        for child in pieces:
            forwards.append(asyncio.ensure_future(ch.send(child, buf[lo:hi], part_of=nbytes)))
        if hi == nbytes:
            for child in whole:
                forwards.append(asyncio.ensure_future(ch.send(child, buf)))

    return Into(buf, landed)


class Exchange(Coroutine[Any, Any, None]):
    """One run of a bound program (the module's table).  ``await`` it, or let the runner step
    it: :meth:`send` advances as far as the messages allow and returns the future to wait for
    before calling it again; ``StopIteration`` when the collective is done on this rank."""

    __slots__ = ("_bound", "_error", "_forwards", "_inner", "_next", "_pending", "_stepper")

    def __init__(self, bound: Bound) -> None:
        self._bound = bound
        self._next = 0  # the round to issue next
        self._pending: list[asyncio.Future[Any]] = []
        self._inner: Generator[Any, None, Any] | None = None  # the one pending awaitable, stepped in place
        self._stepper: LLReceive | None = None  # ... or the one pending receive of a small message
        self._forwards: list[list[asyncio.Future[None]]] = []  # forward lists of the round's receives
        self._error: BaseException | None = None

    def __await__(self) -> Generator[Any, None, None]:
        return self  # type: ignore[return-value]  # an iterator with send/throw, as a generator is

    def __iter__(self) -> Exchange:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, _value: object) -> Any:
        result = self.step()
        if result is FINISHED:
            raise StopIteration
        return result

    def step(self) -> Any:
        """:meth:`send` for the runner (:data:`.runner.FINISHED` where ``send`` raises
        ``StopIteration``): an exception leaving compiled code builds a traceback entry, several
        microseconds per collective."""
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
            stepper = self._stepper
            if stepper is not None:
                try:
                    waiting = stepper.step()
                except (Exception, asyncio.CancelledError) as exc:
                    waiting = None
                    self._error = self._error or exc
                if waiting is not None:
                    waiting._asyncio_future_blocking = True  # as Future.__await__ yields it
                    return waiting
                self._stepper = None
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
                return FINISHED
            step = bound.rounds[self._next]
            self._next += 1
            # Issue the round (inline here: one call less per round of every small collective).
            ch = bound.channel
            for target, source in step.copies:
                copy_bytes(target, source)
            for peer in step.signals:
                ch.signal(peer)
            issued: list[Awaitable[None]] = []
            for peer, data, via_slots in step.sends:
                issued.append(ch.send(peer, data, via_slots=via_slots))
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
        stepper, self._stepper = self._stepper, None
        if stepper is not None:
            stepper.close()
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
        stepper, self._stepper = self._stepper, None
        if stepper is not None:
            stepper.close()
        inner, self._inner = self._inner, None
        closer = getattr(inner, "close", None)
        if closer is not None:
            closer()

    def _admit(self, issued: list[Awaitable[None]]) -> None:
        """Keep what a round issued and is not finished: futures to wait for, and one other
        awaitable (a landing coroutine, or a small message's :class:`~.landing.LLReceive`, which
        :meth:`step` steps itself) alone stepped in place — no task, no loop turn — as ``await``
        would; with others beside it each becomes a task, so that all of them progress
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
            only = others[0]
            if type(only) is LLReceive:
                self._stepper = only  # stepped by step() itself: no generator, no StopIteration
            else:
                self._inner = only.__await__()
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
        # (By index: compiled, zip(..., strict=True) is a generic call with a keyword.)
        for i in range(len(kept)):
            if kept[i] is not arguments[i]:
                return None
        return self.bound

    def keep(self, bound: Bound, arguments: tuple[object, ...]) -> Bound:
        self.bound, self._arguments = bound, arguments
        return bound

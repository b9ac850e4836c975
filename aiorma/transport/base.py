"""The transport contract: what the progress driver needs from a "NIC".

A transport gives each rank an :class:`Endpoint`.  The endpoint registers window memory
(collectively), moves data one-sidedly, updates the words of peers' control regions with atomics,
and reports completions to a :class:`Sink`.  It never interprets epochs; that is the engine's job.

Completion contract, relied on by the engine and the driver:

* ``issue(win_id, token, op)`` starts one RMA operation and returns True when it is already
  *locally* complete (origin buffer reusable, result buffer filled); otherwise
  ``sink.op_completed(win_id, token)`` reports that later.
* ``flush(win_id, target, upto)`` asks for *remote* completion of every op issued to ``target``
  on that window so far.  It returns True when that is already so; otherwise
  ``sink.flushed(win_id, target, upto)`` reports it later.  Either way every one of those ops is
  reported locally complete first.
* ``control_write(win_id, dest, index, op, value)`` applies ``op`` (max or sum) to word ``index``
  of ``dest``'s control region, one-sidedly; ``dest`` may be this rank.  A word written with max
  has one writer, the rank whose slot it is (:mod:`aiorma.engine.control`), so a transport may
  apply the max as a store of the larger value where it can store whole words.  It is issued
  after every flush reported so far, so a write made after ``flushed`` never lands before that
  data (data before flag).  Its arrival is announced at ``dest`` by
  ``sink.control_changed(win_id)`` (local) or found by the destination's :meth:`Endpoint.poll`
  (polled transports).
* ``control_fetch(win_id, token, dest, index, op, value, compare)`` applies an atomic with a
  result; it returns the old value when it has it at once, else None and reports
  ``sink.fetched(win_id, token, old)`` later.
* Sink callbacks that reach the engine (``flushed``, ``fetched``, ``control_changed``) are made
  from :meth:`Endpoint.poll` or from the event loop, never from inside the calls above, so the
  engine is never re-entered; results available at once are return values instead.  Only
  ``op_completed`` (which finishes an RMA call's Request and never touches the engine) may also be
  reported from inside ``flush``.
"""

from __future__ import annotations

from typing import Final, Protocol

import attrs
import numpy as np
from mypy_extensions import mypyc_attr

from ..constants import Op
from ..engine.control import AtomicOp
from ..engine.identity_enum import IdentityEnum
from ..errors import RmaFailure, TransportError


class RmaKind(IdentityEnum):
    PUT = "put"
    GET = "get"
    ACCUMULATE = "accumulate"
    GET_ACCUMULATE = "get_accumulate"
    FETCH_AND_OP = "fetch_and_op"
    COMPARE_AND_SWAP = "compare_and_swap"


class RmaOp:
    """One validated RMA operation.  Arrays are 1-D, C-contiguous, of the window's dtype.
    ``disp`` and the lengths count elements of the window dtype; bounds were checked at the origin.

    Never changed once built, compared by identity.  A plain class rather than an attrs one: one
    is built per RMA call, and compiled (mypyc) a plain class is a C struct whose constructor
    costs a fraction of attrs' generated ``__init__``, which stays interpreted."""

    __slots__ = ("compare", "disp", "kind", "op", "origin", "result", "target")

    def __init__(
        self,
        kind: RmaKind,
        target: int,
        disp: int,
        origin: np.ndarray | None = None,
        result: np.ndarray | None = None,
        compare: np.ndarray | None = None,
        op: Op = Op.REPLACE,
    ) -> None:
        self.kind = kind
        self.target = target
        self.disp = disp
        self.origin = origin
        self.result = result
        self.compare = compare
        self.op = op

    @property
    def count(self) -> int:
        buf = self.origin if self.origin is not None else self.result
        assert buf is not None
        return int(buf.size)

    def __repr__(self) -> str:
        return (
            f"RmaOp({self.kind.name}, target={self.target}, disp={self.disp}, count={self.count}, "
            f"op={self.op.name})"
        )


@attrs.frozen
class WindowLayout:
    """What window creation tells every rank: its local memory, its control region (int64, the
    length asked for) and each rank's element count."""

    memory: np.ndarray
    control: np.ndarray
    counts: tuple[int, ...]


class PollNeed(IdentityEnum):
    """What a polled endpoint needs from the rank's waiter between polls (one answer, so that
    the waiting policy stays in :mod:`aiorma._core.waiter` and the transport only states facts)."""

    IDLE = "idle"  # nothing of ours in flight: park until rung (a guard poll now and then)
    SERVING = "serving"  # peers may need our progress at any time (win_create memory): poll often
    REQUESTS = "requests"  # own requests complete only while we drive progress: keep polling
    THREADS = "threads"  # a worker thread is inside MPI: let it have the interpreter, then wake


class Sink(Protocol):
    """Where an endpoint reports what happened.  ``flushed``, ``fetched`` and ``control_changed``
    come from :meth:`Endpoint.poll` or an event-loop callback, never from inside an ``issue``,
    ``control_fetch``, ``control_write`` or ``flush`` call (the engine that made that call is in
    the middle of a step: an answer inside the call is that call's return value instead).
    ``op_completed`` may come from inside ``flush``."""

    def op_completed(self, win_id: int, token: int) -> None: ...
    def flushed(self, win_id: int, target: int, upto: int) -> None: ...
    def fetched(self, win_id: int, token: int, old: int) -> None: ...
    def control_changed(self, win_id: int) -> None: ...
    def failed(self, error: BaseException) -> None: ...
    def peer_departed(self, rank: int, cause: BaseException | None = None) -> None:
        """Peer ``rank`` left by an exception, or its process ended (``cause`` says how): every
        Request of this rank fails with PeerFailed."""


#: The longest run of int64 words written by one put or accumulate where a peer reads them while
#: they land (signals, the collectives' LL words): a copy of at most 16 aligned bytes is made
#: with 8- or 16-byte stores, where a longer one may be a ``rep movsb`` — byte-sized stores in
#: any order, which a CI run caught tearing a word of a 64 KiB put on one node
#: (docs/architecture.md, *One put per small message*).
WHOLE_RUN: Final = 2


@mypyc_attr(allow_interpreted_subclasses=True)
class EndpointBase:
    """The compiled base of every endpoint: the calls made at every epoch step (through the
    driver's :class:`~aiorma.engine.engine_io.EngineIO`), every poll and every notice, declared
    here so that compiled code calls the MPI endpoint's natively — no generic method call, no
    boxed arguments — where a :class:`Endpoint` protocol would be called through Python.
    Contracts: the module docstring and :class:`Endpoint`."""

    def issue(self, win_id: int, token: int, op: RmaOp) -> bool:
        raise NotImplementedError

    def flush(self, win_id: int, target: int, upto: int) -> bool:
        raise NotImplementedError

    def control_write(self, win_id: int, dest: int, index: int, op: AtomicOp, value: int) -> None:
        raise NotImplementedError

    def control_fetch(
        self, win_id: int, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> int | None:
        raise NotImplementedError

    def poll(self) -> bool:
        raise NotImplementedError

    def look_control(self, win_id: int) -> bool:
        """Look at window ``win_id``'s control region without driving the transport: True when
        a word changed since the last look or poll (reported to the sink as :meth:`poll` reports
        it), False when none did or the endpoint cannot look without polling.  A call made
        while a lock request waits for a peer's write takes it as often as it likes."""
        return False

    def post_words(self, win_id: int, target: int, disp: int, words: np.ndarray | int) -> bool:
        raise NotImplementedError

    def put_word_flushed(self, win_id: int, target: int, disp: int, word: int) -> bool:
        raise NotImplementedError

    def put_words_flushed(self, win_id: int, target: int, disp: int, words: np.ndarray) -> bool:
        raise NotImplementedError

    def put_flushed(self, win_id: int, target: int, disp: int, data: np.ndarray) -> bool:
        raise NotImplementedError

    def stores_words_whole(self, target: int) -> bool:
        raise NotImplementedError


class Endpoint(Protocol):
    """One rank's view of a transport."""

    rank: int
    size: int
    #: True when completions and control-region changes are found only by :meth:`poll` (MPI);
    #: False when the endpoint reports them from event-loop callbacks by itself (local).
    polled: bool

    def attach(self, sink: Sink) -> None:
        """Route completions to ``sink`` (called once, before any window exists)."""

    async def create_window(
        self,
        win_id: int,
        memory: np.ndarray | None,
        count: int,
        dtype: np.dtype,
        control_words: int,
        *,
        notify: bool = False,
        watch_control: bool = True,
    ) -> WindowLayout:
        """Collective.  Expose ``memory`` (win_create) or allocate ``count`` elements (win_allocate,
        ``memory is None``), and allocate a zeroed control region of ``control_words`` int64 words
        (always allocated memory, so that atomics on it are passive).  ``notify``: peers' flushes
        towards this window's data must wake this rank (the collectives' flag windows, whose
        words are read as flags).  ``watch_control=False``: no peer ever writes the control
        region (the engine refuses the epochs that would), so a polled transport never looks at
        it.  Must not block the event loop while waiting for peers."""

    async def free_window(self, win_id: int) -> np.ndarray | None:
        """Collective.  Forget the window; returns a copy of allocated memory (None for win_create)."""

    def issue(self, win_id: int, token: int, op: RmaOp) -> bool: ...

    def flush(self, win_id: int, target: int, upto: int) -> bool: ...

    def put_flushed(self, win_id: int, target: int, disp: int, data: np.ndarray) -> bool:
        """Put ``data`` into ``target``'s window at element ``disp`` and complete it there, inside
        the call, when the transport can (True); else do nothing (False) and the caller takes the
        general path.  Only called when nothing of ours towards ``target`` is in flight on this
        window, so the put is ordered after everything issued before.  Rings ``target`` after it
        as a flush would (``notify`` windows)."""

    def stores_words_whole(self, target: int) -> bool:
        """True when a put of aligned int64 words into ``target``'s memory is seen by
        ``target``'s loads one whole word at a time (shared memory, in-process copies); False
        when the transport may deliver a put's bytes in pieces that split a word, even a put of
        one word (another node: MPI promises nothing about a load racing a put).  Words that
        must be seen whole there are written with accumulates, which MPI applies element by
        element (docs/architecture.md, *One put per small message*).  Symmetric: ``target``
        gets the same answer about this rank."""

    def put_words_flushed(self, win_id: int, target: int, disp: int, words: np.ndarray) -> bool:
        """:meth:`put_flushed` of int64 ``words`` (an int64 window) such that ``target``'s loads
        see each word whole: only where :meth:`stores_words_whole`, one put per run of at most
        :data:`WHOLE_RUN` words where a copy could race a reader, then one flush.  True when
        done inside the call; False changed nothing (the caller writes them with accumulates)."""

    def put_word_flushed(self, win_id: int, target: int, disp: int, word: int) -> bool:
        """:meth:`put_words_flushed` of the one int64 ``word`` (in int64's range): a signal's
        value, which the caller need not wrap in an array."""

    def post_words(self, win_id: int, target: int, disp: int, words: np.ndarray | int) -> bool:
        """Write int64 ``words`` (or the one int64 ``word``) at element ``disp`` of ``target``'s
        int64 window, each word seen whole by ``target``'s loads, ordered after this rank's
        earlier writes of the same words and after nothing else, with no completion reported:
        the transport itself keeps what the write needs until it is complete, and a later
        :meth:`flush` towards ``target`` or the window's free completes it (``Window.notify``).
        True when posted; False changed nothing (the caller writes the words with puts or
        accumulates).  Rings ``target`` after it (``notify`` windows).  The caller may reuse
        ``words`` at once."""

    def reads_memory_of(self, peer: int) -> bool:
        """True when :meth:`read_memory` can copy bytes out of any memory of ``peer``'s — a user's
        buffer, not only a window — inside the call: a peer in this process, or on this node
        where the kernel allows cross-memory attach.  Symmetric: ``peer`` gets the same answer
        about this rank."""

    def read_memory(self, peer: int, address: int, out: np.ndarray) -> None:
        """Copy ``out.nbytes`` bytes from ``address`` in ``peer``'s memory into ``out``
        (contiguous), inside the call; only where :meth:`reads_memory_of`.  What is at that
        address is the caller's business (the peer must keep it unchanged until told the copy is
        done).  Raises :class:`~aiorma.errors.TransportError` when the copy fails."""

    def control_write(self, win_id: int, dest: int, index: int, op: AtomicOp, value: int) -> None: ...

    def control_fetch(
        self, win_id: int, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> int | None: ...

    def poll(self) -> bool:
        """Make progress; report completions and changed control regions to the sink.  True when
        anything was reported."""

    def doorbell(self) -> int | None:
        """A file descriptor that turns readable when a peer wants this rank to poll (it wrote our
        control region, or started an operation that needs our progress); None if there is none.
        Reading it is :meth:`poll`'s job."""

    def parking(self, parked: bool) -> None:
        """The rank is about to park (True; it polls once more before it sleeps) or has woken
        (False): lets peers skip ringing a rank that is polling anyway."""

    def poll_need(self) -> PollNeed:
        """What must happen between polls for progress to be made (see :class:`PollNeed`)."""

    async def close(self) -> None:
        """Collective: free every window left open and whatever start-up created; idempotent."""

    def abandon(self, reason: str | None = None) -> None:
        """Local, after a failure (peers may not be closing): tell the peers this rank left and
        why (``reason``, the exception it left with), stop threads, close sockets; leave
        collective objects (MPI windows, communicators) to the library's finalisation."""


class map_transport_errors:
    """``with map_transport_errors(what):`` translates a transport library's exceptions into
    :class:`TransportError`, in one place.  A class, not a generator: it wraps every MPI call."""

    __slots__ = ("detail", "what")

    def __init__(self, what: str, detail: object = None) -> None:
        self.what = what
        self.detail = detail  # named in the message only when something failed (no formatting per call)

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if exc is None or isinstance(exc, RmaFailure) or not isinstance(exc, Exception):
            return False
        # The library's own error types vary (MPI.Exception, OSError, ...).
        what = self.what if self.detail is None else f"{self.what} {self.detail}"
        raise TransportError(f"{what}: {exc}") from exc

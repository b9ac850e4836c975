"""NotifiedAccess: the machinery behind :meth:`aiorma.Window.signal`, ``put_signal`` and
``wait_until`` (docs/notified.md), one per window.

A signal is a word (or a short array of words) of the target's int64 window written after
everything this rank issued to the target on that window: inside the call when the engine finds
all of it complete there already (the transport's put-and-flush), otherwise as a general put or
accumulate issued once a flush towards the target completed, followed by a flush.  A notice
(``Window.notify``) is the same words without the ordering and without a Request: the
transport's posted write (on this node the same stores, towards another node an accumulate whose
completion only the transport tracks), or the general put or accumulate.  A wait is a
:class:`MemoryWatcher` future on the rank's own memory.  The Window keeps the public methods (and
their contracts) and hands this class what it needs of its own: its public surface, and the few
checks it keeps private.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

import numpy as np

from ..constants import SIGNAL_SET, Op, SignalOp
from ..errors import EpochError, RmaTypeError, RmaUsageError, WindowFreedError
from ..request import Request, finish_as, finished_request
from ..transport.base import WHOLE_RUN, Endpoint, EndpointBase, RmaKind, RmaOp
from .watch import COMPARISONS, MemoryWatcher

if TYPE_CHECKING:
    from ..engine.window_engine import WindowEngine
    from .driver import ProgressDriver

# Enum members the functions below read, as module constants: on Python 3.11 reading a
# member (``EpochKind.LOCK``) goes through the enum metaclass's ``__getattr__`` hook, five
# times a plain attribute's cost; compiled, a Final name is a C variable.
_OP_REPLACE: Final = Op.REPLACE
_OP_SUM: Final = Op.SUM
_RMA_KIND_ACCUMULATE: Final = RmaKind.ACCUMULATE
_RMA_KIND_PUT: Final = RmaKind.PUT

_INT64: Final = np.dtype(np.int64)
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class NotifiedWindow(Protocol):
    """What NotifiedAccess uses of :class:`aiorma.Window`'s public surface (window.py imports this
    module, so this one names the window structurally)."""

    counts: tuple[int, ...]
    dtype: np.dtype

    @property
    def memory(self) -> np.ndarray: ...

    @property
    def engine(self) -> WindowEngine: ...

    def put(self, origin: Any, target: int, disp: int = 0) -> Request: ...

    def accumulate(self, origin: Any, target: int, disp: int = 0, op: Op = Op.SUM) -> Request: ...

    def flush(self, rank: int) -> Request: ...


class NotifiedAccess:
    """The notified-access calls of one window.  :class:`aiorma.Window`'s ``signal``,
    ``put_signal`` and ``wait_until`` delegate here; their docstrings state the contracts.

    Besides the window, the constructor takes what the window keeps private: its progress ``driver``
    and transport ``endpoint``, whether a signal may be written inside the call (``inline``: off
    with ``AIORMA_INLINE=0``), and its checks — ``check_open`` refuses every call of a failed, freed
    or closed window; ``plain`` is the exact-type test of the common RMA call (1-D array of the
    window's dtype, plain int rank and displacement, in bounds); ``check_span`` refuses a rank or
    element range out of bounds and returns the rank and displacement as Python ints; ``value``
    returns a value as one element of the window's dtype, or refuses it; ``origin`` returns any
    origin (a value, a sequence, an array) as a 1-D array of the window's dtype, or refuses it.
    """

    def __init__(
        self,
        window: NotifiedWindow,
        *,
        driver: ProgressDriver,
        endpoint: Endpoint,
        inline: bool,
        check_open: Callable[[], None],
        plain: Callable[[Any, Any, Any], bool],
        check_span: Callable[[int, int, int], tuple[int, int]],
        value: Callable[[Any], np.ndarray],
        origin: Callable[[Any], np.ndarray],
    ) -> None:
        self._window = window
        # Fixed for the window's life: kept here so that the inline paths read one attribute.
        self._engine = window.engine
        self._win_id = window.engine.win_id
        self._dtype = window.dtype
        self._counts = window.counts
        self._driver = driver
        self._endpoint = cast(EndpointBase, endpoint)  # (every endpoint's compiled base: native calls)
        self._inline_allowed = inline
        self._check_open = check_open
        self._plain = plain
        self._check_span = check_span
        self._value = value
        self._origin = origin
        self._watcher: MemoryWatcher | None = None  # made by the first wait_until
        self._signals_pending: dict[int, Request] = {}  # target -> its last signal not yet written

    def signal(self, target: Any, index: Any, value: int | np.ndarray, op: SignalOp) -> Request:
        """:meth:`aiorma.Window.signal`."""
        self._check_open()
        if op is SIGNAL_SET and not self._signals_pending and self._signal_inline(target, index, value):
            return finished_request(None, None, "signal")
        target, index, word = self._check_signal(target, index, value, op)

        def flushed_then_written() -> Request:
            return self._after(self._window.flush(target), lambda: self._write_signal(word), "signal")

        # Signals to one target are written one after the other: a signal waiting for its flush
        # must not be overtaken by a later one (two puts in flight to one word may land in
        # either order).
        earlier = self._signals_pending.get(target)
        if earlier is None:
            signalled = flushed_then_written()
        else:
            signalled = self._after(earlier, flushed_then_written, "signal")
        if not signalled.done():
            self._signals_pending[target] = signalled
            signalled.add_done_callback(lambda done: self._signal_written(target, done))
        return signalled

    def notify(self, target: Any, index: Any, value: int | np.ndarray) -> None:
        """:meth:`aiorma.Window.notify`."""
        self._check_open()
        if self._inline_allowed and self._posted(target, index, value):
            return
        target, _index, word = self._check_signal(target, index, value, SIGNAL_SET)
        for request in self._issue_words(word):
            if not request.done():
                request.add_done_callback(_retrieve)
            elif (error := request.exception()) is not None:
                raise error

    def _posted(self, target: Any, index: Any, value: Any) -> bool:
        """A notice written by the transport inside the call (True): plain arguments
        (:meth:`_words_plain`) and the epoch's grant towards ``target`` in hand, with nothing of
        ours in flight there (the engine's inline flush — stricter than a notice needs, and what
        makes the transport's word writes safe beside the engine's ops).  False changed
        nothing."""
        return (
            self._words_plain(target, index, value)
            and self._engine.flush_inline(target)
            and self._endpoint.post_words(self._win_id, target, index, value)
        )

    def _signal_written(self, target: int, done: Request) -> None:
        if self._signals_pending.get(target) is done:
            del self._signals_pending[target]

    def _signal_inline(self, target: Any, index: Any, value: Any) -> bool:
        """A SIGNAL_SET inside the call: when the call's arguments are plain
        (:meth:`_words_plain`) and everything issued to ``target`` is complete there (already,
        or by a flush answered inside the call), the transport's put-and-flush (True).  False
        changed nothing."""
        if not (
            self._inline_allowed
            and self._words_plain(target, index, value)
            and self._engine.flush_inline(target)  # in a passive epoch, earlier ops complete: data first
        ):
            return False
        if type(value) is int:
            return self._endpoint.put_word_flushed(self._win_id, target, index, value)
        return self._endpoint.put_words_flushed(self._win_id, target, index, value)

    def _words_plain(self, target: Any, index: Any, value: Any) -> bool:
        """Plain signal words: an int (:meth:`_signal_plain`), or an int64 array of an int64
        window (the window's own :meth:`_plain` test)."""
        if type(value) is int:
            return self._signal_plain(target, index, value)
        return self._dtype is _INT64 and self._plain(value, target, index)

    def _signal_plain(self, target: Any, index: Any, value: Any) -> bool:
        """The common signal, checked by exact types: plain ints in range, an int64 window."""
        counts = self._counts
        return (
            self._dtype is _INT64
            and type(target) is int
            and type(index) is int
            and type(value) is int
            and 0 <= target < len(counts)
            and 0 <= index < counts[target]
            and _INT64_MIN <= value <= _INT64_MAX
        )

    def put_signal(
        self,
        origin: Any,
        target: Any,
        disp: Any,
        signal_window: object,
        signal: NotifiedAccess | None,
        index: Any,
        value: int,
        op: SignalOp,
    ) -> Request:
        """:meth:`aiorma.Window.put_signal`.  ``signal`` is ``signal_window``'s NotifiedAccess,
        None when ``signal_window`` is not a Window: refused here, after this window's own check,
        as every bad argument is."""
        self._check_open()
        if (
            op is SIGNAL_SET
            and self._inline_allowed
            and signal is not None
            and signal._inline_allowed
            and not signal._signals_pending
            and self._plain(origin, target, disp)
            and signal._signal_plain(target, index, value)
            and signal._engine.flush_inline(target)  # its epoch covers target: no refusal later
            and self._engine.flush_inline(target)
            and self._endpoint.put_flushed(self._win_id, target, disp, origin)
        ):
            # The signal window was checked above and nothing happened on it since.
            if signal._endpoint.put_word_flushed(signal._win_id, target, index, value):
                return finished_request(None, None, "put_signal")
            return signal.signal(target, index, value, SIGNAL_SET)
        if signal is None:
            raise RmaUsageError(f"signal_window must be a Window, not {type(signal_window).__name__}")
        signal._check_signal(target, index, value, op)
        target, _ = self._check_span(target, 0, 0)
        if not self._engine.passive_access(target):
            raise EpochError(f"put_signal towards rank {target} outside a lock or lock_all epoch")
        self._window.put(origin, target, disp)
        if signal is self:
            return self.signal(target, index, value, op)
        flushed = self._window.flush(target)
        return self._after(flushed, lambda: signal.signal(target, index, value, op), "put_signal")

    def wait_until(self, index: Any, compare: str, value: Any) -> Request:
        """:meth:`aiorma.Window.wait_until`."""
        self._check_open()
        if compare not in COMPARISONS:
            raise RmaUsageError(f"compare must be one of {', '.join(COMPARISONS)}, not {compare!r}")
        _, index = self._check_span(self._engine.rank, index, 1)
        expected = self._value(value)[0]
        if self._watcher is None:
            self._watcher = MemoryWatcher(self._window.memory, self._driver.waiter)
        future = self._watcher.wait(index, expected, compare)
        if future.done():
            return finished_request(None, None, "wait_until")
        return Request(future, self._driver.progress, "wait_until", self._driver.inline_wait)

    def close(self) -> None:
        """The window is being freed: every pending :meth:`wait_until` fails with
        :class:`~aiorma.WindowFreedError`.  Called before the memory goes: a pending wait can
        never be met."""
        if self._watcher is not None:
            self._watcher.fail(WindowFreedError("the window was freed while wait_until waited on it"))
            self._watcher.close()
            self._watcher = None

    def _check_signal(self, target: Any, index: Any, value: Any, op: Any) -> tuple[int, int, RmaOp]:
        """Refuse a bad signal at the call; the op that writes it.  Its words are a copy: this
        path writes them later, after a flush, and the caller may reuse an array ``value`` at
        once."""
        self._check_open()
        if self._dtype != _INT64:
            raise RmaTypeError(f"signal words are int64: the signal window has dtype {self._dtype}")
        if not isinstance(op, SignalOp):
            raise RmaUsageError(f"op must be SIGNAL_SET or SIGNAL_ADD, not {op!r}")
        word = self._origin(value).copy()
        target, index = self._check_span(target, index, word.size)
        if not self._engine.passive_access(target):
            raise EpochError(f"signal towards rank {target} outside a lock or lock_all epoch")
        if op is SIGNAL_SET:
            return target, index, RmaOp(_RMA_KIND_PUT, target, index, word)
        return target, index, RmaOp(_RMA_KIND_ACCUMULATE, target, index, word, op=_OP_SUM)

    def _write_signal(self, word: RmaOp) -> Request:
        """The signal write and the flush that completes it at the target."""
        self._issue_words(word)
        return self._window.flush(word.target)

    def _issue_words(self, word: RmaOp) -> list[Request]:
        """The RMA calls that write ``word`` (a SET as puts, an ADD as an accumulate)."""
        words = word.origin
        assert words is not None
        if word.kind is not _RMA_KIND_PUT:
            return [self._window.accumulate(word.origin, word.target, word.disp, word.op)]
        # Runs of at most WHOLE_RUN words, each copied with whole-word stores; towards a peer
        # whose puts may land in pieces that split a word (another node) as accumulates with
        # REPLACE, which MPI applies element by element — so the reader never loads half of
        # one signal and half of another (docs/architecture.md, *One put per small message*).
        whole = self._endpoint.stores_words_whole(word.target)
        issued = []
        for lo in range(0, words.size, WHOLE_RUN):
            run, disp = words[lo : lo + WHOLE_RUN], word.disp + lo
            if whole:
                issued.append(self._window.put(run, word.target, disp))
            else:
                issued.append(self._window.accumulate(run, word.target, disp, _OP_REPLACE))
        return issued

    def _after(self, first: Request, then: Callable[[], Request], what: str) -> Request:
        """A Request for ``then()``'s Request, ``then`` called once ``first`` succeeded."""
        if first.done():
            error = first.exception()
            return finished_request(None, error, what) if error is not None else then()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle(finished: Request) -> None:
            finish_as(future, finished)

        def step(done: Request) -> None:
            try:
                if done.exception() is not None:
                    settle(done)
                else:
                    then().add_done_callback(settle)
            except BaseException as exc:  # the epoch closed meanwhile, the window failed, ...
                if not future.done():
                    future.set_exception(exc)

        first.add_done_callback(step)
        return Request(future, self._driver.progress, what, self._driver.inline_wait)


def _retrieve(request: Request) -> None:
    """A notice's write finished: its error, if any, is retrieved (nobody awaits the write; a
    failure of the window or of a peer reaches the window's callers and awaiters anyway)."""
    request.exception()

"""Window: the user-facing RMA object.  Every call takes effect when made and returns a Request.

Checks happen here (buffers, dtypes, bounds) and in the engine (epoch rules), all before anything
changes: a call that raises leaves the window exactly as it was.  Ranks are ints or numpy integers,
never bools; displacements are checked as Python ints (no numpy wrap-around); values that are not
already an array of the window's dtype must fit it (refused, never wrapped); a window whose Comm
was closed refuses every call with CommClosedError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Final, SupportsIndex, cast

import numpy as np

from ._buffer_spec import unwrap
from ._core.driver import ProgressDriver
from ._core.notified import NotifiedAccess
from .constants import LOCK_EXCLUSIVE, SIGNAL_SET, LockType, Op, SignalOp
from .engine.window_engine import WindowEngine
from .errors import CommClosedError, RmaRangeError, RmaTypeError, RmaUsageError, WindowFreedError
from .ops import check_accumulate_dtype, check_compare_dtype
from .request import EpochRequest, Request
from .transport.base import Endpoint, RmaKind, RmaOp

# RMA kinds and an op as module constants: on Python 3.11 every ``RmaKind.PUT`` read goes through
# the enum metaclass's ``__getattr__`` hook; compiled, a Final name is a C variable.
_PUT: Final = RmaKind.PUT
_GET: Final = RmaKind.GET
_ACCUMULATE: Final = RmaKind.ACCUMULATE
_GET_ACCUMULATE: Final = RmaKind.GET_ACCUMULATE
_FETCH_AND_OP: Final = RmaKind.FETCH_AND_OP
_COMPARE_AND_SWAP: Final = RmaKind.COMPARE_AND_SWAP
_NO_OP: Final = Op.NO_OP


class Window:
    """Memory exposed by every rank of a :class:`~aiorma.Comm` for one-sided access.

    Created by :meth:`Comm.win_create` / :meth:`Comm.win_allocate`.  ``disp`` in RMA calls counts
    elements of :attr:`dtype`.  Synchronization calls follow MPI's names; each takes effect when
    called and returns a :class:`Request` whose completion is documented per call (awaiting it is
    the blocking form).  RMA Requests complete at *local* completion (origin buffer reusable,
    result buffer filled), as MPI's request-based R* calls; remote completion comes with the
    epoch's closing call or a flush.  Only :meth:`free` (and window creation) is collective.

    Every call refuses bad input at the call, changing nothing, with an
    :class:`~aiorma.RmaUsageError` subclass: :class:`~aiorma.EpochError` for a call the epoch
    rules forbid (RMA outside an epoch covering the target, unlock without lock, ...),
    :class:`~aiorma.RmaRangeError` for a rank or displacement out of range,
    :class:`~aiorma.RmaTypeError` for a buffer or value of the wrong dtype, shape or size, or an
    op the dtype does not support (docs/datatypes.md); :class:`~aiorma.WindowFreedError` after
    :meth:`free`, :class:`~aiorma.CommClosedError` after the Comm closed.  A window that failed
    (a peer, the transport) raises that :class:`~aiorma.RmaFailure` from every call and Request.
    """

    def __init__(
        self,
        driver: ProgressDriver,
        endpoint: Endpoint,
        engine: WindowEngine,
        memory: np.ndarray,
        counts: tuple[int, ...],
    ) -> None:
        self._driver = driver
        self._endpoint = endpoint
        self._engine = engine
        self._memory = memory
        self._win_id = engine.win_id
        self.counts = counts  #: elements exposed by each rank
        self.dtype: np.dtype = memory.dtype  #: the element type of every rank's memory
        self.freed = False
        self._accumulate_ops: set[Op] = set()  # ops accumulate() has accepted for this dtype
        self._notified = NotifiedAccess(
            self,
            driver=driver,
            endpoint=endpoint,
            inline=driver.inline,
            check_open=self._check_open,
            plain=self._plain,
            check_span=self._check_span,
            value=self._value,
            origin=self._origin,
        )

    def _call(self, token: int, what: str, value: Any = None) -> Request:
        """The Request of an engine call's token.  The call took its epoch as far as it could go
        inside it (docs/architecture.md, *Progress and waiting*): a Request that finished inside
        the call is returned finished.  (A method, not a ``functools.partial`` of the driver's:
        compiled, a call of a partial is a generic Python call.)"""
        return self._driver.request(self._win_id, token, what, value)

    def _opening(self, token: int, what: str, close: Callable[[], Request]) -> EpochRequest:
        """The Request of an epoch-opening call's token, closed by ``close`` as a context manager."""
        return cast(EpochRequest, self._driver.request(self._win_id, token, what, None, close))

    # --------------------------------------------------------------------- properties

    @property
    def memory(self) -> np.ndarray:
        """This rank's exposed memory (the caller's own array for ``win_create``)."""
        return self._memory

    @property
    def win_id(self) -> int:
        """The window's number in its Comm (application windows count from 1)."""
        return self._engine.win_id

    @property
    def rank(self) -> int:
        """This rank's number in the window's group (its Comm's rank)."""
        return self._engine.rank

    @property
    def size(self) -> int:
        """The number of ranks in the window's group."""
        return self._engine.size

    @property
    def engine(self) -> WindowEngine:
        """The window's progress engine (its epochs and counters), for inspection and tests."""
        return self._engine

    # ------------------------------------------------------------- active target sync

    def fence(self, assertion: SupportsIndex = 0) -> Request:
        """Close the open fence epoch (barrier semantics) and/or open the next one.  Completes
        when the closed epoch has completed on this rank, i.e. every rank's RMA of that epoch is
        done; with MODE_NOPRECEDE alone, when the new epoch is activated."""
        self._check_open()
        return self._call(self._engine.fence(assertion), "fence")

    def post(self, group: Iterable[SupportsIndex], assertion: SupportsIndex = 0) -> EpochRequest:
        """Expose this window to ``group`` (a list of ranks).  Completes when the exposure is
        granted.  ``async with win.post(group):`` closes it with :meth:`wait` on the way out."""
        self._check_open()
        return self._opening(self._engine.post(group, assertion), "post", self.wait)

    def start(self, group: Iterable[SupportsIndex], assertion: SupportsIndex = 0) -> EpochRequest:
        """Begin an access epoch to ``group`` (a list of ranks).  Completes when every target has
        granted it (or, for an epoch without RMA calls that finished before its grants arrived,
        with the epoch).  ``async with win.start(group):`` closes it with :meth:`complete`."""
        self._check_open()
        return self._opening(self._engine.start(group, assertion), "start", self.complete)

    def complete(self) -> Request:
        """End the access epoch.  Completes when its RMA is complete at every target."""
        self._check_open()
        return self._call(self._engine.complete(), "complete")

    def wait(self) -> Request:
        """End the exposure epoch.  Completes when every origin of the group has completed."""
        self._check_open()
        return self._call(self._engine.wait(), "wait")

    def test(self) -> bool:
        """MPI_WIN_TEST: drive progress; if the exposure epoch is finished, end it, return True."""
        self._check_open()
        self._driver.progress()
        return self._engine.test()

    # ------------------------------------------------------------ passive target sync

    def lock(
        self, rank: SupportsIndex, lock_type: LockType = LOCK_EXCLUSIVE, assertion: SupportsIndex = 0
    ) -> EpochRequest:
        """Begin a passive-target epoch to ``rank``.  Completes when the lock is acquired.
        ``async with win.lock(rank, type):`` closes it with :meth:`unlock` on the way out."""
        self._check_open()
        return self._opening(self._engine.lock(rank, lock_type, assertion), "lock", lambda: self.unlock(rank))

    def unlock(self, rank: SupportsIndex) -> Request:
        """End the lock epoch to ``rank``.  Completes when its RMA is complete at ``rank`` and
        the lock is released."""
        self._check_open()
        return self._call(self._engine.unlock(rank), "unlock")

    def lock_all(self, assertion: SupportsIndex = 0) -> EpochRequest:
        """Shared lock on every rank.  Completes when every rank has granted it.
        ``async with win.lock_all():`` closes it with :meth:`unlock_all` on the way out."""
        self._check_open()
        return self._opening(self._engine.lock_all(assertion), "lock_all", self.unlock_all)

    def unlock_all(self) -> Request:
        """End the lock_all epoch.  Completes when its RMA is complete everywhere."""
        self._check_open()
        return self._call(self._engine.unlock_all(), "unlock_all")

    def flush(self, rank: SupportsIndex) -> Request:
        """Completes when the RMA issued so far to ``rank`` in this epoch is complete there."""
        return self._flush(rank, "flush")

    def flush_local(self, rank: SupportsIndex) -> Request:
        """Completes when the RMA issued so far to ``rank`` is locally complete."""
        return self._flush(rank, "flush_local")

    def _flush(self, rank: SupportsIndex, what: str) -> Request:
        self._check_open()
        return self._call(self._engine.flush(rank), what)

    def flush_all(self) -> Request:
        """:meth:`flush` towards every target of the open lock and lock_all epochs.  Completes
        when the RMA issued so far to each of them is complete there."""
        self._check_open()
        return self._call(self._engine.flush_all(), "flush_all")

    def flush_local_all(self) -> Request:
        """:meth:`flush_local` towards every target of the open lock and lock_all epochs."""
        self._check_open()
        return self._call(self._engine.flush_all(), "flush_local_all")

    # i-prefixed aliases for readers coming from the MPI_WIN_I* proposal of Zounmevo (2014).
    # (Methods, not class attributes bound to the same functions: the class is compiled.)

    def ifence(self, assertion: SupportsIndex = 0) -> Request:
        """:meth:`fence`."""
        return self.fence(assertion)

    def ipost(self, group: Iterable[SupportsIndex], assertion: SupportsIndex = 0) -> EpochRequest:
        """:meth:`post`."""
        return self.post(group, assertion)

    def istart(self, group: Iterable[SupportsIndex], assertion: SupportsIndex = 0) -> EpochRequest:
        """:meth:`start`."""
        return self.start(group, assertion)

    def icomplete(self) -> Request:
        """:meth:`complete`."""
        return self.complete()

    def iwait(self) -> Request:
        """:meth:`wait`."""
        return self.wait()

    def ilock(
        self, rank: SupportsIndex, lock_type: LockType = LOCK_EXCLUSIVE, assertion: SupportsIndex = 0
    ) -> EpochRequest:
        """:meth:`lock`."""
        return self.lock(rank, lock_type, assertion)

    def iunlock(self, rank: SupportsIndex) -> Request:
        """:meth:`unlock`."""
        return self.unlock(rank)

    def ilock_all(self, assertion: SupportsIndex = 0) -> EpochRequest:
        """:meth:`lock_all`."""
        return self.lock_all(assertion)

    def iunlock_all(self) -> Request:
        """:meth:`unlock_all`."""
        return self.unlock_all()

    def iflush(self, rank: SupportsIndex) -> Request:
        """:meth:`flush`."""
        return self.flush(rank)

    def iflush_local(self, rank: SupportsIndex) -> Request:
        """:meth:`flush_local`."""
        return self.flush_local(rank)

    def iflush_all(self) -> Request:
        """:meth:`flush_all`."""
        return self.flush_all()

    def iflush_local_all(self) -> Request:
        """:meth:`flush_local_all`."""
        return self.flush_local_all()

    # ---------------------------------------------------------------------------- RMA

    def put(self, origin: Any, target: SupportsIndex, disp: SupportsIndex = 0) -> Request:
        """Write ``origin`` (an array of the window's dtype, or values that fit it) into
        ``target``'s window at element ``disp``, inside an access epoch covering ``target``.
        Returns a Request that completes at local completion: ``origin`` may be reused; the
        data is in the target's memory once the epoch's closing call or a flush completes."""
        if self._plain(origin, target, disp):
            self._check_open()
            # (_plain found target and disp plain ints: the casts are for the type checker)
            return self._rma(RmaOp(_PUT, cast(int, target), cast(int, disp), origin), "put")
        data = self._origin(origin)
        target, disp = self._check_span(target, disp, data.size)
        return self._rma(RmaOp(_PUT, target, disp, origin=data), "put")

    def get(self, result: np.ndarray, target: SupportsIndex, disp: SupportsIndex = 0) -> Request:
        """Read ``result.size`` elements of ``target``'s window at ``disp`` into ``result``."""
        if self._plain(result, target, disp) and result.flags.writeable:
            self._check_open()
            return self._rma(RmaOp(_GET, cast(int, target), cast(int, disp), result=result), "get", result)
        result, out = self._result(result)
        target, disp = self._check_span(target, disp, out.size)
        return self._rma(RmaOp(_GET, target, disp, result=out), "get", result)

    def accumulate(
        self, origin: Any, target: SupportsIndex, disp: SupportsIndex = 0, op: Op = Op.SUM
    ) -> Request:
        """Combine ``origin`` into the target with ``op``, atomically per element."""
        if type(op) is Op and op in self._accumulate_ops and self._plain(origin, target, disp):
            self._check_open()
            plain = RmaOp(_ACCUMULATE, cast(int, target), cast(int, disp), origin=origin, op=op)
            return self._rma(plain, "accumulate")
        operation = self._op(op, allow_no_op=False)
        self._accumulate_ops.add(operation)
        data = self._origin(origin)
        target, disp = self._check_span(target, disp, data.size)
        return self._rma(RmaOp(_ACCUMULATE, target, disp, origin=data, op=operation), "accumulate")

    def get_accumulate(
        self, origin: Any, result: np.ndarray, target: SupportsIndex, disp: SupportsIndex = 0, op: Op = Op.SUM
    ) -> Request:
        """Fetch the target's old contents into ``result`` and combine ``origin`` into it."""
        operation = self._op(op, allow_no_op=True)
        data = self._origin(origin)
        result, out = self._result(result)
        if out.size != data.size:
            raise RmaTypeError(f"result holds {out.size} elements, origin {data.size}")
        target, disp = self._check_span(target, disp, data.size)
        op_ = RmaOp(_GET_ACCUMULATE, target, disp, origin=data, result=out, op=operation)
        return self._rma(op_, "get_accumulate", result)

    def fetch_and_op(
        self, origin: Any, result: np.ndarray, target: SupportsIndex, disp: SupportsIndex = 0, op: Op = Op.SUM
    ) -> Request:
        """Single-element :meth:`get_accumulate` (MPI_Fetch_and_op): ``result`` (one element)
        receives the target's old value at ``disp``, then ``op`` combines ``origin`` (one
        element) into it.  The Request's result is ``result``, filled when it completes."""
        operation = self._op(op, allow_no_op=True)
        data = self._single(self._origin(origin), "origin")
        result, out = self._result(result)
        out = self._single(out, "result")
        target, disp = self._check_span(target, disp, 1)
        op_ = RmaOp(_FETCH_AND_OP, target, disp, origin=data, result=out, op=operation)
        return self._rma(op_, "fetch_and_op", result)

    def compare_and_swap(
        self, origin: Any, compare: Any, result: np.ndarray, target: SupportsIndex, disp: SupportsIndex = 0
    ) -> Request:
        """Atomically: ``result = target[disp]``; if it equals ``compare``, store ``origin``."""
        self._check_open()
        check_compare_dtype(self.dtype)
        data = self._single(self._origin(origin), "origin")
        expected = self._single(self._origin(compare), "compare")
        result, out = self._result(result)
        out = self._single(out, "result")
        target, disp = self._check_span(target, disp, 1)
        op_ = RmaOp(_COMPARE_AND_SWAP, target, disp, origin=data, compare=expected, result=out)
        return self._rma(op_, "compare_and_swap", result)

    # ----------------------------------------------------------------- notified access
    # The machinery is aiorma/_core/notified.py's NotifiedAccess, one per window.

    def signal(
        self, target: SupportsIndex, index: SupportsIndex, value: int | np.ndarray, op: SignalOp = SIGNAL_SET
    ) -> Request:
        """Write signal word ``index`` of ``target``'s window (an int64 window): store ``value``
        (``SIGNAL_SET``) or add it atomically (``SIGNAL_ADD``), *after* every RMA call
        this rank made to ``target`` on this window is complete there (the call flushes them
        first).  ``target`` awaits it with :meth:`wait_until`, without an epoch call of its own.

        ``value`` may also be an array of words (int64 values, flattened): word ``i`` goes to
        ``index + i``, each word written whole (a reader's load sees the word before or after
        the signal, never half of each), not as one atomic unit — a reader may see some of them
        before others.  The array may be reused as soon as the call returns.  On this node a
        short array costs what one word does (a put and a flush in one transport call).

        Inside a lock or lock_all epoch covering ``target``, which must stay open until the
        Request completes.  The Request completes when the word is written at ``target``
        (remote completion).  On this node ``SIGNAL_SET`` is a put (shared memory stores an
        aligned word whole); towards another node, where a put's bytes may land in pieces, it
        is an accumulate with REPLACE, which MPI applies element by element — so, like
        ``SIGNAL_ADD`` there, it waits for ``target``'s progress.  A word set by several ranks
        holds the last value written, so give each signalling rank its own word, or use
        ``SIGNAL_ADD``."""
        return self._notified.signal(target, index, value, op)

    def notify(self, target: SupportsIndex, index: SupportsIndex, value: int | np.ndarray) -> None:
        """Write signal word ``index`` (or words from ``index`` on, for an array ``value``) of
        ``target``'s int64 window as :meth:`signal` with ``SIGNAL_SET`` does — each word written
        whole, after this rank's earlier writes of the same word — but with no order against this
        rank's other RMA calls and nothing to wait for: no Request.  For notices that the target
        polls for in its own memory (:meth:`wait_until`) and that need no completion, such as
        the sequence words of a protocol of one's own — aiorma's collectives send their flags
        and small messages this way.

        Inside a lock or lock_all epoch covering ``target``; refused at the call as
        :meth:`signal` refuses.  The words land at ``target`` some time after the call — on this
        node inside it (stores into ``target``'s memory, mapped here); towards another node an
        accumulate with REPLACE that ``target``'s progress applies, and that only the transport
        tracks.  They are complete there at the latest when a later :meth:`flush` towards
        ``target`` completes, or when the window is freed (:meth:`free`); the epoch's closing
        call does not wait for them.  The array may be reused as soon as the call returns."""
        self._notified.notify(target, index, value)

    def put_signal(
        self,
        origin: Any,
        target: SupportsIndex,
        disp: SupportsIndex,
        signal_window: object,
        index: SupportsIndex,
        value: int,
        op: SignalOp = SIGNAL_SET,
    ) -> Request:
        """Notified put (OpenSHMEM's ``put_signal``): put ``origin`` into ``target``'s window at
        ``disp``, then, once it is complete at ``target``, :meth:`signal` word ``index`` of
        ``signal_window`` there (which may be this window).  Both windows need a lock or lock_all
        epoch covering ``target``, open until the Request completes; the Request completes when
        the signal is written at ``target`` — so when ``target``'s :meth:`wait_until` on that
        word returns, the data is in its memory."""
        # Not a Window: put_signal refuses it, after this window's own checks.
        signal = signal_window._notified if isinstance(signal_window, Window) else None
        return self._notified.put_signal(origin, target, disp, signal_window, signal, index, value, op)

    def wait_until(self, index: SupportsIndex, compare: str, value: Any) -> Request:
        """Completes once this rank's own window element ``index`` satisfies ``compare`` with
        ``value`` (``"=="``, ``"!="``, ``"<"``, ``"<="``, ``">"``, ``">="``), as OpenSHMEM's
        ``wait_until``: at once if it does now.  Needs no epoch — it only reads local memory —
        and parks through the rank's waiter when there is nothing else to do.  Peers raise such
        words with :meth:`signal`, :meth:`put_signal` or any RMA call.  Cancelling an await of it
        abandons only that wait.  A wait still pending when the window is freed fails with
        :class:`~aiorma.WindowFreedError`."""
        return self._notified.wait_until(index, compare, value)

    # --------------------------------------------------------------------------- free

    def free(self) -> Request:
        """Collective.  Completes once every epoch of this window has completed (rule 10b) and
        every rank has freed it.  Raises EpochError, changing nothing, while an epoch with RMA
        calls is open.  Memory from ``win_allocate`` stays readable as a private copy."""
        self._check_open()
        token = self._engine.free()
        engine_done = self._call(token, "free")
        task = asyncio.get_running_loop().create_task(self._finish_free(engine_done))
        return Request(task, self._driver.progress, "free")

    async def _finish_free(self, engine_done: Request) -> None:
        await engine_done
        self._notified.close()  # before the memory goes: a pending wait can never be met
        copy = await self._endpoint.free_window(self.win_id)
        if copy is not None:
            self._memory = copy
        self._driver.remove_engine(self.win_id)
        self.freed = True

    # ------------------------------------------------------------------------ helpers

    def _rma(self, op: RmaOp, what: str, value: Any = None) -> Request:
        return self._call(self._engine.rma(op.target, op), what, value)

    def _check_open(self) -> None:
        # A failed window refuses every call with its failure, whichever path would serve the
        # call (the inline one never looks at the engine's failure itself).
        if self._engine.failure is not None:
            raise self._engine.failure
        if self._engine.freeing:
            raise WindowFreedError("the window has been freed")
        if self._driver.engines.get(self._engine.win_id) is not self._engine:
            # Only Comm._close (the end of aiorma.run) drops a live engine from the driver.
            raise CommClosedError("the window's Comm is closed: its aiorma.run returned before free()")

    def _plain(self, array: Any, target: Any, disp: Any) -> bool:
        """The common call, checked by exact types first (no conversion needed): a 1-D,
        C-contiguous array of the window's dtype, a plain int rank and displacement, in bounds.
        False sends the call through the full checks, which accept or refuse everything else."""
        counts = self.counts
        return (
            type(array) is np.ndarray
            and array.dtype is self.dtype
            and array.ndim == 1
            and type(target) is int
            and type(disp) is int
            and 0 <= target < len(counts)
            and disp >= 0
            and disp + array.size <= counts[target]
            and array.flags.c_contiguous
        )

    def _origin(self, origin: Any) -> np.ndarray:
        self._check_open()
        origin = unwrap(origin, "origin")
        if isinstance(origin, np.ndarray):
            if origin.dtype != self.dtype:
                raise RmaTypeError(f"buffer dtype {origin.dtype} does not match window {self.dtype}")
            return np.ascontiguousarray(origin).reshape(-1)
        try:
            array = np.asarray(origin)
        except (TypeError, ValueError, OverflowError):  # ragged lists, odd objects
            raise RmaTypeError(f"cannot send {origin!r} into a window of dtype {self.dtype}") from None
        if array.dtype.kind not in "biufc" or not np.can_cast(array.dtype, self.dtype, "same_kind"):
            raise RmaTypeError(f"cannot send {origin!r} into a window of dtype {self.dtype}")
        if not np.can_cast(array.dtype, self.dtype, "safe"):
            return self._fitted(array)
        return np.ascontiguousarray(array, dtype=self.dtype).reshape(-1)

    def _fitted(self, array: np.ndarray) -> np.ndarray:
        """``array`` (converted from Python values or numpy scalars) in the window's dtype, refused
        with RmaTypeError when a value does not fit it: numpy would wrap integers silently and turn
        large floats into infinities."""
        dtype = self.dtype
        if array.size and dtype.kind in "iu":  # same_kind: the source is integer (or bool) too
            info = np.iinfo(dtype)
            low, high = int(array.min()), int(array.max())  # Python ints: no wrap-around here
            if low < info.min or high > info.max:
                raise RmaTypeError(f"values in [{low}, {high}] do not fit a window of dtype {dtype}")
            return np.ascontiguousarray(array, dtype=dtype).reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            converted = np.ascontiguousarray(array, dtype=dtype).reshape(-1)
        if dtype.kind in "fc" and np.count_nonzero(np.isinf(converted)) != np.count_nonzero(np.isinf(array)):
            raise RmaTypeError(f"values beyond the range of dtype {dtype} (they would become infinite)")
        return converted

    def _result(self, result: Any) -> tuple[np.ndarray, np.ndarray]:
        """The result array (``result``, or the array its mpi4py buffer spec names) and its flat
        view, which the engine writes into."""
        self._check_open()
        result = unwrap(result, "result")
        if not isinstance(result, np.ndarray):
            raise RmaTypeError(f"result must be a numpy array, not {type(result).__name__}")
        if result.dtype != self.dtype:
            raise RmaTypeError(f"result dtype {result.dtype} does not match window {self.dtype}")
        if not result.flags.c_contiguous or not result.flags.writeable:
            raise RmaTypeError("result must be a writeable, C-contiguous array")
        return result, result.reshape(-1)

    def _value(self, value: Any) -> np.ndarray:
        """``value`` as one element of the window's dtype; refused if it is not one or does not fit."""
        return self._single(self._origin(value), "value")

    @staticmethod
    def _single(array: np.ndarray, name: str) -> np.ndarray:
        if array.size != 1:
            raise RmaTypeError(f"{name} must hold exactly one element, not {array.size}")
        return array

    def _op(self, op: Any, *, allow_no_op: bool) -> Op:
        try:
            operation = Op(op)
        except ValueError:
            raise RmaUsageError(f"{op!r} is not an aiorma op (SUM, MAX, REPLACE, ...)") from None
        if operation is _NO_OP and not allow_no_op:
            raise RmaUsageError("NO_OP is only meaningful for get_accumulate and fetch_and_op")
        check_accumulate_dtype(operation, self.dtype)
        return operation

    def _check_span(self, target: Any, disp: Any, count: int) -> tuple[int, int]:
        # Plain ints pass on the first test; numpy integers become Python ints before any
        # arithmetic (np.uint64(2**64 - 1) + 1 would wrap to 0); bools are not ranks or offsets.
        if type(target) is not int:
            if not isinstance(target, np.integer):  # bool and np.bool_ are not
                raise RmaRangeError(f"target {target!r} is not an integer rank")
            target = int(target)
        if not 0 <= target < self.size:
            raise RmaRangeError(f"target {target!r} is outside the window's group of {self.size}")
        if type(disp) is not int:
            if not isinstance(disp, np.integer):
                raise RmaRangeError(f"displacement must be a non-negative integer, not {disp!r}")
            disp = int(disp)
        if disp < 0:
            raise RmaRangeError(f"displacement must be a non-negative integer, not {disp!r}")
        exposed = self.counts[target]
        if disp + count > exposed:
            raise RmaRangeError(
                f"elements [{disp}, {disp + count}) are outside rank {target}'s window of {exposed}"
            )
        return target, disp

    def __repr__(self) -> str:
        return f"<Window {self.win_id} rank {self.rank}/{self.size} {self.dtype} {self.counts}>"

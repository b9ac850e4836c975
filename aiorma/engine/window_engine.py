"""The progress engine of one window on one process: pure logic, no I/O (sans-I/O, as h11).

Application calls (``fence``, ``post``, ``rma``...) and network events (``control_changed``,
``fetched``, ``flushed``) go in; every step that needs the world goes out as one call on the
engine's :class:`~aiorma.engine.engine_io.EngineIO`.  Every application call returns an integer
*token*; the request it stands for is finished by ``io.complete(token, error)``.

An answer the I/O gives inside its call is acted on before the application call or event that
asked for it returns.  An atomic answered at once (shared memory) lets the lock request take its
next step at once (:mod:`.lock_protocol`), so the same state machine serves a lock granted inside
``lock()`` and one granted by a peer's hand-off a second later: only where the step runs differs.
A flush answered at once is acted on at the end of the outermost call, never in the middle of the
step that asked for it (:mod:`.completion` keeps the issue sequence numbers, the flushes and the
flush Requests).

Each application call first checks everything and raises :class:`EpochError` (or another usage
error) without changing any state; only then does it act.

The life of an epoch (Zounmevo 2014, §5.6; the rules in docs/semantics.md): *open* and *close*
follow the application's calls; *activate* and *complete* are the engine's.  An epoch that cannot
activate when opened is *deferred*: its RMA calls and its closing are recorded in it and replayed
once it activates.
Matching uses only the monotonic counters of :class:`PeerTrait` (rule 7, docs/semantics.md).

Notifications are one-sided (Zounmevo 2014, §5.7.3): a grant, a "done" or a fence notice is a
:class:`ControlWrite` that raises a word in the *peer's* control region (:mod:`.control`), and this
engine learns of its peers' notifications by reading its own region, which it is handed as an
array, when told :meth:`WindowEngine.control_changed`.  Locks are taken and released with remote
atomics on the target's lock words (:mod:`.lock_protocol`): the target's engine plays no part.

An epoch's life and each target's are tables in :mod:`.states` (read its theory of operation
first); :meth:`WindowEngine._move_epoch` and :meth:`WindowEngine._move_target` are the only places
that change them.  Every public method is guarded: an internal inconsistency (an illegal step)
fails the window with :class:`EngineFailure`, while a refused application call raises its usage
error and changes nothing.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final, NoReturn

import numpy as np

from ..constants import (
    MODE_NOCHECK,
    MODE_NOPRECEDE,
    MODE_NOSUCCEED,
    LockType,
)
from ..errors import EngineFailure, EpochError, RmaFailure, RmaUsageError, WindowFreedError
from ..win_info import Info
from .actions import Action, ActionLog, EpochEvent
from .activation import may_activate
from .checks import check_assertion, check_group, check_rank
from .completion import RemoteCompletion
from .control import READER_MASK, AtomicOp, ControlLayout, Word, pack_fence, unpack_fence
from .engine_io import EngineIO
from .epochs import AccessTarget, Epoch, PeerTrait
from .lock_protocol import LockCounts, LockEngine, QueueLock
from .rules import (
    ACCESS_KINDS,
    MAY_OVERLAP,
    PASSIVE_KINDS,
    EpochKind,
    ReorderFlag,
)
from .states import (
    CLOSED_OUT_PHASES,
    EPOCH_STEPS,
    GRANTED_PHASES,
    TARGET_STEPS,
    EpochPhase,
    EpochStep,
    TargetPhase,
    TargetStep,
)

# Enum members the functions below read, as module constants: on Python 3.11 reading a
# member (``EpochKind.LOCK``) goes through the enum metaclass's ``__getattr__`` hook, five
# times a plain attribute's cost; compiled, a Final name is a C variable.
_ATOMIC_OP_MAX: Final = AtomicOp.MAX
_EPOCH_KIND_FENCE: Final = EpochKind.FENCE
_EPOCH_KIND_LOCK: Final = EpochKind.LOCK
_EPOCH_KIND_LOCK_ALL: Final = EpochKind.LOCK_ALL
_EPOCH_KIND_POST: Final = EpochKind.POST
_EPOCH_KIND_START: Final = EpochKind.START
_EPOCH_PHASE_ACTIVE: Final = EpochPhase.ACTIVE
_EPOCH_PHASE_CLOSING: Final = EpochPhase.CLOSING
_EPOCH_STEP_ACTIVATE: Final = EpochStep.ACTIVATE
_EPOCH_STEP_CLOSE: Final = EpochStep.CLOSE
_EPOCH_STEP_COMPLETE: Final = EpochStep.COMPLETE
_LOCK_TYPE_EXCLUSIVE: Final = LockType.EXCLUSIVE
_LOCK_TYPE_SHARED: Final = LockType.SHARED
_TARGET_PHASE_GRANTED: Final = TargetPhase.GRANTED
_TARGET_STEP_CLOSE_OUT: Final = TargetStep.CLOSE_OUT
_TARGET_STEP_GRANT: Final = TargetStep.GRANT
_WORD_DONE: Final = Word.DONE
_WORD_FENCE: Final = Word.FENCE
_WORD_GRANT: Final = Word.GRANT

#: An open epoch's place in :attr:`WindowEngine._open`: its kind, and its target for a lock epoch
#: (several lock epochs towards different ranks may be open at once; one of every other kind).
_Slot = tuple[EpochKind, int | None]


_FENCE_SLOT: Final[_Slot] = (EpochKind.FENCE, None)
_START_SLOT: Final[_Slot] = (EpochKind.START, None)
_POST_SLOT: Final[_Slot] = (EpochKind.POST, None)
_LOCK_ALL_SLOT: Final[_Slot] = (EpochKind.LOCK_ALL, None)


_NO_OVERLAPS: Final[frozenset[int]] = frozenset()
_epoch_id: Final = operator.attrgetter("id")


def _passive(kind: EpochKind) -> bool:
    """``kind in PASSIVE_KINDS``, by identity: no hash of an enum member on the hot path."""
    return kind is _EPOCH_KIND_LOCK or kind is _EPOCH_KIND_LOCK_ALL


class WindowEngine(LockEngine):
    """Epoch state machines, activation rules, matching and the lock protocol of one window."""

    def __init__(
        self,
        win_id: int,
        rank: int,
        size: int,
        info: Info | None = None,
        *,
        control: np.ndarray | None = None,
        history: bool = False,
        observer: Callable[[EpochEvent], None] | None = None,
        io: EngineIO | None = None,
        peers_write_control: bool = True,
    ) -> None:
        self.win_id = win_id
        #: False for a window whose every rank promises epochs that never write a peer's control
        #: region — lock and lock_all with MODE_NOCHECK only (the collectives' landing windows):
        #: the engine refuses the others, and a polled transport need not scan the region.
        self.peers_write_control = peers_write_control
        #: Where every step that needs the world goes (an :class:`ActionLog` when none is given).
        self.io: EngineIO = io if io is not None else ActionLog()
        self._settling = False  # _settle is running
        self.rank = rank
        self.size = size
        self.info = info if info is not None else Info()
        self._reorder_flags = frozenset(flag for flag in ReorderFlag if flag.enabled(self.info))
        self.peers = [PeerTrait() for _ in range(size)]
        self._everyone = tuple(range(size))  # the group of a fence or lock_all epoch
        self.layout = ControlLayout(size)
        #: This rank's control region (int64, ``layout.words``); peers write it, we read it.
        self.control = control if control is not None else np.zeros(self.layout.words, np.int64)
        # The words as the engine last acted on them: zero, as every region starts, so that words
        # written before this engine existed are acted on by the first control_changed().  A
        # list of ints: compared word by word in a loop, one numpy call (tolist) per look, where
        # numpy's own compare-and-nonzero on a few dozen words costs several microseconds.
        self._seen: list[int] = [0] * self.layout.words
        self._lock_counts = [LockCounts() for _ in range(size)]
        self._locks: dict[int, QueueLock] = {}  # active lock requests, by target
        self._lock_epochs: dict[int, Epoch] = {}  # the epoch each of them was made for
        #: Lock releases waiting for a successor that swapped into the queue but has not yet
        #: linked itself behind us (microseconds on one node): the driver finishes such a release
        #: inside the closing call, so that a releaser that then computes holds nobody up.
        self.links_awaited = 0
        #: Lock requests waiting for a peer's write of a lock word (a hand-off, a drain): the
        #: driver's calls poll meanwhile (at most once per 50 µs), for whoever is queued behind
        #: them.
        self.lock_words_awaited = 0
        #: Lock hand-offs this engine wrote since the driver last looked (a successor named in
        #: our ``LOCK_NEXT`` was given the head): where ranks outnumber cores, the driver hands
        #: the core on after the call that made them (one made by a poll: at the next call), so
        #: that the successor can use the lock.
        self.handoffs_given = 0
        #: An RMA call was recorded for a fence or GATS target not yet granted: the driver polls
        #: once before that call returns, and clears it.
        self.grant_look_wanted = False
        self._fetches: dict[int, Callable[[int], None]] = {}
        #: Every epoch step, in order, when ``history=True`` (tests and tracing read it).
        self.history: list[EpochEvent] | None = [] if history else None
        #: Called synchronously with every EpochEvent (tracing); it must not call the engine.
        self.observer = observer
        self.failure: RmaFailure | None = None
        self.freeing = False
        # Epochs not yet completed, in the order they were opened.  Activation is serial (rule 8),
        # so they are the active ones followed by the deferred ones; kept apart so that an event
        # looks only at the (few) active epochs, and holding N deferred epochs costs O(N) in all.
        self._active: list[Epoch] = []
        self._deferred: deque[Epoch] = deque()
        # Epochs open at application level, by kind (and target for lock epochs), in opening order
        # (rule 3 reads the newest first).
        self._open: dict[_Slot, Epoch] = {}
        self._last_kind: EpochKind | None = None
        self._fences_opened = 0
        self._fence_done_sent = 0
        self._next_epoch_id = 1
        self._next_token = 1
        self._pending_tokens: set[int] = set()
        self._free_token: int | None = None
        # The recorded actions of an engine driven by hand (always empty with a live I/O).
        self._actions: list[Action] = self.io.actions if isinstance(self.io, ActionLog) else []
        self._activating = False
        self._activate_again = False
        self._advancing: Epoch | None = None  # the epoch _advance is pushing, if any
        #: Issue sequence numbers, flushes and flush Requests (:mod:`.completion`).
        self.completion = RemoteCompletion(self.peers, self.io, self._active, self._complete_token)

    # ------------------------------------------------------------------ output

    def drain(self) -> list[Action]:
        """Hand over the actions recorded so far, in order (an engine driven by hand: no I/O
        given); always empty with a live I/O, which carries every step out at once."""
        return self.io.drain() if isinstance(self.io, ActionLog) else []

    def _settle(self) -> None:
        """Act on the flushes the I/O completed inside its calls, in order, until none is left
        (acting on one may complete more).  Only the outermost call runs them."""
        if self._settling:
            return
        self._settling = True
        try:
            done = self.completion.answered_inline
            while done:
                self._flushed(*done.popleft())
        finally:
            self._settling = False

    @property
    def quiescent(self) -> bool:
        """No epoch is live and no request is pending."""
        return not self._active and not self._deferred and not self._pending_tokens

    def open_epochs(self) -> list[Epoch]:
        """Epochs open at application level (not yet closed by the program), in opening order."""
        return list(self._open.values())

    def live_epochs(self) -> list[Epoch]:
        """Epochs not yet completed internally, in opening order."""
        return [*self._active, *self._deferred]

    # ------------------------------------------------------ application: active target

    def fence(self, assertion: Any = 0) -> int:
        """Close the open fence epoch (unless MODE_NOPRECEDE) and open a new one (unless
        MODE_NOSUCCEED).  The token finishes when the closed epoch completes on this process —
        after every peer's "done" for it arrived (barrier semantics without a barrier) — or, when
        nothing is closed, once the new epoch is activated."""
        self._enter_call()
        try:
            result = self._fence(assertion)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _fence(self, assertion: Any = 0) -> int:
        assertion = check_assertion(assertion)
        if not self.peers_write_control:
            self._refuse_control_writes(_EPOCH_KIND_FENCE)
        closing = self._open.get(_FENCE_SLOT)
        if len(self._open) > (closing is not None):
            other = next(e for e in self._open.values() if e.kind is not _EPOCH_KIND_FENCE)
            raise EpochError(f"fence while a {other.kind.value} epoch is open")
        if closing is not None and assertion & MODE_NOPRECEDE and closing.has_ops:
            raise EpochError("MODE_NOPRECEDE, but the open fence epoch has RMA calls to close")
        opening = not assertion & MODE_NOSUCCEED
        token = self._new_token()
        if opening:
            self._fences_opened += 1
        if closing is not None:
            self._close(closing, token)
        if opening:
            open_token = token if closing is None else self._new_token()
            epoch = self._open_epoch(_EPOCH_KIND_FENCE, self._everyone, assertion, open_token)
            epoch.fence_ordinal = self._fences_opened
            if closing is None:
                # Tell peers they may reach this process in the new epoch.  After a closing fence
                # this notice rides on the "done" packet instead.
                self._send_fence_notice()
            self._activate_ready()
        elif closing is None:
            self._complete_token(token)
        return token

    def post(self, group: Iterable[Any], assertion: Any = 0) -> int:
        """Open an exposure epoch for ``group``.  Token: finished when the epoch is activated
        (access granted to every origin in ``group``)."""
        self._enter_call()
        try:
            result = self._post(group, assertion)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _post(self, group: Iterable[Any], assertion: Any = 0) -> int:
        assertion = check_assertion(assertion)
        members = check_group(group, self.size)
        self._check_may_open(_EPOCH_KIND_POST)
        token = self._new_token()
        self._open_epoch(_EPOCH_KIND_POST, members, assertion, token)
        self._activate_ready()
        return token

    def start(self, group: Iterable[Any], assertion: Any = 0) -> int:
        """Open an access epoch towards ``group``.  Token: finished when every target in
        ``group`` has granted this access."""
        self._enter_call()
        try:
            result = self._start(group, assertion)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _start(self, group: Iterable[Any], assertion: Any = 0) -> int:
        assertion = check_assertion(assertion)
        members = check_group(group, self.size)
        self._check_may_open(_EPOCH_KIND_START)
        token = self._new_token()
        self._open_epoch(_EPOCH_KIND_START, members, assertion, token)
        self._activate_ready()
        return token

    def complete(self) -> int:
        """Close the open start epoch.  Token: finished when its RMA is complete at every target
        and each target has been sent its "done"."""
        self._enter_call()
        try:
            result = self._complete()
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _complete(self) -> int:
        epoch = self._open.get(_START_SLOT)
        if epoch is None:
            raise EpochError("complete() without a matching start()")
        token = self._new_token()
        self._close(epoch, token)
        return token

    def wait(self) -> int:
        """Close the open post epoch.  Token: finished when every origin in its group has
        completed its matching access epoch."""
        self._enter_call()
        try:
            result = self._wait()
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _wait(self) -> int:
        epoch = self._open.get(_POST_SLOT)
        if epoch is None:
            raise EpochError("wait() without a matching post()")
        token = self._new_token()
        self._close(epoch, token)
        return token

    def test(self) -> bool:
        """MPI_WIN_TEST: if the open post epoch has completed its exposure, close it and return
        True; otherwise change nothing and return False."""
        self._enter_call()
        try:
            result = self._test()
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _test(self) -> bool:
        epoch = self._open.get(_POST_SLOT)
        if epoch is None:
            raise EpochError("test() without a matching post()")
        if epoch.phase is not _EPOCH_PHASE_ACTIVE or not self._exposure_finished(epoch):
            return False
        self._close(epoch, self._new_token())
        return True

    # ----------------------------------------------------- application: passive target

    def lock(self, rank: Any, lock_type: LockType = LockType.EXCLUSIVE, assertion: Any = 0) -> int:
        """Open a passive-target access epoch towards ``rank``.  Token: finished when the lock
        is granted (at once with MODE_NOCHECK)."""
        self._enter_call()
        try:
            result = self._lock(rank, lock_type, assertion)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _lock(self, rank: Any, lock_type: LockType = LockType.EXCLUSIVE, assertion: Any = 0) -> int:
        # The checks' common outcomes first, as in rma(): a transaction is lock, RMA, unlock.
        if type(assertion) is not int or assertion != 0:
            assertion = check_assertion(assertion)
        if type(rank) is not int or not 0 <= rank < self.size:
            rank = check_rank(rank, self.size)
        try:
            if lock_type is not _LOCK_TYPE_EXCLUSIVE and lock_type is not _LOCK_TYPE_SHARED:
                lock_type = LockType(lock_type)
        except ValueError:
            raise RmaUsageError(
                f"lock type must be LOCK_EXCLUSIVE or LOCK_SHARED, not {lock_type!r}"
            ) from None
        if (_EPOCH_KIND_LOCK, rank) in self._open:
            raise EpochError(f"rank {rank} is already locked by this process; unlock it first")
        self._check_may_open(_EPOCH_KIND_LOCK, assertion)
        token = self._new_token()
        self._open_epoch(_EPOCH_KIND_LOCK, (rank,), assertion, token, lock_type)
        self._activate_ready()
        return token

    def unlock(self, rank: Any) -> int:
        """Close the lock epoch towards ``rank``.  Token: finished when its RMA is complete at
        the target and the lock is released."""
        self._enter_call()
        try:
            result = self._unlock(rank)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _unlock(self, rank: Any) -> int:
        if type(rank) is not int or not 0 <= rank < self.size:  # (as in lock())
            rank = check_rank(rank, self.size)
        epoch = self._open.get((_EPOCH_KIND_LOCK, rank))
        if epoch is None:
            raise EpochError(f"unlock({rank}) without a matching lock({rank})")
        token = self._new_token()
        self._close(epoch, token)
        return token

    def lock_all(self, assertion: Any = 0) -> int:
        """Open a shared-lock access epoch towards every rank.  Token: finished when every rank
        has granted its lock."""
        self._enter_call()
        try:
            result = self._lock_all(assertion)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _lock_all(self, assertion: Any = 0) -> int:
        assertion = check_assertion(assertion)
        self._check_may_open(_EPOCH_KIND_LOCK_ALL, assertion)
        token = self._new_token()
        self._open_epoch(_EPOCH_KIND_LOCK_ALL, self._everyone, assertion, token)
        self._activate_ready()
        return token

    def unlock_all(self) -> int:
        """Close the lock_all epoch.  Token: finished when all its RMA is complete at the targets
        and every lock is released."""
        self._enter_call()
        try:
            result = self._unlock_all()
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _unlock_all(self) -> int:
        epoch = self._open.get(_LOCK_ALL_SLOT)
        if epoch is None:
            raise EpochError("unlock_all() without a matching lock_all()")
        token = self._new_token()
        self._close(epoch, token)
        return token

    def passive_access(self, target: Any) -> bool:
        """True when an open lock or lock_all epoch covers ``target`` (a flush towards it is
        allowed).  Changes nothing."""
        return self._access_epoch_for(target, passive_only=True) is not None

    def flush(self, rank: Any) -> int:
        """Flush the RMA calls made so far in the open passive-target epoch towards ``rank``.
        Token: finished when they are complete at the target.  It also answers flush_local:
        remote completion implies local completion, and MPI's flush is no slower than its
        flush_local for the allocated windows aiorma uses."""
        self._enter_call()
        try:
            result = self._flush(rank)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _flush(self, rank: Any) -> int:
        rank = check_rank(rank, self.size)
        epoch = self._access_epoch_for(rank, passive_only=True)
        if epoch is None:
            raise EpochError(f"flush({rank}) outside a lock epoch towards rank {rank}")
        access = epoch.access[rank]
        if self.completion.flushed_in_call(access):
            token = self._next_token
            self._next_token += 1
            self.io.complete(token, None)
            return token
        token = self._new_token()
        self.completion.wait_for(token, [access])
        return token

    def flush_inline(self, rank: Any) -> bool:
        """True when an open lock or lock_all epoch covers ``rank`` with its grant in hand and
        every RMA call made in it towards ``rank`` is complete there — already, or by a flush the
        I/O completed inside this call.  False changes nothing but perhaps asking for that flush
        (whose report is acted on as any flush's)."""
        self._enter_call()
        try:
            result = self._flush_inline(rank)
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _flush_inline(self, rank: Any) -> bool:
        if type(rank) is not int:
            return False
        epoch = self._access_epoch_for(rank, passive_only=True)
        return epoch is not None and self.completion.flushed_in_call(epoch.access[rank])

    def flush_all(self) -> int:
        """:meth:`flush` towards every target of the open passive-target epochs."""
        self._enter_call()
        try:
            result = self._flush_all()
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _flush_all(self) -> int:
        epochs = [e for e in self.open_epochs() if e.kind in PASSIVE_KINDS]
        if not epochs:
            raise EpochError("flush_all() outside a lock or lock_all epoch")
        token = self._new_token()
        self.completion.wait_for(token, [a for e in epochs for a in e.access.values()])
        return token

    # ---------------------------------------------------------------- application: RMA

    def rma(self, target: Any, payload: Any) -> int:
        """Record an RMA call towards ``target`` in the most recently opened access epoch that
        covers it (rule 3); it is issued at once (``io.issue``) if that epoch is active and
        granted, else when the grant arrives.  Token: the op's identity for the transport's
        local-completion report; the engine itself never finishes it."""
        # Guarded as every application call, the usability check inside the ``try`` and the
        # checks' common outcomes first: this is the hot path.
        try:
            if self.failure is not None or self.freeing:
                self._check_usable()
            if type(target) is not int or not 0 <= target < self.size:
                target = check_rank(target, self.size)
            epoch = self._access_epoch_for(target)
            if epoch is None:
                raise EpochError(f"RMA towards rank {target} outside an access epoch covering it")
            token = self._next_token
            self._next_token += 1
            access = epoch.access[target]
            access.op_count += 1
            # A target is granted only once its epoch is active: no need to look at the epoch.
            if access.phase is _TARGET_PHASE_GRANTED:
                self._issue(epoch, access, token, payload)
            else:
                if not access.queued and (epoch.kind is _EPOCH_KIND_FENCE or epoch.kind is _EPOCH_KIND_START):
                    # The target's grant (its fence or post notice) is often in our memory
                    # already, unread: the driver looks once before this call returns, so that the
                    # op is issued now rather than inside the closing call, after everything else
                    # there (a 1 MiB put in a fence epoch was).  Once per target and epoch: a lock
                    # epoch's own rule polls for its hand-off (lock_words_awaited).
                    self.grant_look_wanted = True
                access.queued.append((token, payload))
            return token
        except Exception as exc:
            self._call_failed(exc)

    def free(self) -> int:
        """Refuse further calls and finish the token once every epoch has completed (rule 10b).
        Raises EpochError, changing nothing, while an epoch with RMA calls is still open."""
        self._enter_call()
        try:
            result = self._free()
            if self.completion.answered_inline:
                self._settle()
            return result
        except Exception as exc:
            self._call_failed(exc)

    def _free(self) -> int:
        open_now = self.open_epochs()
        blocking = [e for e in open_now if not (e.kind is _EPOCH_KIND_FENCE and not e.has_ops)]
        if blocking:
            raise EpochError(f"free() while a {blocking[0].kind.value} epoch is open; close it first")
        for epoch in open_now:  # a trailing fence() opened an empty epoch: close it
            self._close(epoch, self._new_token())
        self.freeing = True
        token = self._free_token = self._new_token()
        self._check_free()
        return token

    # ------------------------------------------------------------------ network events

    def control_changed(self) -> None:
        """Peers may have written this rank's control region: act on every word that changed."""
        self._guarded(self._control_changed)

    def fetched(self, token: int, old: int) -> None:
        """The :class:`ControlFetch` ``token`` completed; ``old`` is the word's previous value."""
        self._guarded(self._fetched, token, old)

    def flushed(self, target: int, upto: int) -> None:
        """Every op issued to ``target`` with sequence number <= ``upto`` is remotely complete."""
        self._guarded(self._flushed, target, upto)

    def _control_changed(self) -> None:
        values: list[int] = self.control.tolist()
        seen = self._seen
        changed = [index for index in range(len(values)) if values[index] != seen[index]]
        if not changed:
            return
        size = self.size
        per_peer = self.layout.lock_tail  # the per-peer words come first
        lock_targets: set[int] = set()
        own_lock_words = False
        for index in changed:
            value = seen[index] = values[index]
            if index >= per_peer:
                own_lock_words = True
                continue
            word, src = divmod(index, size)
            peer = self.peers[src]
            if word == _WORD_GRANT:
                if value > peer.gats_granted_access_id:
                    peer.gats_granted_access_id = value
                    self._grants_arrived(src, value)
            elif word == _WORD_DONE:
                if value > peer.gats_done_received:
                    peer.gats_done_received = value
                    for epoch in self._live_of(_EPOCH_KIND_POST):
                        self._advance(epoch)
            elif word == _WORD_FENCE:
                opened, finished = unpack_fence(value)
                peer.fence_opened = max(peer.fence_opened, opened)
                peer.fence_done_received = max(peer.fence_done_received, finished)
                self._fence_notice_arrived(src)
            else:
                lock_targets.add(src)
        for target in lock_targets:
            lock = self._locks.get(target)
            if lock is not None:
                lock.control_changed()
        if own_lock_words:
            self._activate_ready()  # rules 16a/17a may hold now

    def _fence_notice_arrived(self, src: int) -> None:
        peer = self.peers[src]
        for epoch in self._live_of(_EPOCH_KIND_FENCE):
            access = epoch.access[src]
            if not access.granted and peer.fence_opened >= epoch.fence_ordinal:  # (live: active)
                self._grant(epoch, access)
            self._advance(epoch)

    def _fetched(self, token: int, old: int) -> None:
        then = self._fetches.pop(token, None)
        if then is None:
            raise EngineFailure(f"result for control fetch {token}, which was never asked for")
        then(int(old))

    def _flushed(self, target: int, upto: int) -> None:
        peer = self.peers[target]
        peer.remote_complete_seq = max(peer.remote_complete_seq, upto)
        for epoch in list(self._active):
            if target in epoch.access:
                self._advance(epoch)
        self.completion.service()

    # ------------------------------------- control region (what a QueueLock reads and asks for)

    def control_write(self, dest: int, index: int, op: AtomicOp, value: int) -> None:
        self.io.write(dest, index, op, value)

    def control_fetch(
        self, dest: int, index: int, op: AtomicOp, value: int, compare: int, then: Callable[[int], None]
    ) -> int | None:
        token = self._next_token
        self._next_token += 1
        old = self.io.fetch(token, dest, index, op, value, compare)
        if old is None:
            self._fetches[token] = then  # answered later: fetched() takes the step
        return old

    # -------------------------------------------------------------- epoch life: open/close

    def _open_epoch(
        self,
        kind: EpochKind,
        group: tuple[int, ...],
        assertion: int,
        open_token: int,
        lock_type: LockType = LockType.SHARED,
    ) -> Epoch:
        # An empty trailing fence epoch (fence() without MODE_NOSUCCEED) is closed for the
        # program rather than refusing the next epoch; one with RMA calls was refused earlier.
        fence = self._open.get(_FENCE_SLOT)
        if kind is not _EPOCH_KIND_FENCE and fence is not None:
            self._close(fence, self._new_token())
        opened = self._open
        epoch = Epoch(
            id=self._next_epoch_id,
            kind=kind,
            group=group,
            assertion=assertion,
            predecessor=self._last_kind,
            # (map and a C getter, not a generator: no frame per epoch)
            overlaps=frozenset(map(_epoch_id, opened.values())) if opened else _NO_OVERLAPS,
            open_token=open_token,
            lock_type=lock_type,
            slot=(kind, group[0]) if kind is _EPOCH_KIND_LOCK else (kind, None),
        )
        self._next_epoch_id += 1
        self._last_kind = kind
        if kind in ACCESS_KINDS:
            access = epoch.access
            for r in group:
                access[r] = AccessTarget(r)
        self._deferred.append(epoch)
        opened[epoch.slot] = epoch
        if self.history is not None or self.observer is not None:  # tracing only
            self._emit(EpochEvent("open", epoch.id, epoch.kind))
        return epoch

    def _close(self, epoch: Epoch, token: int) -> None:
        epoch.close_token = token
        del self._open[epoch.slot]
        self._move_epoch(epoch, _EPOCH_STEP_CLOSE)
        self._advance(epoch)

    # ------------------------------------------------------------ epoch life: activation

    def _activate_ready(self) -> None:
        """Activate deferred epochs in order until one cannot be (rule 8: no skipping)."""
        if self._activating:
            self._activate_again = True
            return
        self._activating = True
        try:
            self._activate_again = True
            reorder = self._reorder_flags
            while self._activate_again:
                self._activate_again = False
                deferred = self._deferred
                while deferred and may_activate(deferred[0], self._active, reorder, self._window_locked):
                    epoch = deferred.popleft()
                    self._active.append(epoch)
                    self._activate(epoch)
        finally:
            self._activating = False

    @property
    def window_locked(self) -> bool:
        """Some process holds, or is queued for, a lock on this rank's window (its lock words)."""
        return self._window_locked()

    def _window_locked(self) -> bool:
        control = self.control
        return bool(control[self.layout.lock_tail] or control[self.layout.lock_state] & READER_MASK)

    def _activate(self, epoch: Epoch) -> None:
        self._move_epoch(epoch, _EPOCH_STEP_ACTIVATE)
        kind = epoch.kind
        nocheck = bool(epoch.assertion & MODE_NOCHECK)
        if kind is _EPOCH_KIND_POST:
            for origin in epoch.group:
                peer = self.peers[origin]
                peer.gats_accesses_granted += 1
                epoch.expected_done[origin] = peer.gats_accesses_granted
                self._raise(origin, _WORD_GRANT, peer.gats_accesses_granted)
            self._complete_token(epoch.open_token)
        elif kind is _EPOCH_KIND_START:
            for access in epoch.access.values():
                peer = self.peers[access.rank]
                peer.gats_accesses_opened += 1
                access.ordinal = peer.gats_accesses_opened
                if nocheck or peer.gats_granted_access_id >= access.ordinal:
                    self._grant(epoch, access)
        elif kind in PASSIVE_KINDS:
            exclusive = kind is _EPOCH_KIND_LOCK and epoch.lock_type is _LOCK_TYPE_EXCLUSIVE
            for access in epoch.access.values():
                peer = self.peers[access.rank]
                peer.lock_requests_sent += 1
                access.ordinal = peer.lock_requests_sent
                if nocheck:
                    self._grant(epoch, access)
                    continue
                if access.rank in self._locks:
                    raise EngineFailure(f"a second active lock request towards rank {access.rank}")
                lock = QueueLock(
                    self,
                    self.rank,
                    access.rank,
                    exclusive,
                    self._lock_counts[access.rank],
                )
                access.lock = self._locks[access.rank] = lock
                self._lock_epochs[access.rank] = epoch
                lock.acquire()
        elif kind is _EPOCH_KIND_FENCE:
            for access in epoch.access.values():
                opened = self.peers[access.rank].fence_opened
                if access.rank == self.rank or opened >= epoch.fence_ordinal:
                    self._grant(epoch, access)
            self._complete_token(epoch.open_token)
        if kind is _EPOCH_KIND_START or nocheck:  # (a lock request's grant checks for itself)
            self._check_open_token(epoch)
        self._advance(epoch)

    def _grants_arrived(self, src: int, granted_id: int) -> None:
        for epoch in self._live_of(_EPOCH_KIND_START):
            access = epoch.access.get(src)
            if access is None:  # (live epochs are active)
                continue
            if not access.granted and access.ordinal <= granted_id:
                self._grant(epoch, access)
                self._check_open_token(epoch)
                self._advance(epoch)

    def lock_granted(self, target: int) -> None:
        epoch = self._lock_epochs[target]
        access = epoch.access[target]
        self._grant(epoch, access)
        if epoch.kind is _EPOCH_KIND_LOCK:
            self._complete_token(epoch.open_token)  # its one target is granted: the lock is open
        else:
            self._check_open_token(epoch)
        self._advance(epoch)

    def lock_released(self, target: int) -> None:
        # The request is done with: drop it, so that the epoch (which names it) is freed when it
        # completes, by reference counting rather than by a later run of the cyclic GC.
        epoch = self._lock_epochs[target]
        access = epoch.access[target]
        del self._locks[target], self._lock_epochs[target]
        access.lock = None
        if self._advancing is not epoch:  # (inside _advance(epoch), it looks at the lock next)
            self._advance(epoch)

    def _grant(self, epoch: Epoch, access: AccessTarget) -> None:
        """``access.rank`` granted this epoch: replay the RMA calls recorded for it, in order."""
        self._move_target(access, _TARGET_STEP_GRANT)
        queued, access.queued = access.queued, []
        for token, payload in queued:
            self._issue(epoch, access, token, payload)
        self.completion.granted(access)

    def _check_open_token(self, epoch: Epoch) -> None:
        if epoch.kind is _EPOCH_KIND_POST or epoch.kind is _EPOCH_KIND_FENCE:
            return
        for access in epoch.access.values():  # (a loop, not all(): asked at every grant)
            if access.phase not in GRANTED_PHASES:
                return
        self._complete_token(epoch.open_token)  # no-op once finished

    # ------------------------------------------------------------ epoch life: completion

    def _advance(self, epoch: Epoch) -> None:
        """Push a closed, active epoch towards completion: flush, notify, release, complete."""
        if epoch.phase is not _EPOCH_PHASE_CLOSING:
            return
        # (lock_released reads it: a release finished inside this step is looked at here)
        outer, self._advancing = self._advancing, epoch
        try:
            if epoch.kind is _EPOCH_KIND_POST:
                if self._exposure_finished(epoch):
                    self._complete_epoch(epoch)
                return
            finished = True
            for access in epoch.access.values():
                phase = access.phase
                if phase in CLOSED_OUT_PHASES:
                    continue
                # An empty GATS access sends its "done" without waiting for the grant: a late post
                # then costs this origin nothing (the target's counter remembers the done).
                needs_grant = bool(access.op_count) or _passive(epoch.kind)
                if needs_grant and phase not in GRANTED_PHASES:
                    finished = False
                    continue
                if not self.completion.complete(access.rank, access.last_seq):
                    finished = False
                    continue
                lock = access.lock
                if lock is not None:
                    if not lock.release_requested:
                        lock.release()  # data is remotely complete: give the lock back
                    if not lock.done:  # (a release finished inside the call is done now)
                        finished = False
                        continue
                self._move_target(access, _TARGET_STEP_CLOSE_OUT)
                if epoch.kind is _EPOCH_KIND_START:
                    self._raise(access.rank, _WORD_DONE, access.ordinal)
            if epoch.kind is _EPOCH_KIND_FENCE:
                if finished and not epoch.fence_done_sent:
                    epoch.fence_done_sent = True
                    self._fence_done_sent = max(self._fence_done_sent, epoch.fence_ordinal)
                    self._send_fence_notice()
                finished = epoch.fence_done_sent and all(
                    self.peers[r].fence_done_received >= epoch.fence_ordinal
                    for r in range(self.size)
                    if r != self.rank
                )
            if finished:
                self._complete_epoch(epoch)
        finally:
            self._advancing = outer

    def _exposure_finished(self, epoch: Epoch) -> bool:
        return all(
            self.peers[origin].gats_done_received >= ordinal
            for origin, ordinal in epoch.expected_done.items()
        )

    def _complete_epoch(self, epoch: Epoch) -> None:
        self._move_epoch(epoch, _EPOCH_STEP_COMPLETE)
        self._active.remove(epoch)
        # An empty access epoch can complete before its grants arrive; its opening Request must
        # not outlive it.
        self._complete_token(epoch.open_token)
        self._complete_token(epoch.close_token)
        self._activate_ready()
        if self._free_token is not None:  # (a free waits for this epoch)
            self._check_free()

    def _check_free(self) -> None:
        if self._free_token is not None and not self._active and not self._deferred:
            token, self._free_token = self._free_token, None
            self._complete_token(token)

    # ------------------------------------------------------------------ RMA and flushes

    def _issue(self, epoch: Epoch, access: AccessTarget, token: int, payload: Any) -> None:
        # Issue sequence numbers are per target and monotonic: an access's RMA is remotely
        # complete once the target's flushed watermark reaches its last one (.completion).
        peer = self.peers[access.rank]
        peer.issued_seq += 1
        access.last_seq = peer.issued_seq
        self.io.issue(token, access.rank, payload)
        if self.history is not None or self.observer is not None:
            self._emit(EpochEvent("issue", epoch.id, epoch.kind, access.rank))

    # ------------------------------------------------------------------------ helpers

    def _access_epoch_for(self, target: int, *, passive_only: bool = False) -> Epoch | None:
        # Rule 3: the most recently opened.  A forward scan keeping the last match: a few open
        # epochs at most, and the compiled loop over a dict's values costs no iterator object,
        # where reversed() makes two on every RMA call.
        found = None
        for epoch in self._open.values():
            if target in epoch.access and (not passive_only or _passive(epoch.kind)):
                found = epoch
        return found

    def _live_of(self, kind: EpochKind) -> list[Epoch]:
        """The active epochs of ``kind`` (deferred ones wait for activation, not for events)."""
        return [e for e in self._active if e.kind is kind]

    def _check_may_open(self, kind: EpochKind, assertion: int = 0) -> None:
        """Refuse a ``kind`` epoch that MPI does not let open beside the open ones, or that would
        make a peer write the control region of a ``peers_write_control=False`` window (every
        epoch but lock and lock_all with MODE_NOCHECK; fence() asks the latter itself)."""
        for epoch in self._open.values():
            if epoch.kind is _EPOCH_KIND_FENCE and not epoch.has_ops:
                continue  # an empty trailing fence epoch is closed for the program on open
            if (epoch.kind, kind) not in MAY_OVERLAP:
                raise EpochError(f"cannot open a {kind.value} epoch while a {epoch.kind.value} epoch is open")
        if not self.peers_write_control and not (kind in PASSIVE_KINDS and assertion & MODE_NOCHECK):
            self._refuse_control_writes(kind)

    def _refuse_control_writes(self, kind: EpochKind) -> NoReturn:
        raise RmaUsageError(
            f"a {kind.value} epoch on a window created with peers_write_control=False: "
            "only lock and lock_all with MODE_NOCHECK"
        )

    def _enter_call(self) -> None:
        """An application call's first step: a failed or freed window refuses every call."""
        if self.failure is not None or self.freeing:
            self._check_usable()

    def _call_failed(self, exc: Exception) -> NoReturn:
        """Raise what an application call raises for ``exc``: a usage error (raised by the
        checks, before anything changed) and the window's own failure as they are; anything else
        is an internal inconsistency that fails the window for good, raised as its failure.

        (Each application call spells out its guard — ``_enter_call``, then its body in ``try``,
        and this — rather than taking it from a decorator: compiled, a decorated method is a
        generic Python callable that takes ``*args, **kwargs``, a call through it about 2 µs of
        a 20 µs epoch's instructions.)"""
        if isinstance(exc, RmaUsageError) or exc is self.failure:
            raise exc
        raise self._internal_error(exc) from exc

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise self.failure
        if self.freeing:
            raise WindowFreedError("the window has been freed")

    def _raise(self, dest: int, word: Word, value: int) -> None:
        """Raise our slot of ``word`` at ``dest`` to ``value`` (max: late or repeated is harmless)."""
        self.io.write(dest, self.layout.index(word, self.rank), _ATOMIC_OP_MAX, value)

    def _send_fence_notice(self) -> None:
        value = pack_fence(self._fences_opened, self._fence_done_sent)
        for r in range(self.size):
            if r != self.rank:
                self._raise(r, _WORD_FENCE, value)

    def _new_token(self) -> int:
        token = self._next_token
        self._next_token += 1
        self._pending_tokens.add(token)
        return token

    def _complete_token(self, token: int, error: BaseException | None = None) -> None:
        if token in self._pending_tokens:
            self._pending_tokens.discard(token)
            self.io.complete(token, error)

    def _emit(self, event: EpochEvent) -> None:
        if self.history is not None:
            self.history.append(event)
        if self.observer is not None:
            self.observer(event)

    # ------------------------------------------------------------ the life cycle's steps

    def _move_epoch(self, epoch: Epoch, step: EpochStep) -> None:
        """Take ``step`` in ``epoch``'s life (:data:`.states.EPOCH_TRANSITIONS`), or raise
        EngineFailure: an illegal step is a bug in the engine, and fails the window."""
        phase = EPOCH_STEPS[step].get(epoch.phase)
        if phase is None:
            raise EngineFailure(
                f"illegal step: {step.value} a {epoch.kind.value} epoch (id {epoch.id}) "
                f"in phase {epoch.phase.value}"
            )
        epoch.phase = phase
        if self.history is not None or self.observer is not None:  # tracing only
            self._emit(EpochEvent(step.value, epoch.id, epoch.kind))

    def _move_target(self, access: AccessTarget, step: TargetStep) -> None:
        """Take ``step`` in an access target's life (:data:`.states.TARGET_TRANSITIONS`), or
        raise EngineFailure."""
        phase = TARGET_STEPS[step].get(access.phase)
        if phase is None:
            raise EngineFailure(
                f"illegal step: {step.value} towards rank {access.rank} in phase {access.phase.value}"
            )
        access.phase = phase

    def _internal_error(self, exc: Exception) -> RmaFailure:
        """Fail the window for ``exc``, an internal inconsistency; return the window's failure."""
        failure = exc if isinstance(exc, EngineFailure) else EngineFailure(f"internal error: {exc!r}")
        if failure is not exc:
            failure.__cause__ = exc
        self.fail(failure)
        assert self.failure is not None
        return self.failure

    def _guarded(self, handler: Callable[..., None], *args: Any) -> None:
        """Run an event handler; an internal inconsistency fails the window for good (h11)."""
        if self.failure is not None:
            return
        try:
            handler(*args)
            if self.completion.answered_inline:
                self._settle()
        except Exception as exc:
            self._internal_error(exc)

    def fail(self, failure: RmaFailure) -> None:
        """Fail the window for good: every pending Request gets ``failure``, every later call
        raises it (h11's rule).  The first failure wins."""
        if self.failure is not None:
            return
        self.failure = failure
        self.completion.answered_inline.clear()
        tokens = sorted(self._pending_tokens)
        self._pending_tokens.clear()
        for token in tokens:
            self.io.complete(token, failure)

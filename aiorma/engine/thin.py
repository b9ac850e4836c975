"""The thin path: epochs on an otherwise idle window kept as small records, not as Epochs.

Most epochs a program runs are uncommon in nothing: a lock on a queue nobody else is in, puts
into an epoch whose access is granted, a flush whose data is already complete.  The general path
(:mod:`.window_engine`) builds an :class:`~.epochs.Epoch` and an :class:`~.epochs.AccessTarget`
per epoch and runs activation, matching and completion over them; the thin path keeps an epoch
opened on an idle window as a record (:mod:`.thin_state`) while nothing needs more:

* **lock** (no assertion, nothing else live on the window, atomics towards the target answered
  inside the call): the lock request is the same :class:`~.lock_protocol.QueueLock` state
  machine every lock epoch runs, started here and driven through all the steps whose answers the
  engine's I/O gives inside the call.  Granted now, the epoch is kept as a :class:`ThinLock`;
  queued (a predecessor, readers to drain), the general lock call is made at once and its epoch
  takes the request over where it stands.
* **RMA** on a thin epoch: the per-target sequence numbers move as :meth:`WindowEngine._issue`
  moves them and the operation goes to the engine's I/O.
* **flush** when the transport answers it inside the call.
* **unlock** of a thin lock: flush inline, then the request's release steps, inside the call.
* **fence, start/complete, post/wait** on an idle window: the notices, grants and "done"s are
  the general path's words and counters, written inside the call.

Any other call on the window, or a step that cannot finish inside the call (a successor still
linking, a flush completing later), makes the thin epoch **inflate**: it is opened and activated
as an Epoch, which takes over its lock request and counters, and the general path carries on.

The thin path never runs while tracing is on (every step must then be recorded) and is turned
off for equivalence tests by ``AIORMA_THIN=0`` (:attr:`aiorma._core.settings.Settings.thin`).
"""

from __future__ import annotations

from typing import Any

from ..constants import _ALL_MODES, MODE_NOPRECEDE, MODE_NOSUCCEED, LockType
from .control import Word
from .lock_protocol import Hold, QueueLock
from .rules import EpochKind
from .states import TargetPhase
from .thin_state import DONE, NOT_THIN, ThinAccess, ThinExposure, ThinFence, ThinLock
from .window_engine import WindowEngine


class ThinPath:
    """The thin entry points of one :class:`WindowEngine`.  Each returns :data:`NOT_THIN`
    (nothing changed: make the general call), :data:`DONE` (served; the Request is finished) or,
    for lock and unlock, a positive token: the call started inline and inflated, and the general
    path's token stands for it."""

    @classmethod
    def of(cls, engine: WindowEngine) -> ThinPath | None:
        """The thin path of ``engine``, or None while tracing: the thin path records no steps."""
        if engine.history is not None or engine.observer is not None:
            return None
        return cls(engine)

    def __init__(self, engine: WindowEngine) -> None:
        self.engine = engine
        self.io = engine.io

    # ------------------------------------------------------------------ passive target

    def lock(self, rank: int, exclusive: bool) -> int:
        """Start the lock request with its atomics answered inside the call: :data:`DONE` when it
        is granted now (the epoch is then held as a :class:`ThinLock`), else the general lock
        call's token — that epoch takes over the request, queued behind another holder or
        waiting for readers to drain."""
        engine = self.engine
        if not 0 <= rank < engine.size or not self._idle() or not self.io.atomics_inline(rank):
            return NOT_THIN
        lock = QueueLock(engine, engine.rank, rank, exclusive, engine._lock_counts[rank], _ignore, _ignore)
        engine._locks[rank] = lock
        lock.acquire()  # every step whose atomic is answered inside the call, taken now
        if lock.hold is Hold.HELD:
            engine.thin_lock = ThinLock(rank, exclusive, lock)
            engine._last_kind = EpochKind.LOCK
            return DONE
        engine._adopted = lock
        return engine.lock(rank, LockType.EXCLUSIVE if exclusive else LockType.SHARED)

    def unlock(self, rank: int) -> int:
        """Flush and give the lock back inside the call: :data:`DONE`, or — the data completes
        later, or a successor has swapped itself in but not yet linked — the general unlock's
        token, the epoch inflated first."""
        engine = self.engine
        held = engine.thin_lock
        if held is None or held.target != rank:
            return NOT_THIN
        if not engine.flush_now(rank, held.last_seq):  # completes later: the general path waits
            return self._inflate_unlock(rank)
        lock = held.lock
        lock.release()
        if not lock.done:  # waiting for a successor's link: the general path waits for it
            return self._inflate_unlock(rank)
        del engine._locks[rank]
        engine.thin_lock = None
        return DONE

    def _inflate_unlock(self, rank: int) -> int:
        """The general unlock, after the held epoch is inflated."""
        self.engine.inflate_thin()
        return self.engine.unlock(rank)

    # ------------------------------------------------------------------ active target

    def fence(self, assertion: int) -> int:
        """A fence that opens a fence epoch on an otherwise idle window, or closes the thin one
        (and opens the next) once its RMA is complete inside the call.  Returns the fence's
        token, :data:`DONE` when it finished inside the call (every peer's "done" in, nothing
        left for the driver), or :data:`NOT_THIN`."""
        engine = self.engine
        if engine.failure is not None or engine.freeing or assertion & ~_ALL_MODES:
            return NOT_THIN
        held = engine.thin_fence
        opening = not assertion & MODE_NOSUCCEED
        if held is None:
            if not opening or not self._idle():
                return NOT_THIN
            engine._fences_opened += 1
            engine.thin_fence = ThinFence(engine._fences_opened, assertion)
            engine._last_kind = EpochKind.FENCE
            engine._send_fence_notice()
            return DONE  # only opening: done at activation, which is now
        if not held.ordinal or held.closing or assertion & MODE_NOPRECEDE:
            return NOT_THIN  # the general path orders it behind the closing epoch, or refuses it
        if held.recorded and not self._issue_recorded(held):
            return NOT_THIN  # a target still has not opened the epoch: the general path waits
        if not self._flushed(held.last_seq):
            return NOT_THIN  # completes later: the general path waits for its report
        closed = held.ordinal
        if opening:
            engine._fences_opened += 1
        engine._fence_done_sent = max(engine._fence_done_sent, closed)
        engine._send_fence_notice()  # our "done" (and the next epoch's opening) to every peer
        if opening:
            held = engine.thin_fence = ThinFence(engine._fences_opened, assertion)
        else:
            held.ordinal, held.ops, held.last_seq = 0, {}, {}
        peers = engine.peers
        if all(peers[r].fence_done_received >= closed for r in range(engine.size) if r != engine.rank):
            if not opening:
                engine.thin_fence = None
            return DONE  # every peer's "done" is in: complete
        token = engine._new_token()
        held.closing, held.closing_token = closed, token  # finished by the last peer's "done"
        return token

    def _idle(self) -> bool:
        """Nothing live on the window: a new epoch may be served thinly."""
        engine = self.engine
        return not (
            engine.failure is not None
            or engine.freeing
            or engine._open
            or engine._active
            or engine._deferred
            or engine.thin_lock is not None
            or engine.thin_fence is not None
            or engine.thin_access is not None
            or engine.thin_exposure is not None
        )

    def _group(self, group: object) -> tuple[int, ...] | None:
        """``group`` as ranks when it is a list or tuple of distinct plain ints in range (else the
        general path checks it and refuses what is wrong)."""
        if type(group) is not list and type(group) is not tuple:
            return None
        members = tuple(group)
        size = self.engine.size
        for rank in members:
            if type(rank) is not int or not 0 <= rank < size:
                return None
        if len(set(members)) != len(members):
            return None
        return members

    def start(self, group: object, assertion: int) -> int:
        """Open an access epoch on an idle window; its token finishes when every target granted
        (at once if their grants are in)."""
        engine = self.engine
        members = self._group(group)
        if members is None or assertion or not self._idle():
            return NOT_THIN
        ordinals = {}
        for target in members:
            peer = engine.peers[target]
            peer.gats_accesses_opened += 1
            ordinals[target] = peer.gats_accesses_opened
        engine._last_kind = EpochKind.START
        peers = engine.peers
        if all(peers[t].gats_granted_access_id >= n for t, n in ordinals.items()):
            engine.thin_access = ThinAccess(members, assertion, ordinals, 0)
            return DONE  # every grant is in already
        token = engine._new_token()
        engine.thin_access = ThinAccess(members, assertion, ordinals, token)
        return token

    def complete(self) -> int:
        """Close the thin access epoch when every target granted and its RMA is complete inside
        the call: the "done"s go out and the token is finished."""
        engine = self.engine
        held = engine.thin_access
        if held is None or held.open_token in engine._pending_tokens:
            return NOT_THIN  # a target has not granted yet: the general path waits for it
        if not self._flushed(held.last_seq):
            return NOT_THIN
        engine.thin_access = None
        for target, ordinal in held.ordinals.items():  # after the inline flushes: data, then flag
            engine._raise(target, Word.DONE, ordinal)
        return DONE

    def post(self, group: object, assertion: int) -> int:
        """Open an exposure epoch on an idle window: the grants go out, the token is finished."""
        engine = self.engine
        members = self._group(group)
        if members is None or assertion or not self._idle():
            return NOT_THIN
        expected = {}
        for origin in members:
            peer = engine.peers[origin]
            peer.gats_accesses_granted += 1
            expected[origin] = peer.gats_accesses_granted
            engine._raise(origin, Word.GRANT, peer.gats_accesses_granted)
        engine.thin_exposure = ThinExposure(members, assertion, expected)
        engine._last_kind = EpochKind.POST
        return DONE

    def wait(self) -> int:
        """Close the thin exposure epoch; the token finishes when every origin's "done" is in."""
        engine = self.engine
        held = engine.thin_exposure
        if held is None or held.close_token:
            return NOT_THIN
        peers = engine.peers
        if all(peers[o].gats_done_received >= n for o, n in held.expected_done.items()):
            engine.thin_exposure = None
            return DONE  # every origin's "done" is in
        held.close_token = engine._new_token()
        return held.close_token

    def _issue_recorded(self, held: ThinFence) -> bool:
        """At the closing fence: issue the RMA calls recorded towards targets whose fence notice
        had not arrived, if it has now (read from our own memory); False if one still has not."""
        engine = self.engine
        engine.control_changed()
        if engine.thin_fence is not held:
            return False
        peers = engine.peers
        if any(peers[target].fence_opened < held.ordinal for target in held.waiting):
            return False
        for target, token, payload in held.recorded:
            held.last_seq[target] = engine.issue_seq(target)
            held.ops[target] = held.ops.get(target, 0) + 1
            engine.io.issue(token, target, payload)
        held.recorded, held.waiting = [], set()
        return True

    def _flushed(self, last_seqs: dict[int, int]) -> bool:
        """Remote completion of the RMA towards each target, inside the call; False if the
        transport reports it later (a flush was asked for: the general path waits for it)."""
        flush_now = self.engine.flush_now
        return all(flush_now(target, last_seq) for target, last_seq in last_seqs.items())

    # ------------------------------------------------------------------ RMA and flush

    def rma(self, target: int, payload: Any) -> int:
        """An RMA call towards ``target`` in a thin epoch: handed to the engine's I/O at once, or
        — in a thin fence epoch whose target has not opened it yet — kept and issued at the
        closing fence.  Returns its token, or :data:`NOT_THIN` (the general path serves it: an
        epoch held as an Epoch, or a target not granted yet)."""
        engine = self.engine
        if engine.failure is not None or engine.freeing:
            return NOT_THIN
        held = engine.thin_lock
        fence = engine.thin_fence
        gats = engine.thin_access
        if gats is not None:
            ordinal = gats.ordinals.get(target)
            if ordinal is None:
                return NOT_THIN
            peer = engine.peers[target]
            if peer.gats_granted_access_id < ordinal:
                engine.control_changed()  # the grant may be in our memory already, not yet read
                if engine.thin_access is not gats or peer.gats_granted_access_id < ordinal:
                    return NOT_THIN  # not granted yet: the general path records it for replay
            gats.last_seq[target] = engine.issue_seq(target)
            gats.ops[target] = gats.ops.get(target, 0) + 1
        elif held is not None:
            if held.target != target:
                return NOT_THIN
            held.last_seq = engine.issue_seq(target)
            held.op_count += 1
        elif fence is not None:
            if not fence.ordinal or fence.closing or not 0 <= target < engine.size:
                return NOT_THIN
            peer = engine.peers[target]
            if target in fence.waiting or (target != engine.rank and peer.fence_opened < fence.ordinal):
                token = engine._next_token
                engine._next_token += 1
                fence.recorded.append((target, token, payload))  # after any earlier one: in order
                fence.waiting.add(target)
                return token
            fence.last_seq[target] = engine.issue_seq(target)
            fence.ops[target] = fence.ops.get(target, 0) + 1
        else:
            return NOT_THIN  # an epoch held as an Epoch: WindowEngine.rma
        token = engine._next_token
        engine._next_token += 1
        engine.io.issue(token, target, payload)
        return token

    def flush(self, rank: int) -> int:
        """flush(rank) when the RMA towards ``rank`` is complete already or the transport
        completes it inside the call."""
        engine = self.engine
        if engine._flush_waiters or engine.failure is not None or engine.freeing:
            return NOT_THIN
        held = engine.thin_lock
        if held is not None:
            if held.target != rank:
                return NOT_THIN
            last_seq = held.last_seq
        else:
            epoch = engine._access_epoch_for(rank, passive_only=True)
            if epoch is None:
                return NOT_THIN
            access = epoch.access[rank]
            if access.phase is not TargetPhase.GRANTED:
                return NOT_THIN
            last_seq = access.last_seq
        if not engine.flush_now(rank, last_seq):
            return NOT_THIN  # in flight: the general flush waits for its report
        return DONE


def _ignore() -> None:
    """A thin lock's grant and release are read from its state after the call's steps ran."""

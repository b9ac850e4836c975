"""Remote completion of one window's RMA calls: which of them are complete at their targets, the
flushes asked of the I/O to make them so, and the flush Requests waiting on them.

Every RMA call issued towards a target gets the next *issue sequence number* towards it
(:attr:`PeerTrait.issued_seq`, counted by the engine as it issues); an access epoch remembers the
number of its last call (:attr:`AccessTarget.last_seq`).  The I/O's flush of a target makes
every call issued so far complete there and moves the target's *watermark*
(:attr:`PeerTrait.remote_complete_seq`).  So "the epoch's RMA towards ``t`` is remotely complete"
is one comparison, however many calls it made and whichever flush covered them; a flush is asked
for at most once per sequence number.

A flush the I/O answers inside its call moves the watermark at once, so the step that asked goes
on at once; everyone else waiting on that target (other active epochs, flush Requests) hears of
it from the engine at the end of its outermost call (:attr:`RemoteCompletion.answered_inline`),
never in the middle of the step that asked — that step is pushing an epoch towards completion,
which the report would re-enter.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

from .engine_io import EngineIO
from .epochs import AccessTarget, Epoch, PeerTrait
from .states import TargetPhase

# Enum members the functions below read, as module constants: on Python 3.11 reading a
# member (``EpochKind.LOCK``) goes through the enum metaclass's ``__getattr__`` hook, five
# times a plain attribute's cost; compiled, a Final name is a C variable.
_TARGET_PHASE_GRANTED: Final = TargetPhase.GRANTED


class FlushWaiter:
    """A flush's Request: done once, for each access target, every op called before the flush
    is remotely complete.  ``needs`` pairs an access with the issue sequence number to reach
    (None while the access waits for its grant: its recorded ops get their numbers then).  (A
    plain class: see :class:`~aiorma.engine.epochs.AccessTarget`.)"""

    def __init__(self, token: int, needs: list[tuple[AccessTarget, int | None]]) -> None:
        self.token = token
        self.needs = needs

    def __repr__(self) -> str:
        return f"FlushWaiter(token={self.token}, needs={self.needs!r})"


class RemoteCompletion:
    """The window's flush bookkeeping.  ``active`` is the engine's list of active epochs (read,
    never changed, here); ``finish(token)`` finishes a flush Request's token."""

    def __init__(
        self, peers: list[PeerTrait], io: EngineIO, active: Sequence[Epoch], finish: Callable[[int], None]
    ) -> None:
        self.peers = peers
        self.io = io
        self._active = active
        self._finish = finish
        #: Flush Requests not yet finished, in call order.
        self.waiters: list[FlushWaiter] = []
        #: Flushes the I/O completed inside its call, (target, upto), for the engine to report to
        #: itself at the end of its outermost call.
        self.answered_inline: deque[tuple[int, int]] = deque()

    def complete(self, target: int, last_seq: int) -> bool:
        """True when every op towards ``target`` up to ``last_seq`` is remotely complete: already,
        or by a flush the I/O completed inside this call.  False: a flush is in flight, and the
        engine's ``flushed`` will report it."""
        return self.peers[target].remote_complete_seq >= last_seq or self.request(target)

    def request(self, target: int) -> bool:
        """Ask for a flush of every op issued to ``target`` (unless one is asked for already).
        True when the I/O completed it inside the call: the watermark moves now, and the others
        waiting on ``target`` are told through :attr:`answered_inline`."""
        peer = self.peers[target]
        if peer.issued_seq <= peer.flush_requested:
            return False  # in flight already
        upto = peer.flush_requested = peer.issued_seq
        if not self.io.flush(target, upto):
            return False
        peer.remote_complete_seq = upto
        if len(self._active) > 1 or self.waiters:  # (nobody else to tell otherwise)
            self.answered_inline.append((target, upto))
        return True

    def flushed_in_call(self, access: AccessTarget) -> bool:
        """A flush of ``access`` done inside the call: no flush Request is waiting before it, the
        target granted, and its RMA is complete there already or by a flush answered inside the
        call."""
        return (
            not self.waiters
            and access.phase is _TARGET_PHASE_GRANTED
            and self.complete(access.rank, access.last_seq)
        )

    def wait_for(self, token: int, targets: list[AccessTarget]) -> None:
        """Finish ``token`` once the RMA called so far towards each of ``targets`` is remotely
        complete (now, if it is)."""
        needs = [(a, a.last_seq if a.granted else None) for a in targets if a.op_count]
        self.waiters.append(FlushWaiter(token, needs))
        self.service()

    def granted(self, access: AccessTarget) -> None:
        """``access`` was granted and its recorded ops issued: the flush Requests waiting for
        its grant now wait for its last op."""
        if self.waiters:
            for waiter in self.waiters:
                waiter.needs = [(a, a.last_seq if a is access else seq) for a, seq in waiter.needs]
            self.service()

    def service(self) -> None:
        """Finish the flush Requests whose ops are all remotely complete; ask for the flushes the
        others need."""
        if not self.waiters:
            return
        remaining = []
        for waiter in self.waiters:
            pending = [
                (access, seq)
                for access, seq in waiter.needs
                if seq is None or self.peers[access.rank].remote_complete_seq < seq
            ]
            if not pending:
                self._finish(waiter.token)
                continue
            waiter.needs = pending
            remaining.append(waiter)
            for access, seq in pending:
                if seq is not None:
                    self.request(access.rank)
        self.waiters = remaining

"""The actions that record the engine's calls on its :class:`~.engine_io.EngineIO` when nothing
answers (:class:`ActionLog`), and what the engine reports for tracing (events).

A :class:`~.window_engine.WindowEngine` never touches a transport: every step that needs the
world — an RMA operation, an atomic on a peer's control word, a flush, a finished Request — is one
call on its ``EngineIO``.  The driver's implementation hands each call to the transport
endpoint at once, and when the endpoint answers inside the call (an atomic into shared memory, a
flush of data already complete) the engine takes its next step inside the same application call.
With no I/O given, the engine records every call as an action in an :class:`ActionLog`, answers
nothing, and the caller carries the actions out and feeds the answers back as events: the tests
drive whole networks of engines that way, without MPI.

Actions are named tuples: a tuple costs a fraction of a frozen attrs instance to build.  They
compare by kind and value.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from .control import AtomicOp
from .engine_io import EngineIO
from .rules import EpochKind


class ControlWrite(NamedTuple):
    """Update word ``index`` of ``dest``'s control region with ``op`` (MAX or SUM), one-sidedly.

    Whoever drives the engine by hand carries it out after every action recorded before it; it
    needs no result.  The engine records a write that must follow a flush's data only after the
    ``flushed`` event: data before flag.
    """

    dest: int
    # mypy: the field shadows tuple.index; NamedTuple allows it and no caller uses tuple.index.
    index: int  # type: ignore[assignment]
    op: AtomicOp
    value: int


class ControlFetch(NamedTuple):
    """Atomically apply ``op`` to word ``index`` at ``dest`` and report the old value through
    :meth:`WindowEngine.fetched` with ``token`` (lock words: swap, compare-and-swap, sum)."""

    token: int
    dest: int
    index: int  # type: ignore[assignment]  # as in ControlWrite
    op: AtomicOp
    value: int = 0
    compare: int = 0


class IssueRma(NamedTuple):
    token: int
    target: int
    payload: Any  # the driver's operation description (aiorma.engine.ops.RmaOp)


class FlushTarget(NamedTuple):
    """Ask the transport for remote completion of every op issued to ``target`` so far."""

    target: int
    upto: int  # the per-target issue sequence number the flush must cover


class CompleteRequest(NamedTuple):
    token: int
    error: BaseException | None = None


Action = ControlWrite | ControlFetch | IssueRma | FlushTarget | CompleteRequest


class ActionLog(EngineIO):
    """The :class:`EngineIO` of an engine driven by hand: every call becomes an action, kept in
    order for :meth:`drain`; no answer is ever given inside a call."""

    __slots__ = ("actions",)

    def __init__(self) -> None:
        self.actions: list[Action] = []

    def drain(self) -> list[Action]:
        """The actions recorded so far, in order; the log is empty afterwards."""
        drained = self.actions[:]
        self.actions.clear()
        return drained

    def issue(self, token: int, target: int, payload: Any) -> None:
        self.actions.append(IssueRma(token, target, payload))

    def fetch(self, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int) -> int | None:
        self.actions.append(ControlFetch(token, dest, index, op, value, compare))
        return None

    def write(self, dest: int, index: int, op: AtomicOp, value: int) -> None:
        self.actions.append(ControlWrite(dest, index, op, value))

    def flush(self, target: int, upto: int) -> bool:
        self.actions.append(FlushTarget(target, upto))
        return False

    def complete(self, token: int, error: BaseException | None) -> None:
        self.actions.append(CompleteRequest(token, error))


@attrs.frozen
class EpochEvent:
    """One step in an epoch's two lifetimes: open/close (application), activate/complete (engine),
    or "issue": one of its RMA calls handed to the transport (``target`` is then its target)."""

    step: str  # "open" | "close" | "activate" | "complete" | "issue"
    epoch_id: int
    kind: EpochKind
    target: int = -1

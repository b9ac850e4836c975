"""What the engine asks its driver to do (actions) and what it reports for tracing (events).

Actions are named tuples: one is made for nearly every call and every completion, and a tuple
costs a fraction of a frozen attrs instance to build.  They compare by kind and value.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from .control import AtomicOp
from .rules import EpochKind


class ControlWrite(NamedTuple):
    """Update word ``index`` of ``dest``'s control region with ``op`` (MAX or SUM), one-sidedly.

    The driver carries it out after every action queued before it; it needs no result.  A write
    that follows a ``FlushTarget`` of the same engine reaches ``dest`` only after that flush's
    data (the engine emits it after the ``flushed`` event): data before flag.
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


@attrs.frozen
class EpochEvent:
    """One step in an epoch's two lifetimes: open/close (application), activate/complete (engine),
    or "issue": one of its RMA calls handed to the transport (``target`` is then its target)."""

    step: str  # "open" | "close" | "activate" | "complete" | "issue"
    epoch_id: int
    kind: EpochKind
    target: int = -1

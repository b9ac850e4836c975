"""What the engine asks its driver to do (actions) and what it reports for tracing (events)."""

from __future__ import annotations

from typing import Any

import attrs

from .packets import ControlPacket
from .rules import EpochKind


@attrs.frozen
class SendControl:
    dest: int
    packet: ControlPacket


@attrs.frozen
class IssueRma:
    token: int
    target: int
    payload: Any  # the driver's operation description (aiorma.transport.base.RmaOp)


@attrs.frozen
class FlushTarget:
    """Ask the transport for remote completion of every op issued to ``target`` so far."""

    target: int
    upto: int  # the per-target issue sequence number the flush must cover


@attrs.frozen
class CompleteRequest:
    token: int
    error: BaseException | None = None


Action = SendControl | IssueRma | FlushTarget | CompleteRequest


@attrs.frozen
class EpochEvent:
    """One step in an epoch's two lifetimes: open/close (application), activate/complete (engine),
    or "issue": one of its RMA calls handed to the transport (``target`` is then its target)."""

    step: str  # "open" | "close" | "activate" | "complete" | "issue"
    epoch_id: int
    kind: EpochKind
    target: int = -1

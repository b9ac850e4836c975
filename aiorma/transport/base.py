"""The transport contract: what the progress driver needs from a "NIC".

A transport gives each rank an :class:`Endpoint`.  The endpoint registers window memory
(collectively), moves data one-sidedly, carries small control packets, and reports completions to a
:class:`Sink`.  It never interprets epochs; that is the engine's job.

Completion contract, relied on by the engine:

* ``issue(win_id, token, op)`` starts one RMA operation.  ``sink.op_completed(win_id, token)`` is
  reported once the op is *locally* complete: origin buffer reusable, result buffer filled.
* ``flush(win_id, target, upto)`` asks for *remote* completion of every op issued to ``target``
  on that window so far; ``sink.flushed(win_id, target, upto)`` reports it, and only after
  ``op_completed`` was reported for each of those ops.
* ``send(dest, packet)`` delivers a control packet to ``dest`` (itself included).  Packets between
  two ranks arrive in the order sent.  A packet sent after ``flushed`` was reported for some ops is
  never seen before those ops' data is in the target's memory (data before flag).
* Sink callbacks are made from :meth:`Endpoint.poll` or from the event loop, never from inside
  ``issue``/``flush``/``send``, so the engine is never re-entered.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from typing import Protocol

import attrs
import numpy as np

from ..constants import Op
from ..engine.packets import ControlPacket
from ..errors import TransportError


class RmaKind(enum.Enum):
    PUT = "put"
    GET = "get"
    ACCUMULATE = "accumulate"
    GET_ACCUMULATE = "get_accumulate"
    FETCH_AND_OP = "fetch_and_op"
    COMPARE_AND_SWAP = "compare_and_swap"


@attrs.frozen(eq=False)
class RmaOp:
    """One validated RMA operation.  Arrays are 1-D, C-contiguous, of the window's dtype.

    ``disp`` and the lengths count elements of the window dtype; bounds were checked at the origin.
    """

    kind: RmaKind
    target: int
    disp: int
    origin: np.ndarray | None = None
    result: np.ndarray | None = None
    compare: np.ndarray | None = None
    op: Op = Op.REPLACE

    @property
    def count(self) -> int:
        buf = self.origin if self.origin is not None else self.result
        assert buf is not None
        return int(buf.size)


@attrs.frozen
class WindowLayout:
    """What window creation tells every rank: its local memory and each rank's element count."""

    memory: np.ndarray
    counts: tuple[int, ...]


class Sink(Protocol):
    def packet_received(self, src: int, packet: ControlPacket) -> None: ...
    def op_completed(self, win_id: int, token: int) -> None: ...
    def flushed(self, win_id: int, target: int, upto: int) -> None: ...


class Endpoint(Protocol):
    """One rank's view of a transport."""

    rank: int
    size: int

    def attach(self, sink: Sink) -> None:
        """Route completions and packets to ``sink`` (called once, before any window exists)."""

    async def create_window(
        self, win_id: int, memory: np.ndarray | None, count: int, dtype: np.dtype
    ) -> WindowLayout:
        """Collective.  Expose ``memory`` (win_create) or allocate ``count`` elements (win_allocate,
        ``memory is None``).  Must not block the event loop while waiting for peers."""

    async def free_window(self, win_id: int) -> np.ndarray | None:
        """Collective.  Forget the window; returns a copy of allocated memory (None for win_create)."""

    def issue(self, win_id: int, token: int, op: RmaOp) -> None: ...

    def flush(self, win_id: int, target: int, upto: int) -> None: ...

    def send(self, dest: int, packet: ControlPacket) -> None: ...

    def poll(self) -> bool:
        """Make progress; report completions to the sink.  True when anything happened."""

    def wants_polling(self) -> bool:
        """True when completions can only be found by calling :meth:`poll` (MPI); False when the
        endpoint reports them from event-loop callbacks by itself (local)."""

    def idle_fileno(self) -> int | None:
        """For polled endpoints: a descriptor that turns readable when a peer sent a packet, so an
        idle rank can park on it instead of polling; None when there is none."""

    def busy(self) -> bool:
        """For polled endpoints: own operations are outstanding (they ring no doorbell)."""

    def expecting(self) -> bool:
        """For polled endpoints: a wake-up arrived whose packet is not yet received."""

    async def close(self) -> None: ...


@contextlib.contextmanager
def map_transport_errors(what: str) -> Iterator[None]:
    """Translate a transport library's exceptions into :class:`TransportError`, in one place."""
    try:
        yield
    except TransportError:
        raise
    except Exception as exc:  # the library's own error types vary (MPI.Exception, OSError, ...)
        raise TransportError(f"{what}: {exc}") from exc

"""An in-process network whose puts between ranks leave 8-byte words half-written for a while.

Between nodes, MPI promises nothing about a load that races a put: the bytes of a word may land
in pieces, and a CI run saw LL words mixing two writes between emulated nodes, even with one put
per word (docs/architecture.md, *One put per small message*).  That happens rarely on real
hardware, so this network makes it happen every time: a put of 8-byte elements towards another
rank writes the high half of every word at once — on either byte order, the half that holds an
LL word's flag, the worst half to land first — and the whole put only ``TEAR_SECONDS`` later,
when a flush may complete it.  Accumulates are applied whole, as MPI applies them element by
element.  A protocol that reads words while peers put them gets a torn word here; one that
writes such words with accumulates does not.

Every endpoint records how it was asked to write (``writes``: ``(kind, count)``) so tests can
also check which path a write took.
"""

from __future__ import annotations

import sys

import numpy as np

from aiorma._core.watch import poke_all
from aiorma.transport.base import RmaKind, RmaOp
from aiorma.transport.local import LocalEndpoint, LocalNetwork

#: How long a torn word stays torn: long enough for every reader to look at it a few times.
TEAR_SECONDS = 0.005
# The high half of a word among its two uint32 halves in memory.
_HIGH = 1 if sys.byteorder == "little" else 0


class TearingEndpoint(LocalEndpoint):
    """A rank of a :class:`TearingNetwork`."""

    def __init__(self, network: LocalNetwork, rank: int) -> None:
        super().__init__(network, rank)
        self.writes: list[tuple[str, int]] = []

    def stores_words_whole(self, target: int) -> bool:
        return target == self.rank

    def put_flushed(self, win_id: int, target: int, disp: int, data: np.ndarray) -> bool:
        self.writes.append(("put_flushed", int(data.size)))
        return super().put_flushed(win_id, target, disp, data)

    def put_words_flushed(self, win_id: int, target: int, disp: int, words: np.ndarray) -> bool:
        self.writes.append(("put_words_flushed", int(words.size)))
        # Only where words land whole (the transport contract): the caller accumulates them.
        return target == self.rank and super().put_words_flushed(win_id, target, disp, words)

    def issue(self, win_id: int, token: int, op: RmaOp) -> bool:
        self.writes.append((f"{op.kind.value}/{op.op.name}", op.count))
        if _tears(self.rank, op):
            memory = self.network.memory[win_id][op.target]
            assert memory is not None and op.origin is not None
            span = memory[op.disp : op.disp + op.count].view(np.uint32)
            span[_HIGH::2] = np.ascontiguousarray(op.origin).view(np.uint32)[_HIGH::2]
            poke_all()  # readers waiting on these words look now, and see them torn
        return super().issue(win_id, token, op)


def _tears(origin: int, op: RmaOp) -> bool:
    """A put of 8-byte elements towards another rank."""
    return (
        op.kind is RmaKind.PUT
        and op.target != origin
        and op.origin is not None
        and op.origin.dtype.itemsize == 8
    )


def _delay(origin: int, op: RmaOp) -> float:
    return TEAR_SECONDS if _tears(origin, op) else 0.0


class TearingNetwork(LocalNetwork):
    """``size`` in-process ranks, each a :class:`TearingEndpoint`.  The whole put lands after
    ``TEAR_SECONDS`` (the network's ``op_delay``), and a flush waits for it; so does every put
    completed inside a call, which this network declines (the local transport does whenever
    ops are delayed)."""

    def __init__(self, size: int) -> None:
        super().__init__(size, op_delay=_delay)
        self.endpoints = [TearingEndpoint(self, rank) for rank in range(size)]

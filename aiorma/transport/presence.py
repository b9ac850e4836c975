"""PresenceBoard: what each rank of an MPI endpoint tells the others about itself, one-sidedly.

A small MPI window per endpoint, written by the peers and read by its owner at every poll:

* **word r** — peer r's state: 0 polling, 1 parked (it wants a ring when written to), or a
  *departure notice*: r left aiorma by an exception (``_DEPARTED``), or because rank q had failed
  first (``_DEPARTED + 4 (q + 1)``, so a rank that reads several notices at once still names q);
* **slot r** (``_REASON_BYTES``) — why r left: its exception's type and message, or, written by
  the neighbour that saw it die, that its process ended.

Each word and slot has one writer (its rank, or once it is dead the neighbour that noticed), and
notices only ever replace a smaller value, so a late read never misses one.  Reads need no
message: the owner's poll compares the words with what it last saw.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Final

import numpy as np
from mpi4py import MPI

from ..errors import TransportError
from .base import map_transport_errors
from .window_lifecycle import exclusive

_DEPARTED: Final = 2  # a word at or above this: a departure notice (0/1: polling/parked)
_DEPARTURE_PATIENCE = 0.5  # seconds a leaving rank waits for its notices to land
_REASON_BYTES: Final = 256  # of a departing rank's exception, as UTF-8 text, in each peer's memory


def departure_notice(root: int | None) -> int:
    """The presence value announcing a departure: its own failure (None), or rank ``root``'s."""
    return _DEPARTED if root is None else _DEPARTED + 4 * (root + 1)


def departed_root(rank: int, notice: int) -> int:
    """The rank that failed first, from ``rank``'s departure notice."""
    code = (notice - _DEPARTED) // 4
    return rank if code == 0 else code - 1


class PresenceBoard:
    """The presence window of one endpoint; see the module docstring.

    ``passive[r]``: peer r shares this node's memory (its words are written by an atomic);
    ``passive_puts``: peers on other nodes get plain put + ``Flush`` (the off-node fast paths)."""

    def __init__(self, comm: MPI.Intracomm, passive: list[bool], passive_puts: bool, key: int) -> None:
        """Collective and blocking (start-up); ``key``: the endpoint's
        :func:`~aiorma.transport.window_lifecycle.agree_key`."""
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._passive, self._passive_puts = passive, passive_puts
        size = self.size
        with map_transport_errors("MpiEndpoint start-up"):
            # The endpoint's exchanges on ``comm`` just before put every peer in this creation;
            # another connect's thread may be creating windows too (window_lifecycle).
            nbytes = (8 + _REASON_BYTES) * size
            self._win = exclusive(comm, key, lambda: MPI.Win.Allocate(nbytes, 8, comm=comm))
            memory: Any = self._win.tomemory()
            self._words = np.frombuffer(memory, np.int64)[:size]
            reasons = np.frombuffer(memory, np.uint8)[8 * size : (8 + _REASON_BYTES) * size]
            self._reasons = reasons.reshape(size, _REASON_BYTES)
            self._words[:] = 0
            self._reasons[:] = 0
            self._win.Lock_all()
            comm.Barrier()
        self._seen = self._words.tobytes()
        # The same words for one load each (parked, has_left: at every ring and remote atomic):
        # a memoryview's item costs a third of a numpy array's ``item`` call.
        self._word_view = memoryview(memory).cast("B")[: 8 * size].cast("q")
        self._parked = False
        self._notice = np.zeros(1, np.int64)  # alive while its writes are in flight
        self._flag = np.zeros(1, np.int64)
        #: Peers found departed (nothing more is written into their memory).
        self.departed: set[int] = set()
        #: The rank the departures name, once one is found.
        self.failed_first: int | None = None
        #: Requests of departure writes not complete when this rank left, and their origins.
        self.in_flight: list[object] = []

    # ------------------------------------------------------------------ reading

    def parked(self, rank: int) -> bool:
        """Peer ``rank`` said it is parked (or left): a ring would wake it."""
        word: int = self._word_view[rank]
        return word != 0

    def has_left(self, rank: int) -> bool:
        """Peer ``rank``'s word holds a departure notice."""
        word: int = self._word_view[rank]
        return word >= _DEPARTED

    def departures(self) -> tuple[int, TransportError | None] | None:
        """Look at the words (a poll): when they show a departure not seen before, the rank
        that failed first among the departed and why it left (None: it wrote nothing)."""
        self._win.Sync()  # peers' writes visible to our loads (unified memory model)
        words = self._words.tobytes()
        if words == self._seen:
            return None
        self._seen = words
        found = False
        for rank in np.flatnonzero(self._words >= _DEPARTED).tolist():
            if rank not in self.departed:
                self.departed.add(rank)
                root = departed_root(rank, int(self._words[rank]))
                if self.failed_first is None or root == rank:
                    self.failed_first = root
                found = True
        if not found:
            return None  # a peer parked or woke
        assert self.failed_first is not None
        return self.failed_first, self._reason_of(self.failed_first)

    def _reason_of(self, rank: int) -> TransportError | None:
        text = self._reasons[rank].tobytes().split(b"\0", 1)[0].decode("utf-8", "replace")
        return TransportError(text) if text else None

    # ------------------------------------------------------------------ writing

    def set_parked(self, parked: bool) -> bool:
        """Tell the peers whether we are parked; False if that was already so.  Peers on this
        node get the flag by an atomic into shared memory, peers on other nodes by a put +
        ``Flush`` (passive there)."""
        if parked == self._parked:
            return False
        self._parked = parked
        flag = self._flag
        flag[0] = int(parked)
        for peer, passive in enumerate(self._passive):
            if peer == self.rank or peer in self.departed:
                continue
            # A flag that does not arrive costs speed only (that peer skips no ring, or rings a
            # rank that polls; the guard poll covers the rest), and the usual reason one cannot
            # arrive is a peer whose process died: its death is reported by the liveness ring,
            # not by failing this rank's windows on the next park.
            with contextlib.suppress(MPI.Exception):
                if passive:
                    self._win.Accumulate(flag, peer, self.rank, MPI.REPLACE)
                    self._win.Flush(peer)
                elif self._passive_puts:
                    # A put, although the peer reads the word while it may land in pieces: it
                    # only ever goes between 0 and 1, which differ in one byte.
                    self._win.Put(flag, peer, self.rank)
                    self._win.Flush(peer)
        return True

    def announce_departure(self, reason: str | None) -> None:
        """Leaving by an exception: write ``reason`` (what this rank raised) into our slot of
        every peer's reasons, then this rank's departure notice into their words.  A rank leaving
        because another failed first sends no reason: the peers name that one."""
        if reason is not None and self.failed_first is None:
            self._write_reason(self.rank, f"rank {self.rank} left aiorma by an exception: {reason}")
        self._write_word(self.rank, departure_notice(self.failed_first))

    def lose(self, rank: int, cause: BaseException) -> int:
        """Peer ``rank``'s process is gone: mark it departed here and, in its place, in every
        other live peer's words (its word has no other writer any more), with ``cause`` as its
        reason.  Returns the rank the departures now name."""
        self._write_reason(rank, str(cause))
        notice = departure_notice(None)
        self._words[rank] = notice
        # Departed first: nothing more is written into the dead rank's memory (between nodes an
        # RMA write into a process that no longer exists aborts the writer, in UCX).
        self.departed.add(rank)
        if self.failed_first is None:
            self.failed_first = rank
        self._write_word(rank, notice)
        return self.failed_first

    def _write_reason(self, rank: int, reason: str) -> None:
        text = np.zeros(_REASON_BYTES, np.uint8)
        encoded = reason.encode("utf-8", "replace")[: _REASON_BYTES - 1]
        text[: len(encoded)] = np.frombuffer(encoded, np.uint8)
        self._reasons[rank] = text
        disp = (8 * self.size + rank * _REASON_BYTES) // 8
        self._write_everywhere([text, MPI.BYTE], (disp, _REASON_BYTES, MPI.BYTE))

    def _write_word(self, slot: int, value: int) -> None:
        self._notice[0] = value
        self._write_everywhere([self._notice, MPI.INT64_T], (slot, 1, MPI.INT64_T))

    def _write_everywhere(self, origin: list[Any], target: tuple[int, int, MPI.Datatype]) -> None:
        """Write ``origin`` at ``target`` of every live peer's window (REPLACE, so atomic per
        element).  Waits at most _DEPARTURE_PATIENCE for the writes towards peers on other nodes
        (their MPI progress lands them; they are polling, since they wait for us)."""
        requests: dict[int, MPI.Request] = {}
        with contextlib.suppress(Exception):  # a broken MPI: the peers' timeouts remain
            for peer in range(self.size):
                if peer != self.rank and peer not in self.departed:
                    requests[peer] = self._win.Raccumulate(origin, peer, target, MPI.REPLACE)
            deadline = time.monotonic() + _DEPARTURE_PATIENCE
            pending = dict(requests)
            while pending and time.monotonic() < deadline:
                pending = {peer: request for peer, request in pending.items() if not request.Test()}
            # A request completes at *local* completion; remote completion takes a flush (Open
            # MPI's osc/rdma delivers nothing before one; MPICH delivers eagerly).  Only towards
            # peers whose request completed: they are progressing.
            for peer in requests.keys() - pending.keys():
                self._win.Flush(peer)
            if pending:  # may still run, inside MPI_Finalize (aiorma.transport.in_flight)
                self.in_flight += [*pending.values(), origin]

    def free(self) -> None:
        """Collective (part of the endpoint's close, in its collectives thread, inside
        :func:`~aiorma.transport.window_lifecycle.exclusive`)."""
        self._win.Unlock_all()
        self._win.Free()

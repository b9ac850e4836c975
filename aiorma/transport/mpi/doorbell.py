"""Doorbells: one UDP socket per rank, rung (one empty datagram, never waited for) after writing a
peer's control region or when starting an operation that needs the peer's progress.  UDP rather
than a node-local socket so that a peer on another host can be rung too; a ring carries no data,
so a stray or lost datagram costs a spurious wake-up or a guard poll, never correctness.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterable

from mpi4py import MPI

from ..presence import PresenceBoard

#: How often a peer serving our requests by its progress is rung again.
RERING_INTERVAL = 1e-3


def open_doorbells(
    comm: MPI.Intracomm, hosts: list[str]
) -> tuple[socket.socket | None, list[tuple[str, int] | None]]:
    """Bind this rank's UDP doorbell and learn every peer's address (None: cannot be rung).

    A peer on this host is rung on the loopback address; one on another host at the address its
    host name resolves to there.  Collective and blocking: start-up only.
    """
    rank = comm.Get_rank()
    doorbell: socket.socket | None = None
    address: tuple[str, int] | None = None
    try:
        doorbell = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        doorbell.bind(("0.0.0.0", 0))
        doorbell.setblocking(False)
        try:
            ip = socket.gethostbyname(hosts[rank])
        except OSError:  # an unresolvable host name: peers on this machine can still ring
            ip = "127.0.0.1"
        address = (ip, doorbell.getsockname()[1])
    except OSError:  # no UDP here: peers poll us on their guard interval instead
        if doorbell is not None:
            doorbell.close()
        doorbell = None
    addresses = comm.allgather(address)
    bells: list[tuple[str, int] | None] = []
    for r, peer in enumerate(addresses):
        if peer is None or r == rank:
            bells.append(None)
        elif hosts[r] == hosts[rank]:
            bells.append(("127.0.0.1", peer[1]))
        else:
            bells.append(peer)
    return doorbell, bells


class Doorbell:
    """This rank's doorbell (``sock``, from :func:`open_doorbells`) and the peers' (``bells``):
    which peer to ring and when, and the parked flag in the peers' presence words that tells them
    to ring us.

    ``passive[r]``: RMA into peer r's allocated memory completes without its CPU (shared memory);
    ``passive_puts``: the off-node fast paths are on, so a peer on another node announces its
    parks too (see :meth:`ring`).
    """

    def __init__(
        self,
        sock: socket.socket | None,
        bells: list[tuple[str, int] | None],
        presence: PresenceBoard,
        passive: list[bool],
        passive_puts: bool,
    ) -> None:
        self._socket = sock
        self._bells = bells
        self._presence = presence
        self._passive = passive
        self._passive_puts = passive_puts
        # When each peer was last rung: a peer serving our requests by its own progress (another
        # node, win_create memory) is rung again every RERING_INTERVAL seconds until they complete, so
        # that it never parks in the middle of a long transfer (a 1 MiB accumulate by active
        # messages needs many of its polls).
        self._rung_at = [0.0] * len(bells)

    def fileno(self) -> int | None:
        """The socket's descriptor, readable when a peer rang; None without a doorbell."""
        return self._socket.fileno() if self._socket is not None else None

    def ring(self, dest: int) -> None:
        """Ring ``dest`` if it is parked.  Every peer announces its parks in our presence words
        (see :meth:`parking`), except a peer on another node when the off-node paths are off:
        that one is always rung."""
        address = self._bells[dest]
        if address is not None and (
            self._presence.parked(dest) or not (self._passive[dest] or self._passive_puts)
        ):
            self._rung_at[dest] = time.monotonic()
            # A full socket buffer means unread rings are already waiting; a refused or dropped
            # datagram costs the peer a guard poll, never correctness.
            with contextlib.suppress(OSError):
                self._socket.sendto(b"", address)  # type: ignore[union-attr]

    def ring_everyone(self) -> None:
        """Ring every peer (a departure was written into their presence words)."""
        # Our own entry in the bells is None: we never ring ourselves.
        for peer in range(len(self._bells)):
            if self._bells[peer] is not None and self._socket is not None:
                with contextlib.suppress(OSError):
                    self._socket.sendto(b"", self._bells[peer])  # type: ignore[arg-type]

    def ring_servers(self, servers: Iterable[int]) -> None:
        """Ring again, every RERING_INTERVAL seconds, the peers whose progress our requests wait for
        (``servers``; -1 is skipped)."""
        now = time.monotonic()
        for target in servers:
            if target >= 0 and not self._passive[target] and now - self._rung_at[target] > RERING_INTERVAL:
                self.ring(target)

    def parking(self, parked: bool) -> None:
        """Tell the peers whether we are parked (so they ring us), and after a park empty the
        doorbell.  The waiter polls once more after ``parking(True)`` before it sleeps: a peer
        that raised our word before seeing the flag is found by that poll, one that saw the flag
        rings (Dekker's handshake: the flag is in the peer's memory before our last poll, the
        peer's write in ours before it reads the flag).  Peers on this node get the flag by an
        atomic into shared memory, peers on other nodes by a put + ``Flush`` (passive there)."""
        if not self._presence.set_parked(parked):
            return
        if not parked and self._socket is not None:
            # Rings carry no data (a stray datagram costs a spurious wake-up): empty the socket so
            # that it turns readable again only for new rings.
            with contextlib.suppress(BlockingIOError, InterruptedError):
                while True:
                    self._socket.recv(64)

    def close(self) -> None:
        """Stop ringing and close the socket.  Idempotent."""
        self._bells = [None] * len(self._bells)  # nothing rings any more
        if self._socket is not None:
            self._socket.close()
            self._socket = None

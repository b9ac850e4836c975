"""RingLiveness: notice a peer process that died without leaving aiorma.

A rank that leaves ``connect`` by an exception writes a departure notice into its peers' memory
(see :class:`aiorma.transport.mpi.MpiEndpoint`).  A rank that is *killed* — SIGKILL, the OOM
killer, a segmentation fault — writes nothing, and when the launcher does not end the job at
once its peers would wait for it for ever.  What survives such a death is the kernel: it closes
every socket of a process that ends, however it ends, and the peer's end of a TCP connection then
reads end-of-file (or a reset).

So every rank holds one TCP connection to each of its two ring neighbours (rank ± 1), across
nodes as on one.  A connection that ends without the neighbour's goodbye byte means the
neighbour died; the rank that sees it tells the endpoint, which tells every other rank (in the
memory their polls read anyway).  The connections carry nothing else: watching them costs a
file descriptor in the event loop's selector and nothing on the hot path.  Detection takes one
turn of the neighbour's event loop after the death (a neighbour computing without awaiting
notices when it returns to the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from mpi4py import MPI

_GOODBYE = b"B"  # sent before an orderly close: the end-of-file that follows is no death
# Seconds for a neighbour's connection at start-up (then: no liveness for that pair).  A
# reachable neighbour answers in milliseconds; a firewall that drops the packets costs this much.
_CONNECT_PATIENCE = 2.0


class RingLiveness:
    """TCP connections to this rank's ring neighbours; see the module docstring.

    Construction is collective and blocking (start-up): every rank listens, the addresses are
    exchanged on ``comm``, each rank connects to its successor and accepts its predecessor.  A
    rank that cannot open TCP sockets (none here) watches nothing, and tells its neighbours so:
    they fall back on their other neighbour and on the peers' own timeouts.  So does a rank
    constructed with ``enabled=False`` (the connection's
    :attr:`~aiorma._core.settings.Settings.liveness` off, where TCP between ranks is not wanted):
    a rank that dies without leaving then holds its peers until their own timeouts.
    """

    def __init__(self, comm: MPI.Intracomm, hosts: list[str], enabled: bool = True) -> None:
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._sockets: dict[socket.socket, int] = {}  # connection -> the neighbour at its end
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_death: Callable[[int], None] | None = None
        self._closed = False
        # (every rank takes part in the exchanges below, so that a rank with the ring switched
        # off leaves no neighbour waiting: it just offers and makes no connection)
        listener, address = _listen(hosts[self.rank]) if enabled else (None, None)
        addresses = comm.allgather(address)
        if self.size == 1:
            if listener is not None:
                listener.close()
            return
        successor = (self.rank + 1) % self.size
        predecessor = (self.rank - 1) % self.size
        # Connect first (the kernel completes a connection to a listening socket before anyone
        # accepts it), tell everyone whether it worked, then accept only a connection that was
        # made: no rank waits for one that will never come.  Then keep a connection only when
        # both of its ends set it up — a neighbour that closes a half-made one must not read as
        # dead — which both ends decide alike from the same exchanges.
        outgoing = None
        if listener is not None and addresses[successor] is not None:
            try:
                outgoing = socket.create_connection(addresses[successor], timeout=_CONNECT_PATIENCE)
            except OSError:  # (a host name that resolves to an address we cannot reach)
                outgoing = None
        made = comm.allgather(outgoing is not None)
        incoming = None
        if listener is not None and made[predecessor]:
            try:
                listener.settimeout(_CONNECT_PATIENCE)
                incoming, _ = listener.accept()
            except OSError:
                incoming = None
        if listener is not None:
            listener.close()
        accepted = comm.allgather(incoming is not None or not made[predecessor])
        for connection, neighbour, kept in (
            (outgoing, successor, accepted[successor]),
            (incoming, predecessor, True),
        ):
            if connection is None:
                continue
            if kept:
                connection.setblocking(False)
                self._sockets[connection] = neighbour
            else:
                connection.close()

    @property
    def neighbours(self) -> list[int]:
        """The ranks whose death this rank watches for."""
        return sorted(set(self._sockets.values()))

    def watch(self, loop: asyncio.AbstractEventLoop, on_death: Callable[[int], None]) -> None:
        """Call ``on_death(rank)`` on ``loop`` when a neighbour's connection ends without its
        goodbye.  Once; from the loop's thread."""
        if self._loop is not None or self._closed:
            return
        self._loop, self._on_death = loop, on_death
        for connection in self._sockets:
            loop.add_reader(connection.fileno(), self._readable, connection)

    def _readable(self, connection: socket.socket) -> None:
        try:
            data = connection.recv(64)
        except BlockingIOError:
            return
        except OSError:  # reset: the neighbour's kernel closed it
            data = b""
        if data and _GOODBYE not in data:
            return  # nothing else is ever sent; ignore
        neighbour = self._sockets.pop(connection)
        self._unwatch(connection)
        connection.close()
        if not data and not self._closed and self._on_death is not None:
            self._on_death(neighbour)

    def _unwatch(self, connection: socket.socket) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(connection.fileno())

    def close(self) -> None:
        """Say goodbye to both neighbours and close the connections (an orderly end: the
        neighbours report no death).  Idempotent."""
        if self._closed:
            return
        self._closed = True
        for connection in list(self._sockets):
            with contextlib.suppress(OSError):
                connection.send(_GOODBYE)
            self._unwatch(connection)
        self._close_sockets()

    def _close_sockets(self) -> None:
        for connection in self._sockets:
            connection.close()
        self._sockets.clear()


def _listen(host: str) -> tuple[socket.socket | None, tuple[str, int] | None]:
    """A listening TCP socket on every interface and the address peers reach it at (the host
    name's address, or loopback when the name does not resolve)."""
    listener = None
    try:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("0.0.0.0", 0))
        listener.listen(2)
        try:
            ip = socket.gethostbyname(host)
        except OSError:
            ip = "127.0.0.1"
        return listener, (ip, listener.getsockname()[1])
    except OSError:
        if listener is not None:
            listener.close()
        return None, None

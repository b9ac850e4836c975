"""The MPI transport: one rank per process under ``mpiexec``, over mpi4py.

Windows are ``MPI.Win.Create`` (user memory) or ``MPI.Win.Allocate`` windows, each under one
long-lived ``Lock_all`` epoch opened at creation: every RMA operation is a request-based
passive-target call inside it, and the engine's epochs exist only in its own counters and control
packets.  Control packets travel as 24-byte messages on a private duplicate of the user's
communicator.

Threads: window creation/free and communicator free are collectives that wait for peers, so they
run in one worker thread (MPI is initialised with ``THREAD_MULTIPLE``).  A *single* worker keeps the
order of collectives on the window communicator the same on every rank.  Everything else -- issue,
flush, send, poll -- runs on the event-loop thread and is bounded: on one node MPICH's RMA is truly
passive (DESIGN §6), so ``Flush`` and ``Flush_local`` finish without the target entering MPI.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import attrs
import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from ..constants import Op
from ..engine.packets import ControlPacket
from ..errors import RmaTypeError
from .base import RmaKind, RmaOp, Sink, WindowLayout, map_transport_errors

_T = TypeVar("_T")

_CTRL_TAG = 0
_RING_PATIENCE = 0.005  # how long a ring's packet may take to become visible to Improbe
# After this long without rings or packets, every ring sent has been read and every packet
# received, so the ring count must be zero; resetting it undoes drift from a ring dropped on a
# full socket buffer (which would otherwise make later rings look already claimed).
_RING_RESYNC = 0.05

_MPI_OPS: dict[Op, MPI.Op] = {
    Op.SUM: MPI.SUM,
    Op.PROD: MPI.PROD,
    Op.MIN: MPI.MIN,
    Op.MAX: MPI.MAX,
    Op.BAND: MPI.BAND,
    Op.BOR: MPI.BOR,
    Op.BXOR: MPI.BXOR,
    Op.LAND: MPI.LAND,
    Op.LOR: MPI.LOR,
    Op.LXOR: MPI.LXOR,
    Op.REPLACE: MPI.REPLACE,
    Op.NO_OP: MPI.NO_OP,
}


def _mpi_datatype(dtype: np.dtype) -> tuple[MPI.Datatype, bool]:
    """The MPI datatype of ``dtype`` and whether we own (must free) it.

    ``from_numpy_dtype`` returns a *duplicate* even of a predefined type; atomics
    (compare-and-swap, fetch-and-op) want the predefined type itself, so a duplicate is unwrapped.
    """
    datatype = dtlib.from_numpy_dtype(dtype)
    if datatype.combiner == MPI.COMBINER_DUP:
        base = datatype.decode()[0]
        datatype.Free()
        return base, False
    return datatype.Commit(), True


@attrs.define(eq=False)
class _Window:
    win: MPI.Win
    memory: np.ndarray
    allocated: bool
    datatype: MPI.Datatype
    owns_datatype: bool


@attrs.define(eq=False)
class _Pending:
    """An issued request-based op; ``keep`` holds its numpy buffers alive until completion."""

    win_id: int
    token: int
    target: int
    request: MPI.Request
    keep: object


class MpiEndpoint:
    """An :class:`~aiorma.transport.base.Endpoint` over mpi4py.

    Construction duplicates ``comm`` twice (blocking; it is start-up): one duplicate carries control
    packets, the other window creation/free collectives, so neither can match the user's traffic.
    """

    def __init__(self, comm: MPI.Intracomm = MPI.COMM_WORLD) -> None:
        with map_transport_errors("MpiEndpoint start-up"):
            self._ctrl_comm: MPI.Intracomm = comm.Dup()
            self._win_comm: MPI.Intracomm = comm.Dup()
            self.rank: int = comm.Get_rank()
            self.size: int = comm.Get_size()
            multiple = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        # Without THREAD_MULTIPLE the worker may not call MPI while the loop thread polls;
        # _collective then rendezvouses with a polled Ibarrier instead (see there).
        self._executor = (
            concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiorma-mpi")
            if multiple
            else None
        )
        self._sink: Sink | None = None
        self._windows: dict[int, _Window] = {}
        self._pending: list[_Pending] = []
        # Ops already complete at issue (compare-and-swap), reported by the next poll.
        self._completed: list[tuple[int, int]] = []
        self._flushes: list[tuple[int, int, int]] = []
        # Isend requests with their buffers: the buffer must outlive the request.
        self._sends: list[tuple[MPI.Request, bytes]] = []
        self._closed = False
        self._doorbell, self._doorbell_peers = _open_doorbells(self._ctrl_comm)
        # Each ring promises one packet from a peer.  MPICH may make the packet visible to Improbe
        # only a poll or two after the ring arrives; until then the rank must not park again, or
        # the (already drained) ring would be lost.
        self._unclaimed_rings = 0
        self._last_ring = 0.0  # time.monotonic() of the last ring read or packet received

    def attach(self, sink: Sink) -> None:
        """Route completions and packets to ``sink``; called once, before any window exists."""
        self._sink = sink

    def wants_polling(self) -> bool:
        """Always True: MPI completions are only found by calling :meth:`poll`."""
        return True

    async def _collective(self, fn: Callable[[], _T]) -> _T:
        """Run the blocking collective ``fn`` without blocking the event loop.

        Cancelling the awaiting task does not stop ``fn``: it runs to completion (peers are in the
        same collective) and its result is lost.
        """
        loop = asyncio.get_running_loop()
        if self._executor is not None:
            return await loop.run_in_executor(self._executor, fn)
        # No THREAD_MULTIPLE: MPI may only be called from one thread at a time, so fn cannot run in
        # the worker while the loop thread polls.  Instead wait, polled from the loop, until every
        # rank has reached this collective; then fn's blocking calls return almost at once.
        with map_transport_errors("collective rendezvous"):
            request = self._win_comm.Ibarrier()
        delay = 1e-5
        while True:
            with map_transport_errors("collective rendezvous"):
                if request.Test():
                    break
            await asyncio.sleep(delay)
            delay = min(2 * delay, 1e-3)
        return fn()

    async def create_window(
        self, win_id: int, memory: np.ndarray | None, count: int, dtype: np.dtype
    ) -> WindowLayout:
        """Collective.  Expose ``memory`` (``Win.Create``) or allocate ``count`` zeroed elements
        (``Win.Allocate``, ``memory is None``), then open the window's ``Lock_all`` epoch.

        Raises :class:`RmaTypeError` on every rank when the ranks' dtypes differ.
        """
        dtype = np.dtype(dtype)
        count = int(memory.size if memory is not None else count)

        def create() -> tuple[_Window, tuple[int, ...]]:
            # Exchange first: a dtype mismatch then fails on every rank before any window exists.
            with map_transport_errors("create_window: exchange"):
                peers = self._win_comm.allgather((count, dtype))
            if any(other != dtype for _, other in peers):
                raise RmaTypeError(f"window dtypes differ between ranks: {[d for _, d in peers]}")
            with map_transport_errors("create_window"):
                datatype, owned = _mpi_datatype(dtype)
                if memory is None:
                    size = count * dtype.itemsize
                    win = MPI.Win.Allocate(size, dtype.itemsize, comm=self._win_comm)
                    local = np.frombuffer(win.tomemory(), dtype)[:count]
                    local[...] = 0  # deterministic start, as the local transport gives
                else:
                    win = MPI.Win.Create(memory, dtype.itemsize, comm=self._win_comm)
                    local = memory
                win.Lock_all()
                # Every rank holds its Lock_all before anyone issues RMA into this window.
                self._win_comm.Barrier()
            return _Window(win, local, memory is None, datatype, owned), tuple(c for c, _ in peers)

        window, counts = await self._collective(create)
        self._windows[win_id] = window
        return WindowLayout(window.memory, counts)

    async def free_window(self, win_id: int) -> np.ndarray | None:
        """Collective.  The engine guarantees no op of this rank is outstanding on the window.

        Returns a copy of allocated memory, None for a ``Win.Create`` window.
        """
        # Forget it first, so no poll touches the MPI window while the worker frees it.
        window = self._windows.pop(win_id)

        def free() -> np.ndarray | None:
            with map_transport_errors("free_window"):
                window.win.Unlock_all()
                # After every rank's Unlock_all, every peer's ops into our memory are complete,
                # so the copy below sees their data.
                self._win_comm.Barrier()
                copy = window.memory.copy() if window.allocated else None
                window.win.Free()
                if window.owns_datatype:
                    window.datatype.Free()
            return copy

        return await self._collective(free)

    def issue(self, win_id: int, token: int, op: RmaOp) -> None:
        """Start ``op``; its ``op_completed`` is reported by a later :meth:`poll`."""
        window = self._windows[win_id]
        win, dt = window.win, window.datatype
        target = (op.disp, op.count, dt)
        keep: object = op  # holds origin/result/compare arrays
        with map_transport_errors(f"issue {op.kind.value}"):
            if op.kind is RmaKind.COMPARE_AND_SWAP:
                win.Compare_and_swap([op.origin, dt], [op.compare, dt], [op.result, dt], op.target, op.disp)
                # Bounded: intra-node RMA is passive.  After this the result buffer is filled.
                win.Flush_local(op.target)
                self._completed.append((win_id, token))
                return
            if op.kind is RmaKind.PUT:
                request = win.Rput([op.origin, dt], op.target, target)
            elif op.kind is RmaKind.GET:
                request = win.Rget([op.result, dt], op.target, target)
            elif op.kind is RmaKind.ACCUMULATE:
                request = win.Raccumulate([op.origin, dt], op.target, target, _MPI_OPS[op.op])
            else:  # GET_ACCUMULATE, FETCH_AND_OP (count 1)
                # NO_OP ignores the origin, which the engine may leave out; MPI still wants one.
                origin = op.origin if op.origin is not None else np.empty_like(op.result)
                keep = (op, origin)
                request = win.Rget_accumulate(
                    [origin, dt], [op.result, dt], op.target, target, _MPI_OPS[op.op]
                )
        self._pending.append(_Pending(win_id, token, op.target, request, keep))

    def flush(self, win_id: int, target: int, upto: int) -> None:
        """Ask for remote completion of every op issued so far to ``target``; reported by poll."""
        self._flushes.append((win_id, target, upto))

    def send(self, dest: int, packet: ControlPacket) -> None:
        """Send ``packet`` to ``dest`` (possibly ourselves); MPI keeps same-pair order."""
        data = packet.encode()
        with map_transport_errors("send control packet"):
            request = self._ctrl_comm.Isend([data, MPI.BYTE], dest, _CTRL_TAG)
        self._sends.append((request, data))
        if dest == self.rank:
            self._unclaimed_rings += 1  # our own packet: do not park before receiving it
            self._last_ring = time.monotonic()
            return
        address = self._doorbell_peers.get(dest)
        if address is not None:
            # Ring after the packet is sent, so a woken peer finds it.  A full socket buffer
            # (BlockingIOError) means unread rings are already waiting: the wake-up is not lost.
            with contextlib.suppress(BlockingIOError):
                self._doorbell.sendto(b"\x01", address)

    def idle_fileno(self) -> int | None:
        """A file descriptor that becomes readable when a peer sent us a control packet, or None
        when the rank must keep polling: some peer cannot ring it (another host), or a window
        exposes user memory (``Win.Create``).  Measured with the mpich wheel: RMA into Win.Create
        memory is carried by active messages that complete only when the *target* enters MPI
        (a parked target made every put wait for its next guard poll), whereas Win.Allocate
        memory is shared and truly passive."""
        if self._doorbell is None or len(self._doorbell_peers) != self.size - 1:
            return None
        if any(not window.allocated for window in self._windows.values()):
            return None
        return self._doorbell.fileno()

    def busy(self) -> bool:
        """Ops, flushes or sends of ours are outstanding: their completion rings no doorbell."""
        return bool(self._pending or self._flushes or self._completed or self._sends)

    def expecting(self) -> bool:
        """A peer rang (or we sent ourselves a packet), but the packet has not been received yet:
        keep polling, do not park.  Bounded to a few milliseconds after the last ring, so a count
        that drifted up can cost a short spin, never a spinning rank."""
        return self._unclaimed_rings > 0 and time.monotonic() - self._last_ring < _RING_PATIENCE

    def poll(self) -> bool:
        """Receive packets, report completed ops and flushes, retire finished sends.

        Returns True iff anything was reported to the sink.  Sink callbacks may call issue/flush/
        send: all state is updated before each callback, and new work is picked up by later polls.
        """
        sink = self._sink
        assert sink is not None, "attach() a sink before polling"
        self._drain_doorbell()
        busy = self._receive_packets(sink)
        busy |= self._report_ops(sink)
        busy |= self._run_flushes(sink)
        self._retire_sends()
        return busy

    def _drain_doorbell(self) -> None:
        # The rings carry no data (a stray datagram costs at most a spurious wake-up); empty the
        # socket so that it becomes readable again only for new rings.
        if self._doorbell is None:
            return
        rings = 0
        with contextlib.suppress(BlockingIOError):
            while self._doorbell.recv(64):
                rings += 1
        now = time.monotonic()
        if rings:
            self._unclaimed_rings += rings
            self._last_ring = now
        elif self._unclaimed_rings and now - self._last_ring > _RING_RESYNC:
            self._unclaimed_rings = 0

    def _receive_packets(self, sink: Sink) -> bool:
        arrived: list[tuple[int, ControlPacket]] = []
        status = MPI.Status()
        with map_transport_errors("receive control packet"):
            # Improbe also drives MPI progress, which MPICH's peers need (DESIGN §6).
            while (msg := self._ctrl_comm.Improbe(MPI.ANY_SOURCE, _CTRL_TAG, status)) is not None:
                data = bytearray(status.Get_count(MPI.BYTE))
                msg.Recv([data, MPI.BYTE])
                # A malformed packet is dropped, never raised (nothing here should send one).
                with contextlib.suppress(ValueError):
                    arrived.append((status.Get_source(), ControlPacket.decode(data)))
        # A packet may be the flag after data put into our memory: make those stores visible
        # to this thread's loads (unified memory model) before the engine reads the window.
        with map_transport_errors("window sync"):
            for win_id in {packet.win_id for _, packet in arrived}:
                if (window := self._windows.get(win_id)) is not None:
                    window.win.Sync()
        # Rings read plus packets sent to ourselves, minus packets received.  No clamping at
        # zero: a packet is often received before its ring is read, and the ring read later must
        # then cancel out, not look like a packet still to come.
        if arrived:
            self._unclaimed_rings -= len(arrived)
            self._last_ring = time.monotonic()
        for src, packet in arrived:
            sink.packet_received(src, packet)
        return bool(arrived)

    def _report_ops(self, sink: Sink) -> bool:
        done, self._completed = self._completed, []
        if self._pending:
            with map_transport_errors("test RMA requests"):
                indices = MPI.Request.Testsome([p.request for p in self._pending])
            if indices:
                finished = set(indices)
                done += [(p.win_id, p.token) for i, p in enumerate(self._pending) if i in finished]
                self._pending = [p for i, p in enumerate(self._pending) if i not in finished]
        for win_id, token in done:
            sink.op_completed(win_id, token)
        return bool(done)

    def _run_flushes(self, sink: Sink) -> bool:
        flushes, self._flushes = self._flushes, []
        if not flushes:
            return False
        # Compare-and-swaps issued before these flushes must be reported before them.
        self._report_ops(sink)
        for win_id, target, upto in flushes:
            window = self._windows[win_id]
            key = (win_id, target)
            mine = [p for p in self._pending if (p.win_id, p.target) == key]
            self._pending = [p for p in self._pending if (p.win_id, p.target) != key]
            with map_transport_errors("flush"):
                window.win.Flush(target)  # bounded: intra-node RMA is passive
                # Flush completed them; Waitall only releases the requests.
                MPI.Request.Waitall([p.request for p in mine])
            for p in mine:
                sink.op_completed(p.win_id, p.token)
            sink.flushed(win_id, target, upto)
        return True

    def _retire_sends(self) -> None:
        if not self._sends:
            return
        with map_transport_errors("test control sends"):
            indices = MPI.Request.Testsome([request for request, _ in self._sends])
        if indices:
            finished = set(indices)
            self._sends = [s for i, s in enumerate(self._sends) if i not in finished]

    async def close(self) -> None:
        """Collective.  Free the duplicate communicators and stop the worker; idempotent."""
        if self._closed:
            return
        self._closed = True

        def free() -> None:
            with map_transport_errors("close"):
                self._ctrl_comm.Free()
                self._win_comm.Free()

        try:
            await self._collective(free)
        finally:
            if self._executor is not None:
                self._executor.shutdown()
            if self._doorbell is not None:
                self._doorbell.close()


def _open_doorbells(comm: MPI.Intracomm) -> tuple[socket.socket | None, dict[int, str]]:
    """Bind this rank's doorbell and learn the addresses of the peers on the same host.

    A doorbell is a non-blocking UNIX datagram socket in the abstract namespace, named after the
    job (a random id from rank 0) and the rank.  Collective and blocking: start-up only.
    """
    job = comm.bcast(uuid.uuid4().hex if comm.Get_rank() == 0 else None, root=0)
    rank = comm.Get_rank()
    doorbell: socket.socket | None = None
    try:
        doorbell = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        doorbell.bind(f"\0aiorma-{job}-{rank}")
        doorbell.setblocking(False)
    except OSError:  # no abstract UNIX sockets here: fall back to polling
        if doorbell is not None:
            doorbell.close()
        doorbell = None
    hosts = comm.allgather((socket.gethostname(), doorbell is not None))
    here = hosts[rank][0]
    peers = {
        r: f"\0aiorma-{job}-{r}"
        for r, (host, bound) in enumerate(hosts)
        if r != rank and host == here and bound
    }
    return doorbell, peers

"""MpiEndpoint: the MPI transport's endpoint, one rank per process under ``mpiexec``, over mpi4py.

Every aiorma window is two MPI windows, each under one long-lived ``Lock_all`` opened at
creation (:mod:`aiorma.transport.mpi.windows`): the *data* window and the *control* window
(``P``-sized int64 counters, see :mod:`aiorma.engine.control`).  The engine's epochs exist only in
those counters.

Passive or not.  Measured with the mpich wheel (docs/architecture.md): RMA and atomics into
*allocated* memory of a rank on the same node complete without that rank's CPU (shared memory),
in about a microsecond, so such calls are made inline, blocking for that microsecond.  Everything
else — a peer on another node (MPICH's network module needs the target's progress), or the data
window of a ``win_create`` window (active messages even on one node) — may take as long as the
target takes to enter MPI, so it never blocks the event loop: every op is a request whose
completion means remote completion (puts and accumulates as ``Rget_accumulate``), tested by
:meth:`MpiEndpoint.poll`, so a flush there only waits for requests; ``Compare_and_swap`` (no
request-based form), and ``Win.Flush`` for windows of derived datatypes, run in a worker thread
(:mod:`aiorma.transport.mpi.workers`; MPI is initialised with ``THREAD_MULTIPLE``).  The
transport rings such a target's doorbell (:mod:`aiorma.transport.mpi.doorbell`) as it starts the
operation, and every millisecond while our requests wait for it, so that a parked target polls
and serves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, NoReturn

import numpy as np
from mpi4py import MPI

from ..._core.memcopy import LONG_COPY, copy_bytes
from ..._core.settings import Settings
from ...engine.control import AtomicOp
from ...errors import PeerFailed, RmaFailure, TransportError
from ..base import (
    WHOLE_RUN,
    EndpointBase,
    PollNeed,
    RmaKind,
    RmaOp,
    Sink,
    WindowLayout,
    map_transport_errors,
)
from ..busy_progress import BusyProgress
from ..in_flight import keep_until_exit
from ..liveness import RingLiveness
from ..presence import PresenceBoard
from ..window_lifecycle import agree_key, exclusive
from .cpu_atomics import (
    COMPARE_AND_SWAP,
    SEQ_CST,
    Accumulator,
    Atomics,
    WordsChanged,
    WordStores,
    load_accumulator,
    load_word_stores,
    load_words_changed,
)
from .cpu_atomics import load as load_cpu_atomics
from .cross_memory import ReadFailed
from .cross_memory import probe as probe_cross_memory
from .datatypes import CONTROL_OPS, MPI_OPS
from .doorbell import RERING_INTERVAL, Doorbell, open_doorbells
from .windows import MpiWindow, open_window
from .workers import Workers

# The members used per call as module constants: on Python 3.11 every ``RmaKind.PUT`` read goes
# through the enum metaclass's ``__getattr__`` hook (about 0.2 µs, five times a plain class
# attribute); compiled, a Final name is a C variable.
_PUT: Final = RmaKind.PUT
_GET: Final = RmaKind.GET
_ACCUMULATE: Final = RmaKind.ACCUMULATE
_COMPARE_AND_SWAP: Final = RmaKind.COMPARE_AND_SWAP
_INT64: Final = np.dtype(np.int64)
_ATOMIC_MAX: Final = AtomicOp.MAX
_ATOMIC_SUM: Final = AtomicOp.SUM
_ATOMIC_REPLACE: Final = AtomicOp.REPLACE
_ATOMIC_NO_OP: Final = AtomicOp.NO_OP
_ATOMIC_CAS: Final = AtomicOp.CAS
_CAS_CODE: Final = COMPARE_AND_SWAP
_NEED_THREADS: Final = PollNeed.THREADS
_NEED_REQUESTS: Final = PollNeed.REQUESTS
_NEED_SERVING: Final = PollNeed.SERVING
_NEED_IDLE: Final = PollNeed.IDLE
_NETWORK_KINDS: Final = frozenset((_PUT, _GET))

#: Puts up to this size into a peer's memory mapped here are word stores by this thread
#: (``store_words``, ~0.3 µs for 8 bytes, where ``Rput`` and its ``Test`` take ~3 and the flush
#: after them a ``Flush`` instead of a ``Win_sync``); larger ones stay MPI's ``Rput``, up to
#: :data:`COPIED_PUT_BYTES`.
STORED_PUT_BYTES: Final = 16 << 10

#: Puts from this size into a peer's memory mapped here are a copy by this thread: glibc's
#: ``memcpy`` with non-temporal stores (:data:`~aiorma._core.memcopy.LONG_COPY`), MPI's own copy.
#: Below it ``copy_bytes`` would be numpy's vector loop (immune to ``rep movsb``'s slow case but
#: slower in cache than ``memcpy``: 32 puts of 32 KiB per lock epoch took 1.08 x the time).
COPIED_PUT_BYTES: Final = LONG_COPY

#: How long after a notice towards another node its target is rung again when parked (every
#: RERING_INTERVAL), and this rank keeps polling rather than parking: longer than a notice takes
#: to arrive, so that a park the target began before it arrived ends.
NOTICE_RERING: Final = 10 * RERING_INTERVAL


def _writable(origin: np.ndarray) -> np.ndarray:
    """``origin`` as MPI's ``Rget_accumulate`` takes it: mpi4py wants that call's origin writable
    (it only reads it), so a read-only origin — a constant table, a view of someone else's
    buffer, valid for every other RMA call — is copied."""
    return origin if origin.flags.writeable else origin.copy()


class MpiEndpoint(EndpointBase):
    """An :class:`~aiorma.transport.base.Endpoint` over mpi4py.

    Construction duplicates ``comm`` twice and exchanges host names and doorbell addresses
    (blocking; it is start-up): one duplicate carries window collectives, the other is only
    probed, to drive MPI progress, so neither can match the user's traffic.  ``settings`` are the
    connection's switches (default: the environment's now).
    """

    polled = True

    def __init__(self, comm: MPI.Intracomm = MPI.COMM_WORLD, settings: Settings | None = None) -> None:
        if settings is None:
            settings = Settings.from_environment()
        with map_transport_errors("MpiEndpoint start-up"):
            self._probe_comm: MPI.Intracomm = comm.Dup()
            self._win_comm: MPI.Intracomm = comm.Dup()
            self.rank: int = comm.Get_rank()
            self.size: int = comm.Get_size()
            multiple = MPI.Query_thread() == MPI.THREAD_MULTIPLE
            hosts = self._probe_comm.allgather(socket.gethostname())
            here = hosts[self.rank]
            #: Ranks on this rank's host (by host name).
            self.ranks_on_node = hosts.count(here)
            # Shared memory between ranks of one host, unless MPICH was told not to use it.
            shared = not settings.mpich_nolocal
            self._passive = [shared and host == here for host in hosts]
            # Every rank on this node: the control words' atomics are the CPU's own, where every
            # rank has them (aiorma.transport.mpi.cpu_atomics; off with AIORMA_INLINE=0).
            atomics = load_cpu_atomics() if settings.inline and all(self._passive) else None
            agreed = self._probe_comm.allreduce(atomics is not None, op=MPI.LAND)
            self._atomics: Atomics | None = atomics if agreed else None
            # Peers on this host whose memory we may copy straight out of (large collective
            # messages in one copy: cross_memory).
            reader, self._pids, self._readable = probe_cross_memory(self._probe_comm, self._passive)
            self._memory_reader = reader
        # Off-node fast paths, off with AIORMA_INLINE=0 (the tests run both ways):
        # puts and gets into another node's allocated memory as plain ones completed by Flush
        # (the network delivers them without the target's CPU), and atomics into a peer that
        # runs the progress thread made inline (_answered_by_peer).  Off, they are accumulates
        # served by the target's progress.  Words a peer reads while they are written (control
        # words, signals) are accumulates there either way (stores_words_whole).
        self._passive_puts = settings.inline
        # Small puts into a peer's memory mapped here as word stores (off with AIORMA_INLINE=0).
        self._store_words: WordStores | None = load_word_stores() if settings.inline else None
        # The accumulate family as a loop of ours under the target's gate, on elements mapped here,
        # for windows whose ranks all agree to (aiorma.transport.mpi.windows.open_window); only
        # where the control words' atomics are the CPU's (every rank on this node).
        self._accumulate_elements: Accumulator | None = None
        # A poll's look at a control region that only the CPU's atomics change: a fence and a
        # load per word, instead of MPI_Win_sync and a copy of the region per window.
        self._words_changed: WordsChanged | None = None
        if self._atomics is not None:
            self._accumulate_elements = load_accumulator()
            self._words_changed = load_words_changed()
        if not multiple:
            raise RuntimeError(
                "aiorma's MPI transport needs MPI_THREAD_MULTIPLE (mpi4py's default thread level)"
            )
        self._workers = Workers(self._worker_failed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sink: Sink | None = None
        self._windows: dict[int, MpiWindow] = {}
        # The windows whose control region peers may write: each poll scans these (the landing
        # windows are not among them, so a poll costs two MPI calls fewer for each).
        self._watched: dict[int, MpiWindow] = {}
        # How many of them are ``win_create`` windows (poll_need asks at every turn of the waiter).
        self._created_windows = 0
        # Request-based RMA not yet complete: (win_id, target) -> [(token, request, keep, served)],
        # ``served``: the op needs the target's progress (its request completes remotely).
        self._pending: dict[tuple[int, int], list[tuple[int, MPI.Request, object, bool]]] = {}
        # Off-node puts issued since the last Flush towards that target: (win_id, target).  A put
        # into another node's allocated memory is passive (the network delivers it without the
        # target's CPU), so a blocking ``Flush`` completes it in a network round trip.
        self._unflushed: set[tuple[int, int]] = set()
        # On this node: (win_id, target) where MPI carried an op since the last flush (gets out
        # of memory mapped here are copies, which a flush need not ask MPI about).
        self._issued_since_flush: set[tuple[int, int]] = set()
        # Flushes waiting for requests towards targets that need their own progress.
        self._waiting_flushes: dict[tuple[int, int], list[int]] = {}
        # Ops in the RMA worker (compare-and-swaps; every op that needs the target's progress
        # where starting a request may wait for it): (win_id, target) -> count.
        self._thread_ops: dict[tuple[int, int], int] = {}
        # Open MPI's one-sided components may complete part of a request-based op inside the
        # call that starts it: an Rget_accumulate into ``win_create`` memory waits there until the
        # target polls (seen with a stopped target: the loop froze for good), where MPICH returns
        # the request at once.  Under Open MPI such ops start in the worker thread instead.
        self._starting_may_wait = "Open MPI" in MPI.Get_library_version()
        self._fetch_targets: dict[int, int] = {}  # request-based fetch token -> its target
        # Request-based control fetches: (win_id, token, request, result buffer).
        self._fetches: list[tuple[int, int, MPI.Request, np.ndarray]] = []
        # Request-based control writes towards peers that need progress: (request, buffers kept
        # alive, (win_id, dest)).
        self._writes: list[tuple[MPI.Request, object, tuple[int, int]]] = []
        # Notices posted towards another node (post_words): the (window, target) pairs that a
        # flush must complete in the worker thread, and when each target last got one (rung
        # again while that is recent: see _ring_servers).
        self._posted: set[tuple[int, int]] = set()
        self._noticed_at: dict[int, float] = {}
        self._word_buffers = tuple(np.zeros(1, np.int64) for _ in range(3))
        self._closed = False
        doorbell, bells = open_doorbells(self._probe_comm, hosts)
        # Presence words (aiorma.transport.presence): presence[r] = 1 while peer r is parked
        # (written by r, one-sidedly; by a peer on another node only while the off-node paths are
        # on, see parking()), or its departure notice.  A ring to a peer that is not parked is
        # skipped: it is polling anyway, and a ring costs a system call on both sides.
        # Window creations and frees of this process's connects take turns (window_lifecycle).
        self._lifecycle_key = key = agree_key(self._probe_comm)
        self._presence = PresenceBoard(self._probe_comm, self._passive, self._passive_puts, key)
        self._doorbell = Doorbell(doorbell, bells, self._presence, self._passive, self._passive_puts)
        # Connections to the ring neighbours, whose end without a goodbye means that neighbour's
        # process died (killed, crashed) without leaving: see aiorma.transport.liveness.
        self._liveness = RingLiveness(self._probe_comm, hosts, settings.liveness)
        # Atomics from another node need our MPI progress even while the loop computes without
        # awaiting: a thread drives it then (see aiorma.transport.busy_progress).
        self._busy: BusyProgress | None = None
        # The poll looks for peers to ring again (their progress serves our requests) at most
        # once per interval: the look costs more than the rest of an off-node poll.
        self._next_rering = 0.0
        if not all(self._passive) and settings.progress_thread:
            self._busy = BusyProgress(self._probe_comm.Iprobe)

    def attach(self, sink: Sink) -> None:
        """Route completions to ``sink``; called once, on the event loop, before any window
        exists."""
        self._sink = sink
        self._liveness.watch(asyncio.get_running_loop(), self._peer_lost)

    # ------------------------------------------------------------------ windows

    async def create_window(
        self,
        win_id: int,
        memory: np.ndarray | None,
        count: int,
        dtype: np.dtype,
        control_words: int,
        *,
        notify: bool = False,
        watch_control: bool = True,
    ) -> WindowLayout:
        """Collective.  Expose ``memory`` (``Win.Create``) or allocate ``count`` zeroed elements
        (``Win.Allocate``, ``memory is None``), allocate the control region, and open both
        windows' ``Lock_all`` epochs.

        Raises :class:`RmaTypeError` on every rank when the ranks' dtypes differ.
        """
        self._loop = asyncio.get_running_loop()
        dtype = np.dtype(dtype)
        count = int(memory.size if memory is not None else count)

        def create() -> tuple[MpiWindow, tuple[int, ...]]:
            return open_window(
                self._win_comm, self._lifecycle_key, win_id, memory, count, dtype, control_words, notify,
                cpu_atomics=self._atomics is not None,
                accumulate_elements=self._accumulate_elements is not None,
            )  # fmt: skip

        window, counts = await self._workers.collective(create)
        self._windows[win_id] = window
        if watch_control:
            self._watched[win_id] = window
        self._created_windows += not window.allocated
        return WindowLayout(window.memory, window.control, counts)

    async def free_window(self, win_id: int) -> np.ndarray | None:
        """Collective.  The engine guarantees no op of this rank is outstanding on the window.

        Returns a copy of allocated memory, None for a ``Win.Create`` window.
        """
        # Forget it first, so no poll touches the MPI windows while the worker frees them.
        window = self._windows.pop(win_id)
        self._watched.pop(win_id, None)
        self._created_windows -= not window.allocated
        # Unlock_all below completes the puts a Flush has not yet.
        self._unflushed = {key for key in self._unflushed if key[0] != win_id}
        self._issued_since_flush = {key for key in self._issued_since_flush if key[0] != win_id}
        self._posted = {key for key in self._posted if key[0] != win_id}  # (and notices)

        def free() -> np.ndarray | None:
            return window.free_collectively(self._win_comm, self._lifecycle_key)

        return await self._workers.collective(free)

    # ------------------------------------------------------------------ data

    def _inline(self, window: MpiWindow, target: int) -> bool:
        """True when RMA into ``target``'s data memory completes without ``target``'s CPU."""
        return window.allocated and self._passive[target]

    def issue(self, win_id: int, token: int, op: RmaOp) -> bool:
        """Start ``op``; True when it is already locally complete.

        Into allocated memory, puts and gets need no CPU of the target's: on this node a get is
        a copy out of its memory, mapped here (``Win_shared_query``), a small put word stores into
        it (``store_words`` of the compiled CPU atomics; without them an ``Rput``), a put of
        512 KiB or more a copy into it, one in between an ``Rput``; where the window's ranks agreed
        to (:func:`~aiorma.transport.mpi.windows.open_window`), the accumulate family is a loop of
        this thread's under the target's gate (``accumulate_elements``), complete on return; on another node
        ``Rput``/``Rget``, which the network delivers (docs/benchmarks.md, *Off-node at the
        network's speed ...*), so a later ``Flush`` completes them in a round trip.  Ops
        that need the target's progress — accumulates towards another node (MPICH's
        active-message path), anything into ``win_create`` memory — are requests whose
        completion means *remote* completion (a put or accumulate becomes ``Rget_accumulate``,
        REPLACE or the op, into a scratch buffer), so that a flush of them only waits for
        requests, tested by the poll, and never blocks the loop for a peer's CPU.  Under Open
        MPI, whose call that starts such a request may itself wait for the target, they are
        started (and waited for) in the RMA worker thread instead — unless the target's progress
        thread bounds that wait, as for a compare-and-swap (:meth:`_answered_by_peer`).
        """
        window = self._windows[win_id]
        target = op.target
        kind = op.kind
        addresses = window.data_addresses
        if addresses is not None and kind is not _PUT and kind is not _GET:
            # Every rank's accumulates into this window are loops of its own under the target's
            # gate, in memory mapped here (open_window agreed it): complete on return, nothing of
            # MPI's in flight.
            accumulate_elements, gates = self._accumulate_elements, window.gate_addresses
            assert accumulate_elements is not None and gates is not None
            accumulate_elements(
                addresses[target] + op.disp * window.element_size,
                window.element_type,
                _CAS_CODE if kind is _COMPARE_AND_SWAP else op.op,
                op.origin,
                op.result,
                op.compare,
                gates[target],
            )
            return True
        if window.allocated and self._passive[target] and kind is not _COMPARE_AND_SWAP:
            memory = window.shared[target]
            if memory is not None:
                # The target's memory is mapped here: a get is a copy by this thread, a small put
                # stores by it, complete on return, without MPICH's RMA path (~1 µs alone, ~7
                # inside an epoch's call).
                if kind is _GET:
                    copy_bytes(op.result, memory[op.disp : op.disp + op.count])  # type: ignore[arg-type]
                    return True
                if kind is _PUT:
                    data: np.ndarray = op.origin  # type: ignore[assignment]
                    if data.nbytes >= COPIED_PUT_BYTES:
                        # A copy by this thread (glibc's memcpy, as MPI's own put into shared
                        # memory is), without MPI's request: MPICH's Rput, its Test and the Flush
                        # after it cost ~10 µs more than the copy at 1 MiB (bench osu).  The
                        # flush after it is a memory barrier (Win_sync): nothing of MPI's is in
                        # flight.
                        copy_bytes(memory[op.disp : op.disp + op.count], data)
                        return True
                    store_words = self._store_words
                    if store_words is not None and not window.owns_datatype:
                        # Word stores, not a copy: aiorma's own readers of words landing in
                        # their memory (a signal's words on its general path, LL words) rely on
                        # each word written whole, which numpy's copies of a few words do not
                        # promise (a numpy copy of two words was once seen tearing one).
                        store_words(memory, op.disp * memory.itemsize, data)
                        return True
            self._issued_since_flush.add((win_id, target))
            # The hot case, without the general path's bookkeeping: shared memory, one request.
            dt = window.datatype
            spec = (op.disp, op.count * window.units, dt)
            try:
                if kind is _PUT:
                    request = window.win.Rput([op.origin, dt], target, spec)
                elif kind is _GET:
                    request = window.win.Rget([op.result, dt], target, spec)
                elif kind is _ACCUMULATE:
                    request = window.win.Raccumulate([op.origin, dt], target, spec, MPI_OPS[op.op])
                else:  # GET_ACCUMULATE, FETCH_AND_OP; NO_OP leaves the origin out, MPI wants one
                    origin = op.origin
                    if origin is None or not origin.flags.writeable:  # kept alive with the op
                        origin = np.empty_like(op.result) if origin is None else _writable(origin)
                        op = RmaOp(kind, target, op.disp, origin, op.result, op.compare, op.op)
                    request = window.win.Rget_accumulate(
                        [origin, dt], [op.result, dt], target, spec, MPI_OPS[op.op]
                    )
                if request.Test():
                    return True
            except MPI.Exception as exc:
                raise TransportError(f"issue {kind.value}: {exc}") from exc
            self._pending.setdefault((win_id, target), []).append((token, request, op, False))
            return False
        win, dt = window.win, window.datatype
        key = (win_id, target)
        if kind in _NETWORK_KINDS and self._passive_puts and window.allocated and not window.owns_datatype:
            # Another node's allocated memory: passive for puts and gets (see the docstring).
            spec = (op.disp, op.count * window.units, dt)
            try:
                if kind is _PUT:
                    request = win.Rput([op.origin, dt], target, spec)
                    self._unflushed.add(key)
                else:
                    request = win.Rget([op.result, dt], target, spec)
                if request.Test():
                    return True
            except MPI.Exception as exc:
                raise TransportError(f"issue {kind.value}: {exc}") from exc
            self._pending.setdefault(key, []).append((token, request, op, False))
            return False
        inline = self._inline(window, target)
        if not inline:
            self._doorbell.ring(target)
        with map_transport_errors("issue", op.kind):
            if op.kind is _COMPARE_AND_SWAP:
                # No request-based form: blocking for a microsecond into shared memory, else in
                # the worker thread.
                def cas() -> None:
                    win.Compare_and_swap([op.origin, dt], [op.compare, dt], [op.result, dt], target, op.disp)
                    win.Flush_local(target)

                if inline or self._answered_by_peer(target):
                    cas()
                    return True
                self._op_in_thread(win_id, target, token, cas)
                return False
            remote_completion = not inline and not window.owns_datatype
            if not inline and self._starting_may_wait and not self._answered_by_peer(target):

                def start_and_wait() -> None:
                    request, _keep = self._start_request(window, op, remote_completion)
                    request.Wait()  # (_keep holds the buffers MPI uses until then)

                self._op_in_thread(win_id, target, token, start_and_wait)
                return False
            request, keep = self._start_request(window, op, remote_completion)
            if request.Test():
                return True
        self._pending.setdefault(key, []).append((token, request, keep, not inline))
        return False

    def _start_request(
        self, window: MpiWindow, op: RmaOp, remote_completion: bool
    ) -> tuple[MPI.Request, object]:
        """Start ``op`` as a request-based MPI op; returns the request and what must stay alive
        until it completes.  ``remote_completion``: a put or accumulate becomes
        ``Rget_accumulate`` into a scratch buffer, whose completion is remote completion."""
        win, dt, target = window.win, window.datatype, op.target
        spec = (op.disp, op.count * window.units, dt)
        keep: object = op  # holds origin/result arrays until completion
        if op.kind is _GET:
            request = win.Rget([op.result, dt], target, spec)
        elif op.kind in (_PUT, _ACCUMULATE) and remote_completion:
            scratch = np.empty_like(op.origin)
            origin = _writable(op.origin)
            keep = (op, scratch, origin)
            mpi_op = MPI.REPLACE if op.kind is _PUT else MPI_OPS[op.op]
            request = win.Rget_accumulate([origin, dt], [scratch, dt], target, spec, mpi_op)
        elif op.kind is _PUT:
            request = win.Rput([op.origin, dt], target, spec)
        elif op.kind is _ACCUMULATE:
            request = win.Raccumulate([op.origin, dt], target, spec, MPI_OPS[op.op])
        else:  # GET_ACCUMULATE, FETCH_AND_OP (count 1)
            # NO_OP ignores the origin, which the window may leave out; MPI still wants one.
            origin = _writable(op.origin) if op.origin is not None else np.empty_like(op.result)
            keep = (op, origin)
            request = win.Rget_accumulate([origin, dt], [op.result, dt], target, spec, MPI_OPS[op.op])
        return request, keep

    def _op_in_thread(self, win_id: int, target: int, token: int, call: Callable[[], None]) -> None:
        """Run an op's blocking ``call`` in the RMA worker, reporting it done after; a flush
        towards ``target`` waits for it (:meth:`_served`)."""
        key = (win_id, target)
        self._thread_ops[key] = self._thread_ops.get(key, 0) + 1

        def done(_: object) -> None:
            self._thread_ops[key] -= 1
            self._op_done(win_id, token)
            self._flushes_due()

        self._in_thread(call, done)

    def _served(self, key: tuple[int, int]) -> bool:
        """True while an op towards ``key``'s target still needs that target's progress (a
        ``Flush`` there would wait for its CPU)."""
        if self._thread_ops.get(key):
            return True
        return any(entry[3] for entry in self._pending.get(key, ()))

    def _complete_network(self, window: MpiWindow, key: tuple[int, int]) -> None:
        """Remote completion of the passive ops towards another node's allocated memory: one
        ``Flush`` (a network round trip; nothing left that needs the target's CPU), then their
        requests, which it completed."""
        if key in self._unflushed:
            self._unflushed.discard(key)
            with map_transport_errors("flush"):
                window.win.Flush(key[1])
        mine = self._pending.pop(key, None)
        if mine:
            with map_transport_errors("flush"):
                MPI.Request.Waitall([request for _, request, _, _ in mine])
            for token, _, _, _ in mine:
                self._op_done(key[0], token)

    def flush(self, win_id: int, target: int, upto: int) -> bool:
        """Remote completion of every op issued so far to ``target``; True when done at once."""
        window = self._windows[win_id]
        key = (win_id, target)
        if window.allocated and self._passive[target]:
            mine = self._pending.pop(key, None) if self._pending else None
            try:
                if key in self._issued_since_flush:
                    self._issued_since_flush.discard(key)
                    window.win.Flush(target)  # about a microsecond: shared memory
                else:  # no op of MPI's since the last flush (copies out of mapped memory only)
                    window.win.Sync()
                if mine:
                    MPI.Request.Waitall([request for _, request, _, _ in mine])  # complete; releases them
            except MPI.Exception as exc:
                raise TransportError(f"flush: {exc}") from exc
            if mine:
                for token, _, _, _ in mine:
                    self._op_done(win_id, token)
            if window.notify:
                self._doorbell.ring(target)
            return True
        posted = key in self._posted
        if not window.owns_datatype and not posted:
            # Ops that need the target's progress complete remotely with their requests: wait for
            # those, by polling; the passive ones (puts and gets into allocated memory) complete
            # with one Flush once nothing else is in flight (_flushes_due).
            if not self._served(key):
                if window.allocated:
                    self._complete_network(window, key)
                if window.notify:
                    self._doorbell.ring(target)
                return True
            self._doorbell.ring(target)
            self._waiting_flushes.setdefault(key, []).append(upto)
            return False
        # A derived datatype (puts cannot be turned into accumulates), or notices in flight (no
        # request completes them, and they need the target's progress): a blocking Flush, in the
        # worker thread.
        self._posted.discard(key)
        mine = self._pending.pop(key, [])
        requests = [request for _, request, _, _ in mine]
        self._doorbell.ring(target)

        def flush() -> None:
            window.win.Flush(target)
            if requests:
                MPI.Request.Waitall(requests)

        def done(_: object) -> None:
            for token, _, _, _ in mine:
                self._op_done(win_id, token)
            if window.notify:
                self._doorbell.ring(target)
            assert self._sink is not None
            self._sink.flushed(win_id, target, upto)

        self._in_thread(flush, done)
        return False

    def stores_words_whole(self, target: int) -> bool:
        """On this node, and towards this rank itself: shared memory, where
        :meth:`put_words_flushed` stores each word with one aligned 8-byte store (or, where MPI
        maps no memory, puts runs short enough that ``memcpy`` moves whole words), and a put to
        oneself is a copy by the calling thread, which no load of ours can interleave.  Towards
        another node a put's bytes may land in pieces (between two emulated nodes CI runs saw
        words half-written, once with one put per word), so words that must arrive whole are
        accumulates there.  Symmetric: host names are the same for every rank, and mpiexec gives
        every rank the same ``MPIR_CVAR_NOLOCAL``."""
        return self._passive[target] or target == self.rank

    @property
    def cpu_atomics(self) -> Atomics | None:
        """The form of the CPU's atomics the control words use (compiled or through ctypes:
        :mod:`~aiorma.transport.mpi.cpu_atomics`), None where they are MPI's."""
        return self._atomics

    @cpu_atomics.setter
    def cpu_atomics(self, form: Atomics) -> None:
        # Another form of the same instructions (bench atomics alternates them): never to or
        # from MPI's atomics, which must not meet the CPU's on one word (see cpu_atomics).
        if self._atomics is None or form is None:
            raise ValueError("only a window's CPU atomics can be swapped, for another form of them")
        self._atomics = form

    def reads_memory_of(self, peer: int) -> bool:
        """On this host, where the kernel lets both processes read each other
        (:mod:`.cross_memory`, probed at start-up); never under ``MPIR_CVAR_NOLOCAL``."""
        return self._readable[peer]

    def read_memory(self, peer: int, address: int, out: np.ndarray) -> None:
        """``process_vm_readv`` from ``peer``'s process; where that process is gone (killed or
        crashed), ``peer`` is lost — reported to every rank — and the call raises
        :class:`~aiorma.errors.PeerFailed` naming it, as a write into its memory would."""
        if not self._readable[peer] or self._memory_reader is None:
            raise TransportError(f"rank {self.rank} cannot read rank {peer}'s memory")
        try:
            self._memory_reader.read(self._pids[peer], address, out)
        except ReadFailed as error:
            if error.errno == errno.ESRCH:
                self._failed_towards(peer, error)
            raise

    def put_words_flushed(self, win_id: int, target: int, disp: int, words: np.ndarray) -> bool:
        """:meth:`put_flushed` where :meth:`stores_words_whole`, each word written whole: into
        ``target``'s memory mapped here, one element store per word (a numpy copy of two words
        was seen tearing one); where MPI maps none, one ``Put`` per run of :data:`WHOLE_RUN`
        words (MPICH copies a put with ``memcpy``, which may use ``rep movsb`` for a long one),
        then a ``Flush``.  Towards another node nothing (an accumulate, which needs the target's
        progress, cannot complete inside the call)."""
        return self.stores_words_whole(target) and self._put_flushed(win_id, target, disp, words, words=True)

    def put_word_flushed(self, win_id: int, target: int, disp: int, word: int) -> bool:
        """:meth:`put_words_flushed` of one word given as an int (a signal's value): into mapped
        memory one element store, without the one-word array a put needs."""
        return self.stores_words_whole(target) and self._put_flushed(win_id, target, disp, word, words=True)

    def post_words(self, win_id: int, target: int, disp: int, words: np.ndarray | int) -> bool:
        """:class:`~aiorma.transport.base.Endpoint`'s posted word write.  On this node (and to
        ourselves) :meth:`put_words_flushed`'s stores.  Towards another node an ``Raccumulate``
        with REPLACE per run of :data:`WHOLE_RUN` words, which MPI applies element by element (a
        put's bytes may land there in pieces); its request, tested once here and then by the
        poll with the control writes (``_writes``), completes locally and keeps the origin alive
        until then — no token, no Request, no report to the engine: what a notice saves over an
        RMA call (docs/benchmarks.md, *Notices without a Request*).  ``target``'s progress
        applies it; it is rung now if parked, and again while the notice is young (a park may
        begin before it arrives), and a flush towards it waits for it in the worker thread
        (MPI's ``Flush`` waits for that progress).  Not under Open MPI (starting an accumulate
        may wait for the target there), nor into ``Win.Create`` memory or with a derived
        datatype: False."""
        if self.stores_words_whole(target):
            return self._put_flushed(win_id, target, disp, words, words=True)
        window = self._windows[win_id]
        if not window.allocated or window.owns_datatype or self._starting_may_wait:
            return False
        # A copy: MPI may read it after we return, and the caller may reuse its array at once.
        origin = np.array([words] if isinstance(words, int) else words, np.int64)
        win = window.win
        try:  # (as _towards does, without a generic context manager on this path)
            for lo in range(0, origin.size, WHOLE_RUN):
                run = origin[lo : lo + WHOLE_RUN]
                spec = (disp + lo, run.size, MPI.INT64_T)
                request = win.Raccumulate([run, MPI.INT64_T], target, spec, MPI.REPLACE)
                # A test drives MPI's progress once (MPICH sends the message on), and usually
                # finds it locally complete: nothing to keep.
                if not request.Test():
                    self._writes.append((request, run, (win_id, target)))
        except MPI.Exception as error:
            self._failed_towards(target, error)
        self._posted.add((win_id, target))
        self._noticed_at[target] = time.monotonic()
        self._doorbell.ring(target)
        return True

    def put_flushed(self, win_id: int, target: int, disp: int, data: np.ndarray) -> bool:
        """A put completed at ``target`` inside the call, into allocated memory: on this node
        stores into ``target``'s memory, mapped here (well under a microsecond for a few words,
        where ``Put`` + ``Flush`` take about three); to another node ``Put`` + ``Flush`` over the
        network (a round trip, without the target's CPU: see :meth:`issue`)."""
        return self._put_flushed(win_id, target, disp, data)

    def _put_flushed(
        self, win_id: int, target: int, disp: int, data: np.ndarray | int, words: bool = False
    ) -> bool:
        """:meth:`put_flushed`: stores into the mapped memory (one per element for ``words``, else
        one copy) and ``Win_sync``, or ``Put`` (one per run of :data:`WHOLE_RUN` for ``words``)
        and ``Flush``.  ``data`` an int: one int64 word."""
        window = self._windows[win_id]
        if not window.allocated or window.owns_datatype or not (self._passive[target] or self._passive_puts):
            return False
        key = (win_id, target)
        if key in self._pending or key in self._unflushed:
            return False  # the caller's contract says otherwise; be safe, take the general path
        win, dt, units = window.win, window.datatype, window.units
        memory = window.shared[target]
        try:
            if isinstance(data, int) and (memory is None or memory.dtype != _INT64):
                data = np.array([data], np.int64)  # a put carries an array
            if memory is not None and (isinstance(data, int) or data.dtype == memory.dtype):
                # Everything earlier towards target is complete there (the caller's contract),
                # so these stores land after it; Win_sync is MPI's memory barrier for memory
                # shared this way: what a later store (a flag) publishes is visible first.  The
                # C calls below make that barrier themselves (fenced).
                fenced = False
                if isinstance(data, int):
                    addresses = window.data_addresses
                    if addresses is not None and self._atomics is not None:
                        # Where the CPU serves this window's atomics, one locked exchange: the
                        # store and the barrier in one C call.
                        self._atomics.exchange(addresses[target] + 8 * disp, data, SEQ_CST)
                        fenced = True
                    else:
                        memory[disp] = data  # one word: one aligned 8-byte store, as below
                elif words:
                    # Words read while they land: one aligned 8-byte store each (the compiled
                    # store_words, with its full fence, or one element store each), where a
                    # copy of several may be made in smaller pieces.
                    store_words = self._store_words
                    if store_words is not None and memory.itemsize == 8:
                        store_words(memory, disp * 8, data, True)
                        fenced = True
                    else:
                        for i, word in enumerate(data.tolist()):
                            memory[disp + i] = word
                else:
                    copy_bytes(memory[disp : disp + data.size], data)
                if not fenced:
                    win.Sync()
            else:
                assert not isinstance(data, int)  # (made an array above where memory is not mapped)
                run = WHOLE_RUN if words else max(1, data.size)
                for lo in range(0, data.size, run):
                    part = data[lo : lo + run]
                    win.Put([part, dt], target, (disp + lo, part.size * units, dt))
                win.Flush(target)
        except MPI.Exception as exc:
            raise TransportError(f"put: {exc}") from exc
        if window.notify:
            self._doorbell.ring(target)
        return True

    def _flushes_due(self) -> bool:
        """Report the flushes whose target has nothing of ours left that needs its progress."""
        due = [key for key in self._waiting_flushes if not self._served(key)]
        for key in due:
            win_id, target = key
            window = self._windows.get(win_id)
            if window is not None and window.allocated:
                self._complete_network(window, key)
            for upto in self._waiting_flushes.pop(key):
                if window is not None and window.notify:
                    self._doorbell.ring(target)
                assert self._sink is not None
                self._sink.flushed(win_id, target, upto)
        return bool(due)

    # ------------------------------------------------------------------ control region

    def control_write(self, win_id: int, dest: int, index: int, op: AtomicOp, value: int) -> None:
        """Apply ``op`` (max or sum) to ``dest``'s control word ``index`` and ring ``dest``.

        When every rank is on this node, either is the CPU's own atomic on ``dest``'s control
        region, mapped here (:mod:`~aiorma.transport.mpi.cpu_atomics`); else, on this node, a max
        is a store there (MPI-4's ``Win_shared_query``) between two ``Win_sync``, a sum an
        ``Accumulate`` into shared memory; each is applied inside the call.  Towards
        another node an accumulate, served by ``dest``'s progress (``Rget_accumulate``, whose
        completion the poll tests), never a plain put of the new value: ``dest`` reads its
        control words while peers write them, and a put's bytes may land there in pieces — a
        load between two pieces could see a value that was never written, even one above the
        true value (docs/architecture.md, *One put per small message*), where MPI applies an
        accumulate element by element.
        """
        window = self._windows[win_id]
        with map_transport_errors("control write"):
            addresses = window.control_addresses
            if addresses is not None:
                # Every control word of this window is the CPU atomics' (see control_fetch): one
                # locked instruction, which also orders the data written before it (a locked
                # instruction drains the write-combining buffers of non-temporal copies).
                atomics = self._atomics
                assert atomics is not None
                if op is _ATOMIC_SUM:
                    atomics.fetch_add(addresses[dest] + 8 * index, value, SEQ_CST)
                else:
                    atomics.fetch_max(addresses[dest] + 8 * index, value)
            elif op is _ATOMIC_MAX and (words := window.shared_control[dest]) is not None:
                # A max word has one writer, the rank whose slot it is (Endpoint.control_write's
                # contract), so the value there is the last one we wrote: the max is a load, a
                # compare and one aligned 8-byte store, which a reader sees whole, old or new.
                # The first Win_sync orders the data flushed before it (even copied with
                # non-temporal stores) ahead of the word; the second publishes the word.
                window.ctrl.Sync()
                if value > words[index]:
                    words[index] = value
                window.ctrl.Sync()
            elif self._passive[dest]:
                buf = self._word_buffers[0]
                buf[0] = value
                # Shared memory: MPICH applies it in the call; Flush_local releases the buffer.
                window.ctrl.Accumulate(buf, dest, index, CONTROL_OPS[op])
                window.ctrl.Flush_local(dest)
            else:
                self._control_accumulate(window, dest, index, op, value)
        if dest != self.rank:
            self._doorbell.ring(dest)

    def _control_accumulate(self, window: MpiWindow, dest: int, index: int, op: AtomicOp, value: int) -> None:
        """``op`` on another node's control word, served by its progress: ``Rget_accumulate``,
        whose completion (tested by the poll) is remote completion."""
        buf = np.array([value], np.int64)
        scratch = np.empty(1, np.int64)
        with self._towards(dest):
            request = window.ctrl.Rget_accumulate(
                [buf, MPI.INT64_T], [scratch, MPI.INT64_T], dest, (index, 1, MPI.INT64_T), CONTROL_OPS[op]
            )
        self._writes.append((request, (buf, scratch), (window.win_id, dest)))

    def _answered_by_peer(self, dest: int) -> bool:
        """True when an atomic into ``dest`` may block the loop: ``dest`` is on another node and
        serves atomics within a bound even while its loop computes (its progress thread, which
        runs wherever this one does: every rank with a peer on another node).  Blocking there
        costs a network round trip while ``dest`` awaits, at most the thread's bound while it
        computes (aiorma.transport.busy_progress) — shorter than the round trips through this
        rank's worker thread or event loop that a request-based atomic costs.  (Towards a peer
        that left, :meth:`control_fetch` refuses before it would block: see there.)"""
        return self._passive_puts and self._busy is not None and not self._passive[dest]

    def control_fetch(
        self, win_id: int, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int
    ) -> int | None:
        """An atomic with a result on ``dest``'s control word ``index``: the old value now (shared
        memory), or None and ``sink.fetched`` later.  A read (``NO_OP``) of a rank on this node
        is a load from its control region, mapped here; when every rank is on this node, every
        other op is the CPU's own atomic there (:mod:`~aiorma.transport.mpi.cpu_atomics`)."""
        if self._presence.has_left(dest):
            # Its departure notice is in our memory (written before its progress thread stopped):
            # nobody would serve the atomic, and an inline one would block the loop for good.
            self._refuse_departed(dest)
        window = self._windows[win_id]
        addresses = window.control_addresses
        if addresses is not None and op is not _ATOMIC_NO_OP:
            # Every control atomic of this window is the CPU's own: a locked instruction on the
            # word, mapped here (see aiorma.transport.mpi.cpu_atomics).
            atomics = self._atomics
            assert atomics is not None
            address = addresses[dest] + 8 * index
            if op is _ATOMIC_REPLACE:
                return atomics.exchange(address, value, SEQ_CST)  # type: ignore[no-any-return]
            if op is _ATOMIC_SUM:
                return atomics.fetch_add(address, value, SEQ_CST)  # type: ignore[no-any-return]
            if op is _ATOMIC_CAS:
                return atomics.compare_exchange(address, compare, value)
            return atomics.fetch_max(address, value)
        ctrl = window.ctrl
        if op is _ATOMIC_NO_OP:
            words = window.shared_control[dest]
            if words is not None:
                # A read, of memory mapped here: one aligned 8-byte load sees the word whole,
                # before or after any peer's atomic on it; Win_sync orders it after our own
                # atomics (and makes the peers' visible).
                ctrl.Sync()
                return int(words[index])
        inline = self._passive[dest]
        if not inline and self._answered_by_peer(dest):
            self._doorbell.ring(dest)  # a parked peer serves it at once instead of at its thread's next look
            inline = True
        if inline:
            # Inline: about a microsecond into shared memory, a round trip to another node; the
            # endpoint's own buffers are free again on return.
            origin, result, expected = self._word_buffers
            origin[0] = value
            try:
                if op is _ATOMIC_CAS:
                    expected[0] = compare
                    ctrl.Compare_and_swap(origin, expected, result, dest, index)
                else:
                    ctrl.Fetch_and_op(origin, result, dest, index, CONTROL_OPS[op])
                ctrl.Flush_local(dest)
            except MPI.Exception as exc:
                raise TransportError(f"control fetch: {exc}") from exc
            return int(result[0])
        origin = np.array([value], np.int64)
        result = np.zeros(1, np.int64)
        self._doorbell.ring(dest)
        with map_transport_errors("control fetch"):
            if op is _ATOMIC_CAS:
                expected = np.array([compare], np.int64)

                def cas() -> None:
                    ctrl.Compare_and_swap(origin, expected, result, dest, index)
                    ctrl.Flush_local(dest)

                def swapped(_: object) -> None:
                    self._fetched(win_id, token, result)

                self._in_thread(cas, swapped)
                return None
            # The origin and result datatypes named as the target's: mpi4py maps an int64 array
            # to MPI_LONG, which Open MPI refuses to combine with an MPI_INT64_T target.
            request = ctrl.Rget_accumulate(
                [origin, MPI.INT64_T], [result, MPI.INT64_T], dest, (index, 1, MPI.INT64_T), CONTROL_OPS[op]
            )
        self._fetches.append((win_id, token, request, result))
        self._fetch_targets[token] = dest
        return None

    # ------------------------------------------------------------------ polling

    def poll(self) -> bool:
        """Drive MPI progress, report completed requests and changed control regions.  True iff
        anything was reported."""
        sink = self._sink
        assert sink is not None, "attach() a sink before polling"
        if self._closed:
            # Closing or closed: the collectives thread frees these windows, and an MPI call on a
            # window being freed crashes the process (aiorma.progress() reaches every endpoint).
            return False
        if self._busy is not None:
            self._busy.polled_at = time.monotonic()
        active = False
        # try/except as map_transport_errors would: this call runs a few times per RMA call, and
        # that class's three calls are the interpreter's, this function is compiled.
        try:
            # Drives MPI progress, which MPICH's peers may need (docs/architecture.md, *Progress and
            # waiting*); nothing is ever sent on this communicator, so it never matches.
            self._probe_comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG)
            if self._pending:
                active |= self._test_pending()
            if self._waiting_flushes:
                active |= self._flushes_due()
            if (
                self._pending or self._fetches or self._waiting_flushes or self._writes or self._noticed_at
            ) and ((now := time.monotonic()) >= self._next_rering):
                self._next_rering = now + RERING_INTERVAL
                self._ring_servers()
            if self._fetches:
                active |= self._test_fetches()
            if self._writes:
                self._test_writes()
            departure = self._presence.departures()
            if departure is not None:  # the driver keeps the first failure only
                sink.peer_departed(*departure)
                active = True
            for win_id, window in list(self._watched.items()):
                changed = self._looked(window)
                if changed is None:
                    window.ctrl.Sync()  # peers' atomics visible to our loads (unified memory model)
                    raw = window.control.tobytes()
                    changed = raw != window.seen
                    if changed:
                        window.seen[:] = raw
                if changed:
                    sink.control_changed(win_id)
                    active = True
        except RmaFailure:
            raise
        except Exception as exc:
            raise TransportError(f"poll: {exc}") from exc
        return active

    def look_control(self, win_id: int) -> bool:
        """The poll's look at one window's control region, alone (:meth:`_looked`); False where
        it needs MPI — what MPI must deliver needs a poll."""
        window = self._watched.get(win_id)
        if window is None or self._closed or not self._looked(window):
            return False
        sink = self._sink
        assert sink is not None
        sink.control_changed(win_id)
        return True

    def _looked(self, window: MpiWindow) -> bool | None:
        """Whether ``window``'s control words changed since they were last looked at, seen by
        the CPU alone (one C call: a fence and a load per word) where only the CPU's atomics
        write them (every rank on this node); None elsewhere, where MPI must make the peers'
        writes visible (``Win_sync``) before a load sees them."""
        words_changed = self._words_changed
        if words_changed is None or window.control_addresses is None:
            return None
        return words_changed(window.control, window.seen)

    def _peer_lost(self, rank: int, cause: BaseException | None = None) -> None:
        """Peer ``rank``'s process ended without leaving aiorma: a ring neighbour's connection
        ended without a goodbye (:class:`~aiorma.transport.liveness.RingLiveness`), or an
        operation on its memory failed (``cause``).  Its departure goes into every other peer's
        presence word for it and into ours, and is reported, so that every rank fails with
        PeerFailed naming it."""
        if self._closed or rank in self._presence.departed:
            return
        if cause is None:
            cause = TransportError(f"rank {rank}'s process ended without leaving aiorma (killed or crashed)")
        first = self._presence.lose(rank, cause)
        self._doorbell.ring_everyone()
        if self._sink is not None:
            self._sink.peer_departed(first, cause if first == rank else None)

    @contextlib.contextmanager
    def _towards(self, dest: int) -> Iterator[None]:
        """Around a write into another node's memory: when the network reports it failed (the
        connection to ``dest`` was reset: its process is gone), ``dest`` is lost — reported as
        such to every rank — and the call raises :class:`PeerFailed` naming it, not a bare
        transport error."""
        try:
            yield
        except MPI.Exception as error:
            self._failed_towards(dest, error)

    def _failed_towards(self, dest: int, error: Exception) -> NoReturn:
        """An operation towards ``dest`` failed in MPI: ``dest`` is lost (see :meth:`_towards`)."""
        cause = TransportError(f"an operation on rank {dest}'s memory failed: {error}")
        cause.__cause__ = error
        self._peer_lost(dest, cause)
        raise PeerFailed(dest, cause) from error

    def _refuse_departed(self, dest: int) -> NoReturn:
        """An operation towards ``dest``, which has left: report the departures our memory holds
        (if not yet) and raise PeerFailed naming the rank that failed first."""
        departure = self._presence.departures()
        if departure is not None and self._sink is not None:
            self._sink.peer_departed(*departure)
        first = self._presence.failed_first
        raise PeerFailed(dest if first is None else first, TransportError(f"rank {dest} has left aiorma"))

    def _ring_servers(self) -> None:
        """Ring again, every so often (:meth:`Doorbell.ring_servers`), the peers whose progress our
        requests wait for."""
        servers = {target for key in self._pending if self._served(key) for target in key[1:]}
        servers |= {target for _, target in self._waiting_flushes}
        servers |= {self._fetch_targets.get(token, -1) for _, token, _, _ in self._fetches}
        servers |= {key[1] for _request, _buffers, key in self._writes}
        if self._noticed_at:
            # A notice's target may have begun a park before the notice arrived (it was rung only
            # if parked when posted): ring it again for a while.
            recent = time.monotonic() - NOTICE_RERING
            servers |= {target for target, at in self._noticed_at.items() if at >= recent}
            self._noticed_at = {target: at for target, at in self._noticed_at.items() if at >= recent}
        self._doorbell.ring_servers(servers)

    def _test_pending(self) -> bool:
        done: list[tuple[int, int]] = []
        for key, entries in list(self._pending.items()):
            left = []
            try:
                for entry in entries:
                    if entry[1].Test():
                        done.append((key[0], entry[0]))
                    else:
                        left.append(entry)
            except MPI.Exception as error:  # its target is gone (see _towards)
                self._failed_towards(key[1], error)
            if left:
                self._pending[key] = left
            else:
                del self._pending[key]
        for win_id, token in done:
            self._op_done(win_id, token)
        return bool(done)

    def _test_fetches(self) -> bool:
        done = []
        for entry in self._fetches:
            try:
                if entry[2].Test():
                    done.append(entry)
            except MPI.Exception as error:  # its target is gone (see _towards)
                self._failed_towards(self._fetch_targets[entry[1]], error)
        if not done:
            return False
        self._fetches = [entry for entry in self._fetches if entry not in done]
        for win_id, token, _request, result in done:
            del self._fetch_targets[token]
            self._fetched(win_id, token, result)
        return True

    def _test_writes(self) -> None:
        left = []
        for entry in self._writes:
            try:
                finished = entry[0].Test()
            except MPI.Exception as error:  # its target is gone (see _towards)
                self._failed_towards(entry[2][1], error)
            if not finished:
                left.append(entry)
        self._writes = left

    def doorbell(self) -> int | None:
        return self._doorbell.fileno()

    def parking(self, parked: bool) -> None:
        """Tell the peers whether we are parked (so they ring us), and after a park empty the
        doorbell (see :meth:`Doorbell.parking`)."""
        if self._closed:
            return
        self._doorbell.parking(parked)

    def poll_need(self) -> PollNeed:
        """A worker thread inside MPI first (it must get the interpreter to finish), then own
        requests (they complete only while we drive progress), then ``win_create`` windows (peers
        may access them any time, by active messages that need our progress)."""
        if self._workers.blocking_calls:
            return _NEED_THREADS
        if self._pending or self._fetches or self._writes or self._waiting_flushes or self._noticed_at:
            return _NEED_REQUESTS
        if self._created_windows:
            return _NEED_SERVING
        return _NEED_IDLE

    # ------------------------------------------------------------------ helpers

    def _op_done(self, win_id: int, token: int) -> None:
        assert self._sink is not None
        self._sink.op_completed(win_id, token)

    def _fetched(self, win_id: int, token: int, result: np.ndarray) -> None:
        assert self._sink is not None
        self._sink.fetched(win_id, token, int(result[0]))

    def _in_thread(self, call: Callable[[], None], then: Callable[[Any], None]) -> None:
        """Run the blocking MPI ``call`` in the RMA worker; ``then`` runs on the loop after it."""
        loop = self._loop
        assert loop is not None
        self._workers.in_thread(loop, call, then)

    def _worker_failed(self, error: TransportError) -> None:
        """A blocking call in the RMA worker raised: the rank's windows fail for good, with the
        cause."""
        assert self._sink is not None
        self._sink.failed(error)

    async def close(self) -> None:
        """Collective.  Free the windows still open (every rank has the same ones: creation and
        free are collective), the presence window and the duplicate communicators; stop the
        workers and close the doorbell.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._liveness.close()  # an orderly end: the neighbours report no death
        self._stop_busy()  # before the collective below frees the communicator it probes
        windows = [self._windows.pop(win_id) for win_id in sorted(self._windows)]
        self._watched.clear()
        self._created_windows = 0
        pending = [request for ops in self._pending.values() for _token, request, _keep, _served in ops]
        pending += [request for _w, _t, request, _buffer in self._fetches]
        pending += [request for request, _buffers, _key in self._writes]
        self._pending.clear()
        self._fetches.clear()
        self._writes.clear()

        def free() -> None:
            # A blocking call still running in the RMA worker (a CAS, a Flush) uses these windows:
            # let it finish before they go.
            self._workers.drain_blocking()
            with map_transport_errors("close"):
                # Our own operations complete as the peers unlock in this same collective.
                MPI.Request.Waitall(pending)
                for window in windows:
                    window.unlock()
                # Every peer is in this close before any window goes; another connect's thread
                # may be freeing windows too: one at a time (aiorma.transport.window_lifecycle).
                self._win_comm.Barrier()

                def free_all() -> None:
                    for window in windows:
                        window.free_windows()
                    self._presence.free()

                exclusive(self._win_comm, self._lifecycle_key, free_all)
                for window in windows:
                    window.free_datatype()
                self._probe_comm.Free()
                self._win_comm.Free()

        try:
            await self._workers.collective(free)
        finally:
            self._stop()

    def abandon(self, reason: str | None = None) -> None:
        """Leave after a failure: tell the peers this rank departed and why, stop the workers (a
        collective stuck in one is left to finish on its own) and close the doorbell; the MPI
        objects are left for ``MPI_Finalize``."""
        if not self._closed:
            # Our departure into every peer's presence word (where their polls look anyway) and
            # a ring: their Requests waiting on us fail with PeerFailed naming us and what we
            # raised at their next poll, not at their own timeouts.
            self._presence.announce_departure(reason)
            self._doorbell.ring_everyone()
            # What is still in flight may complete inside MPI_Finalize, after the interpreter
            # freed its buffers: they outlive it (aiorma.transport.in_flight).
            keep_until_exit(self._in_flight())
        self._stop()

    def _in_flight(self) -> list[object]:
        """The requests and buffers of every operation not known to be complete."""
        held: list[object] = []
        for ops in self._pending.values():
            for _token, request, keep, _served in ops:
                held += [request, keep]
        for _win_id, _token, request, result in self._fetches:
            held += [request, result]
        for request, buffers, _key in self._writes:
            held += [request, buffers]
        return held + self._presence.in_flight

    def _stop_busy(self) -> None:
        if self._busy is not None:
            self._busy.stop()
            self._busy = None

    def _stop(self) -> None:
        self._closed = True
        self._liveness.close()
        self._stop_busy()
        self._workers.stop()
        self._doorbell.close()

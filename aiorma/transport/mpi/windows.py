"""The MPI side of one aiorma window: two MPI windows, each under one long-lived ``Lock_all``
opened at creation — the *data* window (``Win.Allocate``, or ``Win.Create`` on the caller's
array) and the *control* window (always ``Win.Allocate``: ``P``-sized int64 counters, see
:mod:`aiorma.engine.control`) — created and freed collectively."""

from __future__ import annotations

import attr
import numpy as np
from mpi4py import MPI

from ...errors import RmaTypeError
from ..base import map_transport_errors
from ..window_lifecycle import exclusive
from .cpu_atomics import element_type
from .datatypes import mpi_datatype


# attr.s, not attrs.define: the module is compiled (aiorma._native), and mypyc compiles the former.
@attr.s(auto_attribs=True, eq=False)
class MpiWindow:
    win_id: int
    win: MPI.Win
    memory: np.ndarray
    allocated: bool
    datatype: MPI.Datatype
    units: int  # datatype elements per window element (itemsize for MPI.BYTE)
    owns_datatype: bool
    ctrl: MPI.Win
    control: np.ndarray
    seen: bytearray  # the control region as last reported to the sink (a copy)
    notify: bool  # ring a target after each flush towards it (collectives' flag windows)
    #: Each rank's data memory as this process may load and store it (ranks of this node, for an
    #: allocated window: MPI's Win_shared_query), else None.
    shared: list[np.ndarray | None]
    #: Each rank's control region as this process may load and store it (ranks of this node),
    #: else None.
    shared_control: list[np.ndarray | None]
    #: The address of each rank's control region here, when every control atomic of this window
    #: is the CPU's own (:mod:`~aiorma.transport.mpi.cpu_atomics`), else None.
    control_addresses: list[int] | None
    #: The address of each rank's data memory here, when every accumulate, fetch-and-op and
    #: compare-and-swap into this window is a loop of this process's under the target's gate
    #: (``_cpu_atomics.c``'s ``accumulate_elements``, elements of type :attr:`element_type`), else None.
    data_addresses: list[int] | None = None
    #: The address of each rank's gate here: the word after its control words, a lock that every
    #: accumulate into that rank's memory takes (as MPICH's window mutex), when data_addresses is set.
    gate_addresses: list[int] | None = None
    element_type: int = 0
    element_size: int = 0  # bytes

    def unlock(self) -> None:
        """Close both windows' ``Lock_all`` epochs (completing this rank's operations in them)."""
        self.win.Unlock_all()
        self.ctrl.Unlock_all()

    def free_windows(self) -> None:
        """Free both MPI windows (collective, after :meth:`unlock`; inside
        :func:`~aiorma.transport.window_lifecycle.exclusive`)."""
        self.win.Free()
        self.ctrl.Free()

    def free_datatype(self) -> None:
        """Free the MPI datatype if we own it (after :meth:`free_windows`)."""
        if self.owns_datatype:
            self.datatype.Free()

    def free_collectively(self, comm: MPI.Intracomm, key: int) -> np.ndarray | None:
        """Collective over ``comm`` and blocking: unlock and free the window; a copy of allocated
        memory, None for a ``Win.Create`` window.  ``key``: the endpoint's
        :func:`~aiorma.transport.window_lifecycle.agree_key`."""
        with map_transport_errors("free_window"):
            self.unlock()
            # After every rank's Unlock_all, every peer's ops into our memory are complete,
            # so the copy below sees their data.
            comm.Barrier()
            copy = self.memory.copy() if self.allocated else None
            # After the barrier every peer is in this free; another connect's thread may be
            # freeing windows too: one at a time (aiorma.transport.window_lifecycle).
            exclusive(comm, key, self.free_windows)
            self.free_datatype()
        return copy


def open_window(
    comm: MPI.Intracomm,
    key: int,
    win_id: int,
    memory: np.ndarray | None,
    count: int,
    dtype: np.dtype,
    control_words: int,
    notify: bool,
    cpu_atomics: bool = False,
    accumulate_elements: bool = False,
) -> tuple[MpiWindow, tuple[int, ...]]:
    """Collective over ``comm`` and blocking: expose ``memory`` (``Win.Create``) or allocate
    ``count`` zeroed elements (``Win.Allocate``, ``memory is None``), allocate the control region,
    and open both windows' ``Lock_all`` epochs.  Returns the window and every rank's count.
    ``key``: the endpoint's :func:`~aiorma.transport.window_lifecycle.agree_key`.  With
    ``cpu_atomics`` (the same on every rank), the window's control atomics are the CPU's when every
    rank mapped every rank's control region (agreed here); with ``accumulate_elements`` as well (the
    same on every rank), its accumulate family too — ``accumulate_elements`` under the target's gate,
    for an element type it computes, when every rank mapped every rank's allocated memory, aligned.

    Raises :class:`RmaTypeError` on every rank when the ranks' dtypes differ.
    """
    # Exchange first: a dtype mismatch then fails on every rank before any window exists.
    with map_transport_errors("create_window: exchange"):
        peers = comm.allgather((count, dtype))
    if any(other != dtype for _, other in peers):
        raise RmaTypeError(f"window dtypes differ between ranks: {[d for _, d in peers]}")

    def allocate() -> tuple[MPI.Win, MPI.Win]:
        if memory is None:
            win = MPI.Win.Allocate(count * dtype.itemsize, dtype.itemsize, comm=comm)
        else:
            win = MPI.Win.Create(memory, dtype.itemsize, comm=comm)
        # One word more than the engine's: the gate of accumulates into this rank (data_addresses).
        return win, MPI.Win.Allocate((control_words + 1) * 8, 8, comm=comm)

    with map_transport_errors("create_window"):
        datatype, units, owned = mpi_datatype(dtype)
        # After the exchange every peer is in this creation; another connect's thread may be
        # creating windows too: one at a time (aiorma.transport.window_lifecycle).
        win, ctrl = exclusive(comm, key, allocate)
        if memory is None:
            raw = np.frombuffer(win.tomemory(), np.uint8)[: count * dtype.itemsize]
            # Every byte zero, as the local transport's np.zeros gives (assigning 0 to
            # the typed array would store '0' in a str window).
            raw[...] = 0
            local = raw.view(dtype)
        else:
            local = memory
        region = np.frombuffer(ctrl.tomemory(), np.int64)
        region[: control_words + 1] = 0
        control = region[:control_words]
        win.Lock_all()
        ctrl.Lock_all()
        # Every rank holds its Lock_alls and a zeroed control region before anyone
        # issues RMA into this window.
        comm.Barrier()
    counts = tuple(c for c, _ in peers)
    shared = shared_memory(win, dtype, counts) if memory is None and not owned else [None] * len(counts)
    # The engine's control words, without the gate after them (the transport's own).
    shared_control = [
        None if words is None else words[:control_words]
        for words in shared_memory(ctrl, control.dtype, (control_words + 1,) * len(counts))
    ]
    addresses = data_addresses = gate_addresses = None
    type_code = element_type(dtype) if accumulate_elements else 0
    if cpu_atomics:
        # Every rank or none: a word must never see both an MPI atomic and a CPU one.
        mapped = [words.ctypes.data for words in shared_control if words is not None]
        data = [view.ctypes.data for view in shared if view is not None]
        data_ok = type_code != 0 and len(data) == len(counts) and all(a % dtype.itemsize == 0 for a in data)
        with map_transport_errors("create_window: agree on atomics"):
            agreed = comm.allreduce((len(mapped) == len(counts)) | data_ok << 1, op=MPI.BAND)
        if agreed & 1:
            addresses = mapped
            if agreed & 2:
                data_addresses = data
                gate_addresses = [address + 8 * control_words for address in mapped]
    window = MpiWindow(
        win_id, win, local, memory is None, datatype, units, owned,
        ctrl, control, bytearray(control.tobytes()), notify, shared, shared_control, addresses,
        data_addresses, gate_addresses, type_code if data_addresses is not None else 0, dtype.itemsize,
    )  # fmt: skip
    return window, counts


def shared_memory(win: MPI.Win, dtype: np.dtype, counts: tuple[int, ...]) -> list[np.ndarray | None]:
    """Each rank's memory of the allocated window ``win`` (``counts`` elements of ``dtype``) as
    this process can load and store it, else None.  MPI-4 lets ``Win_shared_query`` ask this of
    any window: memory that another process of this node allocated is mapped here, memory on
    another node is not (size 0) — and neither is any with ``MPIR_CVAR_NOLOCAL=1``.  An MPI that
    refuses the query for a window not made by ``Win_allocate_shared`` gives None throughout."""
    views: list[np.ndarray | None] = []
    for rank, count in enumerate(counts):
        size = count * dtype.itemsize
        try:
            buf, _unit = win.Shared_query(rank)
        except MPI.Exception:
            buf = None
        if buf is None or size == 0 or len(buf) < size:
            views.append(None)
        else:
            views.append(np.frombuffer(buf, np.uint8)[:size].view(dtype))
    return views

"""Copies straight out of another process's memory on this node (Linux's cross-memory attach).

``process_vm_readv(2)`` copies bytes from an address in another process into this one: one copy,
made by the kernel, of memory the other process never had to expose.  MPI libraries move large
messages between ranks of one node this way (MPICH's CMA protocol); aiorma's collectives do for
large messages (:mod:`aiorma.collectives.landing`), where the alternative is two copies through
a shared landing slot, each of which crosses between cores — 3-22 GB/s each on this project's VM,
depending on its phase, against 6-8 GB/s for one ``process_vm_readv``; with the slot path's
hand-offs, one copy took 0.33-0.79 x the time at 4 MiB in either phase (docs/benchmarks.md,
*Large messages in one copy*).

The kernel allows it where ``ptrace`` would be allowed — the same user, Yama's ``ptrace_scope``
at 0, one PID namespace; a container may refuse it altogether.  So nothing is assumed:
:func:`probe` has every rank read a known word out of each peer on its host and the ranks agree,
pair by pair, where it worked both ways.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence

import numpy as np
from mpi4py import MPI

from ...errors import TransportError


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class ReadFailed(TransportError):
    """A read out of another process failed; ``errno`` says why (``ESRCH``: the process is gone)."""

    def __init__(self, message: str, errno: int) -> None:
        super().__init__(message)
        self.errno = errno


class ProcessMemoryReader:
    """``process_vm_readv`` through ``ctypes``: :meth:`read` copies from another process.  Not
    thread-safe (one pair of iovecs): called from the event loop's thread only."""

    def __init__(self) -> None:
        # The C library already loaded into this process (no find_library: it forks a subprocess,
        # which an MPI process had better not).
        libc = ctypes.CDLL(None, use_errno=True)
        self._readv = libc.process_vm_readv
        iovec_p = ctypes.POINTER(_Iovec)
        count = ctypes.c_ulong
        self._readv.argtypes = [ctypes.c_int, iovec_p, count, iovec_p, count, ctypes.c_ulong]
        self._readv.restype = ctypes.c_ssize_t
        self._local = _Iovec()
        self._remote = _Iovec()

    def read(self, pid: int, address: int, out: np.ndarray) -> None:
        """Copy ``out.nbytes`` bytes at ``address`` in process ``pid`` into ``out`` (contiguous).
        Raises :class:`ReadFailed` when the kernel refuses or copies less (the process left,
        or the address is not mapped there)."""
        nbytes = int(out.nbytes)
        local, remote = self._local, self._remote
        local.iov_base, local.iov_len = out.ctypes.data, nbytes
        remote.iov_base, remote.iov_len = address, nbytes
        done = 0
        while done < nbytes:
            # The kernel may stop short (a partial read between pages); go on from there.
            got = self._readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
            if got <= 0:
                error = ctypes.get_errno() if got < 0 else 0
                raise ReadFailed(
                    f"process_vm_readv of {nbytes} bytes from process {pid} failed after {done}: "
                    f"{os.strerror(error) if error else 'nothing copied'}",
                    error,
                )
            done += got
            local.iov_base, local.iov_len = out.ctypes.data + done, nbytes - done
            remote.iov_base, remote.iov_len = address + done, nbytes - done


def probe(
    comm: MPI.Intracomm, same_host: Sequence[bool]
) -> tuple[ProcessMemoryReader | None, list[int], list[bool]]:
    """Collective over ``comm``: which peers this rank may read with cross-memory attach.
    ``same_host[r]``: rank ``r`` runs on this host and shares memory with us (the transport's
    on-node test).  Every rank exposes a word holding a value of its own; each reads the word of
    every peer on its host, and a pair counts only where both reads returned the right value.
    Returns (the reader or None, every rank's process id, the pairs: True where reads work)."""
    rank = comm.Get_rank()
    reader: ProcessMemoryReader | None
    try:
        reader = ProcessMemoryReader()
    except (OSError, AttributeError):  # no C library with the call (not Linux)
        reader = None
    token = np.array([(os.getpid() << 20) ^ (rank + 1) ^ 0x5A5A5A5A], dtype=np.int64)
    here = (os.getpid(), int(token.ctypes.data), int(token[0]), reader is not None)
    everyone = comm.allgather(here)
    mine = [False] * len(everyone)
    scratch = np.zeros(1, dtype=np.int64)
    for peer, (pid, address, value, able) in enumerate(everyone):
        if peer == rank or not same_host[peer] or not able or reader is None:
            continue
        try:
            reader.read(pid, address, scratch)
        except TransportError:
            continue
        mine[peer] = int(scratch[0]) == value
    rows = comm.allgather(mine)  # the token stays alive (and unchanged) until every rank has read
    pairs = [peer != rank and rows[rank][peer] and rows[peer][rank] for peer in range(len(rows))]
    return (reader if any(pairs) else None), [pid for pid, _, _, _ in everyone], pairs

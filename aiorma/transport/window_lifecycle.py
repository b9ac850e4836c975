"""One MPI window creation or free at a time in this process.

Every :class:`~aiorma.transport.mpi.MpiEndpoint` runs its window collectives in its own thread, so
a process with two connects open (``connect()`` and ``connect(split)``) can call
``MPI_Win_allocate`` — or ``MPI_Win_free`` — in two threads at the same moment.  MPI allows that
under ``MPI_THREAD_MULTIPLE``, but MPICH 5.0 (ch4:ucx, the ``mpich`` wheel) does not survive it:
its internal state is corrupted, and the process dies of SIGSEGV later — in a following
``Win_free``, or in ``MPI_Finalize`` at exit (mpi4py calls it from ``Py_AtExit``, after Python
has switched faulthandler off, so the rank dies with an empty stderr).  Measured with plain
mpi4py on one rank: two threads each allocating and freeing windows on its own communicator crash
in most runs, two threads only allocating or only freeing too; RMA, flushes, ``Iprobe`` and
communicator ``Dup``/``Free`` in one thread while another creates and frees windows never did;
the same two threads with every create and free under one lock never did.

So the calls that create or free windows run under a process-wide lock (:func:`exclusive`).  A
plain lock would deadlock across processes: the calls are collective, so the holder waits inside
for its peers, and two ranks that took two connects' collectives in opposite orders would each
hold its own lock waiting for the other.  The lock is therefore taken all together or not at all:
every rank of the communicator *tries* its lock (without waiting) and the ranks agree, by an
allreduce, whether all of them hold it; only then do they make the calls, and otherwise each lets
go of it and they try again after a short random pause.  Nobody ever waits for a lock while
holding one, so there is no deadlock.  So that contending connects do not keep splitting the
ranks' locks between them, a rank offers its lock only to the contender with the smallest *key*
(:func:`agree_key`: the same on every rank of a connect, and distinct between connects started
one after another in a process): the ranks that see the same contenders pick the same one.  The
caller enters after a synchronising call on the same communicator (the exchange before a
creation, a barrier before a free), so that the agreement never holds a lock while waiting for a
late peer.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from mpi4py import MPI

_T = TypeVar("_T")

_state = threading.Lock()  # guards the three below
_next_key = 0  # above every key agreed in this process
_waiting: collections.Counter[int] = collections.Counter()  # keys of the contenders here
_holder: int | None = None  # the key that holds this process's lock
_FIRST_PAUSE = 1e-4  # seconds before the first retry; doubled each time up to _LONGEST_PAUSE
_LONGEST_PAUSE = 0.01


def agree_key(comm: MPI.Intracomm) -> int:
    """Collective over ``comm`` (an endpoint's start-up): its key for :func:`exclusive`, the same
    on every rank of ``comm`` and, on each of them, above the key of every endpoint started
    before (two started at the same moment may share one: they then take turns at random)."""
    global _next_key
    with _state:
        mine = _next_key
    key = int(comm.allreduce(mine, op=MPI.MAX))
    with _state:
        _next_key = max(_next_key, key + 1)
    return key


def exclusive(comm: MPI.Intracomm, key: int, call: Callable[[], _T]) -> _T:
    """Collective over ``comm``: run ``call`` — MPI calls that create or free windows, collective
    over ``comm`` — on every rank of ``comm`` while each of them holds its process's lock, so that
    no other window creation or free of these processes runs meanwhile.  ``key`` is the endpoint's
    :func:`agree_key`.  Enter after a synchronising call on ``comm`` (see the module docstring).
    ``call`` runs exactly once, at the same attempt on every rank."""
    global _holder
    pause = _FIRST_PAUSE
    with _state:
        _waiting[key] += 1
    try:
        while True:
            with _state:
                held = _holder is None and key == min(_waiting)
                if held:
                    _holder = key
            try:
                if comm.allreduce(held, op=MPI.LAND):
                    return call()
            finally:
                if held:
                    with _state:
                        _holder = None
            # Another connect of this process (or of a peer's) holds a lock: try again shortly.
            time.sleep(random.uniform(0, pause))
            pause = min(2 * pause, _LONGEST_PAUSE)
    finally:
        with _state:
            _waiting[key] -= 1
            if not _waiting[key]:
                del _waiting[key]

"""Buffers of MPI operations still in flight when a rank leaves after a failure: kept until the
process ends.

A rank that abandons its connection (it leaves ``aiorma.connect`` by an exception, its own or a
peer's) does not wait for its operations towards peers that departed: nobody may ever complete
them.  But MPI still may — mpi4py calls ``MPI_Finalize`` from a C-level exit hook, after the
interpreter has freed every Python object, and finalizing progresses what is still in flight.  An
``Rget_accumulate`` finishing then writes its result into memory the interpreter has already
given back to the allocator: a corrupted heap, and the process aborted at exit
(``malloc(): unsorted double linked list corrupted``, seen in ``test_departure_mpi.py``'s late
peer on two emulated nodes, in about a third of the runs on a loaded machine).  So the buffers
(and the requests) of such operations are leaked on purpose: one reference each that is never
released, so the interpreter never frees them.  Only on that path, and only a few words.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable


def keep_until_exit(objects: Iterable[object]) -> None:
    """Give each of ``objects`` one reference that is never released: it outlives the
    interpreter's teardown, and ``MPI_Finalize`` after it."""
    for obj in objects:
        if obj is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))

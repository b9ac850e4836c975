"""How aiorma's element types and reduction operations map to MPI's: the datatype carrying a
window's elements and the op tables of the data and control windows."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from ...constants import Op
from ...engine.control import AtomicOp

MPI_OPS: dict[Op, MPI.Op] = {
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
CONTROL_OPS: dict[AtomicOp, MPI.Op] = {
    AtomicOp.MAX: MPI.MAX,
    AtomicOp.SUM: MPI.SUM,
    AtomicOp.REPLACE: MPI.REPLACE,
    AtomicOp.NO_OP: MPI.NO_OP,
}


def mpi_datatype(dtype: np.dtype) -> tuple[MPI.Datatype, int, bool]:
    """The MPI datatype carrying elements of ``dtype``, how many of it make one element, and
    whether we own (must free) it.

    Numbers in the machine's byte order map to MPI's own type, which the MPI library computes
    accumulates with (and whose atomics, compare-and-swap and fetch-and-op, want the predefined
    type itself: ``from_numpy_dtype`` returns a *duplicate* even of a predefined type, so a
    duplicate is unwrapped); timedelta64 and datetime64 to int64.  Every other fixed-size dtype
    (str, bytes, void, structured, another byte order) has no MPI arithmetic, only data movement,
    and maps to ``itemsize`` MPI.BYTEs per element: mpi4py's mapping of 'U4' to one wchar per
    element moved a quarter of each element, of 'S4' one byte, and a structured dtype's derived
    type tripped an MPICH assertion in put.
    """
    if dtype.kind in "mM":
        return MPI.INT64_T, 1, False
    if dtype.kind not in "biufc" or dtype.names is not None or not dtype.isnative:
        return MPI.BYTE, dtype.itemsize, False
    datatype = dtlib.from_numpy_dtype(dtype)
    if datatype.combiner == MPI.COMBINER_DUP:
        base = datatype.decode()[0]
        datatype.Free()
        return base, 1, False
    return datatype.Commit(), 1, True

"""mpi4py buffer specifications, accepted wherever aiorma takes a buffer (RMA calls, collectives).

mpi4py takes a buffer bare, the MPI datatype inferred from it, or as a *spec* naming the
datatype: ``[buf, MPI.DOUBLE]``, ``(buf, MPI.DOUBLE)``, ``[buf, count, MPI.DOUBLE]``.  aiorma
always infers the type from the numpy dtype, as mpi4py does for a bare array.  Programmers who
come from mpi4py write the explicit form by habit, and it says nothing aiorma could get wrong
when the datatype is the array's own type; so those three forms are accepted and mean exactly
what they mean in mpi4py: the whole array, or its first ``count`` elements in C order.

Everything else a spec could say has no unambiguous aiorma meaning and is refused with
:class:`~aiorma.RmaTypeError` naming what to pass instead: a datatype that is not the array's
own type (mpi4py would reinterpret the bytes; aiorma never does), derived datatypes, a
``(count, displacement)`` pair, typecode strings, buffers that are not numpy arrays.

mpi4py is not imported here: an object can only be an ``MPI.Datatype`` if the program has
imported ``mpi4py.MPI`` already, and importing it would initialise MPI in programs that run on
the in-process transport.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

import numpy as np

from .errors import RmaTypeError


def unwrap(value: Any, what: str) -> Any:
    """``value`` unchanged, unless it is an mpi4py buffer spec: then the numpy array it names
    (the array itself, or a view of its first ``count`` elements).  Raises RmaTypeError, with
    what to pass, for a spec aiorma cannot take as it is."""
    if not _is_spec(value):
        return value
    if len(value) not in (2, 3):
        raise RmaTypeError(
            f"{what}: aiorma takes the mpi4py specs [buf, datatype] and [buf, count, datatype]; "
            "better, pass the numpy array alone (its dtype gives the type)"
        )
    buf, datatype = value[0], value[-1]
    if not isinstance(buf, np.ndarray):
        raise RmaTypeError(
            f"{what}: aiorma moves numpy arrays, not {type(buf).__name__}: pass a numpy array "
            "(numpy.frombuffer wraps other buffers)"
        )
    if isinstance(datatype, str):
        raise RmaTypeError(f"{what}: pass the numpy array alone; aiorma takes the type from its dtype")
    if not _predefined(datatype):
        raise RmaTypeError(
            f"{what}: derived MPI datatypes are not accepted: pass the elements as a numpy array "
            "(a slice, or a copy gathering them)"
        )
    expected = _numpy_dtype(datatype)
    if expected is None or expected != buf.dtype:  # (np.dtype("float64") == None is True)
        matching = _datatype_for(buf.dtype)
        raise RmaTypeError(
            f"{what}: {_datatype_name(datatype)} is not the type of the {buf.dtype} array and aiorma "
            "never reinterprets buffers: pass the array alone (its dtype gives the type)"
            + (f" or [array, {matching}]" if matching else "")
        )
    if len(value) == 2:
        return buf
    count = _count(value[1], buf, what)
    if not buf.flags.c_contiguous:  # its first count elements would be a copy, not the array
        raise RmaTypeError(f"{what}: [buf, count, datatype] needs a C-contiguous buf")
    return buf.reshape(-1)[:count]


def _is_spec(value: Any) -> bool:
    """A list or tuple ending in an MPI datatype, or an array and a typecode string."""
    if not isinstance(value, list | tuple) or len(value) < 2:
        return False
    last = value[-1]
    if isinstance(last, str):
        return isinstance(value[0], np.ndarray)
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and isinstance(last, mpi.Datatype)


def _count(value: Any, buf: np.ndarray, what: str) -> int:
    if isinstance(value, tuple | list):
        raise RmaTypeError(f"{what}: for [buf, (count, displ), datatype] pass buf[displ:displ + count]")
    if isinstance(value, bool):
        raise RmaTypeError(f"{what}: count {value!r} is not an element count")
    try:
        count = operator.index(value)
    except TypeError:
        raise RmaTypeError(f"{what}: count {value!r} is not an element count") from None
    if not 0 <= count <= buf.size:
        raise RmaTypeError(f"{what}: count {count} outside the array's {buf.size} elements")
    return count


def _predefined(datatype: Any) -> bool:
    try:
        return bool(datatype.is_predefined)
    except Exception:  # MPI.DATATYPE_NULL
        return True


def _numpy_dtype(datatype: Any) -> np.dtype | None:
    """The numpy dtype of a predefined MPI datatype; None for derived or null datatypes."""
    from mpi4py.util import dtlib  # mpi4py.MPI is imported already: a Datatype exists

    try:
        if not datatype.is_predefined:
            return None
        return np.dtype(dtlib.to_numpy_dtype(datatype))
    except Exception:  # MPI.DATATYPE_NULL, or a type numpy has no equivalent for
        return None


def _datatype_name(datatype: Any) -> str:
    try:
        name = datatype.Get_name()
    except Exception:  # MPI.DATATYPE_NULL and some derived types have no name
        name = ""
    return name.replace("MPI_", "MPI.", 1) if name else "the MPI datatype"


# Candidates for "pass [array, MPI.X]", in order of preference (fixed-size names first).
_SUGGESTED = (
    "DOUBLE", "FLOAT", "INT64_T", "INT32_T", "INT16_T", "INT8_T", "UINT64_T", "UINT32_T",
    "UINT16_T", "UINT8_T", "C_BOOL", "C_DOUBLE_COMPLEX", "C_FLOAT_COMPLEX", "LONG_DOUBLE",
)  # fmt: skip


def _datatype_for(dtype: np.dtype) -> str | None:
    """The predefined MPI datatype whose numpy type is ``dtype``, as ``MPI.NAME``, if any."""
    mpi = sys.modules["mpi4py.MPI"]
    for name in _SUGGESTED:
        found = _numpy_dtype(getattr(mpi, name, None))
        if found is not None and found == dtype:
            return f"MPI.{name}"
    return None

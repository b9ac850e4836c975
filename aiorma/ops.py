"""Reduction operations on numpy data: which dtypes each op accepts, and how it combines."""

from __future__ import annotations

import numpy as np

from .constants import Op
from .errors import RmaTypeError

_BITWISE = {Op.BAND, Op.BOR, Op.BXOR}
_LOGICAL = {Op.LAND, Op.LOR, Op.LXOR}
_ORDER = {Op.MIN, Op.MAX}


#: Ops that only move data: bit-exact on any dtype, whatever arithmetic the MPI library has.
_DATA_MOVEMENT = {Op.REPLACE, Op.NO_OP}

# The one table of arithmetic per numpy kind (docs/datatypes.md), for every transport: MPI
# computes these itself, the local transport with numpy, and both agree only on these.
# timedelta64 and datetime64 compute on their int64 count of units, as MPI does (NaT is just the
# int64 minimum); the sum or product of two instants, and the product of two durations, mean
# nothing.  str, bytes, void and structured dtypes have no MPI arithmetic at all: they move (put,
# get, REPLACE, NO_OP) and nothing else.
_ARITHMETIC: dict[str, frozenset[Op]] = {
    "b": frozenset({Op.SUM, Op.PROD, *_ORDER, *_BITWISE, *_LOGICAL}),
    "i": frozenset({Op.SUM, Op.PROD, *_ORDER, *_BITWISE, *_LOGICAL}),
    "u": frozenset({Op.SUM, Op.PROD, *_ORDER, *_BITWISE, *_LOGICAL}),
    "f": frozenset({Op.SUM, Op.PROD, *_ORDER}),
    "c": frozenset({Op.SUM, Op.PROD}),
    "m": frozenset({Op.SUM, *_ORDER}),
    "M": frozenset(_ORDER),
}


def check_window_dtype(dtype: np.dtype) -> None:
    """Raise RmaTypeError unless a window may hold ``dtype``: any fixed-size dtype without Python
    objects in it, in C order of elements.  Object references mean nothing in another process
    (and MPI has no type for them); a flexible dtype of size 0 ('U', 'S', 'V') holds nothing;
    a subarray dtype would make numpy allocate an array of its base type instead."""
    if dtype.hasobject:
        raise RmaTypeError(
            f"a window cannot hold {dtype}: Python object references mean nothing in another process; "
            "use a fixed-size dtype (numbers, 'U<n>' or 'S<n>' strings, structured records)"
        )
    if dtype.itemsize == 0:
        raise RmaTypeError(f"a window needs a fixed-size dtype, not {dtype} (size 0): e.g. 'U8', not 'U'")
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        raise RmaTypeError(f"a window of subarray dtype {dtype}: use dtype {base}, {shape} times the count")


def check_accumulate_dtype(op: Op, dtype: np.dtype) -> None:
    """:func:`check_op_dtype` for the accumulate family, which the MPI library computes: also
    refuse what it has no arithmetic for (float16: MPICH's accumulate applied SUM, PROD, MIN and
    MAX to the raw bits) or defines only in part: on bool, MPI defines only the logical ops
    (LAND, LOR, LXOR) — Open MPI refuses the others, MPICH computes them on the bytes (SUM stored
    True + True as the byte 2) — so that no transport reinterprets it and every transport refuses
    alike.  (Collectives reduce with numpy and accept both.)"""
    if dtype == np.float16 and op not in _DATA_MOVEMENT:
        raise RmaTypeError(
            f"{op.name} on float16: MPI libraries have no float16 arithmetic for accumulate (MPICH "
            "applies it to the raw bits); use a float32 window, or REPLACE / NO_OP, which only move data"
        )
    if dtype.kind == "b" and op not in _LOGICAL and op not in _DATA_MOVEMENT:
        raise RmaTypeError(
            f"{op.name} on bool: MPI defines only LAND, LOR and LXOR on logical types (Open MPI refuses "
            "the others; MPICH adds bools as bytes, True + True storing 2); use LOR for 'any', LAND for "
            "'all', or an integer window to count"
        )
    check_op_dtype(op, dtype)


def check_op_dtype(op: Op, dtype: np.dtype) -> None:
    """Raise RmaTypeError unless ``op`` is defined on ``dtype`` by the table above (REPLACE and
    NO_OP on any dtype; arithmetic on native-byte-order numbers only, as MPI computes in the
    machine's order)."""
    if op in _DATA_MOVEMENT or op in arithmetic_ops(dtype):
        return
    kind = dtype.kind
    if op in _BITWISE | _LOGICAL and kind in "fcmM":
        raise RmaTypeError(f"{op.name} needs an integer or bool window, not {dtype}")
    if op in _ORDER and kind == "c":
        raise RmaTypeError(f"{op.name} is undefined on complex dtype {dtype}")
    if kind in _ARITHMETIC and not dtype.isnative:
        raise RmaTypeError(
            f"{op.name} on {dtype}: arithmetic needs the machine's byte order "
            f"(use {dtype.newbyteorder('=')}); REPLACE and NO_OP move any dtype"
        )
    takes = [o.name for o in Op if o in arithmetic_ops(dtype) or o in _DATA_MOVEMENT]
    raise RmaTypeError(f"{op.name} is not defined on {dtype}, which takes {', '.join(takes)}")


def arithmetic_ops(dtype: np.dtype) -> frozenset[Op]:
    """The ops besides REPLACE and NO_OP that ``dtype`` supports (ignoring float16's refusal in
    the accumulate family)."""
    if dtype.names is not None or not dtype.isnative:
        return frozenset()
    return _ARITHMETIC.get(dtype.kind, frozenset())


def check_compare_dtype(dtype: np.dtype) -> None:
    """Raise RmaTypeError unless compare_and_swap may compare ``dtype``: integers and bool in the
    machine's byte order (MPI's compare-and-swap types)."""
    if dtype.kind not in "iub" or not dtype.isnative:
        raise RmaTypeError(f"compare_and_swap needs an integer or bool window, not {dtype}")


def combine(op: Op, current: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """The new target contents for ``current  op  operand`` (elementwise, window dtype), computed
    as MPI libraries compute it in C: integers wrap, floats overflow to infinity and invalid
    operations give NaN, without warnings (numpy would warn, and the tests turn warnings into
    errors)."""
    with np.errstate(all="ignore"):
        return _combine(op, current, operand)


def _combine(op: Op, current: np.ndarray, operand: np.ndarray) -> np.ndarray:
    if op is Op.REPLACE:
        return operand
    if op is Op.NO_OP:
        return current
    if current.dtype.kind in "mM":  # on the int64 counts, as MPI computes (NaT is not special)
        return _combine(op, current.view(np.int64), operand.view(np.int64)).view(current.dtype)
    if op is Op.SUM:
        return current + operand
    if op is Op.PROD:
        return current * operand
    # MIN and MAX as MPI libraries define them in C: the target keeps its value only when it is
    # strictly smaller (larger) than the operand, so a NaN on either side gives the operand, and
    # of -0.0 and 0.0 the operand wins (numpy's minimum would propagate NaN instead).
    if op is Op.MIN:
        return np.where(current < operand, current, operand)
    if op is Op.MAX:
        return np.where(current > operand, current, operand)
    if op is Op.BAND:
        return current & operand
    if op is Op.BOR:
        return current | operand
    if op is Op.BXOR:
        return current ^ operand
    if op is Op.LAND:
        return np.logical_and(current, operand).astype(current.dtype)
    if op is Op.LOR:
        return np.logical_or(current, operand).astype(current.dtype)
    if op is Op.LXOR:
        return np.logical_xor(current, operand).astype(current.dtype)
    raise RmaTypeError(f"unknown op {op!r}")

"""Reduction operations on numpy data: which dtypes each op accepts, and how it combines."""

from __future__ import annotations

import numpy as np

from .constants import Op
from .errors import RmaTypeError

_BITWISE = {Op.BAND, Op.BOR, Op.BXOR}
_LOGICAL = {Op.LAND, Op.LOR, Op.LXOR}


#: Ops that only move data: bit-exact on any dtype, whatever arithmetic the MPI library has.
_DATA_MOVEMENT = {Op.REPLACE, Op.NO_OP}


def check_accumulate_dtype(op: Op, dtype: np.dtype) -> None:
    """:func:`check_op_dtype` for the accumulate family, which the MPI library computes: also
    refuse what it has no arithmetic for (float16: MPICH's accumulate applied SUM, PROD, MIN and
    MAX to the raw bits), so that no transport reinterprets it and every transport refuses alike.
    (Collectives reduce with numpy and accept float16.)"""
    if dtype == np.float16 and op not in _DATA_MOVEMENT:
        raise RmaTypeError(
            f"{op.name} on float16: MPI libraries have no float16 arithmetic for accumulate (MPICH "
            "applies it to the raw bits); use a float32 window, or REPLACE / NO_OP, which only move data"
        )
    check_op_dtype(op, dtype)


def check_op_dtype(op: Op, dtype: np.dtype) -> None:
    """Raise RmaTypeError when MPI would reject ``op`` on ``dtype`` (e.g. BXOR on floats)."""
    kind = dtype.kind
    if op in _BITWISE and kind not in "iub":
        raise RmaTypeError(f"{op.name} needs an integer or bool window, not {dtype}")
    if op in _LOGICAL and kind not in "iub":
        raise RmaTypeError(f"{op.name} needs an integer or bool window, not {dtype}")
    if op in (Op.MIN, Op.MAX) and kind == "c":
        raise RmaTypeError(f"{op.name} is undefined on complex dtype {dtype}")


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

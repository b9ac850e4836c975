"""Reduction operations on numpy data: which dtypes each op accepts, and how it combines."""

from __future__ import annotations

import numpy as np

from .constants import Op
from .errors import RmaTypeError

_BITWISE = {Op.BAND, Op.BOR, Op.BXOR}
_LOGICAL = {Op.LAND, Op.LOR, Op.LXOR}


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
    """The new target contents for ``current  op  operand`` (elementwise, window dtype)."""
    if op is Op.REPLACE:
        return operand
    if op is Op.NO_OP:
        return current
    if op is Op.SUM:
        return current + operand
    if op is Op.PROD:
        return current * operand
    if op is Op.MIN:
        return np.minimum(current, operand)
    if op is Op.MAX:
        return np.maximum(current, operand)
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

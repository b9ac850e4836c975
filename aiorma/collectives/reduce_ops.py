"""Reduction arithmetic for collectives: in-place combining in rank order.

MPI reduces ``x0 op x1 op … op x(P-1)``.  Every aiorma op is commutative except ``REPLACE``
(the result is the highest rank's value) and ``NO_OP`` (the lowest rank's), so the algorithms
keep track of whether incoming data comes from higher or lower ranks and the result is
well defined for those two as well.  Semantics match :func:`aiorma.ops.combine` (what
``accumulate`` does), computed in place with numpy ufuncs, except MIN and MAX with a NaN: numpy's
minimum and maximum propagate it, where accumulate follows MPI's C definition
(docs/datatypes.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from .. import _native
from ..constants import Op

# The ops a reduction reads on every call, as module constants: reading ``Op.REPLACE`` goes
# through the enum metaclass's ``__getattr__`` hook (a fifth of an 8-byte reduction's time).
_REPLACE: Final = Op.REPLACE
_NO_OP: Final = Op.NO_OP

#: Ops whose ufunc writes its result into ``out`` in the operands' dtype.
_ARITHMETIC = {
    Op.SUM: np.add,
    Op.PROD: np.multiply,
    Op.MIN: np.minimum,
    Op.MAX: np.maximum,
    Op.BAND: np.bitwise_and,
    Op.BOR: np.bitwise_or,
    Op.BXOR: np.bitwise_xor,
}
#: Ops whose ufunc gives a bool result, stored as 0/1 in the operands' dtype.
_LOGICAL = {
    Op.LAND: np.logical_and,
    Op.LOR: np.logical_or,
    Op.LXOR: np.logical_xor,
}


#: The compiled whole-message step (``_combine.c``: ``combine_into``), or None where the build left
#: none: numpy's ufuncs do every combination.
COMPILED: Final = _native.compiled_extension("aiorma.collectives._combine")
#: The element types ``combine_into`` computes, by the code it knows them by.
TYPE_CODES: Final = {
    np.dtype(np.float64): 1,
    np.dtype(np.float32): 2,
    np.dtype(np.int64): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.uint64): 5,
    np.dtype(np.uint32): 6,
}


def is_commutative(op: Op) -> bool:
    """False for REPLACE and NO_OP, whose result depends on the order of the operands."""
    return op is not _REPLACE and op is not _NO_OP


def reduce_into(
    op: Op, acc: np.ndarray, incoming: np.ndarray, incoming_higher: bool, out: np.ndarray | None = None
) -> None:
    """``out = acc op incoming`` if ``incoming`` holds the contribution of higher ranks than
    ``acc`` does, else ``out = incoming op acc``; ``out`` defaults to ``acc`` (in place) and has
    ``acc``'s dtype.  ``out`` may be ``acc`` but must not overlap ``incoming``."""
    if out is None:
        out = acc
    if op is _REPLACE or op is _NO_OP:
        keep_incoming = incoming_higher if op is _REPLACE else not incoming_higher
        if keep_incoming:
            out[...] = incoming
        elif out is not acc:
            out[...] = acc
        return
    ufunc = _ARITHMETIC.get(op)
    if ufunc is not None:
        ufunc(acc, incoming, out=out)
    else:
        out[...] = _LOGICAL[op](acc, incoming)


def combiner(
    op: Op, acc: np.ndarray, incoming_higher: bool, out: np.ndarray | None = None
) -> Callable[[np.ndarray, int, int], None]:
    """A landing consumer (``consume(slot, lo, hi)``: a chunk's bytes and its byte range in the
    message) that combines each chunk with the same bytes of ``acc`` (1-D, typed) into ``out``
    (default ``acc``), as :func:`reduce_into` does."""
    target = acc if out is None else out
    itemsize = acc.dtype.itemsize
    dtype = acc.dtype
    nbytes = int(acc.nbytes)
    compiled = COMPILED
    # The compiled loop's type code where it may run (a commutative op, arrays it can take whole),
    # else 0; it declines the ops it does not compute as numpy does (a float's MIN and MAX).
    code = (
        TYPE_CODES.get(dtype, 0)
        if compiled is not None
        and is_commutative(op)
        and acc.flags.c_contiguous
        and target.flags.c_contiguous
        and target.flags.writeable
        else 0
    )

    def combine(slot: np.ndarray, lo: int, hi: int) -> None:
        if lo == 0 and hi == nbytes:  # the whole message at once (a small one): no slices
            if code and compiled is not None and compiled.combine_into(target, acc, slot, op, code):
                return
            reduce_into(op, acc, slot.view(dtype), incoming_higher, target)
            return
        a, b = lo // itemsize, hi // itemsize
        reduce_into(op, acc[a:b], slot.view(dtype), incoming_higher, target[a:b])

    return combine

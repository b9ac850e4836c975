"""Argument checks made at the call of a collective, before anything is queued or sent.

A bad buffer raises :class:`~aiorma.RmaTypeError`, a bad root :class:`~aiorma.RmaRangeError`, a
bad algorithm or option :class:`~aiorma.RmaUsageError`; nothing has changed when they do.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Sequence
from typing import Any, TypeGuard

import numpy as np

from .._buffer_spec import unwrap
from ..constants import Op
from ..errors import RmaRangeError, RmaTypeError, RmaUsageError
from ..ops import check_op_dtype

_NUMERIC = "biufc"  # bool, signed, unsigned, float, complex
# (op, dtype) pairs op() has accepted: the checks of a repeated call are a set look-up.
_ACCEPTED_OPS: set[tuple[Op, np.dtype]] = set()


def plain(send: Any, recv: Any) -> TypeGuard[np.ndarray]:
    """The common buffers, checked by exact types first: ``send`` and ``recv`` numpy arrays (not
    mpi4py specs, not subclasses) of one numeric dtype, both C-contiguous, ``recv`` writeable —
    what :func:`send_buffer` and :func:`recv_buffer` return unchanged and :func:`same_dtype`
    accepts (pass one array twice for a buffer that is both).  False sends the call through those
    checks, which accept or refuse everything else; nothing is refused here."""
    return (
        type(send) is np.ndarray
        and type(recv) is np.ndarray
        and send.dtype is recv.dtype
        and send.dtype.kind in _NUMERIC
        and send.flags.c_contiguous
        and recv.flags.c_contiguous
        and recv.flags.writeable
    )


def send_buffer(buf: Any, what: str) -> np.ndarray:
    """A numeric numpy array (or an mpi4py buffer spec of one), returned C-contiguous (copied
    only if it was not)."""
    buf = unwrap(buf, what)
    if not isinstance(buf, np.ndarray):
        raise RmaTypeError(f"{what} must be a numpy array, not {type(buf).__name__}")
    if buf.dtype.kind not in _NUMERIC:
        raise RmaTypeError(f"{what} has dtype {buf.dtype}; collectives move numeric arrays only")
    return np.ascontiguousarray(buf)


def recv_buffer(buf: Any, what: str) -> np.ndarray:
    """A numeric, C-contiguous, writeable numpy array (or an mpi4py buffer spec of one): results
    are written into it in place."""
    buf = unwrap(buf, what)
    if not isinstance(buf, np.ndarray):
        raise RmaTypeError(f"{what} must be a numpy array, not {type(buf).__name__}")
    if buf.dtype.kind not in _NUMERIC:
        raise RmaTypeError(f"{what} has dtype {buf.dtype}; collectives move numeric arrays only")
    if not buf.flags.c_contiguous or not buf.flags.writeable:
        raise RmaTypeError(f"{what} must be a writeable, C-contiguous array")
    return buf


def pair(send: Any, recv: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`send_buffer` and :func:`recv_buffer` of a ``what`` call (in that order), and
    :func:`same_dtype`; the :func:`plain` pair as it is."""
    if plain(send, recv):
        return send, recv
    source = send_buffer(send, f"{what} send buffer")
    target = recv_buffer(recv, f"{what} receive buffer")
    same_dtype(source, target, what)
    return source, target


def same_dtype(a: np.ndarray, b: np.ndarray, what: str) -> None:
    if a.dtype != b.dtype:
        raise RmaTypeError(f"{what}: send dtype {a.dtype} and receive dtype {b.dtype} differ")


def expect_size(buf: np.ndarray, size: int, what: str) -> None:
    if buf.size != size:
        raise RmaTypeError(f"{what} holds {buf.size} elements, {size} expected")


def root(value: Any, size: int) -> int:
    if type(value) is int and 0 <= value < size:  # the common call
        return value
    if isinstance(value, bool):
        raise RmaRangeError(f"root {value!r} is not a rank")
    try:
        rank = operator.index(value)
    except TypeError:
        raise RmaRangeError(f"root {value!r} is not an integer rank") from None
    if not 0 <= rank < size:
        raise RmaRangeError(f"root {rank} is outside the Comm of {size} ranks")
    return rank


def op(value: Any, dtype: np.dtype) -> Op:
    if type(value) is Op and (value, dtype) in _ACCEPTED_OPS:
        return value
    try:
        operation = Op(value)
    except ValueError:
        raise RmaUsageError(f"{value!r} is not an aiorma op (SUM, MAX, REPLACE, ...)") from None
    check_op_dtype(operation, dtype)
    if len(_ACCEPTED_OPS) < 1024:  # (dtypes made on the fly could grow it without end)
        _ACCEPTED_OPS.add((operation, dtype))
    return operation


def algorithm(value: Any, allowed: Collection[str], what: str) -> str | None:
    """``value`` if it names one of ``allowed`` (a collective's table: its keys), None for None."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        raise RmaUsageError(f"unknown {what} algorithm {value!r}; choose from {', '.join(allowed)}")
    return value


def nodes(value: Any, size: int) -> list[object] | None:
    """A node label per rank (ranks with equal labels share a node), or None."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise RmaUsageError(f"nodes must be a sequence with one node label per rank, not {value!r}")
    labels = [v.item() if isinstance(v, np.generic) else v for v in value]
    if len(labels) != size:
        raise RmaUsageError(f"nodes names {len(labels)} ranks, the Comm has {size}")
    try:
        for label in labels:
            hash(label)
    except TypeError:
        raise RmaUsageError("node labels must be hashable (ints or strings)") from None
    return labels


def positive_int(value: Any, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise RmaUsageError(f"{what} must be an integer >= {minimum}, not {value!r}")
    return int(value)

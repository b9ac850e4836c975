"""The collectives' reduction arithmetic: the combiner a receive hands each message to, in both
forms of its whole-message step — numpy's ufuncs and the compiled loop (``_combine.c``) — which
must give numpy's result bit for bit wherever the compiled one takes the op."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from aiorma.collectives import reduce_ops
from aiorma.collectives.reduce_ops import combiner, reduce_into
from aiorma.constants import Op

from .native_forms import compiled

INTEGER_OPS = [Op.SUM, Op.PROD, Op.MIN, Op.MAX, Op.BAND, Op.BOR, Op.BXOR]
FLOAT_OPS = [Op.SUM, Op.PROD]
UFUNCS = {
    Op.SUM: np.add,
    Op.PROD: np.multiply,
    Op.MIN: np.minimum,
    Op.MAX: np.maximum,
    Op.BAND: np.bitwise_and,
    Op.BOR: np.bitwise_or,
    Op.BXOR: np.bitwise_xor,
}


def _compiled() -> Any:
    return compiled(reduce_ops.COMPILED, "combine step", "numpy combines every message: tested below")


def _values(dtype: np.dtype, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.kind == "f":
        values = rng.normal(0, 1e3, count).astype(dtype)
        values[:4] = [np.nan, np.inf, -np.inf, -0.0][: min(4, count)]
        return values
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max, count, dtype=dtype, endpoint=True)
    values[:2] = [info.max, info.min][: min(2, count)]  # sums and products that wrap
    return values


@pytest.mark.parametrize("dtype", list(reduce_ops.TYPE_CODES), ids=str)
@pytest.mark.parametrize("count", [1, 2, 7])
def test_the_compiled_step_gives_numpys_result(dtype: np.dtype, count: int) -> None:
    """Every op it takes, on every type it knows, equals the ufunc's result bit for bit (NaN,
    infinities and signed zeros among the floats, wrapping among the integers), into a separate
    output and in place; the operands may be unaligned."""
    compiled = _compiled()
    code = reduce_ops.TYPE_CODES[dtype]
    for op in FLOAT_OPS if dtype.kind == "f" else INTEGER_OPS:
        acc, incoming = _values(dtype, count, 1), _values(dtype, count, 2)
        expected = UFUNCS[op](acc, incoming)
        raw = np.zeros(count * dtype.itemsize + 1, np.uint8)[1:]  # an unaligned copy of incoming
        raw[:] = incoming.view(np.uint8)
        out = np.empty_like(acc)
        assert compiled.combine_into(out, acc, raw, op, code) is True
        assert out.tobytes() == expected.tobytes(), (op, acc, incoming, out, expected)
        assert compiled.combine_into(acc, acc, raw, op, code) is True  # in place
        assert acc.tobytes() == expected.tobytes()


def test_the_compiled_step_declines_what_numpy_must_compute() -> None:
    """A float's MIN and MAX (numpy's NaN and signed-zero rules), the logical ops, REPLACE and
    NO_OP, an unknown type: False and nothing written.  Buffers that do not match: ValueError."""
    compiled = _compiled()
    acc, incoming = np.array([1.0, np.nan]), np.array([np.nan, -0.0])
    out = np.full(2, 7.0)
    for op in (Op.MIN, Op.MAX, Op.LAND, Op.LOR, Op.LXOR, Op.REPLACE, Op.NO_OP):
        assert compiled.combine_into(out, acc, incoming.view(np.uint8), op, 1) is False
    assert compiled.combine_into(out, acc, incoming.view(np.uint8), Op.SUM, 99) is False
    assert (out == 7.0).all()
    with pytest.raises(ValueError, match="whole elements"):
        compiled.combine_into(out, acc, np.zeros(15, np.uint8), Op.SUM, 1)
    with pytest.raises(ValueError, match="whole elements"):
        compiled.combine_into(np.zeros(3, np.int32), np.zeros(3, np.int32), np.zeros(12, np.uint8), Op.SUM, 3)


@pytest.mark.parametrize("op", list(Op), ids=lambda op: op.name)
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.complex128], ids=str)
@pytest.mark.parametrize("higher", [True, False])
def test_a_combiner_gives_reduce_intos_result_whole_or_in_chunks(op: Op, dtype: Any, higher: bool) -> None:
    """Whichever form runs, a message combined whole (a small one) or chunk by chunk gives what
    reduce_into gives on the whole arrays."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c" and op in (Op.MIN, Op.MAX, Op.BAND, Op.BOR, Op.BXOR):
        return  # not a complex op (refused at the call: tests/test_collective_checks.py)
    if dtype.kind == "f" and op in (Op.BAND, Op.BOR, Op.BXOR):
        return  # not a float op (refused at the call)
    rng = np.random.default_rng(int(op))
    acc = (rng.integers(0, 50, 6) + (1j if dtype.kind == "c" else 0)).astype(dtype)
    incoming = rng.integers(0, 50, 6).astype(dtype)
    if dtype.kind == "f":
        acc[0], incoming[1] = np.nan, -0.0
    expected = acc.copy()
    reduce_into(op, expected, incoming, higher)
    whole = acc.copy()
    combiner(op, whole, higher)(incoming.view(np.uint8), 0, incoming.nbytes)
    assert whole.tobytes() == expected.tobytes()
    chunked, out = acc.copy(), np.empty_like(acc)
    combine = combiner(op, chunked, higher, out)
    raw = incoming.view(np.uint8)
    cut = 2 * dtype.itemsize
    combine(raw[:cut], 0, cut)
    combine(raw[cut:], cut, incoming.nbytes)
    assert out.tobytes() == expected.tobytes()

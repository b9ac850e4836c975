"""Every numpy dtype × every accumulate-family call × op, on edge values, between two ranks (run
by tests/test_dtype_ops.py on the local transport and under mpiexec): rank 0 applies each
combination to rank 1's window inside a lock epoch; every rank writes, per combination, what it
saw (rank 1: the window after the call; rank 0: the fetched values), or the error it was refused
with.  The test compares with numpy."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import aiorma

DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "longdouble", "complex64", "complex128",
]
OPS = ["SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "REPLACE", "NO_OP"]
CALLS = ["accumulate", "get_accumulate", "fetch_and_op", "compare_and_swap"]


def edge_values(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(target's initial contents, origin's operand): negatives, limits, NaN and infinities."""
    if dtype.kind == "b":
        return np.array([True, False, True, False]), np.array([True, True, False, False])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        low = int(info.min) if dtype.kind == "i" else 0
        signed = dtype.kind == "i"
        target = np.array([3, low, int(info.max), 5, -5 if signed else 9, 0], dtype)
        origin = np.array([2, 1, -1 if signed else 1, int(info.max), -7 if signed else 6, low], dtype)
        return target, origin
    real = np.finfo(dtype.type(0).real.dtype)
    target = np.array([3, -5, np.nan, np.inf, real.max, -0.0, 1.5, real.tiny], dtype)
    origin = np.array([2, -7, 1.0, -np.inf, real.max, 0.0, np.nan, -real.tiny], dtype)
    if dtype.kind == "c":
        target = target + 1j * np.array([1, -2, 0, 3, 0, -1, 2, 0], dtype.type(0).real.dtype)
        origin = origin + 1j * np.array([-1, 4, 2, 0, 1, 0, -3, 5], dtype.type(0).real.dtype)
    return target.astype(dtype), origin.astype(dtype)


def combos() -> list[tuple[str, str, str]]:
    out = []
    for dtype in DTYPES:
        for call in CALLS:
            for op in (OPS if call != "compare_and_swap" else ["-"]):
                if call == "accumulate" and op == "NO_OP":
                    continue
                out.append((dtype, call, op))
    return out


def encode(array: np.ndarray) -> list[str]:
    raw = np.ascontiguousarray(np.atleast_1d(array)).view(np.uint8).reshape(array.size, -1)
    return [row.tobytes().hex() for row in raw]


async def run_one(comm: aiorma.Comm, dtype_name: str, call: str, op_name: str) -> dict[str, Any]:
    dtype = np.dtype(dtype_name)
    target_init, origin = edge_values(dtype)
    n = 1 if call in ("fetch_and_op", "compare_and_swap") else target_init.size
    win = await comm.win_allocate(n, dtype)
    if comm.rank == 1:
        win.memory[:] = target_init[:n]
    await comm.barrier()
    record: dict[str, Any] = {}
    if comm.rank == 0:
        result = np.zeros(n, dtype)
        try:
            await win.lock(1, aiorma.LOCK_EXCLUSIVE)
            try:
                op = getattr(aiorma, op_name) if op_name != "-" else None
                if call == "accumulate":
                    win.accumulate(origin[:n], 1, 0, op)
                elif call == "get_accumulate":
                    win.get_accumulate(origin[:n], result, 1, 0, op)
                elif call == "fetch_and_op":
                    win.fetch_and_op(origin[:1], result, 1, 0, op)
                else:
                    win.compare_and_swap(origin[:1], target_init[:1], result, 1, 0)
            finally:
                await win.unlock(1)
            record["fetched"] = encode(result)
        except aiorma.RmaUsageError as error:
            record["refused"] = f"{type(error).__name__}: {error}"
    await comm.barrier()
    if comm.rank == 1:
        record["window"] = encode(np.array(win.memory))
    await comm.barrier()
    await win.free()
    return record


async def main(comm: aiorma.Comm) -> list[dict[str, Any]]:
    out = []
    for dtype_name, call, op_name in combos():
        record = await run_one(comm, dtype_name, call, op_name)
        out.append({"dtype": dtype_name, "call": call, "op": op_name, **record})
    return out


if __name__ == "__main__":
    from tests.mpi_harness import write_rank_result

    async def mpi_main(comm: aiorma.Comm) -> None:
        write_rank_result(comm.rank, await main(comm))

    aiorma.run(mpi_main)
    sys.exit(0)

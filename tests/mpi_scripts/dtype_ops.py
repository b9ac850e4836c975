"""Every numpy kind × every RMA call × op, on edge values, between two ranks (run by
tests/test_dtype_ops.py on the local transport and under mpiexec): rank 0 applies each
combination to rank 1's window inside a lock epoch; every rank writes, per combination, what it
saw (rank 1: the window when created and after the call; rank 0: the fetched values), or the
error it was refused with.  The test compares with numpy.

Kinds: bool, signed and unsigned integers, floats, complex, timedelta64, datetime64, str (U),
bytes (S), void (V8), a structured dtype and a non-native byte order move by put, get and
REPLACE / NO_OP; object windows must be refused at creation on every transport."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import aiorma

ARITHMETIC_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "longdouble", "complex64", "complex128",
]  # fmt: skip
# Names a JSON record can carry, for the dtypes numpy spells differently.
STRUCT = "struct{a:i4,b:f8}"
OTHER_DTYPES = ["timedelta64[s]", "datetime64[s]", "U4", "S4", "V8", STRUCT, ">i4"]
DTYPES = ARITHMETIC_DTYPES + OTHER_DTYPES
OPS = ["SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "REPLACE", "NO_OP"]
CALLS = ["put", "get", "accumulate", "get_accumulate", "fetch_and_op", "compare_and_swap"]
CREATIONS = ["allocate", "create"]  # win_allocate, win_create


def as_dtype(name: str) -> np.dtype:
    if name == STRUCT:
        return np.dtype([("a", "<i4"), ("b", "<f8")])  # packed: 12 bytes, mixed basic types
    return np.dtype(name)


def edge_values(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(target's initial contents, origin's operand): negatives, limits, NaN and infinities; for
    the byte kinds, values using every byte of the element (UCS-4 code points above 0xFF, bytes
    0x00 and 0xFF inside an element)."""
    if dtype.kind == "b":
        return np.array([True, False, True, False]), np.array([True, True, False, False])
    if dtype.kind in "iu" and dtype.isnative:
        info = np.iinfo(dtype)
        low = int(info.min) if dtype.kind == "i" else 0
        signed = dtype.kind == "i"
        target = np.array([3, low, int(info.max), 5, -5 if signed else 9, 0], dtype)
        origin = np.array([2, 1, -1 if signed else 1, int(info.max), -7 if signed else 6, low], dtype)
        return target, origin
    if dtype.kind in "iu":  # another byte order: the same values, bytes swapped in memory
        return np.array([1, -2, 2**31 - 1, -(2**31)], dtype), np.array([-3, 0x01020304, 7, 0], dtype)
    if dtype.kind in "mM":
        unit = np.datetime_data(dtype)[0]
        nat, big = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        target = np.array([3, -5, nat, big, 1_700_000_000, 0], np.int64).view(dtype)
        origin = np.array([2, 7, 1, 1, -1_700_000_000, nat], np.int64).view(dtype)
        assert unit == "s"
        return target, origin
    if dtype.kind == "U":
        return (np.array(["ab", "", "\u03c9xyz", "\U0001f600bc"], dtype),
                np.array(["wxyz", "\u20ac", "", "a\x00b"], dtype))  # fmt: skip
    if dtype.kind == "S":
        return (np.array([b"ab", b"", b"\xff\x00\x01\x02", b"abcd"], dtype),
                np.array([b"wxyz", b"\x80", b"", b"\x00\x00\x00\xfe"], dtype))  # fmt: skip
    if dtype.kind == "V" and dtype.names is None:
        raw = np.arange(64, dtype=np.uint8) * 37 + 1
        return raw[:32].view(dtype), raw[32:].view(dtype)
    if dtype.kind == "V":
        target = np.array([(1, 1.5), (-2, np.nan), (2**31 - 1, -0.0), (0, np.inf)], dtype)
        origin = np.array([(-7, -np.inf), (5, 2.25), (-(2**31), 1e300), (3, -1.0)], dtype)
        return target, origin
    real = np.finfo(dtype.type(0).real.dtype)
    target = np.array([3, -5, np.nan, np.inf, real.max, -0.0, 1.5, real.tiny], dtype)
    origin = np.array([2, -7, 1.0, -np.inf, real.max, 0.0, np.nan, -real.tiny], dtype)
    if dtype.kind == "c":
        target = target + 1j * np.array([1, -2, 0, 3, 0, -1, 2, 0], dtype.type(0).real.dtype)
        origin = origin + 1j * np.array([-1, 4, 2, 0, 1, 0, -3, 5], dtype.type(0).real.dtype)
    return target.astype(dtype), origin.astype(dtype)


def combos() -> list[tuple[str, str, str, str]]:
    """(dtype, call, op, creation): put and get into both kinds of window, the accumulate family
    and compare_and_swap into allocated ones."""
    out = []
    for dtype in DTYPES:
        for call in CALLS:
            ops = OPS if call in ("accumulate", "get_accumulate", "fetch_and_op") else ["-"]
            for op in ops:
                if call == "accumulate" and op == "NO_OP":
                    continue
                for creation in CREATIONS if call in ("put", "get") else ["allocate"]:
                    out.append((dtype, call, op, creation))
    return out


def encode(array: np.ndarray) -> list[str]:
    """Each element's bytes, in hex."""
    raw = np.ascontiguousarray(np.atleast_1d(array)).view(np.uint8).reshape(array.size, -1)
    return [row.tobytes().hex() for row in raw]


def refusal(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


async def run_one(
    comm: aiorma.Comm, dtype_name: str, call: str, op_name: str, creation: str
) -> dict[str, Any]:
    dtype = as_dtype(dtype_name)
    target_init, origin = edge_values(dtype)
    n = 1 if call in ("fetch_and_op", "compare_and_swap") else target_init.size
    record: dict[str, Any] = {}
    try:
        if creation == "allocate":
            win = await comm.win_allocate(n, dtype)
        else:
            # Not zeros in the caller's array: a window over it must expose exactly its bytes.
            buf = np.full(n * dtype.itemsize, 0xA5, np.uint8).view(dtype)
            win = await comm.win_create(buf)
    except Exception as error:  # every fixed-size dtype must be accepted: the test reports it
        record["not_created"] = refusal(error)
        await comm.barrier()
        return record
    if comm.rank == 1:
        record["fresh"] = encode(np.array(win.memory))
        win.memory[:] = target_init[:n]
    await comm.barrier()
    if comm.rank == 0:
        result = np.zeros(n, dtype)
        try:
            await win.lock(1, aiorma.LOCK_EXCLUSIVE)
            try:
                op = getattr(aiorma, op_name) if op_name != "-" else None
                if call == "put":
                    win.put(origin[:n], 1, 0)
                elif call == "get":
                    win.get(result, 1, 0)
                elif call == "accumulate":
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
        except Exception as error:  # the test checks that it is a typed aiorma refusal
            record["refused"] = refusal(error)
    await comm.barrier()
    if comm.rank == 1:
        record["window"] = encode(np.array(win.memory))
    await comm.barrier()
    await win.free()
    return record


async def object_windows(comm: aiorma.Comm) -> list[dict[str, Any]]:
    """Object windows (Python references, meaningless in another process) are refused at creation,
    on every rank alike; a refused creation leaves the Comm usable (the barrier after it)."""
    out = []
    for creation in CREATIONS:
        record: dict[str, Any] = {"dtype": "object", "call": creation, "op": "-", "creation": creation}
        try:
            if creation == "allocate":
                win = await comm.win_allocate(4, object)
            else:
                win = await comm.win_create(np.array(["a", 1, None, 2.5], object))
            await win.free()
            record["created"] = True
        except Exception as error:
            record["refused"] = refusal(error)
        await comm.barrier()
        out.append(record)
    return out


async def object_buffers(comm: aiorma.Comm) -> list[dict[str, Any]]:
    """Object arrays as the origin or result of calls on an int64 window are refused at the call."""
    win = await comm.win_allocate(2, np.int64)
    out = []
    if comm.rank == 0:
        await win.lock(1)
        calls = {
            "put": lambda: win.put(np.array([1, 2], object), 1),
            "get": lambda: win.get(np.zeros(2, object), 1),
            "accumulate": lambda: win.accumulate(np.array([1, 2], object), 1, 0, aiorma.SUM),
            "get_accumulate": lambda: win.get_accumulate(
                np.array([1, 2], np.int64), np.zeros(2, object), 1, 0, aiorma.SUM
            ),
        }
        for name, call in calls.items():
            record: dict[str, Any] = {"dtype": "object-buffer", "call": name, "op": "-"}
            record["creation"] = "allocate"
            try:
                call()
                record["accepted"] = True
            except Exception as error:
                record["refused"] = refusal(error)
            out.append(record)
        await win.unlock(1)
    await comm.barrier()
    if comm.rank == 1:
        out.append({"dtype": "object-buffer", "call": "window", "window": encode(np.array(win.memory))})
    await win.free()
    return out


async def main(comm: aiorma.Comm) -> list[dict[str, Any]]:
    out = []
    for dtype_name, call, op_name, creation in combos():
        record = await run_one(comm, dtype_name, call, op_name, creation)
        out.append({"dtype": dtype_name, "call": call, "op": op_name, "creation": creation, **record})
    out.extend(await object_windows(comm))
    out.extend(await object_buffers(comm))
    return out


if __name__ == "__main__":
    from tests.mpi_harness import write_rank_result

    async def mpi_main(comm: aiorma.Comm) -> None:
        write_rank_result(comm.rank, await main(comm))

    aiorma.run(mpi_main)
    sys.exit(0)

"""Differential test: every numpy kind × put / get / accumulate / get_accumulate / fetch_and_op /
compare_and_swap × op, on edge values (negatives, NaN, infinities, the type's limits, every byte
of an element used), on the local transport and under mpiexec (one node, two emulated nodes),
each compared with numpy's result.  Data movement (put, get, REPLACE, NO_OP) must move every
byte of any fixed-size dtype; arithmetic follows the one table of docs/datatypes.md (written
out again below, independently of aiorma's code), and a refusal is an RmaTypeError at the call,
the same on every transport, leaving the window unchanged; object windows are refused at
creation everywhere.  Nothing may be silently reinterpreted (MPICH applied float16 arithmetic to
the bits: SUM of [3, 5] and [2, 7] gave [-3.05e-05, -0.000244]; it moved a quarter of each 'U4'
element, and summed datetime64 values as raw integers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable, mpi_library_name

from .mpi_harness import run_mpi_json
from .mpi_scripts import dtype_ops

SCRIPT = Path(__file__).parent / "mpi_scripts" / "dtype_ops.py"

_ALL_ARITHMETIC = {"SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR"}


def allowed_arithmetic(dtype: np.dtype) -> set[str]:
    """The arithmetic ops docs/datatypes.md promises for ``dtype`` (REPLACE and NO_OP: all)."""
    if not dtype.isnative:
        return set()
    if dtype.kind == "b":  # MPI defines only the logical ops on logical types (Open MPI refuses
        return {"LAND", "LOR", "LXOR"}  # the rest; MPICH added True + True as the byte 2)
    if dtype.kind in "iu":
        return _ALL_ARITHMETIC
    if dtype.kind == "f":
        return set() if dtype == np.float16 else {"SUM", "PROD", "MIN", "MAX"}
    if dtype.kind == "c":
        return {"SUM", "PROD"}
    if dtype.kind == "m":  # on the int64 count of units, NaT being the int64 minimum
        return {"SUM", "MIN", "MAX"}
    if dtype.kind == "M":  # the earliest or latest instant; a sum of instants means nothing
        return {"MIN", "MAX"}
    return set()  # str, bytes, void, structured


def allowed(dtype: np.dtype, call: str, op: str) -> bool:
    if call in ("put", "get") or op in ("REPLACE", "NO_OP"):
        return True
    if call == "compare_and_swap":
        return dtype.kind in "biu" and dtype.isnative
    return op in allowed_arithmetic(dtype)


def reference(op: str, target: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """numpy's result of ``target op origin``, written here without aiorma's code.  MIN and MAX
    follow MPI's C definition (docs/datatypes.md): the target stays only if strictly smaller
    (larger), so NaN on either side, and -0.0 against 0.0, give the origin's value.  timedelta64
    and datetime64 compute on their int64 counts (wrapping, NaT an ordinary int64)."""
    if target.dtype.kind in "mM":
        return reference(op, target.view(np.int64), origin.view(np.int64)).view(target.dtype)
    with np.errstate(all="ignore"):
        result = {
            "SUM": lambda: target + origin,
            "PROD": lambda: target * origin,
            "MIN": lambda: np.where(target < origin, target, origin),
            "MAX": lambda: np.where(target > origin, target, origin),
            "BAND": lambda: target & origin,
            "BOR": lambda: target | origin,
            "BXOR": lambda: target ^ origin,
            "LAND": lambda: np.logical_and(target, origin),
            "LOR": lambda: np.logical_or(target, origin),
            "LXOR": lambda: np.logical_xor(target, origin),
            "REPLACE": lambda: origin,
            "NO_OP": lambda: target,
        }[op]()
    return np.asarray(result).astype(target.dtype)


def decode(hexes: list[str], dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(bytes.fromhex("".join(hexes)), dtype)


def same(actual: np.ndarray, expected: np.ndarray) -> bool:
    """Floats and complex by value (NaN equal to NaN; longdouble's padding bytes are not data);
    every other kind byte for byte."""
    if actual.dtype.kind in "fc":
        return bool(np.array_equal(actual, expected, equal_nan=True))
    return actual.tobytes() == np.ascontiguousarray(expected).tobytes()


Records = list[list[dict[str, Any]]]  # per rank, per combination


def split(records: Records) -> tuple[Records, Records]:
    """(the per-combination records of both ranks, the object-dtype records that follow them)."""
    n = len(dtype_ops.combos())
    return [rank[:n] for rank in records], [rank[n:] for rank in records]


def mismatches(records: list[list[dict[str, Any]]], float_min_max_either_way: bool = False) -> list[str]:
    """What each transport got wrong, one line per combination (empty: all agree with numpy and
    with the table).  ``float_min_max_either_way``: a float MIN or MAX may also keep the origin
    only if strictly smaller (larger) — Open MPI's choice where NaN or signed zeros meet, which
    MPI leaves open (docs/datatypes.md)."""
    combos, objects = split(records)
    problems = []
    for mine, theirs in zip(*combos, strict=True):
        dtype = dtype_ops.as_dtype(mine["dtype"])
        call, op_name, creation = mine["call"], mine["op"], mine["creation"]
        label = f"{mine['dtype']} {call} {op_name} ({creation})"
        if "not_created" in mine or "not_created" in theirs:
            why = mine.get("not_created") or theirs["not_created"]
            problems.append(f"{label}: window not created ({why})")
            continue
        target, origin = dtype_ops.edge_values(dtype)
        n = 1 if call in ("fetch_and_op", "compare_and_swap") else target.size
        target, origin = target[:n], origin[:n]
        fresh = decode(theirs["fresh"], np.dtype(np.uint8))
        fill = 0 if creation == "allocate" else 0xA5
        if fresh.size != n * dtype.itemsize or np.any(fresh != fill):
            problems.append(f"{label}: the new window held {theirs['fresh']}, not bytes {fill:#x}")
        window = decode(theirs["window"], dtype)
        if "refused" in mine:
            if allowed(dtype, call, op_name):
                problems.append(f"{label}: refused ({mine['refused']}), docs/datatypes.md allows it")
            elif not mine["refused"].startswith("RmaTypeError: "):
                problems.append(f"{label}: refused with {mine['refused']}, not an RmaTypeError")
            if not same(window, target):
                problems.append(f"{label}: refused ({mine['refused']}) but the window changed")
            continue
        if not allowed(dtype, call, op_name):  # (numpy may have no result to compare with)
            problems.append(f"{label}: accepted, docs/datatypes.md refuses it")
            continue
        if call == "put":
            expected_window, expected_fetch = origin, None
        elif call == "get":
            expected_window, expected_fetch = target, target
        elif call == "compare_and_swap":
            expected_window, expected_fetch = origin, target
        else:
            expected_window = reference(op_name, target, origin)
            expected_fetch = None if call == "accumulate" else target
        if not same(window, expected_window) and not (
            float_min_max_either_way
            and op_name in ("MIN", "MAX")
            and dtype.kind == "f"
            and same(window, reference(op_name, origin, target))
        ):
            problems.append(f"{label}: window {window.tolist()} != numpy's {expected_window.tolist()}")
        fetched = decode(mine["fetched"], dtype)
        if expected_fetch is not None and not same(fetched, expected_fetch):
            problems.append(f"{label}: fetched {fetched.tolist()} != {expected_fetch.tolist()}")
    problems += object_mismatches(objects)
    return problems


def object_mismatches(objects: list[list[dict[str, Any]]]) -> list[str]:
    """Object windows refused at creation on both ranks, object buffers refused at the call (the
    window untouched); always with RmaTypeError."""
    problems = []
    for rank, records in enumerate(objects):
        for record in records:
            label = f"rank {rank}: {record['dtype']} {record['call']}"
            if record["call"] == "window":
                if any(int(h, 16) for h in record["window"]):
                    problems.append(f"{label}: refused object buffers changed the window")
            elif not record.get("refused", "").startswith("RmaTypeError: "):
                got = record.get("refused", "accepted")
                problems.append(f"{label}: {got}, not refused with RmaTypeError")
    return problems


def refusals(records: list[list[dict[str, Any]]]) -> dict[str, str]:
    return {
        f"{r['dtype']} {r['call']} {r['op']} {r['creation']}": r["refused"]
        for rank in records
        for r in rank
        if "refused" in r
    }


@pytest.fixture(scope="module")
def local_records() -> list[list[dict[str, Any]]]:
    return aiorma.run(dtype_ops.main, nprocs=2)


@pytest.mark.timeout(300)
def test_local_transport_agrees_with_numpy(local_records: list[list[dict[str, Any]]]) -> None:
    assert mismatches(local_records) == []


def test_float16_arithmetic_is_refused_data_movement_is_not(
    local_records: list[list[dict[str, Any]]],
) -> None:
    refused = refusals(local_records)
    for call in ("accumulate", "get_accumulate", "fetch_and_op"):
        assert "float16" in refused[f"float16 {call} SUM allocate"]
        assert f"float16 {call} REPLACE allocate" not in refused
    assert "float16 get_accumulate NO_OP allocate" not in refused


def test_every_kind_is_covered() -> None:
    """The differential run covers every numpy kind (bool, signed, unsigned, float, complex,
    timedelta, datetime, str, bytes, void, structured), a non-native byte order and object."""
    dtypes = [dtype_ops.as_dtype(name) for name in dtype_ops.DTYPES]
    assert {d.kind for d in dtypes} == set("biufcmMUSV")
    assert any(d.names for d in dtypes) and any(d.kind == "V" and not d.names for d in dtypes)
    assert any(not d.isnative for d in dtypes)


def test_datetime64_sum_is_a_typed_refusal(local_records: list[list[dict[str, Any]]]) -> None:
    """numpy's UFuncTypeError (datetime + datetime) must not escape: an RmaTypeError at the call."""
    refused = refusals(local_records)
    for call in ("accumulate", "get_accumulate", "fetch_and_op"):
        assert refused[f"datetime64[s] {call} SUM allocate"].startswith("RmaTypeError: ")


def mpi_library_name_is_open_mpi() -> bool:
    return (mpi_library_name() or "").startswith("Open MPI")


@pytest.mark.mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize("emulate_nodes", [0, 2], ids=["one_node", "two_nodes"])
def test_mpi_transport_agrees_with_numpy_and_local(
    emulate_nodes: int, local_records: list[list[dict[str, Any]]]
) -> None:
    if emulate_nodes and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    records = run_mpi_json(SCRIPT, 2, timeout=350, emulate_nodes=emulate_nodes)
    assert mismatches(records, float_min_max_either_way=mpi_library_name_is_open_mpi()) == []
    assert refusals(records) == refusals(local_records)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "dtype",
    [np.dtype(object), np.dtype([("a", "i4"), ("o", object)]), np.dtype("U"), np.dtype(("i4", (3,)))],
    ids=["object", "struct_with_object", "size_0", "subarray"],
)
def test_window_dtypes_without_fixed_bytes_are_refused_at_creation(dtype: np.dtype) -> None:
    """Refused by win_allocate on every rank before anything collective (the barrier after it
    completes); win_create, which takes an array, sees only the object ones (numpy arrays have no
    size-0 or subarray dtype)."""

    async def main(comm: aiorma.Comm) -> list[str]:
        refused = []
        with pytest.raises(aiorma.RmaTypeError) as allocate:
            await comm.win_allocate(3, dtype)
        refused.append(str(allocate.value))
        if dtype.hasobject:
            with pytest.raises(aiorma.RmaTypeError) as create:
                await comm.win_create(np.zeros(3, dtype))
            refused.append(str(create.value))
        await comm.barrier()
        return refused

    first, second = aiorma.run(main, nprocs=2)
    assert first == second and all(str(dtype) in why for why in first)

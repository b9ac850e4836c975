"""Differential test: every numpy dtype × accumulate / get_accumulate / fetch_and_op /
compare_and_swap × op, on edge values (negatives, NaN, infinities, the type's limits), on the
local transport and under mpiexec (one node, two emulated nodes), each compared element for
element with numpy's result.  A combination the library refuses must be refused the same way on
every transport and leave the window unchanged; nothing may be silently reinterpreted (MPICH
applied float16 arithmetic to the bits: SUM of [3, 5] and [2, 7] gave [-3.05e-05, -0.000244])."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable

from .mpi_harness import run_mpi_json
from .mpi_scripts import dtype_ops

SCRIPT = Path(__file__).parent / "mpi_scripts" / "dtype_ops.py"


def reference(op: str, target: np.ndarray, origin: np.ndarray) -> np.ndarray:
    """numpy's result of ``target op origin``, written here without aiorma's code.  MIN and MAX
    follow MPI's C definition (docs/datatypes.md): the target stays only if strictly smaller
    (larger), so NaN on either side, and -0.0 against 0.0, give the origin's value."""
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
    if actual.dtype.kind in "fc":
        return bool(np.array_equal(actual, expected, equal_nan=True))
    return bool(np.array_equal(actual, expected))


def mismatches(records: list[list[dict[str, Any]]]) -> list[str]:
    """What each transport got wrong, one line per combination (empty: all agree with numpy)."""
    origin_rank, target_rank = records[0], records[1]
    problems = []
    for mine, theirs in zip(origin_rank, target_rank, strict=True):
        dtype = np.dtype(mine["dtype"])
        call, op_name = mine["call"], mine["op"]
        target, origin = dtype_ops.edge_values(dtype)
        n = 1 if call in ("fetch_and_op", "compare_and_swap") else target.size
        target, origin = target[:n], origin[:n]
        window = decode(theirs["window"], dtype)
        label = f"{dtype} {call} {op_name}"
        if "refused" in mine:
            if not same(window, target):
                problems.append(f"{label}: refused ({mine['refused']}) but the window changed")
            continue
        if call == "compare_and_swap":
            expected_window, expected_fetch = origin, target
        else:
            expected_window = reference(op_name, target, origin)
            expected_fetch = target
        if not same(window, expected_window):
            problems.append(f"{label}: window {window.tolist()} != numpy's {expected_window.tolist()}")
        fetched = decode(mine["fetched"], dtype)
        if call != "accumulate" and not same(fetched, expected_fetch):
            problems.append(f"{label}: fetched {fetched.tolist()} != {expected_fetch.tolist()}")
    return problems


def refusals(records: list[list[dict[str, Any]]]) -> dict[str, str]:
    return {f"{r['dtype']} {r['call']} {r['op']}": r["refused"] for r in records[0] if "refused" in r}


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
        assert "float16" in refused[f"float16 {call} SUM"]
        assert f"float16 {call} REPLACE" not in refused
    assert "float16 get_accumulate NO_OP" not in refused


@pytest.mark.mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize("emulate_nodes", [0, 2], ids=["one_node", "two_nodes"])
def test_mpi_transport_agrees_with_numpy_and_local(
    emulate_nodes: int, local_records: list[list[dict[str, Any]]]
) -> None:
    if emulate_nodes and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    records = run_mpi_json(SCRIPT, 2, timeout=350, emulate_nodes=emulate_nodes)
    assert mismatches(records) == []
    assert refusals(records) == refusals(local_records)

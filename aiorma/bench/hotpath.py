"""The cost of the hot path: one ``win.put`` and one ``await win.flush(t)`` inside a long lock_all
epoch, against the same calls in raw mpi4py, in the same run.

    python -m aiorma.bench hotpath [--iters N] [--repeats R] [--json PATH]

Launches itself on 2 ranks under the mpich wheel's ``mpiexec``; rank 0 calls, rank 1 is the
target (an allocated window: on one node MPICH's RMA into it is passive).  Reports the median
time per call over ``--repeats`` runs of ``--iters`` calls each, and aiorma's cost above mpi4py's:
that difference is the Python price of aiorma's layers (validation, engine, driver, Request).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._cli import command_parser
from ._launch import ensure_mpi_ranks


def _per_call(fn: Any, iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def measure_mpi(iters: int) -> dict[str, float]:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    win = MPI.Win.Allocate(64, 8, comm=comm)
    win.Lock_all()
    origin = np.ones(1, np.int64)
    times: dict[str, float] = {}
    if comm.Get_rank() == 0:
        times["put"] = _per_call(lambda: win.Put(origin, 1), iters)
        times["rput"] = _per_call(lambda: win.Rput(origin, 1).Wait(), iters)
        times["flush"] = _per_call(lambda: win.Flush(1), iters)

        def put_flush() -> None:
            win.Put(origin, 1)
            win.Flush(1)

        times["put+flush"] = _per_call(put_flush, iters)
    win.Unlock_all()
    comm.Barrier()
    win.Free()
    return times


async def measure_aiorma(comm: Any, iters: int) -> dict[str, float]:
    win = await comm.win_allocate(8, np.int64)
    await win.lock_all()
    origin = np.ones(1, np.int64)
    times: dict[str, float] = {}
    if comm.rank == 0:
        times["put"] = _per_call(lambda: win.put(origin, 1), iters)
        await win.flush(1)
        start = time.perf_counter()
        for _ in range(iters):
            await win.flush(1)
        times["flush"] = (time.perf_counter() - start) / iters
        start = time.perf_counter()
        for _ in range(iters):
            win.put(origin, 1)
            await win.flush(1)
        times["put+flush"] = (time.perf_counter() - start) / iters
    await win.unlock_all()
    await comm.barrier()
    await win.free()
    return times


async def run(comm: Any, options: argparse.Namespace) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    for i in range(options.repeats):
        for name, value in measure_mpi(options.iters).items():
            samples.setdefault(f"mpi4py {name}", []).append(value)
        for name, value in (await measure_aiorma(comm, options.iters)).items():
            samples.setdefault(f"aiorma {name}", []).append(value)
        if comm.rank == 0:
            print(f"[hotpath] run {i + 1}/{options.repeats} done", file=sys.stderr, flush=True)
    return {name: 1e6 * statistics.median(values) for name, values in samples.items()}


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench hotpath", __doc__)
    parser.add_argument("--iters", type=int, default=5000, help="calls per run (default %(default)s)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs; the median is reported (default %(default)s)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the medians (µs per call) here")
    options = parser.parse_args(argv)
    if ensure_mpi_ranks(2, "aiorma.bench", ["hotpath", *argv]):
        return 0

    import aiorma

    result = aiorma.run(run, options)
    if os.environ.get("PMI_RANK", "0") != "0":
        return 0
    print(f"{'call':24} {'µs per call':>12}")
    for name in sorted(result):
        print(f"{name:24} {result[name]:>12.2f}")
    for call in ("put", "flush", "put+flush"):
        ours, theirs = result[f"aiorma {call}"], result[f"mpi4py {call}"]
        print(f"aiorma's Python cost of {call}: {ours - theirs:.2f} µs ({ours / theirs:.1f}x)")
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(result, indent=1))
    return 0

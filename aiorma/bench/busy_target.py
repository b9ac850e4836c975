"""Locks into a target that computes without awaiting, across nodes: what the progress thread buys.

    python -m aiorma.bench busy_target [--emulate-nodes 2] [--seconds S] [--json PATH]

Two ranks, by default on two emulated nodes (needs root; ``--emulate-nodes 0`` for one node).
Rank 0 computes in pure Python for ``--seconds`` without awaiting or calling MPI; rank 1 runs
exclusive lock / 8-byte accumulate / unlock epochs into it meanwhile.  Across nodes the lock's
atomics need rank 0's MPI progress, which aiorma's progress thread provides while its loop
computes (docs/architecture.md, *Locks across nodes*).  Measured in the same run, each in its own
mpiexec job: raw mpi4py (``Lock``/``Accumulate``/``Unlock``: MPICH's own passive target), aiorma
with the progress thread, and aiorma without it (``AIORMA_PROGRESS_THREAD=0``).  Reported per
mode: epochs completed while the target computed, the median and longest epoch in milliseconds
(ms), and the target's compute rate in millions of loop iterations per second, alone (no
origin traffic) and under the traffic — the thread's cost to a computing rank.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._cli import command_parser
from .._core.settings import PROGRESS_THREAD_ENV
from ._launch import add_emulate_nodes_option, ensure_mpi_ranks, under_mpiexec

MODES = ("mpi4py", "aiorma", "aiorma, no progress thread")
_THREAD_ENV = PROGRESS_THREAD_ENV  # set in the launched ranks' environment: their connections read it


def compute(seconds: float, stop: Any = None) -> int:
    """Pure-Python work for ``seconds`` (or until ``stop()``): the loop iterations done."""
    started = time.perf_counter()
    n = 0
    while time.perf_counter() - started < seconds:
        n += 1
        if stop is not None and n % 1000 == 0 and stop():
            break
    return n


def _summary(epochs: list[tuple[float, float]], seconds: float, alone: int, loaded: int) -> dict[str, Any]:
    """Epochs are (start, duration) relative to the target's start; those that began while it
    computed count."""
    during = [d for s, d in epochs if s < seconds]
    return {
        "epochs_while_computing": len(during),
        "median_epoch_ms": 1e3 * statistics.median(during) if during else None,
        "longest_epoch_ms": 1e3 * max(during) if during else None,
        "target_miter_per_s_alone": alone / seconds / 1e6,
        "target_miter_per_s_loaded": loaded / seconds / 1e6,
    }


def run_mpi4py(seconds: float) -> dict[str, Any] | None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    win = MPI.Win.Allocate(8, 8, comm=comm)
    one = np.ones(1, np.int64)
    comm.Barrier()
    alone = compute(seconds) if comm.rank == 0 else 0
    comm.Barrier()
    epochs: list[tuple[float, float]] = []
    start = comm.bcast(time.time())
    if comm.rank == 0:
        loaded = compute(seconds)
    else:
        while time.time() - start < seconds:
            begin = time.time()
            win.Lock(0, MPI.LOCK_EXCLUSIVE)
            win.Accumulate(one, 0, 0, MPI.SUM)
            win.Unlock(0)
            epochs.append((begin - start, time.time() - begin))
    comm.Barrier()
    result = comm.gather((alone, loaded if comm.rank == 0 else 0, epochs))
    win.Free()
    if comm.rank != 0 or result is None:
        return None
    return _summary(result[1][2], seconds, result[0][0], result[0][1])


async def run_aiorma(comm: Any, seconds: float) -> dict[str, Any] | None:
    import aiorma

    win = await comm.win_allocate(1, np.int64)
    one = np.ones(1, np.int64)
    times = np.zeros(2, np.float64)
    await comm.barrier()
    alone = compute(seconds) if comm.rank == 0 else 0
    await comm.barrier()
    times[0] = time.time()
    await comm.bcast(times[:1], 0)
    start = float(times[0])
    epochs: list[tuple[float, float]] = []
    loaded = 0
    if comm.rank == 0:
        loaded = compute(seconds)  # no await: only the progress thread can serve the origin
    else:
        while time.time() - start < seconds:
            begin = time.time()
            async with win.lock(0, aiorma.LOCK_EXCLUSIVE):
                win.accumulate(one, 0, 0, aiorma.SUM)
            epochs.append((begin - start, time.time() - begin))
    await comm.barrier()
    out = np.zeros(2 * comm.size, np.float64)
    mine = np.array([alone, loaded], np.float64)
    await comm.allgather(mine, out)
    flat = np.array([x for e in epochs for x in e] or [0.0], np.float64)
    count = np.zeros(1, np.int64)
    count[0] = len(epochs)
    await comm.bcast(count, 1)
    received = np.zeros(max(1, 2 * int(count[0])), np.float64)
    if comm.rank == 1:
        received[: flat.size] = flat
    await comm.bcast(received, 1)
    await win.free()
    if comm.rank != 0:
        return None
    pairs = [(float(received[2 * i]), float(received[2 * i + 1])) for i in range(int(count[0]))]
    return _summary(pairs, seconds, int(out[0]), int(out[1]))


def worker(seconds: float, mode: str, out: Path) -> None:
    if mode == "mpi4py":
        result = run_mpi4py(seconds)
    else:
        import aiorma

        async def main(comm: Any) -> dict[str, Any] | None:
            return await run_aiorma(comm, seconds)

        result = aiorma.run(main)
    if result is not None:
        out.write_text(json.dumps(result))


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench busy_target", __doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="target's computation (default 1.0)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results here as JSON")
    parser.add_argument("--worker-mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    add_emulate_nodes_option(parser)
    parser.set_defaults(emulate_nodes=2)
    options = parser.parse_args(argv)
    if options.seconds <= 0:
        parser.error("--seconds must be positive")
    if under_mpiexec():
        worker(options.seconds, options.worker_mode, options.worker_out)
        return 0
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            out = Path(tmp) / "result.json"
            saved = os.environ.get(_THREAD_ENV)
            os.environ[_THREAD_ENV] = "0" if "no progress thread" in mode else "1"
            try:
                args = [*argv, "--worker-mode", mode, "--worker-out", str(out)]
                ensure_mpi_ranks(2, "aiorma.bench", ["busy_target", *args], options.emulate_nodes)
            finally:
                if saved is None:
                    del os.environ[_THREAD_ENV]
                else:
                    os.environ[_THREAD_ENV] = saved
            results[mode] = json.loads(out.read_text())
    where = f"{options.emulate_nodes} emulated nodes" if options.emulate_nodes >= 2 else "one node"
    print(f"busy target, {where}, target computing {options.seconds:g} s in pure Python")
    print(
        f"{'mode':28} {'epochs':>7} {'median ms':>10} {'longest ms':>11} "
        f"{'Mit/s alone':>12} {'Mit/s loaded':>13}"
    )
    for mode, r in results.items():
        median = "-" if r["median_epoch_ms"] is None else f"{r['median_epoch_ms']:.2f}"
        longest = "-" if r["longest_epoch_ms"] is None else f"{r['longest_epoch_ms']:.1f}"
        print(
            f"{mode:28} {r['epochs_while_computing']:>7} {median:>10} {longest:>11} "
            f"{r['target_miter_per_s_alone']:>12.2f} {r['target_miter_per_s_loaded']:>13.2f}"
        )
    if options.json:
        document = {
            "benchmark": "busy_target",
            "command": shlex.join(["python", "-m", "aiorma.bench", "busy_target", *argv]),
            "date": time.strftime("%Y-%m-%d"),
            "emulate_nodes": options.emulate_nodes,
            "seconds": options.seconds,
            "results": results,
        }
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

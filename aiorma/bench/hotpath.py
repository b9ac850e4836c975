"""The cost of the hot path: the common epochs at 8 B, back to back, against the same calls in raw
mpi4py, in the same processes and interleaved round by round.

    python -m aiorma.bench hotpath [--iters N] [--repeats R] [--ranks P] [--json PATH]
                                   [--plot DIR [--compare PATH]] [--emulate-nodes K]
                                   [--backend asyncio|trio]

Launches itself on ``--ranks`` ranks (2 by default) under the mpich wheel's ``mpiexec``.  Rank 0
is the origin, rank 1 the target, further ranks only take part in fences (allocated windows: on
one node MPICH's RMA into them is passive).  Each round times, first with mpi4py's blocking calls
and then with aiorma awaiting each call (the blocking form), ``--iters`` back-to-back repetitions
of every case:

* ``lock/put/unlock``: an exclusive lock, one 8-byte put, unlock;
* ``lock_all put+flush``: one put and a flush inside a long lock_all epoch;
* ``fence/put/fence``: fence(NOPRECEDE), one put, fence(NOSUCCEED), on every rank;
* ``pscw``: start/put/complete at the origin against post/wait at the target;
* ``put``, ``flush``: the single calls inside lock_all (aiorma's Python cost per call).

It reports the median over ``--repeats`` rounds of the time per repetition in microseconds (µs) and
the ratio aiorma / mpi4py: the Python price of aiorma's layers (validation, engine, driver, Request)
for each case. ``AIORMA_INLINE=0`` in the environment turns the inline paths off (inline waiting,
the transport's off-node fast paths), to measure what they buy. ``--plot DIR`` draws the ratios into
``DIR/hotpath_ratio.png``, beside those of an earlier ``--json`` result given with ``--compare``
(e.g. the same run with the inline paths off):

    AIORMA_INLINE=0 python -m aiorma.bench hotpath --json off.json
    python -m aiorma.bench hotpath --json on.json --plot docs/img --compare off.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import _native
from .._cli import command_parser, plot_directory
from .._core.settings import Settings
from ._launch import add_emulate_nodes_option, ensure_mpi_ranks, launched_rank, mpi_library_name

CASES = ("lock/put/unlock", "lock_all put+flush", "fence/put/fence", "pscw", "put", "flush")


def _timed(fn: Callable[[], None], iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


async def _timed_async(fn: Callable[[], Any], iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        await fn()
    return (time.perf_counter() - start) / iters


def measure_mpi(iters: int) -> dict[str, float]:
    """One round of every case with raw mpi4py; times on rank 0 (others: empty)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    win = MPI.Win.Allocate(64, 8, comm=comm)
    origin = np.ones(1, np.int64)
    times: dict[str, float] = {}
    group = win.Get_group()
    peer = group.Incl([1 - rank] if rank < 2 else [])

    comm.Barrier()
    if rank == 0:

        def lock_put_unlock() -> None:
            win.Lock(1, MPI.LOCK_EXCLUSIVE)
            win.Put(origin, 1)
            win.Unlock(1)

        times["lock/put/unlock"] = _timed(lock_put_unlock, iters)
    comm.Barrier()

    def fence_put_fence() -> None:
        win.Fence(MPI.MODE_NOPRECEDE)
        if rank == 0:
            win.Put(origin, 1)
        win.Fence(MPI.MODE_NOSUCCEED)

    elapsed = _timed(fence_put_fence, iters)
    if rank == 0:
        times["fence/put/fence"] = elapsed
    comm.Barrier()

    if rank == 0:

        def start_put_complete() -> None:
            win.Start(peer)
            win.Put(origin, 1)
            win.Complete()

        times["pscw"] = _timed(start_put_complete, iters)
    elif rank == 1:

        def post_wait() -> None:
            win.Post(peer)
            win.Wait()

        _timed(post_wait, iters)
    comm.Barrier()

    win.Lock_all()
    if rank == 0:

        def put_flush() -> None:
            win.Put(origin, 1)
            win.Flush(1)

        times["lock_all put+flush"] = _timed(put_flush, iters)
        times["put"] = _timed(lambda: win.Put(origin, 1), iters)
        times["flush"] = _timed(lambda: win.Flush(1), iters)
    win.Unlock_all()
    comm.Barrier()
    peer.Free()
    group.Free()
    win.Free()
    return times


async def measure_aiorma(comm: Any, iters: int) -> dict[str, float]:
    """The same round with aiorma, awaiting every call."""
    import aiorma

    rank = comm.rank
    win = await comm.win_allocate(8, np.int64)
    origin = np.ones(1, np.int64)
    times: dict[str, float] = {}

    await comm.barrier()
    if rank == 0:

        async def lock_put_unlock() -> None:
            await win.lock(1, aiorma.LOCK_EXCLUSIVE)
            win.put(origin, 1)
            await win.unlock(1)

        times["lock/put/unlock"] = await _timed_async(lock_put_unlock, iters)
    await comm.barrier()

    async def fence_put_fence() -> None:
        await win.fence(aiorma.MODE_NOPRECEDE)
        if rank == 0:
            win.put(origin, 1)
        await win.fence(aiorma.MODE_NOSUCCEED)

    elapsed = await _timed_async(fence_put_fence, iters)
    if rank == 0:
        times["fence/put/fence"] = elapsed
    await comm.barrier()

    if rank == 0:

        async def start_put_complete() -> None:
            await win.start([1])
            win.put(origin, 1)
            await win.complete()

        times["pscw"] = await _timed_async(start_put_complete, iters)
    elif rank == 1:

        async def post_wait() -> None:
            await win.post([0])
            await win.wait()

        await _timed_async(post_wait, iters)
    await comm.barrier()

    await win.lock_all()
    if rank == 0:

        async def put_flush() -> None:
            win.put(origin, 1)
            await win.flush(1)

        times["lock_all put+flush"] = await _timed_async(put_flush, iters)
        times["put"] = _timed(lambda: win.put(origin, 1), iters)
        await win.flush(1)
        times["flush"] = await _timed_async(lambda: win.flush(1), iters)
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
            print(f"[hotpath] round {i + 1}/{options.repeats} done", file=sys.stderr, flush=True)
    return {name: 1e6 * statistics.median(values) for name, values in samples.items()}


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench hotpath", __doc__)
    parser.add_argument("--iters", type=int, default=2000, help="repetitions per round (default %(default)s)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="rounds; the median is reported (default %(default)s)"
    )
    parser.add_argument("--ranks", type=int, default=2, help="ranks to run (default %(default)s)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the medians (µs) and ratios here")
    parser.add_argument(
        "--plot", type=plot_directory, metavar="DIR", help="draw DIR/hotpath_ratio.png (needs matplotlib)"
    )
    parser.add_argument(
        "--compare", type=Path, metavar="PATH", help="with --plot: an earlier --json result to draw beside"
    )
    parser.add_argument(
        "--backend",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="the event loop aiorma runs under (default %(default)s)",
    )
    add_emulate_nodes_option(parser)
    options = parser.parse_args(argv)
    if options.ranks < 2:
        parser.error("--ranks must be at least 2")
    if ensure_mpi_ranks(options.ranks, "aiorma.bench", ["hotpath", *argv], options.emulate_nodes):
        return 0

    import aiorma

    result = aiorma.run(run, options, backend=options.backend)
    if launched_rank() != 0:
        return 0
    inline = Settings.from_environment().inline
    print(
        f"hotpath, {options.ranks} ranks, inline paths {'on' if inline else 'off'}, {options.backend}; "
        "µs per repetition"
    )
    print(f"hotpath, {mpi_library_name()}; engine {_native.describe()}")
    print(f"{'case':22} {'mpi4py':>9} {'aiorma':>9} {'ratio':>7}")
    ratios = {}
    for case in CASES:
        ours, theirs = result[f"aiorma {case}"], result[f"mpi4py {case}"]
        ratios[case] = ours / theirs
        print(f"{case:22} {theirs:>9.2f} {ours:>9.2f} {ours / theirs:>6.1f}x")
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "ranks": options.ranks,
            "inline": inline,
            "backend": options.backend,
            "emulate_nodes": options.emulate_nodes,
            "engine": _native.describe(),
            "us": result,
            "ratio": ratios,
        }
        options.json.write_text(json.dumps(record, indent=1))
    if options.plot:
        current = {"inline": inline, "ranks": options.ranks, "engine": _native.describe(), "ratio": ratios}
        earlier = json.loads(options.compare.read_text()) if options.compare else None
        print("wrote", plot(current, earlier, options.plot))
    return 0


def _label(record: dict[str, Any]) -> str:
    inline = record.get("inline", record.get("thin"))  # (results written before the rename)
    engine = record.get("engine", "")  # (results written before the compiled engine: from source)
    how = "engine compiled" if engine.startswith("compiled") else "engine from source"
    return f"aiorma, inline paths {'on' if inline else 'off'}, {how}, {record['ranks']} ranks"


def plot(current: dict[str, Any], earlier: dict[str, Any] | None, directory: Path) -> Path:
    """Bars of aiorma / mpi4py per case for ``current`` (and ``earlier`` beside it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in (earlier, current) if r is not None]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(records)
    for i, record in enumerate(records):
        xs = [c + (i - (len(records) - 1) / 2) * width for c in range(len(CASES))]
        bars = ax.bar(xs, [record["ratio"][case] for case in CASES], width, label=_label(record))
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(4.0, color="gray", linestyle="--", linewidth=0.8, label="target: 4 × mpi4py")
    ax.set_xticks(range(len(CASES)), CASES, fontsize=8)
    ax.set_ylabel("time / raw mpi4py time (same run)")
    ax.set_title("Hot path, 8 B, back to back (python -m aiorma.bench hotpath)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "hotpath_ratio.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

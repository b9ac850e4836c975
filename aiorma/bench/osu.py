"""OSU-style one-sided latency and bandwidth: aiorma against raw mpi4py, in the same run.

    python -m aiorma.bench osu [--json PATH] [--plot DIR] [--iters N] [--max-size BYTES]
                               [--emulate-nodes K]

Launches itself on 2 ranks under the mpich wheel's ``mpiexec``; with ``--emulate-nodes 2`` the two
ranks run as if on two nodes (own hostnames, no shared memory between them: see
``aiorma.bench._launch``), which the measuring code itself does not know.  Rank 0 is the origin, rank 1 the
target.  For every synchronization mode (fence, pscw, lock, lock_all+flush) and operation (put,
get, accumulate, fetch_and_op, compare_and_swap) it times one epoch per iteration, as
``osu_put_latency`` does, first with mpi4py's blocking MPI calls, then with aiorma awaiting each
call (the blocking form).  Both use allocated windows (``Win.Allocate``/``win_allocate``, OSU's
default): MPICH's RMA into them is truly passive.  Bandwidth (``osu_put_bw``/``osu_get_bw``
shape): 32 operations per lock epoch.  Message sizes double from 8 B to ``--max-size`` (4 MiB by
default) for put, get and accumulate; the atomics move 8 B.  The report gives, for each cell, the
median time of one epoch over ``--iters`` epochs in microseconds (µs), for MPI and for aiorma, and
their ratio aiorma / MPI; bandwidth cells also in MB/s.  ``--json`` writes the records with the
machine, date, emulation mode and each rank's hostname.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._cli import command_parser, plot_directory
from ._app_runs import machine
from ._launch import EMULATE_ENV, add_emulate_nodes_option, ensure_mpi_ranks, launched_rank, mpi_library_name

MODES = ("fence", "pscw", "lock", "lock_all")
OPS = ("put", "get", "accumulate", "fetch_and_op", "compare_and_swap")
WINDOW_OPS = 32  # operations per epoch in the bandwidth test
MAX_SIZE = 4 << 20  # bytes: OSU's default sweep ends at 4 MiB


def sizes_up_to(limit: int) -> list[int]:
    """Message sizes in bytes: 8, 16, 32, ... up to ``limit``, and ``limit`` itself (rounded down
    to whole int64 elements) if it is not such a power of two."""
    sizes, size = [], 8
    while size <= limit:
        sizes.append(size)
        size *= 2
    last = limit // 8 * 8
    if sizes and last > sizes[-1]:
        sizes.append(last)
    return sizes or [8]


#: Open MPI's byte-transfer components (``--mca btl``), as its ranks see them.
OMPI_BTL = "OMPI_MCA_btl"


def where_am_i() -> dict[str, Any]:
    """What this rank sees of its node: how it tells, if at all, that the node is emulated."""
    from mpi4py import MPI

    return {
        "rank": MPI.COMM_WORLD.Get_rank(),
        "hostname": socket.gethostname(),
        "processor_name": MPI.Get_processor_name(),
        "MPIR_CVAR_NOLOCAL": os.environ.get("MPIR_CVAR_NOLOCAL"),
        OMPI_BTL: os.environ.get(OMPI_BTL),  # Open MPI's emulation: "self,tcp"
        EMULATE_ENV: os.environ.get(EMULATE_ENV),
    }


# ---------------------------------------------------------------------------------- mpi4py


def mpi_epoch(win: Any, mode: str, rank: int, access: Callable[[], None]) -> None:
    """One blocking MPI epoch in which rank 0 calls ``access`` towards rank 1."""
    from mpi4py import MPI

    if mode == "fence":
        win.Fence()
        if rank == 0:
            access()
        win.Fence()
    elif mode == "pscw":
        group = win.Get_group()
        peer = group.Incl([1 - rank])
        if rank == 0:
            win.Start(peer)
            access()
            win.Complete()
        else:
            win.Post(peer)
            win.Wait()
        peer.Free()
        group.Free()
    elif rank == 0:  # lock / lock_all: the target does nothing
        if mode == "lock":
            win.Lock(1, MPI.LOCK_SHARED)
            access()
            win.Unlock(1)
        else:
            access()
            win.Flush(1)


def mpi_access(win: Any, op: str, origin: np.ndarray, result: np.ndarray) -> Callable[[], None]:
    from mpi4py import MPI

    one = (origin[:1], result[:1])
    return {
        "put": lambda: win.Put(origin, 1),
        "get": lambda: win.Get(result, 1),
        "accumulate": lambda: win.Accumulate(origin, 1, op=MPI.SUM),
        "fetch_and_op": lambda: win.Fetch_and_op(one[0], one[1], 1, 0, MPI.SUM),
        "compare_and_swap": lambda: win.Compare_and_swap(one[0], one[0], one[1], 1, 0),
    }[op]


def time_mpi(mode: str, op: str, count: int, iters: int, repeat: int = 1) -> float:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    win = MPI.Win.Allocate(count * 8, 8, comm=comm)
    origin, result = np.ones(count, np.int64), np.zeros(count, np.int64)
    if mode == "lock_all":
        win.Lock_all()
    access = mpi_access(win, op, origin, result)

    def body() -> None:
        for _ in range(repeat):
            access()

    samples = []
    for i in range(iters + 5):
        comm.Barrier()
        start = time.perf_counter()
        mpi_epoch(win, mode, rank, body)
        if i >= 5:  # warm-up
            samples.append(time.perf_counter() - start)
    if mode == "lock_all":
        win.Unlock_all()
    comm.Barrier()
    win.Free()
    return statistics.median(samples) if rank == 0 else 0.0


# ---------------------------------------------------------------------------------- aiorma


async def aiorma_epoch(win: Any, mode: str, rank: int, access: Callable[[], Any]) -> None:
    import aiorma

    if mode == "fence":
        await win.fence(aiorma.MODE_NOPRECEDE)
        if rank == 0:
            access()
        await win.fence(aiorma.MODE_NOSUCCEED)
    elif mode == "pscw":
        if rank == 0:
            await win.start([1])
            access()
            await win.complete()
        else:
            await win.post([0])
            await win.wait()
    elif rank == 0:
        if mode == "lock":
            await win.lock(1, aiorma.LOCK_SHARED)
            access()
            await win.unlock(1)
        else:
            access()
            await win.flush(1)


def aiorma_access(win: Any, op: str, origin: np.ndarray, result: np.ndarray) -> Callable[[], Any]:
    import aiorma

    one = (origin[:1], result[:1])
    return {
        "put": lambda: win.put(origin, 1),
        "get": lambda: win.get(result, 1),
        "accumulate": lambda: win.accumulate(origin, 1, 0, aiorma.SUM),
        "fetch_and_op": lambda: win.fetch_and_op(one[0], one[1], 1, 0, aiorma.SUM),
        "compare_and_swap": lambda: win.compare_and_swap(one[0], one[0], one[1], 1, 0),
    }[op]


async def time_aiorma(comm: Any, mode: str, op: str, count: int, iters: int, repeat: int = 1) -> float:
    win = await comm.win_allocate(count, np.int64)
    origin, result = np.ones(count, np.int64), np.zeros(count, np.int64)
    if mode == "lock_all":
        await win.lock_all()
    access = aiorma_access(win, op, origin, result)

    def body() -> None:
        for _ in range(repeat):
            access()

    samples = []
    for i in range(iters + 5):
        await comm.barrier()
        start = time.perf_counter()
        await aiorma_epoch(win, mode, comm.rank, body)
        if i >= 5:
            samples.append(time.perf_counter() - start)
    if mode == "lock_all":
        await win.unlock_all()
    await comm.barrier()
    await win.free()
    return statistics.median(samples) if comm.rank == 0 else 0.0


# ------------------------------------------------------------------------------------- run


def cases(max_size: int) -> list[dict[str, Any]]:
    found = []
    for mode in MODES:
        for op in OPS:
            sizes = sizes_up_to(max_size) if op in ("put", "get", "accumulate") else [8]
            for size in sizes:
                found.append({"test": "latency", "mode": mode, "op": op, "size_bytes": size})
    for op in ("put", "get"):
        for size in sizes_up_to(max_size):
            found.append({"test": "bandwidth", "mode": "lock", "op": op, "size_bytes": size})
    return found


async def measure(comm: Any, options: argparse.Namespace) -> dict[str, Any]:
    """Every cell, mpi4py then aiorma; on rank 0 the records and every rank's :func:`where_am_i`
    (other ranks: empty)."""
    from mpi4py import MPI

    # Blocking mpi4py calls inside aiorma.run are fine here: nothing of aiorma's is in flight.
    ranks_seen = MPI.COMM_WORLD.gather(where_am_i(), root=0)
    if comm.rank == 0:
        hosts = ", ".join(f"rank {r['rank']} on {r['hostname']}" for r in ranks_seen)
        print(f"[osu] {hosts}", file=sys.stderr, flush=True)
    records: list[dict[str, Any]] = []
    todo = cases(options.max_size)
    for i, case in enumerate(todo):
        count = case["size_bytes"] // 8
        repeat = WINDOW_OPS if case["test"] == "bandwidth" else 1
        mpi_s = time_mpi(case["mode"], case["op"], count, options.iters, repeat)
        aiorma_s = await time_aiorma(comm, case["mode"], case["op"], count, options.iters, repeat)
        if comm.rank == 0:
            record = dict(case, mpi_us=mpi_s * 1e6, aiorma_us=aiorma_s * 1e6, ratio=aiorma_s / mpi_s)
            if case["test"] == "bandwidth":
                moved = case["size_bytes"] * repeat
                record.update(mpi_mb_s=moved / mpi_s / 1e6, aiorma_mb_s=moved / aiorma_s / 1e6)
            records.append(record)
            print(
                f"[{i + 1}/{len(todo)}] {case['test']} {case['mode']} {case['op']} {case['size_bytes']} B: "
                f"mpi {mpi_s * 1e6:.1f} us, aiorma {aiorma_s * 1e6:.1f} us, x{aiorma_s / mpi_s:.1f}",
                file=sys.stderr,
                flush=True,
            )
    return {"records": records, "ranks": ranks_seen} if comm.rank == 0 else {}


def plot(records: list[dict[str, Any]], directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    fig, axes = plt.subplots(1, len(MODES), figsize=(4 * len(MODES), 3.6), sharey=True)
    for ax, mode in zip(axes, MODES, strict=True):
        for op in ("put", "get", "accumulate"):
            rows = [r for r in records if r["test"] == "latency" and r["mode"] == mode and r["op"] == op]
            ax.plot([r["size_bytes"] for r in rows], [r["ratio"] for r in rows], marker="o", label=op)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{mode} epoch latency")
        ax.set_xlabel("message size (bytes)")
        ax.axhline(1.0, color="grey", linewidth=0.8)
    axes[0].set_ylabel("aiorma / mpi4py latency")
    axes[-1].legend()
    fig.tight_layout()
    path = directory / "osu_latency_ratio.png"
    fig.savefig(path, dpi=110)
    written.append(path)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.8))
    for op in ("put", "get"):
        rows = [r for r in records if r["test"] == "bandwidth" and r["op"] == op]
        sizes = [r["size_bytes"] for r in rows]
        ax.plot(sizes, [r["mpi_mb_s"] for r in rows], marker="s", linestyle="--", label=f"mpi4py {op}")
        ax.plot(sizes, [r["aiorma_mb_s"] for r in rows], marker="o", label=f"aiorma {op}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("MB/s (32 ops per lock epoch)")
    ax.legend()
    fig.tight_layout()
    path = directory / "osu_bandwidth.png"
    fig.savefig(path, dpi=110)
    written.append(path)
    plt.close(fig)
    return written


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench osu", __doc__)
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the records here as JSON")
    parser.add_argument(
        "--plot", type=plot_directory, metavar="DIR", help="write PNG plots into DIR (needs matplotlib)"
    )
    parser.add_argument(
        "--iters",
        type=int,
        default=50,
        help="epochs per measurement; the median is reported (default %(default)s)",
    )
    parser.add_argument(
        "--max-size", type=int, default=MAX_SIZE, help="largest message in bytes (default %(default)s)"
    )
    add_emulate_nodes_option(parser)
    options = parser.parse_args(argv)
    if options.iters < 1 or options.max_size < 8 or options.emulate_nodes < 0:
        parser.error("--iters must be at least 1, --max-size at least 8, --emulate-nodes at least 0")
    if ensure_mpi_ranks(2, "aiorma.bench", ["osu", *argv], emulate_nodes=options.emulate_nodes):
        return 0  # the ranks ran under mpiexec and wrote the results

    import aiorma

    found = aiorma.run(measure, options)
    records = found.get("records")
    if launched_rank() == 0 and records:
        if options.json:
            document = {
                "benchmark": "osu",
                "command": shlex.join(["python", "-m", "aiorma.bench", "osu", *argv]),
                "machine": machine(),
                "emulate_nodes": options.emulate_nodes,
                "ranks": found["ranks"],
                "iters": options.iters,
                "records": records,
            }
            options.json.parent.mkdir(parents=True, exist_ok=True)
            options.json.write_text(json.dumps(document, indent=1))
        if options.plot:
            for path in plot(records, options.plot):
                print(f"wrote {path}", file=sys.stderr)
        hosts = ", ".join(f"rank {r['rank']}: {r['hostname']}" for r in found["ranks"])
        emulated = f"{options.emulate_nodes} emulated nodes" if options.emulate_nodes >= 2 else "one node"
        print(f"osu, {mpi_library_name()}, {emulated} ({hosts}); median of {options.iters} epochs; ", end="")
        print("ratio = aiorma / mpi4py")
        print(f"{'test':9} {'mode':8} {'op':16} {'bytes':>8} {'mpi us':>9} {'aiorma us':>10} {'ratio':>6}")
        for r in records:
            print(
                f"{r['test']:9} {r['mode']:8} {r['op']:16} {r['size_bytes']:>8} "
                f"{r['mpi_us']:>9.1f} {r['aiorma_us']:>10.1f} {r['ratio']:>6.1f}"
            )
    return 0

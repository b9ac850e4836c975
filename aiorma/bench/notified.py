"""Notified put against a PSCW epoch carrying the same data, and both against raw mpi4py.

    python -m aiorma.bench notified [--bytes N] [--iters N] [--repeats R] [--json PATH]
                                    [--plot DIR] [--emulate-nodes K]

Launches itself on 2 ranks under the mpich wheel's ``mpiexec``.  Each case is a ping-pong: rank 0
sends ``--bytes`` bytes to rank 1, which — once it knows they have landed — sends them back; the
latency is half the round trip (µs), median over ``--repeats`` rounds of ``--iters`` round trips:

* ``notified put``: aiorma's ``put_signal`` (the data, then a signal word once the data is in the
  peer's memory) inside a long lock_all, the receiver awaiting ``wait_until`` on its own memory;
* ``pscw epoch``: aiorma's post/start/put/complete/wait, one epoch per message;
* ``mpi4py put+flag``: the same protocol in raw mpi4py (``Put``, ``Flush``, ``Put`` of the flag,
  ``Flush``; the receiver spins on its memory with ``Win.Sync``), the yardstick of the first;
* ``mpi4py pscw``: raw mpi4py's ``Post``/``Start``/``Put``/``Complete``/``Wait``, the yardstick of
  the second.

The report gives each case's latency and the ratios notified / PSCW (in aiorma) and aiorma /
mpi4py for both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._cli import command_parser, plot_directory
from ._launch import add_emulate_nodes_option, ensure_mpi_ranks, launched_rank, mpi_library_name

CASES = ("notified put", "pscw epoch", "mpi4py put+flag", "mpi4py pscw")


def _mpi_round(nbytes: int, iters: int) -> dict[str, float]:
    """Both raw mpi4py ping-pongs; half round trips in seconds (rank 0's clock)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, peer = comm.Get_rank(), 1 - comm.Get_rank()
    data = MPI.Win.Allocate(max(nbytes, 1), 1, comm=comm)
    flag = MPI.Win.Allocate(8, 8, comm=comm)
    mine = np.frombuffer(flag.tomemory(), np.int64)  # type: ignore[call-overload]
    mine[0] = 0
    payload = np.ones(nbytes, np.uint8)
    word = np.zeros(1, np.int64)
    times: dict[str, float] = {}
    comm.Barrier()
    data.Lock_all()
    flag.Lock_all()

    def send(value: int) -> None:
        data.Put(payload, peer)
        data.Flush(peer)
        word[0] = value
        flag.Put(word, peer)
        flag.Flush(peer)

    def arrive(value: int) -> None:
        while mine[0] < value:
            flag.Sync()

    comm.Barrier()
    start = time.perf_counter()
    for i in range(1, iters + 1):
        if rank == 0:
            send(i)
            arrive(i)
        else:
            arrive(i)
            send(i)
    times["mpi4py put+flag"] = (time.perf_counter() - start) / iters / 2
    flag.Unlock_all()
    data.Unlock_all()
    comm.Barrier()
    group = data.Get_group()
    other = group.Incl([peer])
    start = time.perf_counter()
    for _ in range(iters):
        for sender in (0, 1):
            if rank == sender:
                data.Start(other)
                data.Put(payload, peer)
                data.Complete()
            else:
                data.Post(other)
                data.Wait()
    times["mpi4py pscw"] = (time.perf_counter() - start) / iters / 2
    comm.Barrier()
    other.Free()
    group.Free()
    flag.Free()
    data.Free()
    return times


async def _aiorma_round(comm: Any, nbytes: int, iters: int) -> dict[str, float]:
    rank, peer = comm.rank, 1 - comm.rank
    data = await comm.win_allocate(max(nbytes, 1), np.uint8)
    words = await comm.win_allocate(1, np.int64)
    payload = np.ones(nbytes, np.uint8)
    times: dict[str, float] = {}
    await comm.barrier()
    async with data.lock_all(), words.lock_all():
        await comm.barrier()
        start = time.perf_counter()
        for i in range(1, iters + 1):
            if rank == 0:
                data.put_signal(payload, peer, 0, words, 0, i)
                await words.wait_until(0, ">=", i)
            else:
                await words.wait_until(0, ">=", i)
                data.put_signal(payload, peer, 0, words, 0, i)
        times["notified put"] = (time.perf_counter() - start) / iters / 2
        await comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        for sender in (0, 1):
            if rank == sender:
                await data.start([peer])
                data.put(payload, peer, 0)
                await data.complete()
            else:
                await data.post([peer])
                await data.wait()
    times["pscw epoch"] = (time.perf_counter() - start) / iters / 2
    await comm.barrier()
    await data.free()
    await words.free()
    return times


async def run(comm: Any, options: argparse.Namespace) -> dict[str, float]:
    samples: dict[str, list[float]] = {}
    for i in range(options.repeats):
        for name, value in _mpi_round(options.bytes, options.iters).items():
            samples.setdefault(name, []).append(value)
        for name, value in (await _aiorma_round(comm, options.bytes, options.iters)).items():
            samples.setdefault(name, []).append(value)
        if comm.rank == 0:
            print(f"[notified] round {i + 1}/{options.repeats} done", file=sys.stderr, flush=True)
    return {name: 1e6 * statistics.median(values) for name, values in samples.items()}


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench notified", __doc__)
    parser.add_argument("--bytes", type=int, default=8, help="message size (default %(default)s)")
    parser.add_argument("--iters", type=int, default=2000, help="round trips per round (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds; the median is reported (default 5)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the medians (µs) and ratios here")
    parser.add_argument(
        "--plot",
        type=plot_directory,
        metavar="DIR",
        help="draw DIR/notified.png (notified_2nodes.png on emulated nodes; needs matplotlib)",
    )
    add_emulate_nodes_option(parser)
    options = parser.parse_args(argv)
    if options.bytes < 0 or options.iters < 1 or options.repeats < 1:
        parser.error("--bytes must be at least 0, --iters and --repeats at least 1")
    if ensure_mpi_ranks(2, "aiorma.bench", ["notified", *argv], options.emulate_nodes):
        return 0

    import aiorma

    us = aiorma.run(run, options)
    if launched_rank() != 0:
        return 0
    where = f"{options.emulate_nodes} emulated nodes" if options.emulate_nodes >= 2 else "one node"
    print(f"notified, {mpi_library_name()}, {options.bytes} B, {where}; µs per message (half a round trip)")
    for case in CASES:
        print(f"  {case:18} {us[case]:9.2f}")
    ratios = {
        "notified / pscw (aiorma)": us["notified put"] / us["pscw epoch"],
        "notified: aiorma / mpi4py": us["notified put"] / us["mpi4py put+flag"],
        "pscw: aiorma / mpi4py": us["pscw epoch"] / us["mpi4py pscw"],
    }
    for name, ratio in ratios.items():
        print(f"  {name:28} {ratio:6.2f}x")
    record = {"bytes": options.bytes, "emulate_nodes": options.emulate_nodes, "us": us, "ratio": ratios}
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(record, indent=1))
    if options.plot:
        print("wrote", plot(record, options.plot))
    return 0


def plot(record: dict[str, Any], directory: Path) -> Path:
    """Bars of the four latencies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    bars = ax.bar(CASES, [record["us"][case] for case in CASES], color=["C0", "C1", "C2", "C3"])
    ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_ylabel("µs per message (half a round trip)")
    where = f"{record['emulate_nodes']} emulated nodes" if record["emulate_nodes"] >= 2 else "one node"
    ax.set_title(f"Notified put vs PSCW epoch, {record['bytes']} B, {where} (bench notified)")
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ("notified_2nodes.png" if record["emulate_nodes"] >= 2 else "notified.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

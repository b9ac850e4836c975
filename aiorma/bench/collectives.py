"""Collectives: aiorma's (built on RMA) against the MPI library's own, in the same run.

    python -m aiorma.bench collectives [--ranks 2,4,8] [--sizes 8,1024,65536,1048576,4194304]
        [--collectives barrier,bcast,...] [--budget SECONDS] [--persistent] [--emulate-nodes K]
        [--json PATH] [--plot DIR]

For every rank count the command starts itself under the mpich wheel's ``mpiexec``.  On each rank,
for each collective and message size, it times a loop of the MPI library's blocking collective
(mpi4py: ``Barrier``, ``Bcast``, ``Reduce``, ``Allreduce``, ``Allgather``, ``Gather``,
``Scatter``, ``Alltoall`` on ``COMM_WORLD``) and then a loop of aiorma's, each call awaited, on the
same numpy buffers (float64).  Latency = the slowest rank's loop time / iterations.  The report is
the ratio aiorma / MPI per cell.  ``--persistent`` also times the persistent forms made once per
cell — MPI-4's ``Allreduce_init`` & co. (``Start`` + ``Wait`` per call) and aiorma's
``comm.allreduce_init`` & co. (``await req.start()``) — as a second table and columns of their own.

Message size is OSU's: the buffer of bcast/reduce/allreduce, and the per-rank block of allgather,
gather, scatter and alltoall.  Iterations per cell: as many as fit ``--budget`` seconds per
library (at least 3, at most 2000), decided on rank 0 from a warm-up and broadcast.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._cli import command_parser, plot_directory
from ._app_runs import machine
from ._launch import add_emulate_nodes_option, emulation_unavailable, mpiexec_command, under_mpiexec

COLLECTIVES = ("barrier", "bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "alltoall")
DEFAULT_SIZES = (8, 1024, 65536, 1 << 20, 4 << 20)
# At most 300 made an 8-byte cell a 10-40 ms sample, and two runs of one tree differed by up to
# 1.9x there (2026-11-27); the budget still bounds a cell's time.
MIN_ITERS, MAX_ITERS = 3, 2000


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = command_parser("python -m aiorma.bench collectives", __doc__)
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated rank counts (default 2,4,8)")
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="comma-separated message sizes in bytes (default %(default)s)",
    )
    parser.add_argument(
        "--collectives",
        default=",".join(COLLECTIVES),
        help="comma-separated collectives (default %(default)s)",
    )
    parser.add_argument(
        "--budget", type=float, default=0.25, help="seconds per library per cell (default %(default)s)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the results here as JSON")
    parser.add_argument(
        "--plot", type=plot_directory, metavar="DIR", help="write PNG plots into DIR (needs matplotlib)"
    )
    parser.add_argument(
        "--persistent",
        action="store_true",
        help="also time the persistent forms (MPI-4's *_init + Start/Wait, aiorma's *_init + start)",
    )
    add_emulate_nodes_option(parser)
    parser.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)  # internal: rank output
    args = parser.parse_args(argv)
    args.rank_counts = [int(x) for x in args.ranks.split(",") if x]
    args.size_list = [int(x) for x in args.sizes.split(",") if x]
    args.names = [x for x in args.collectives.split(",") if x]
    unknown = set(args.names) - set(COLLECTIVES)
    if unknown:
        parser.error(f"unknown collectives {sorted(unknown)}; choose from {', '.join(COLLECTIVES)}")
    return args


# ---------------------------------------------------------------------- one rank (under mpiexec)


class _Cell:
    """Buffers and the calls for one collective at one size: MPI's blocking call and aiorma's,
    and their persistent forms (MPI-4's ``*_init``, aiorma's ``comm.*_init``), made on demand."""

    def __init__(self, name: str, nbytes: int, comm: Any, world: Any) -> None:
        from mpi4py import MPI

        size, rank = world.Get_size(), world.Get_rank()
        n = max(1, nbytes // 8)
        # The arguments of each library's call (MPI wants an MPI.Op, aiorma its own op code);
        # the methods are named alike: Bcast/bcast, Bcast_init/bcast_init, ...
        args: tuple[Any, ...]
        if name == "barrier":
            mpi_args: tuple[Any, ...] = ()
            args = ()
        elif name == "bcast":
            buf = np.full(n, float(rank))
            mpi_args = args = (buf, 0)
        elif name == "reduce":
            send, recv = np.full(n, 1.0 + rank), np.zeros(n)
            mpi_args, args = (send, recv, MPI.SUM, 0), (send, recv, 1, 0)
        elif name == "allreduce":
            send, recv = np.full(n, 1.0 + rank), np.zeros(n)
            mpi_args, args = (send, recv, MPI.SUM), (send, recv)
        elif name in ("allgather", "gather"):
            send, recv = np.full(n, float(rank)), np.zeros(n * size)
            mpi_args = args = (send, recv) if name == "allgather" else (send, recv, 0)
        elif name == "scatter":
            send, recv = np.arange(n * size, dtype=np.float64), np.zeros(n)
            mpi_args = args = (send, recv, 0)
        else:
            send, recv = np.full(n * size, float(rank)), np.zeros(n * size)
            mpi_args = args = (send, recv)
        method = name.capitalize()
        self._mpi_init = functools.partial(getattr(world, f"{method}_init"), *mpi_args)
        self._aio_init = functools.partial(getattr(comm, f"{name}_init"), *args)
        self.mpi: Callable[[], None] = functools.partial(getattr(world, method), *mpi_args)
        self.aio: Callable[[], Awaitable[Any]] = functools.partial(getattr(comm, name), *args)

    def persistent(self) -> tuple[Callable[[], None], Callable[[], Awaitable[Any]], Callable[[], None]]:
        """Persistent collectives made once, here: the call that runs MPI's (``Start`` +
        ``Wait``), the one that starts aiorma's, and what frees MPI's request afterwards."""
        mpi_request, aio_request = self._mpi_init(), self._aio_init()

        def mpi() -> None:
            mpi_request.Start()
            mpi_request.Wait()

        return mpi, aio_request.start, mpi_request.Free


async def _time_aio(call: Callable[[], Awaitable[Any]], iters: int, comm: Any) -> float:
    await comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        await call()
    return time.perf_counter() - start


def _time_mpi(call: Callable[[], None], iters: int, world: Any) -> float:
    world.Barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return time.perf_counter() - start


def _iterations(seconds_per_call: float, budget: float) -> int:
    return int(min(MAX_ITERS, max(MIN_ITERS, budget / max(seconds_per_call, 1e-7))))


async def _rank_main(comm: Any, args: argparse.Namespace) -> None:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    rows = []
    await comm.barrier()
    for name in args.names:
        for nbytes in [0] if name == "barrier" else args.size_list:
            cell = _Cell(name, nbytes, comm, world)
            # warm up both (first-touch of buffers, landing slots) and size the loops on rank 0
            warm = _time_mpi(cell.mpi, 2, world) / 2
            warm_aio = await _time_aio(cell.aio, 2, comm) / 2
            iters_mpi, iters_aio = world.bcast(
                (_iterations(warm, args.budget), _iterations(warm_aio, args.budget)), 0
            )
            t_mpi = world.allreduce(_time_mpi(cell.mpi, iters_mpi, world), MPI.MAX) / iters_mpi
            t_aio = await _time_aio(cell.aio, iters_aio, comm)
            t_aio = world.allreduce(t_aio, MPI.MAX) / iters_aio
            persistent: dict[str, float] = {}
            if args.persistent:
                mpi_start, aio_start, free = cell.persistent()
                _time_mpi(mpi_start, 2, world)
                await _time_aio(aio_start, 2, comm)
                p_mpi = world.allreduce(_time_mpi(mpi_start, iters_mpi, world), MPI.MAX) / iters_mpi
                p_aio = world.allreduce(await _time_aio(aio_start, iters_aio, comm), MPI.MAX) / iters_aio
                free()
                persistent = {
                    "mpi_persistent_us": p_mpi * 1e6,
                    "aiorma_persistent_us": p_aio * 1e6,
                    # against MPI's own persistent form, and against its plain call
                    "persistent_ratio": p_aio / p_mpi,
                    "persistent_vs_blocking": p_aio / t_mpi,
                }
            if rank == 0:
                row = {
                    "collective": name,
                    "ranks": size,
                    "bytes": nbytes,
                    "mpi_us": t_mpi * 1e6,
                    "aiorma_us": t_aio * 1e6,
                    "ratio": t_aio / t_mpi,
                    "iters": [iters_mpi, iters_aio],
                    "algorithm": (comm.collectives.trace or [""])[-1],
                    **persistent,
                }
                rows.append(row)
                print(
                    f"  {size} ranks {name:9} {nbytes:>8} B  mpi {t_mpi * 1e6:10.1f} us  "
                    f"aiorma {t_aio * 1e6:10.1f} us  x{t_aio / t_mpi:8.1f}  ({row['algorithm']})"
                    + (
                        f"  persistent: mpi {p_mpi * 1e6:.1f} us aiorma {p_aio * 1e6:.1f} us"
                        f" x{p_aio / p_mpi:.1f}"
                        if persistent
                        else ""
                    ),
                    file=sys.stderr,
                    flush=True,
                )
    await comm.barrier()
    if rank == 0 and args.worker_out is not None:
        args.worker_out.write_text(json.dumps(rows))


# ---------------------------------------------------------------------- the launcher


def _launch(ranks: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.json"
        command = mpiexec_command(
            ranks,
            [
                sys.executable,
                "-m",
                "aiorma.bench.collectives",
                "--sizes",
                args.sizes,
                "--collectives",
                args.collectives,
                "--budget",
                str(args.budget),
                *(["--persistent"] if args.persistent else []),
                "--worker-out",
                str(out),
            ],
            args.emulate_nodes,
        )
        print(f"[{ranks} ranks] {' '.join(command)}", file=sys.stderr, flush=True)
        env = dict(os.environ)
        repo = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p)
        status = subprocess.run(command, env=env, check=False).returncode
        if status != 0:
            raise SystemExit(f"mpiexec -n {ranks} exited with {status}")
        return json.loads(out.read_text())


def table(rows: list[dict[str, Any]], form: str = "") -> str:
    """Markdown: one line per (collective, size), a column pair per rank count; ``form="persistent"``
    for the persistent forms' columns (rows measured with ``--persistent``)."""
    mpi_key, aio_key, ratio_key = (
        ("mpi_persistent_us", "aiorma_persistent_us", "persistent_ratio")
        if form
        else ("mpi_us", "aiorma_us", "ratio")
    )
    rows = [r for r in rows if ratio_key in r]
    ranks = sorted({r["ranks"] for r in rows})
    what = "persistent: MPI µs / aiorma µs / ratio" if form else "MPI µs / aiorma µs / ratio"
    head = "| collective | bytes | " + " | ".join(f"{p} ranks, {what}" for p in ranks) + " |"
    lines = [head, "|" + "---|" * (2 + len(ranks))]
    keys = sorted(
        {(r["collective"], r["bytes"]) for r in rows}, key=lambda k: (COLLECTIVES.index(k[0]), k[1])
    )
    for name, nbytes in keys:
        cells = []
        for p in ranks:
            row = next(
                (r for r in rows if (r["collective"], r["bytes"], r["ranks"]) == (name, nbytes, p)), None
            )
            cells.append(
                "–" if row is None else f"{row[mpi_key]:.1f} / {row[aio_key]:.0f} / **{row[ratio_key]:.1f}**"
            )
        lines.append(f"| {name} | {nbytes if name != 'barrier' else '–'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], directory: Path, emulate_nodes: int = 0) -> list[Path]:
    """The ratio and latency figures; ``collectives_2nodes_*.png`` for a run on emulated nodes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    ranks = sorted({r["ranks"] for r in rows})
    names = [n for n in COLLECTIVES if any(r["collective"] == n for r in rows)]
    written = []

    def barrier_panel(ax: Any, key: str, label: str) -> None:
        mine = sorted((r for r in rows if r["collective"] == "barrier"), key=lambda r: r["ranks"])
        ax.plot([r["ranks"] for r in mine], [r[key] for r in mine], marker="o", label=label)
        ax.set_title("barrier")
        ax.set_xlabel("ranks")
        ax.set_yscale("log")
        ax.set_xticks([r["ranks"] for r in mine])

    persistent = any("persistent_ratio" in r for r in rows)
    fig, axes = plt.subplots(2, 4, figsize=(16, 7), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        if name == "barrier":
            barrier_panel(ax, "ratio", "aiorma / MPI")
            if persistent:
                barrier_panel(ax, "persistent_ratio", "persistent")
            ax.axhline(3, color="grey", ls="--", lw=0.8)
            ax.set_ylabel("aiorma / MPI latency")
            ax.legend(fontsize=7)
            continue
        for p in ranks:
            mine = sorted(
                (r for r in rows if r["collective"] == name and r["ranks"] == p), key=lambda r: r["bytes"]
            )
            if not mine:
                continue
            xs = [max(r["bytes"], 1) for r in mine]
            (line,) = ax.plot(xs, [r["ratio"] for r in mine], marker="o", label=f"{p} ranks")
            if all("persistent_ratio" in r for r in mine):
                ax.plot(
                    xs,
                    [r["persistent_ratio"] for r in mine],
                    marker="x",
                    ls="--",
                    color=line.get_color(),
                    label=f"{p} ranks, persistent",
                )
        ax.set_title(name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(3, color="grey", ls="--", lw=0.8)
        ax.axhline(1.3, color="grey", ls=":", lw=0.8)
        ax.set_xlabel("bytes")
        ax.set_ylabel("aiorma / MPI latency")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    where = f", {emulate_nodes} emulated nodes" if emulate_nodes >= 2 else ""
    prefix = f"collectives_{emulate_nodes}nodes" if emulate_nodes >= 2 else "collectives"
    forms = " (x, dashed: the persistent forms against MPI's)" if persistent else ""
    title = (
        f"aiorma collectives (RMA-based) vs MPI's own{where}{forms} — latency ratio"
        " (grey dashed: 3×, dotted: 1.3×)"
    )
    fig.suptitle(title)
    fig.tight_layout()
    path = directory / f"{prefix}_ratio.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)

    fig, axes = plt.subplots(2, 4, figsize=(16, 7), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        if name == "barrier":
            barrier_panel(ax, "aiorma_us", "aiorma")
            barrier_panel(ax, "mpi_us", "MPI")
            ax.set_ylabel("latency (µs)")
            ax.legend(fontsize=7)
            continue
        for p in ranks:
            mine = sorted(
                (r for r in rows if r["collective"] == name and r["ranks"] == p), key=lambda r: r["bytes"]
            )
            if not mine:
                continue
            xs = [max(r["bytes"], 1) for r in mine]
            (line,) = ax.plot(xs, [r["aiorma_us"] for r in mine], marker="o", label=f"aiorma {p}")
            ax.plot(
                xs, [r["mpi_us"] for r in mine], marker="x", ls="--", color=line.get_color(), label=f"MPI {p}"
            )
        ax.set_title(name)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("latency (µs)")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(f"collective latency{where}: aiorma (solid) and MPI (dashed)")
    fig.tight_layout()
    path = directory / f"{prefix}_latency.png"
    fig.savefig(path, dpi=90)
    plt.close(fig)
    written.append(path)
    return written


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if under_mpiexec():
        import aiorma

        aiorma.run(_rank_main, args)
        return 0
    if args.emulate_nodes >= 2 and (reason := emulation_unavailable()) is not None:
        raise SystemExit(reason)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for ranks in args.rank_counts:
        rows += _launch(ranks, args)
    result = {
        "machine": machine(),
        "command": "python -m aiorma.bench collectives " + " ".join(argv),
        "emulate_nodes": args.emulate_nodes,
        "rows": rows,
    }
    print(f"collectives, {result['machine']['mpi_library']}")
    print(table(rows))
    if args.persistent:
        print(table(rows, "persistent"))
    print(f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    if args.plot is not None:
        for path in plot(rows, args.plot, args.emulate_nodes):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

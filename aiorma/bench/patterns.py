"""The inefficiency patterns and reorder flags of Zounmevo (2014) §5.8: how far a late peer's delay spreads.

Each experiment (see :mod:`aiorma.bench._patterns_experiments`) injects a 1000 µs delay at one
peer and times a *victim* elsewhere, with and without the delay, in the same run; the difference
of the medians is the delay *propagated* to the victim.  Series: ``blocking`` (every
synchronization awaited at once, the MPI shape) and ``nonblocking`` for the five patterns;
``nonblocking`` and ``nonblocking+flag`` (the Info reorder flag set) for the four flags.

On ``--transport mpi`` (default) the command re-executes itself under the mpich wheel's
``mpiexec`` (found next to this Python), one job per rank count (2, 3, 4: each experiment on the
fewest processes it needs) unless ``--ranks N`` puts all in one job.  On ``--transport local`` it
runs the ranks in this process with ``aiorma.run(..., nprocs=N)``; delays are sleeps there.

Output: a Markdown table on stdout, ``--json PATH`` (a list of records ``{experiment,
size_bytes, series, delay_us, propagated_us, victim_us, reps}``, medians over ``reps``
repetitions), ``--plot DIR`` (PNGs ``patterns_*.png``); progress lines on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import aiorma

from .._cli import command_parser, plot_directory
from ._launch import mpiexec_command
from ._patterns_experiments import (
    BLOCKING,
    DELAY,
    EXPERIMENTS,
    FLAG,
    NONBLOCKING,
    REORDER_SERIES,
    TRANSFER,
    Ctx,
    Experiment,
    Iteration,
)

WARMUP = 2  # repetitions run first and not counted (Python and MPI warm-up)
RECORD_KEYS = ("experiment", "size_bytes", "series", "delay_us", "propagated_us", "victim_us", "reps")
GOOD_MAX = 0.25  # nonblocking (and +flag) series: propagate at most this share of the delay
BAD_MIN = 0.75  # blocking and flag-off series: propagate at least this share


def _log(message: str) -> None:
    print(f"[patterns] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- one rank


def _plan(experiment: Experiment, sizes: set[int] | None, series: set[str] | None) -> list[tuple[str, int]]:
    """The (series, size) runs of an experiment after the filters; early_fence adds the
    ``transfer`` calibration that sizes its delay."""
    chosen = [s for s in experiment.series if series is None or s in series]
    if experiment.name == "early_fence" and chosen:
        chosen = [TRANSFER, *chosen]
    return [(s, size) for s in chosen for size in experiment.sizes if sizes is None or size in sizes]


async def rank_main(
    comm: aiorma.Comm,
    names: list[str],
    sizes: set[int] | None,
    series: set[str] | None,
    reps: int,
    use_mpi: bool,
    pin: bool = True,
) -> dict[str, Any]:
    """Run the named experiments on this rank; return its victim samples (seconds)."""
    mpi = None
    if use_mpi:
        from mpi4py import MPI

        mpi = MPI.COMM_WORLD
    cpus = sorted(os.sched_getaffinity(0)) if pin else None
    ctx = Ctx(comm, mpi, cpus=cpus)
    samples: list[dict[str, Any]] = []
    runs = [(name, s, size) for name in names for s, size in _plan(EXPERIMENTS[name], sizes, series)]
    for index, (name, series_name, size) in enumerate(runs, 1):
        experiment = EXPERIMENTS[name]
        flag = experiment.flag if series_name == FLAG else None
        info = aiorma.Info(**{flag: True}) if flag else aiorma.Info()
        count = 2 * max(experiment.sizes)  # origins write disjoint halves
        windows = [await comm.win_allocate(count, np.uint8, info=info) for _ in range(experiment.windows)]
        data = np.ones(size, np.uint8)
        started = time.perf_counter()
        ctx.pin(experiment.busy_rank)
        for rep in range(WARMUP + reps):
            # Alternate which variant goes first, so slow drifts hit both alike.
            for delayed in (False, True) if rep % 2 == 0 else (True, False):
                victim = await experiment.body(ctx, Iteration(windows, data, series_name, delayed))
                # Every rank has finished this repetition before any prepares the next (a lock
                # taken before t0 must not overtake a slower peer's request of this one).
                await comm.barrier()
                if victim is not None and rep >= WARMUP:
                    samples.append(
                        {
                            "experiment": name,
                            "size": size,
                            "series": series_name,
                            "delayed": delayed,
                            "s": victim,
                        }
                    )
        ctx.unpin()
        for window in windows:
            await window.free()
        if comm.rank == 0:
            took = time.perf_counter() - started
            _log(f"{name} {size} B {series_name}: {reps} reps in {took:.1f} s ({index}/{len(runs)})")
    return {"rank": comm.rank, "samples": samples, "late_starts": ctx.late_starts}


# --------------------------------------------------------------------------- launching


def _groups(experiments: list[Experiment], ranks: int | None) -> list[tuple[int, list[str]]]:
    if ranks is not None:
        return [(ranks, [e.name for e in experiments])]
    by_count: dict[int, list[str]] = defaultdict(list)
    for e in experiments:
        by_count[e.ranks].append(e.name)
    return sorted(by_count.items())


def _filters(args: argparse.Namespace) -> list[str]:
    out = ["--reps", str(args.reps)]
    if args.sizes:
        out += ["--sizes", args.sizes]
    if args.series:
        out += ["--series", args.series]
    if args.no_pin:
        out += ["--no-pin"]
    return out


def _run_local(nprocs: int, names: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    return aiorma.run(
        rank_main,
        names,
        _parse_sizes(args.sizes),
        _parse_series(args.series),
        args.reps,
        False,
        nprocs=nprocs,
    )


def _run_mpi(nprocs: int, names: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    root = Path(aiorma.__file__).resolve().parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="aiorma-patterns-") as tmp:
        worker = [sys.executable, "-m", "aiorma.bench", "patterns", "--worker", tmp]
        cmd = mpiexec_command(nprocs, [*worker, "--only", ",".join(names), *_filters(args)])
        _log(f"{nprocs} ranks: {' '.join(names)}")
        # Own session: a timeout kills mpiexec and every rank together.
        with subprocess.Popen(cmd, env=env, start_new_session=True) as proc:
            try:
                code = proc.wait(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise SystemExit(f"mpiexec job timed out after {args.timeout} s") from None
        if code != 0:
            raise SystemExit(f"mpiexec job exited with {code}")
        return [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("rank*.json"))]


def _worker(args: argparse.Namespace) -> int:
    """Under mpiexec: one rank of a job; writes its samples to ``--worker DIR``."""
    names = args.only.split(",")
    result = aiorma.run(
        rank_main,
        names,
        _parse_sizes(args.sizes),
        _parse_series(args.series),
        args.reps,
        True,
        transport="mpi",
    )
    Path(args.worker, f"rank{result['rank']}.json").write_text(json.dumps(result))
    return 0


# ------------------------------------------------------------------------------ results


def summarize(samples: list[dict[str, Any]], reps: int) -> list[dict[str, Any]]:
    """Medians per (experiment, size, series): victim with the delay, and minus the victim
    without it (propagated).  early_fence's delay is its transfer time, from its ``transfer``
    calibration series."""
    groups: dict[tuple[str, int, str, bool], list[float]] = defaultdict(list)
    for s in samples:
        groups[(s["experiment"], s["size"], s["series"], s["delayed"])].append(s["s"] * 1e6)
    med = {key: statistics.median(values) for key, values in groups.items()}
    records = []
    for (name, size, series, delayed), victim in sorted(med.items()):
        if not delayed or series == TRANSFER or (name, size, series, False) not in med:
            continue
        if name == "early_fence":
            with_transfer, without = (
                med.get((name, size, TRANSFER, True)),
                med.get((name, size, TRANSFER, False)),
            )
            delay_us = (
                with_transfer - without if with_transfer is not None and without is not None else float("nan")
            )
        else:
            delay_us = DELAY * 1e6
        records.append(
            {
                "experiment": name,
                "size_bytes": size,
                "series": series,
                "delay_us": round(delay_us, 1),
                "propagated_us": round(victim - med[(name, size, series, False)], 1),
                "victim_us": round(victim, 1),
                "reps": min(
                    len(groups[(name, size, series, True)]), len(groups[(name, size, series, False)])
                ),
            }
        )
    order = list(EXPERIMENTS)
    records.sort(key=lambda r: (order.index(r["experiment"]), r["size_bytes"], r["series"]))
    return records


def target(record: dict[str, Any]) -> tuple[str, bool | None]:
    """The issue's target for a record, and whether it is met (None: delay not measurable)."""
    share = record["propagated_us"] / record["delay_us"] if record["delay_us"] > 0 else float("nan")
    good = record["series"] == FLAG or (
        record["series"] == NONBLOCKING and EXPERIMENTS[record["experiment"]].series != REORDER_SERIES
    )
    if share != share:  # NaN
        return ("≤ 25 %" if good else "≥ 75 %"), None
    return ("≤ 25 %", share <= GOOD_MAX) if good else ("≥ 75 %", share >= BAD_MIN)


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| experiment | size | series | victim µs | without delay µs | propagated µs | delay µs "
        "| propagated | target | met |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in records:
        goal, met = target(r)
        share = r["propagated_us"] / r["delay_us"] if r["delay_us"] > 0 else float("nan")
        lines.append(
            f"| {r['experiment']} | {_size(r['size_bytes'])} | {r['series']} | {r['victim_us']:.0f} | "
            f"{r['victim_us'] - r['propagated_us']:.0f} | {r['propagated_us']:.0f} | {r['delay_us']:.0f} | "
            f"{share:.0%} | {goal} | {'—' if met is None else 'yes' if met else 'NO'} |"
        )
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def _parse_sizes(text: str | None) -> set[int] | None:
    return {int(x) for x in text.split(",")} if text else None


def _parse_series(text: str | None) -> set[str] | None:
    if not text:
        return None
    chosen = set(text.split(","))
    unknown = chosen - {BLOCKING, NONBLOCKING, FLAG}
    if unknown:
        raise SystemExit(f"unknown series {sorted(unknown)}; use {BLOCKING}, {NONBLOCKING}, {FLAG}")
    return chosen


# --------------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = command_parser(
        "python -m aiorma.bench patterns",
        __doc__,
        epilog="experiments: " + ", ".join(f"{e.name} ({e.ranks} ranks)" for e in EXPERIMENTS.values()),
    )
    parser.add_argument(
        "--transport",
        choices=("mpi", "local"),
        default="mpi",
        help="mpi: ranks under mpiexec; local: ranks in this process (default %(default)s)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the records here as JSON")
    parser.add_argument(
        "--plot", type=plot_directory, metavar="DIR", help="write PNG plots into DIR (needs matplotlib)"
    )
    parser.add_argument("--reps", type=int, default=20, help="repetitions per variant (median; default 20)")
    parser.add_argument("--ranks", type=int, help="run everything in one job of N ranks (extra ranks idle)")
    parser.add_argument("--only", help="comma-separated experiment names (default: all)")
    parser.add_argument("--sizes", help="comma-separated byte counts to keep (e.g. 1,1048576)")
    parser.add_argument("--series", help=f"comma-separated series to keep ({BLOCKING},{NONBLOCKING},{FLAG})")
    parser.add_argument(
        "--no-pin",
        action="store_true",
        help="mpi: do not give the busy-looping rank a core of its own (the others share the rest)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per mpiexec job (default 1800)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one rank under mpiexec
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    names = args.only.split(",") if args.only else list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    needed = max(EXPERIMENTS[n].ranks for n in names)
    if args.ranks is not None and args.ranks < needed:
        bigger = ", ".join(n for n in names if EXPERIMENTS[n].ranks > args.ranks)
        parser.error(f"--ranks {args.ranks}: {bigger} need more")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.worker:
        return _worker(args)
    experiments = [EXPERIMENTS[n] for n in (args.only.split(",") if args.only else EXPERIMENTS)]
    run = _run_mpi if args.transport == "mpi" else _run_local
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    for nprocs, names in _groups(experiments, args.ranks):
        results += run(nprocs, names, args)
    late = sum(r["late_starts"] for r in results)
    if late:
        _log(f"{late} rank-repetitions reached the aligned start late (noisy machine)")
    records = summarize([s for r in results for s in r["samples"]], args.reps)
    _log(f"done in {time.perf_counter() - started:.0f} s")
    pinning = "off" if args.no_pin or args.transport == "local" else "busy rank on its own core"
    print(
        f"transport {args.transport}, medians over {args.reps} repetitions, delay {DELAY * 1e6:.0f} µs, "
        f"pinning {pinning}\n"
    )
    print(table(records))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    if args.plot:
        from ._patterns_plot import plot_all

        for path in plot_all(records, args.plot, title_note=f"{args.transport} transport"):
            _log(f"wrote {path}")
    return 0

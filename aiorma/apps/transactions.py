"""Transactional updates: many small exclusive-lock accumulates to random peers (Zounmevo 2014,
§5.4.2, §5.8.2).

    mpiexec -n 4 python -m aiorma.apps.transactions --json out.json
    python -m aiorma.apps.transactions --local 4 --transactions 500

(``examples/transactions.py`` runs the same with the same options; ``python -m aiorma.bench
transactions`` drives it for several rank counts.)

Every rank runs T transactions.  One transaction is ``lock(target, LOCK_EXCLUSIVE)``, an
``accumulate`` of 32 int64 (256 B) at a random offset of the target's window, ``unlock(target)``:
the exclusive lock makes the 32-element update atomic as a whole, which a bare accumulate (atomic
per element only) would not.  Targets and offsets are random, so nobody knows in advance who will
update whom — the pattern two-sided messages serve badly.

Modes, each on its own window and with the same transactions:

* ``blocking``: every unlock is awaited before the next lock (what blocking MPI imposes).
* ``nonblocking``: transactions are issued without waiting; at most K unlock Requests are in
  flight (a deque; when K are outstanding the oldest is awaited).  The engine still activates the
  lock epochs one at a time, but each as soon as the previous one completes, inside the engine.
* ``nonblocking+aaar``: the same on a window with ``Info(access_after_access_reorder=True)``, so
  lock epochs towards *different* targets are active together (rule 13); two towards the same
  target are still serialised by the exclusive lock itself.
* ``mpi4py`` (not by default; MPI only): the baseline, the same transactions with raw mpi4py's
  blocking ``Win.Lock``/``Accumulate``/``Unlock`` on a ``Win.Allocate`` window, so a run can report
  aiorma's modes as ratios against the MPI library's own.

Verification is exact: each rank's transactions come from ``numpy.random.default_rng([seed,
rank])``, so every rank can replay every rank's plan and compute, element by element, what its own
window must hold after all modes and repeats.  The window is read after ``free()`` (which completes
every epoch and every peer's operations into it).  A lost or doubled update shows as a mismatch.

Throughput of one run is ``ranks × T / (slowest rank's elapsed time)`` after a barrier; with
``--repeats`` the modes are interleaved (so drifting machine load hits them alike) and the median
is reported.  ``CPU µs/tx`` is the CPU time of all ranks per transaction (from one barrier to the
next): when ranks outnumber cores, throughput is bounded by it rather than by latency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

import aiorma

MODES = ("blocking", "nonblocking", "nonblocking+aaar")
MPI4PY = "mpi4py"  # raw mpi4py baseline: not a default mode, and needs mpiexec
KNOWN_MODES = (MPI4PY, *MODES)
UPDATE = 32  # int64 elements per transaction: 256 B
WINDOW = 4096  # int64 elements exposed per rank


@dataclass(frozen=True)
class Options:
    transactions: int = 2000
    inflight: int = 16
    modes: tuple[str, ...] = MODES
    repeats: int = 3
    seed: int = 2024
    window: int = WINDOW
    progress: bool = True


@dataclass(frozen=True)
class Plan:
    """One rank's transactions: ``values[t]`` is accumulated at ``offsets[t]`` of ``targets[t]``."""

    targets: np.ndarray
    offsets: np.ndarray
    values: np.ndarray


def make_plan(seed: int, rank: int, size: int, transactions: int, window: int) -> Plan:
    rng = np.random.default_rng([seed, rank])
    targets = rng.integers(0, size, transactions)
    offsets = rng.integers(0, window - UPDATE + 1, transactions)
    values = rng.integers(-1000, 1001, (transactions, UPDATE), dtype=np.int64)
    return Plan(targets, offsets, values)


def expected_window(options: Options, rank: int, size: int) -> np.ndarray:
    """What ``rank``'s window holds after every rank ran its plan ``repeats`` times."""
    expected = np.zeros(options.window, np.int64)
    columns = np.arange(UPDATE)
    for origin in range(size):
        plan = make_plan(options.seed, origin, size, options.transactions, options.window)
        mine = plan.targets == rank
        np.add.at(expected, plan.offsets[mine, None] + columns, plan.values[mine])
    return expected * options.repeats


async def run_transactions(
    win: aiorma.Window, plan: Plan, blocking: bool, inflight: int, report: str | None
) -> float:
    """Issue every transaction of ``plan``; return the seconds until all have completed."""
    pending: deque[tuple[aiorma.Request, aiorma.Request, aiorma.Request]] = deque()
    total = len(plan.targets)
    next_report = time.perf_counter() + 2.0
    start = time.perf_counter()
    for t in range(total):
        target = int(plan.targets[t])
        # The lock is not awaited even in blocking mode (MPICH's MPI_Win_lock returns at once too):
        # the accumulate is recorded and replayed when the grant arrives.
        locked = win.lock(target, aiorma.LOCK_EXCLUSIVE)
        updated = win.accumulate(plan.values[t], target, int(plan.offsets[t]), aiorma.SUM)
        unlocked = win.unlock(target)
        if blocking:
            await unlocked
            await locked
            await updated
        else:
            pending.append((locked, updated, unlocked))
            if len(pending) >= inflight:
                # Unlock completing implies its lock and accumulate did: those awaits do not yield.
                for request in reversed(pending.popleft()):
                    await request
        if report is not None and time.perf_counter() >= next_report:
            print(f"{report}: {t + 1}/{total} transactions issued", file=sys.stderr, flush=True)
            next_report += 2.0
    while pending:
        for request in reversed(pending.popleft()):
            await request
    return time.perf_counter() - start


class Mpi4pyWindow:
    """The ``mpi4py`` mode's window: the same transactions through blocking MPI calls.

    Only under mpiexec with aiorma's MPI transport (its ``comm`` is ``MPI.COMM_WORLD``'s ranks).
    """

    def __init__(self, window: int, size: int) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        if self.comm.size != size:  # e.g. in-process ranks (--local): MPI has just this process
            raise ValueError("the mpi4py mode needs every rank under mpiexec (not --local)")
        self.win = MPI.Win.Allocate(window * 8, 8, comm=self.comm)
        self.local = np.frombuffer(self.win.tomemory(), np.int64)
        self.win.Lock(self.comm.rank, MPI.LOCK_EXCLUSIVE)
        self.local[:] = 0
        self.win.Unlock(self.comm.rank)
        self.comm.Barrier()  # nobody accumulates into a window not yet zeroed

    def run(self, plan: Plan, report: str | None) -> float:
        """Every transaction of ``plan``, one blocking lock/accumulate/unlock after another."""
        MPI, win = self.MPI, self.win
        total = len(plan.targets)
        next_report = time.perf_counter() + 2.0
        start = time.perf_counter()
        for t in range(total):
            target = int(plan.targets[t])
            win.Lock(target, MPI.LOCK_EXCLUSIVE)
            # Both sides typed INT64_T: numpy's int64 would map to MPI_LONG, a different signature.
            update = [plan.values[t], MPI.INT64_T]
            win.Accumulate(update, target, (int(plan.offsets[t]), UPDATE, MPI.INT64_T), MPI.SUM)
            win.Unlock(target)
            if report is not None and time.perf_counter() >= next_report:
                print(f"{report}: {t + 1}/{total} transactions done", file=sys.stderr, flush=True)
                next_report += 2.0
        return time.perf_counter() - start

    def barrier(self) -> None:
        # MPI's own barrier, not aiorma's: ranks wait inside MPI, where MPICH serves the lock
        # requests of ranks still running (as in a plain mpi4py program).
        self.comm.Barrier()

    def free(self) -> np.ndarray:
        """Free the window after every rank is done with it; return a copy of its final contents."""
        self.comm.Barrier()
        self.win.Lock(self.comm.rank, self.MPI.LOCK_SHARED)  # the public copy, synchronised
        final = self.local.copy()
        self.win.Unlock(self.comm.rank)
        self.win.Free()
        return final


async def main(comm: aiorma.Comm, options: Options) -> dict[str, object]:
    """Run every mode ``repeats`` times; return this rank's times and verification per mode."""
    plan = make_plan(options.seed, comm.rank, comm.size, options.transactions, options.window)
    windows: dict[str, aiorma.Window | Mpi4pyWindow] = {}
    for mode in options.modes:
        if mode == MPI4PY:
            windows[mode] = Mpi4pyWindow(options.window, comm.size)
            continue
        info = aiorma.Info(access_after_access_reorder=mode == "nonblocking+aaar")
        windows[mode] = await comm.win_allocate(options.window, np.int64, info)
    elapsed: dict[str, list[float]] = {mode: [] for mode in options.modes}
    cpu: dict[str, list[float]] = {mode: [] for mode in options.modes}
    for repeat in range(options.repeats):
        for mode in options.modes:
            await comm.barrier()  # start together: a run's time is the slowest rank's
            label = f"[transactions] {mode} run {repeat + 1}/{options.repeats}"
            report = label if options.progress and comm.rank == 0 else None
            cpu_start = time.process_time()
            win = windows[mode]
            if isinstance(win, Mpi4pyWindow):
                win.barrier()
                cpu_start = time.process_time()
                seconds = win.run(plan, report)
                win.barrier()
            else:
                seconds = await run_transactions(win, plan, mode == "blocking", options.inflight, report)
                # CPU until every rank is done: a rank that finished early still serves lock requests.
                await comm.barrier()
            cpu[mode].append(time.process_time() - cpu_start)
            elapsed[mode].append(seconds)
            if report is not None:
                print(f"{label}: done in {seconds:.3f} s (rank 0)", file=sys.stderr, flush=True)
    expected = expected_window(options, comm.rank, comm.size)
    verified = {}
    for mode, win in windows.items():
        if isinstance(win, Mpi4pyWindow):
            verified[mode] = bool(np.array_equal(win.free(), expected))
            continue
        # free() completes every epoch and every peer's operations into this window; afterwards
        # win.memory is a private copy of the final contents.
        await win.free()
        verified[mode] = bool(np.array_equal(win.memory, expected))
    return {"elapsed": elapsed, "cpu": cpu, "pid": os.getpid(), "verified": verified}


def summarize(options: Options, ranks: list[dict[str, object]]) -> dict[str, object]:
    """Combine every rank's result: job throughput per run (slowest rank), median over runs."""
    size = len(ranks)
    modes = {}
    for mode in options.modes:
        runs = [max(r["elapsed"][mode][i] for r in ranks) for i in range(options.repeats)]  # type: ignore[index]
        rates = [size * options.transactions / s for s in runs]
        # process_time() is per process: count each process once (--local puts every rank in one).
        processes = list({r["pid"]: r for r in ranks}.values())
        cpu = [sum(r["cpu"][mode][i] for r in processes) for i in range(options.repeats)]  # type: ignore[index]
        modes[mode] = {
            "tx_per_s": statistics.median(rates),
            "tx_per_s_runs": rates,
            # CPU seconds of all ranks per transaction: what a loaded machine makes scarce.
            "cpu_us_per_tx": 1e6 * statistics.median(cpu) / (size * options.transactions),
            "verified": all(r["verified"][mode] for r in ranks),  # type: ignore[index]
        }
    return {
        "ranks": size,
        "transactions_per_rank": options.transactions,
        "inflight": options.inflight,
        "repeats": options.repeats,
        "bytes_per_update": UPDATE * 8,
        "modes": modes,
    }


def print_table(summary: dict[str, object]) -> None:
    modes: dict[str, dict[str, object]] = summary["modes"]  # type: ignore[assignment]
    base = modes.get("blocking", {}).get("tx_per_s")
    mpi = modes.get(MPI4PY, {}).get("tx_per_s")
    print(
        f"{summary['ranks']} ranks, {summary['transactions_per_rank']} transactions per rank "
        f"of {summary['bytes_per_update']} B, at most {summary['inflight']} in flight, "
        f"median of {summary['repeats']} runs"
    )
    print(
        f"{'mode':<18} {'tx/s (job)':>12} {'vs blocking':>12} {'vs mpi4py':>10} {'CPU µs/tx':>10}  verified"
    )
    for mode, row in modes.items():
        ratio = f"{row['tx_per_s'] / base:.2f}x" if base else "-"
        vs_mpi = f"{row['tx_per_s'] / mpi:.3g}x" if mpi else "-"
        rate, cpu = row["tx_per_s"], row["cpu_us_per_tx"]
        print(f"{mode:<18} {rate:>12.0f} {ratio:>12} {vs_mpi:>10} {cpu:>10.0f}  {row['verified']}")


def parse(argv: list[str] | None = None) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--transactions",
        "-T",
        type=int,
        default=Options.transactions,
        metavar="T",
        help="transactions per rank per run (default %(default)s)",
    )
    parser.add_argument(
        "--inflight",
        "-K",
        type=int,
        default=Options.inflight,
        metavar="K",
        help="nonblocking modes: most transactions outstanding per rank (default %(default)s)",
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated, from " + ", ".join(KNOWN_MODES)
    )
    parser.add_argument(
        "--repeats", type=int, default=Options.repeats, help="runs per mode, interleaved (median)"
    )
    parser.add_argument(
        "--seed", type=int, default=Options.seed, help="seed of every rank's plan (default %(default)s)"
    )
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in-process instead of MPI")
    parser.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = [m for m in modes if m not in KNOWN_MODES]
    if unknown or not modes:
        parser.error(f"unknown mode(s) {unknown}; choose from {', '.join(KNOWN_MODES)}")
    if args.local is not None and MPI4PY in modes:
        parser.error("the mpi4py mode needs mpiexec, not --local")
    if args.transactions < 1 or args.inflight < 1 or args.repeats < 1:
        parser.error("--transactions, --inflight and --repeats must be at least 1")
    if args.local is not None and args.local < 1:
        parser.error("--local needs at least one rank")
    options = Options(
        transactions=args.transactions,
        inflight=args.inflight,
        modes=modes,
        repeats=args.repeats,
        seed=args.seed,
        progress=not args.quiet,
    )
    return options, args


def finish(options: Options, ranks: list[dict[str, object]], json_path: str | None) -> int:
    summary = summarize(options, ranks)
    print_table(summary)
    if json_path:
        with open(json_path, "w") as out:
            json.dump(summary, out, indent=2)
    verified = all(row["verified"] for row in summary["modes"].values())  # type: ignore[union-attr]
    print("verified: every window holds exactly the sum of all updates" if verified else "LOST UPDATES")
    return 0 if verified else 1


def cli(argv: list[str] | None = None) -> int:
    """Run from the command line: ``--local N`` ranks in this process, else one rank per
    process under ``mpiexec``; rank 0 prints the table.  Returns the exit status (1 on a lost
    update), the same on every rank."""
    options, args = parse(argv)
    if args.local:
        return finish(options, aiorma.run(main, options, nprocs=args.local), args.json)
    from mpi4py import MPI

    mine = aiorma.run(main, options)
    everyone = MPI.COMM_WORLD.gather(mine, root=0)
    code = finish(options, everyone, args.json) if MPI.COMM_WORLD.rank == 0 else 0
    return int(MPI.COMM_WORLD.bcast(code, root=0))


if __name__ == "__main__":
    sys.exit(cli())

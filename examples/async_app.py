"""An asyncio application: 2-D heat diffusion whose halo exchange runs in GATS epochs.

    mpiexec -n 4 python examples/async_app.py --size 512 --steps 300
    python examples/async_app.py --local 4

The square grid (fixed boundary: a hot top edge, cold elsewhere) is split into horizontal strips,
one per rank.  Each rank exposes its strip *with one halo row above and below* in a window.  Every
time step:

1. ``post`` to the neighbours (they may write our halo rows) and ``start`` towards them;
2. ``put`` our first row into the upper neighbour's lower halo and our last row into the lower
   neighbour's upper halo; ``complete()`` and ``wait()`` close the epochs *at the call* and hand
   back Requests;
3. compute the interior rows, which need no halo, while the rows travel — yielding to the event
   loop between chunks;
4. ``await`` the two Requests — our rows have landed, the neighbours' rows are in our halos — and
   compute the two edge rows.

Beside the solver, an independent asyncio task on rank 0 reports progress: every rank leaves its
latest (step, ‖Δu‖²) in rank 0's *monitor* window with a shared-lock put whose unlock Request it
keeps (never waiting on it), and the reporter reads the window with a get under its own shared
lock and prints the step and the global residual ‖u_{t+1} − u_t‖.  Neither task blocks the other.

At the end each rank compares its strip with a serial numpy computation of the whole grid, which
does the same floating-point operations in the same order, so the match is exact.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from dataclasses import dataclass

import numpy as np

import aiorma

ALPHA = 0.2  # explicit scheme, stable for ALPHA <= 0.25
CHUNK_ROWS = 32  # interior rows computed between yields to the event loop


@dataclass(frozen=True)
class Options:
    size: int = 256
    steps: int = 200
    report_every: float = 0.25  # seconds between progress reports
    seed: int = 11


def initial_grid(options: Options) -> np.ndarray:
    rng = np.random.default_rng([options.seed, options.size])
    u = np.zeros((options.size, options.size))
    u[1:-1, 1:-1] = rng.uniform(0.0, 0.1, (options.size - 2, options.size - 2))
    u[0, :] = 1.0  # the hot edge
    return u


def stencil(u: np.ndarray, out: np.ndarray, rows: slice) -> None:
    """New values for ``rows`` of ``u`` (which has a row above and below them) into ``out``.
    Edge columns stay fixed.  The serial reference uses this very function."""
    lo, hi = rows.start, rows.stop
    centre = u[lo:hi, 1:-1]
    out[lo:hi, 1:-1] = centre + ALPHA * (
        u[lo - 1 : hi - 1, 1:-1] + u[lo + 1 : hi + 1, 1:-1] + u[lo:hi, :-2] + u[lo:hi, 2:] - 4.0 * centre
    )
    out[lo:hi, 0] = u[lo:hi, 0]
    out[lo:hi, -1] = u[lo:hi, -1]


def serial(options: Options) -> np.ndarray:
    u = initial_grid(options)
    new = u.copy()
    for _ in range(options.steps):
        stencil(u, new, slice(1, options.size - 1))
        u, new = new, u
    return u


def strip_rows(size: int, ranks: int, rank: int) -> tuple[int, int]:
    """Global interior rows [first, stop) of ``rank``'s strip (rows 1 .. size-2, split evenly)."""
    interior = size - 2
    base, extra = divmod(interior, ranks)
    first = 1 + rank * base + min(rank, extra)
    return first, first + base + (rank < extra)


class Monitor:
    """Rank 0's window of (step, ‖Δu‖²) pairs, one per rank, and the reporter that reads it."""

    def __init__(self, win: aiorma.Window) -> None:
        self.win = win
        self.sent: list[aiorma.Request] = []
        self.reports: list[tuple[int, float]] = []

    def publish(self, step: int, change2: float) -> None:
        """Leave this rank's latest values at rank 0: a nonblocking shared-lock epoch."""
        rank = self.win.rank
        self.win.lock(0, aiorma.LOCK_SHARED)
        self.win.put(np.array([step, change2]), 0, 2 * rank)
        self.sent.append(self.win.unlock(0))
        while self.sent and self.sent[0].done():  # retire finished ones without waiting
            self.sent.pop(0)

    async def flush(self) -> None:
        for request in self.sent:
            await request
        self.sent.clear()

    async def read(self) -> tuple[int, float]:
        values = np.empty(self.win.counts[0])
        self.win.lock(0, aiorma.LOCK_SHARED)
        self.win.get(values, 0, 0)
        await self.win.unlock(0)
        steps, change2 = values[0::2], values[1::2]
        return int(steps.min()), float(np.sqrt(change2.sum()))

    async def reporter(self, stop: asyncio.Event, every: float, total: int) -> None:
        """Print the slowest rank's step and the global residual every ``every`` seconds; once
        ``stop`` is set, one last report, read after the end."""
        while True:
            with contextlib.suppress(TimeoutError):  # a tick, or the end
                await asyncio.wait_for(stop.wait(), every)
            # Decided before reading: a read that starts just before the end and returns the
            # second-to-last step is followed by one more, started after the end.
            final = stop.is_set()
            step, residual = await self.read()
            self.reports.append((step, residual))
            print(f"[progress] step {step}/{total}  residual ‖Δu‖ = {residual:.3e}", flush=True)
            if final:
                return


async def main(comm: aiorma.Comm, options: Options) -> dict[str, object]:
    rank, size, n = comm.rank, comm.size, options.size
    first, stop = strip_rows(n, size, rank)
    height = stop - first
    grid = initial_grid(options)
    # The strip with its halo rows lives in the window: rows 0 and height+1 are the halos.
    u = np.ascontiguousarray(grid[first - 1 : stop + 1])
    new = u.copy()
    win = await comm.win_create(u)
    monitor = Monitor(await comm.win_allocate(2 * size if rank == 0 else 0, np.float64))
    up = rank - 1 if rank > 0 else None
    down = rank + 1 if rank < size - 1 else None
    neighbours = [r for r in (up, down) if r is not None]

    stop_reporting = asyncio.Event()
    reporter = (
        asyncio.create_task(monitor.reporter(stop_reporting, options.report_every, options.steps))
        if rank == 0
        else None
    )
    start = time.perf_counter()
    for step in range(1, options.steps + 1):
        if neighbours:
            win.post(neighbours)
            win.start(neighbours)
            if up is not None:  # our first row -> the upper neighbour's lower halo
                win.put(u[1], up, win.counts[up] - n)
            if down is not None:  # our last row -> the lower neighbour's upper halo
                win.put(u[height], down, 0)
            sent = win.complete()  # both epochs are closed here, at the call ...
            received = win.wait()
        for lo in range(2, height, CHUNK_ROWS):  # ... and the interior is computed meanwhile
            stencil(u, new, slice(lo, min(lo + CHUNK_ROWS, height)))
            await asyncio.sleep(0)  # let the progress engine and the reporter run
        if neighbours:
            await sent  # our rows are in the neighbours' halos; u[1], u[height] reusable
            await received  # the neighbours' rows are in our halos
        stencil(u, new, slice(1, 2))
        if height > 1:
            stencil(u, new, slice(height, height + 1))
        change2 = float(np.sum((new[1 : height + 1] - u[1 : height + 1]) ** 2))
        u[1 : height + 1] = new[1 : height + 1]  # the halo rows are the neighbours' to write
        monitor.publish(step, change2)
    elapsed = time.perf_counter() - start

    await monitor.flush()
    await comm.barrier()  # every rank's last values are in the monitor before the final report
    stop_reporting.set()
    if reporter is not None:
        await reporter
    await win.free()
    await monitor.win.free()

    reference = serial(options)[first:stop]
    diff = float(np.max(np.abs(u[1 : height + 1] - reference))) if height else 0.0
    return {
        "max_abs_diff": diff,
        "exact": bool(np.array_equal(u[1 : height + 1], reference)),
        "elapsed_s": elapsed,
        "reports": monitor.reports,
    }


def finish(options: Options, ranks: list[dict[str, object]], json_path: str | None) -> int:
    diff = max(r["max_abs_diff"] for r in ranks)  # type: ignore[type-var]
    exact = all(r["exact"] for r in ranks)
    reports = ranks[0]["reports"]
    verified = diff <= 1e-12
    summary = {
        "ranks": len(ranks),
        "size": options.size,
        "steps": options.steps,
        "max_abs_diff": diff,
        "exact": exact,
        "verified": verified,
        "reports": len(reports),  # type: ignore[arg-type]
        "final_step_reported": reports[-1][0] if reports else None,  # type: ignore[index]
        "elapsed_s": max(r["elapsed_s"] for r in ranks),  # type: ignore[type-var]
    }
    print(
        f"{options.size}x{options.size} grid, {options.steps} steps on {len(ranks)} ranks in "
        f"{summary['elapsed_s']:.2f} s; {summary['reports']} progress reports"
    )
    print(
        f"{'verified' if verified else 'FAILED'}: matches the serial numpy computation "
        f"(max |diff| = {diff:.1e}{', bit for bit' if exact else ''})"
    )
    if json_path:
        with open(json_path, "w") as out:
            json.dump(summary, out, indent=2)
    return 0 if verified else 1


def parse(argv: list[str] | None = None) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=Options.size, help="grid points per side")
    parser.add_argument("--steps", type=int, default=Options.steps)
    parser.add_argument("--report-every", type=float, default=Options.report_every, metavar="SECONDS")
    parser.add_argument("--seed", type=int, default=Options.seed)
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in-process instead of MPI")
    parser.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.report_every <= 0:
        parser.error("--steps must be at least 1 and --report-every positive")
    ranks = args.local or 1
    if args.size < 3 or args.size - 2 < ranks:
        parser.error("--size must leave at least one interior row per rank")
    options = Options(size=args.size, steps=args.steps, report_every=args.report_every, seed=args.seed)
    return options, args


if __name__ == "__main__":
    opts, cli = parse()
    if cli.local:
        sys.exit(finish(opts, aiorma.run(main, opts, nprocs=cli.local), cli.json))
    from mpi4py import MPI

    if opts.size - 2 < MPI.COMM_WORLD.size:
        sys.exit("--size must leave at least one interior row per rank")
    mine = aiorma.run(main, opts)
    everyone = MPI.COMM_WORLD.gather(mine, root=0)
    code = finish(opts, everyone, cli.json) if MPI.COMM_WORLD.rank == 0 else 0
    sys.exit(MPI.COMM_WORLD.bcast(code, root=0))

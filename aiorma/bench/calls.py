"""Python calls per transaction and per epoch: what the interpreter runs for each, counted.

    python -m aiorma.bench calls [--ranks P] [--transactions T] [--epochs N] [--json PATH]
                                 [--plot DIR [--compare PATH]] [--emulate-nodes K]

Launches itself on ``--ranks`` ranks (2 by default) under the mpich wheel's ``mpiexec`` and
counts, with :mod:`cProfile` on rank 0, the Python-level calls (functions and builtins) made per
unit of work:

* ``transactions <mode>``: the transactional update of :mod:`aiorma.apps.transactions`
  (exclusive lock, a 256 B accumulate, unlock, on random targets), for its three modes;
* ``lock/put/unlock``, ``fence/put/fence``, ``pscw``: one 8-byte epoch, awaited call by call
  (rank 0 the origin, rank 1 the target), as ``bench hotpath`` times them.

Two counts per row: **aiorma** — calls into the code every call of the program goes through
(``Window``, ``Request``, the engine package, the driver's request bookkeeping); **all** —
everything, polls, the transport and the event loop included (it grows when a rank waits, so it
moves with the machine's load).  Where the time goes is what the benchmark's time-based siblings
measure; this one shows what a change to the code's structure saved, reproducibly.
``--plot DIR`` draws the aiorma-path counts into ``DIR/calls.png``, beside those of an earlier
``--json`` result given with ``--compare`` (e.g. the same command run in the tree before a change).

The ranks run the engine from source (``AIORMA_PURE_PYTHON=1``): the profiler sees no call inside
a compiled module, and what is counted is the structure of the code, not how fast it runs.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import _native
from .._cli import command_parser, plot_directory
from ._launch import add_emulate_nodes_option, ensure_mpi_ranks, launched_rank

#: The code every call of the program passes through: (file suffix, functions or None for all).
CALL_PATH: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("aiorma/window.py", None),
    ("aiorma/request.py", frozenset({"__init__", "finished", "__await__"})),
    ("aiorma/_core/driver.py", frozenset({"request", "_finish", "issue", "watch"})),
    *(
        (f"aiorma/engine/{name}.py", None)
        for name in (
            "window_engine",
            "lock_protocol",
            "activation",
            "completion",
            "checks",
            "epochs",
            "rules",
        )
    ),
)


def _on_path(filename: str, function: str) -> bool:
    filename = filename.replace("\\", "/")
    return any(
        filename.endswith(suffix) and (names is None or function in names) for suffix, names in CALL_PATH
    )


def count(profile: cProfile.Profile, units: int) -> dict[str, float]:
    """Calls per unit in ``profile``: on aiorma's path and in all."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    on_path = sum(
        calls for (filename, _, name), (_, calls, *_rest) in stats.items() if _on_path(filename, name)
    )
    everything = sum(calls for _, calls, *_rest in stats.values())
    return {"aiorma": on_path / units, "all": everything / units}


async def _profiled(comm: Any, units: int, work: Callable[[], Awaitable[None]]) -> dict[str, float] | None:
    """Run ``work`` once untimed (warm-up), then once under the profiler on rank 0."""
    await work()
    await comm.barrier()
    profile = cProfile.Profile()
    if comm.rank == 0:
        profile.enable()
    await work()
    profile.disable()
    await comm.barrier()
    return count(profile, units) if comm.rank == 0 else None


async def run(comm: Any, options: argparse.Namespace) -> dict[str, dict[str, float]]:
    import aiorma
    from aiorma.apps.transactions import MODES, make_plan, run_transactions

    rows: dict[str, dict[str, float]] = {}
    for mode in MODES:
        info = aiorma.Info(access_after_access_reorder=True) if mode.endswith("aaar") else None
        win = await comm.win_allocate(4096, np.int64, info=info)
        plan = make_plan(1, comm.rank, comm.size, options.transactions, 4096)

        async def transactions(win: Any = win, plan: Any = plan, mode: str = mode) -> None:
            await run_transactions(win, plan, mode == "blocking", 16, None)

        result = await _profiled(comm, options.transactions, transactions)
        if result is not None:
            rows[f"transactions {mode}"] = result
        await win.free()

    win = await comm.win_allocate(8, np.int64)
    origin = np.ones(1, np.int64)
    n = options.epochs

    async def lock_put_unlock() -> None:
        if comm.rank == 0:
            for _ in range(n):
                await win.lock(1, aiorma.LOCK_EXCLUSIVE)
                win.put(origin, 1)
                await win.unlock(1)

    async def fence_put_fence() -> None:
        for _ in range(n):
            await win.fence(aiorma.MODE_NOPRECEDE)
            if comm.rank == 0:
                win.put(origin, 1)
            await win.fence(aiorma.MODE_NOSUCCEED)

    async def pscw() -> None:
        for _ in range(n):
            if comm.rank == 0:
                await win.start([1])
                win.put(origin, 1)
                await win.complete()
            elif comm.rank == 1:
                await win.post([0])
                await win.wait()

    for name, work in (
        ("lock/put/unlock", lock_put_unlock),
        ("fence/put/fence", fence_put_fence),
        ("pscw", pscw),
    ):
        result = await _profiled(comm, n, work)
        if result is not None:
            rows[name] = result
    await win.free()
    return rows


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench calls", __doc__)
    parser.add_argument("--ranks", type=int, default=2, help="ranks to run (default %(default)s)")
    parser.add_argument(
        "--transactions", type=int, default=2000, help="transactions per rank and mode (default %(default)s)"
    )
    parser.add_argument("--epochs", type=int, default=2000, help="epochs per case (default %(default)s)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the counts here")
    parser.add_argument(
        "--plot", type=plot_directory, metavar="DIR", help="draw DIR/calls.png (needs matplotlib)"
    )
    parser.add_argument(
        "--compare", type=Path, metavar="PATH", help="with --plot: an earlier --json result to draw beside"
    )
    add_emulate_nodes_option(parser)
    options = parser.parse_args(argv)
    if options.ranks < 2:
        parser.error("--ranks must be at least 2 (the epochs have an origin and a target)")
    # The ranks inherit it (see the module docstring); it is read when they import aiorma.
    os.environ[_native.PURE_VARIABLE] = "1"
    if ensure_mpi_ranks(options.ranks, "aiorma.bench", ["calls", *argv], options.emulate_nodes):
        return 0

    import aiorma

    rows = aiorma.run(run, options)
    if launched_rank() != 0:
        return 0
    print(f"calls, {options.ranks} ranks, rank 0; Python calls per unit (cProfile)", file=sys.stderr)
    print(f"{'unit':34} {'aiorma':>8} {'all':>8}")
    for name, row in rows.items():
        print(f"{name:34} {row['aiorma']:>8.1f} {row['all']:>8.1f}")
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps({"ranks": options.ranks, "rows": rows}, indent=1))
    if options.plot:
        earlier = json.loads(options.compare.read_text())["rows"] if options.compare else None
        print("wrote", plot(rows, earlier, options.plot))
    return 0


Rows = dict[str, dict[str, float]]


def plot(current: Rows, earlier: Rows | None, directory: Path) -> Path:
    """Bars of the aiorma-path calls per unit of ``current`` (and ``earlier`` beside it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    units = list(current)
    series = [(label, rows) for label, rows in (("before (--compare)", earlier), ("now", current)) if rows]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(series)
    for i, (label, rows) in enumerate(series):
        xs = [u + (i - (len(series) - 1) / 2) * width for u in range(len(units))]
        bars = ax.bar(xs, [rows[unit]["aiorma"] for unit in units], width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_xticks(range(len(units)), [unit.replace("transactions ", "tx ") for unit in units], fontsize=8)
    ax.set_ylabel("Python calls per unit on aiorma's path")
    ax.set_title("Calls per transaction and per epoch, rank 0 (python -m aiorma.bench calls)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "calls.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""The CPU atomics' two forms, compiled and through ctypes, in the same process, batch by batch.

    python -m aiorma.bench atomics [--iters N] [--repeats R] [--json PATH]

Launches itself on 2 ranks under the mpich wheel's ``mpiexec``.  On one node the control words'
atomics (the lock queue's swap and compare-and-swap, the counters) are the CPU's own
instructions (aiorma/transport/mpi/cpu_atomics.py), called either through the C extension that
``./dev/setup.sh`` builds beside the compiled engine or through ``ctypes`` and ``libatomic``.
Rank 0 times, alternating the two forms batch by batch (so both see the same machine), while
rank 1 waits in the event loop (the lock is passive: rank 1 does nothing for it):

* ``lock/put/unlock``: an exclusive lock of rank 1, one 8-byte put, unlock, each awaited;
* ``transaction``: lock, a 256-byte accumulate, unlock, awaited, towards ranks 0 and 1 in turn
  (the epoch of ``aiorma.apps.transactions``, without contention).

Reported: the median µs per epoch of each form and the median of the per-round ratios compiled /
ctypes (below 1: the compiled form saves that share), with the quartiles of those ratios.  Needs
the build (``./dev/setup.sh``) and ``libatomic``; says so and exits 1 without either.
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

from .._cli import command_parser
from ..constants import LOCK_EXCLUSIVE, SUM
from ._launch import ensure_mpi_ranks, launched_rank

CASES = ("lock/put/unlock", "transaction")
FORMS = ("ctypes", "compiled")


async def _batch(win: Any, case: str, iters: int) -> float:
    """Seconds per epoch of one batch of ``case`` (rank 0)."""
    one, update = np.ones(1, np.int64), np.ones(32, np.int64)
    start = time.perf_counter()
    if case == "lock/put/unlock":
        for _ in range(iters):
            await win.lock(1, LOCK_EXCLUSIVE)
            win.put(one, 1)
            await win.unlock(1)
    else:
        for i in range(iters):
            target = i & 1
            win.lock(target, LOCK_EXCLUSIVE)
            win.accumulate(update, target, 64, SUM)
            await win.unlock(target)
    return (time.perf_counter() - start) / iters


async def run(comm: Any, options: argparse.Namespace) -> dict[str, Any]:
    from ..transport.mpi.cpu_atomics import load_compiled, load_library

    endpoint = comm.world.endpoint
    forms = {"ctypes": load_library(), "compiled": load_compiled()}
    missing = [name for name, form in forms.items() if form is None]
    if getattr(endpoint, "cpu_atomics", None) is None:
        missing.append("CPU atomics in use (every rank on one node, AIORMA_INLINE not 0)")
    win = await comm.win_allocate(4096, np.int64)
    samples: dict[str, dict[str, list[float]]] = {case: {form: [] for form in FORMS} for case in CASES}
    if comm.rank == 0 and not missing:
        for case in CASES:
            for round_ in range(options.repeats):
                for form in FORMS if round_ % 2 else reversed(FORMS):
                    endpoint.cpu_atomics = forms[form]
                    samples[case][form].append(1e6 * await _batch(win, case, options.iters))
            print(f"[atomics] {case} done", file=sys.stderr, flush=True)
    await comm.barrier()  # rank 1 waits here, in the event loop
    await win.free()
    return {"missing": missing, "samples": samples}


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench atomics", __doc__)
    parser.add_argument("--iters", type=int, default=1000, help="epochs per batch (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=30, help="batches per form and case (%(default)s)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write medians, ratios, samples here")
    options = parser.parse_args(argv)
    if options.iters < 1 or options.repeats < 2:
        parser.error("--iters must be at least 1 and --repeats at least 2")
    if ensure_mpi_ranks(2, "aiorma.bench", ["atomics", *argv], 0):
        return 0

    import aiorma

    result = aiorma.run(run, options)
    if launched_rank() != 0:
        return 0
    if result["missing"]:
        print(f"atomics: cannot compare, missing: {', '.join(result['missing'])}", file=sys.stderr)
        return 1
    print(f"atomics, 2 ranks, {options.repeats} batches of {options.iters} per form; µs per epoch (median)")
    print(f"  {'case':18}{'ctypes':>9}{'compiled':>10}{'ratio':>8}   quartiles")
    summary: dict[str, dict[str, float]] = {}
    for case, per_form in result["samples"].items():
        ratios = [c / t for t, c in zip(per_form["ctypes"], per_form["compiled"], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios)
        medians = {form: statistics.median(values) for form, values in per_form.items()}
        summary[case] = {**medians, "ratio": statistics.median(ratios), "q1": q1, "q3": q3}
        print(
            f"  {case:18}{medians['ctypes']:9.1f}{medians['compiled']:10.1f}"
            f"{summary[case]['ratio']:8.3f}   {q1:.3f}-{q3:.3f}"
        )
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps({"summary": summary, "samples": result["samples"]}, indent=1))
    return 0

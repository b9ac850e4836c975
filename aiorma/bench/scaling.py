"""Held epochs: time per epoch when N epochs are opened and closed without awaiting, then awaited.

    python -m aiorma.bench scaling [--transport local|mpi] [--counts 10,100,1000,10000] [--json PATH]

Two ranks.  For each kind (fence, pscw, lock, lock_all) and each N, every rank opens and closes N
epochs of that kind with one 8-byte put each, keeping the closing Requests, then awaits them all.
The engine holds up to N deferred epochs at once; if anything were scanned per epoch, the time per
epoch would grow with N.  ``mpi`` launches itself on 2 ranks under the mpich wheel's ``mpiexec``.
Reported: the time per epoch in microseconds (µs) for each kind and N, and the spread — the
largest over the smallest time per epoch among N ≥ 100 (flat: about 1).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._cli import command_parser
from ._launch import ensure_mpi_ranks, launched_rank

KINDS = ("fence", "pscw", "lock", "lock_all")


async def held_epochs(comm: Any, kind: str, count: int) -> float:
    """Seconds per epoch on this rank for ``count`` held epochs of ``kind``."""
    import aiorma

    win = await comm.win_allocate(4, np.int64)
    other = (comm.rank + 1) % comm.size
    source = (comm.rank - 1) % comm.size
    data = np.ones(1, np.int64)
    if kind == "fence":
        win.fence()
    await comm.barrier()
    start = time.perf_counter()
    held = []
    for _ in range(count):
        if kind == "fence":
            win.put(data, other)
            held.append(win.fence())
        elif kind == "pscw":
            win.post([source])
            win.start([other])
            win.put(data, other)
            held.append(win.complete())
            held.append(win.wait())
        elif kind == "lock":
            win.lock(other)
            win.put(data, other)
            held.append(win.unlock(other))
        else:
            win.lock_all()
            win.put(data, other)
            held.append(win.unlock_all())
    for request in held:
        await request
    elapsed = time.perf_counter() - start
    if kind == "fence":
        await win.fence(aiorma.MODE_NOSUCCEED)
    await win.free()
    return elapsed / count


async def measure(comm: Any, counts: list[int]) -> list[dict[str, Any]]:
    records = []
    for kind in KINDS:
        for count in counts:
            per_epoch = await held_epochs(comm, kind, count)
            if comm.rank == 0:
                records.append({"kind": kind, "held": count, "us_per_epoch": per_epoch * 1e6})
                print(
                    f"[scaling] {kind} {count}: {per_epoch * 1e6:.1f} µs/epoch", file=sys.stderr, flush=True
                )
    return records


def report(records: list[dict[str, Any]]) -> None:
    counts = sorted({r["held"] for r in records})
    print(f"{'kind':9}" + "".join(f"{c:>10}" for c in counts) + f"{'max/min (N>=100)':>18}")
    for kind in KINDS:
        row = {r["held"]: r["us_per_epoch"] for r in records if r["kind"] == kind}
        big = [row[c] for c in counts if c >= 100]
        spread = max(big) / min(big) if big else float("nan")
        print(f"{kind:9}" + "".join(f"{row[c]:>10.1f}" for c in counts) + f"{spread:>18.2f}")


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench scaling", __doc__)
    parser.add_argument(
        "--transport",
        choices=("local", "mpi"),
        default="local",
        help="local: both ranks in this process; mpi: 2 ranks under mpiexec (default %(default)s)",
    )
    parser.add_argument(
        "--counts",
        default="10,100,1000,10000",
        help="comma-separated numbers of held epochs (default %(default)s)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the records here as JSON")
    options = parser.parse_args(argv)
    counts = [int(c) for c in options.counts.split(",")]
    if options.transport == "mpi" and ensure_mpi_ranks(2, "aiorma.bench", ["scaling", *argv]):
        return 0

    import aiorma

    if options.transport == "local":
        records = aiorma.run(measure, counts, nprocs=2)[0]
    else:
        records = aiorma.run(measure, counts)
        if launched_rank() != 0:
            return 0
    report(records)
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps({"transport": options.transport, "records": records}, indent=1))
    return 0

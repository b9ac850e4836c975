"""Small collective messages: LL messages against the data slots, per message size, in one run.

    python -m aiorma.bench ll_messages [--sizes 4,8,16,32] [--iters N] [--repeats R] [--json PATH]
                                       [--emulate-nodes K]

Launches itself on 2 ranks under the mpich wheel's ``mpiexec``.  The Comm's landing windows
(aiorma/collectives/landing.py) are opened with LL slots of the largest size; before each batch
both ranks switch the landing's LL threshold, at the same point of the message sequence, between
that size (the message goes as LL words: one ``Window.signal`` of the words) and 0 (the data
slots: one ``put_signal`` of the data and its flag).  The two variants alternate batch by batch,
so both see the same machine.  Two costs per message, in µs:

* ``pingpong``: half a round trip of a message between ranks 0 and 1 (send, then receive the
  reply), each round trip one job of the Comm's collective runner, awaited as a collective is;
* ``self``: a rank sending to itself and receiving it (both sides' Python and MPI, no waiting),
  every rank at once;
* ``allreduce``: a whole ``comm.allreduce`` (SUM) of a ``uint8`` buffer of the message size (on 2
  ranks one message each way).

Reported, rank 0's clock: the best and the median batch of ``--repeats`` batches of ``--iters``
messages (on a shared machine the best is the cost, the median what other jobs let through), and
the ratios LL / data slots of both (below 1: LL pays).
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
from ..collectives.bcast import await_all
from ..constants import SUM
from ._launch import add_emulate_nodes_option, ensure_mpi_ranks, launched_rank, mpi_library_name

VARIANTS = ("ll", "slots")
KINDS = ("pingpong", "self", "allreduce")


async def _batch(comm: Any, kind: str, nbytes: int, iters: int) -> float:
    """Seconds per message of one batch (see the module docstring).  Each round trip (or
    self-message) is one job of the Comm's collective runner, awaited as a collective is: the
    waits poll inline and the job resumes in the poll that finds its message landed."""
    collectives = comm.collectives
    landing = collectives.landing
    rank = landing.rank
    buf = np.zeros(nbytes, np.uint8)
    peer = rank if kind == "self" else 1 - rank
    if kind == "allreduce":
        out = np.empty_like(buf)
        start = time.perf_counter()
        for _ in range(iters):
            await comm.allreduce(buf, out, SUM)
        return (time.perf_counter() - start) / iters

    async def round_trip() -> None:
        if rank == 0 or kind == "self":
            # Together, as the collectives do: a send not finished inside its call (a data-slot
            # message to another node) is a coroutine that moves only while awaited.
            await await_all([landing.send(peer, buf), landing.recv(peer, buf)])
        else:
            await landing.recv(peer, buf)
            await landing.send(peer, buf)

    start = time.perf_counter()
    for _ in range(iters):
        await collectives.submit(round_trip, kind)
    return (time.perf_counter() - start) / iters / (2 if kind == "pingpong" else 1)


async def run(comm: Any, options: argparse.Namespace) -> dict[str, dict[str, dict[int, list[float]]]]:
    """``us[kind][variant][size]``: µs per message of every batch."""
    landing = comm.collectives.landing
    largest = landing.ll_bytes
    samples: dict[str, dict[str, dict[int, list[float]]]] = {
        kind: {variant: {size: [] for size in options.sizes} for variant in VARIANTS} for kind in KINDS
    }
    for i in range(options.repeats):
        for size in options.sizes:
            for kind in KINDS:
                for variant in VARIANTS:
                    await comm.barrier()  # both ranks switch between the same two messages
                    landing.ll_bytes = largest if variant == "ll" else 0
                    seconds = await _batch(comm, kind, size, options.iters)
                    landing.ll_bytes = largest
                    samples[kind][variant][size].append(seconds)
        if comm.rank == 0:
            print(f"[ll_messages] round {i + 1}/{options.repeats} done", file=sys.stderr, flush=True)
    await comm.barrier()
    return {
        kind: {
            variant: {size: [1e6 * v for v in values] for size, values in per_size.items()}
            for variant, per_size in per_variant.items()
        }
        for kind, per_variant in samples.items()
    }


def _sizes(text: str) -> list[int]:
    sizes = [int(s) for s in text.split(",") if s]
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive byte counts, not {text!r}")
    return sizes


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench ll_messages", __doc__)
    parser.add_argument("--sizes", type=_sizes, default=[4, 8, 16, 32], help="message sizes in bytes")
    parser.add_argument("--iters", type=int, default=500, help="messages per batch (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=15, help="batches per cell; the median is reported")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the medians (µs) and ratios here")
    add_emulate_nodes_option(parser)
    options = parser.parse_args(argv)
    if options.iters < 1 or options.repeats < 1:
        parser.error("--iters and --repeats must be at least 1")
    if ensure_mpi_ranks(2, "aiorma.bench", ["ll_messages", *argv], options.emulate_nodes):
        return 0

    import aiorma
    from aiorma.collectives import landing

    # LL slots for the largest size: the batches switch the threshold below it (module docstring).
    largest = -(-max(options.sizes) // 4) * 4
    landing.DEFAULT_CONFIG = landing.LandingConfig(ll_bytes=largest)
    samples = aiorma.run(run, options)
    if launched_rank() != 0:
        return 0
    where = f"{options.emulate_nodes} emulated nodes" if options.emulate_nodes >= 2 else "one node"
    print(f"ll_messages, {mpi_library_name()}, 2 ranks, {where}; µs per message, best | median batch")
    us = {
        stat: {
            kind: {variant: {size: fn(v) for size, v in sizes.items()} for variant, sizes in variants.items()}
            for kind, variants in samples.items()
        }
        for stat, fn in (("best", min), ("median", statistics.median))
    }
    print(f"  {'':9}{'bytes':>6} {'LL':>7} {'slots':>7} {'ratio':>6} | {'LL':>7} {'slots':>7} {'ratio':>6}")
    for kind in KINDS:
        for size in options.sizes:
            cells = []
            for stat in ("best", "median"):
                ll, slots = us[stat][kind]["ll"][size], us[stat][kind]["slots"][size]
                cells.append(f"{ll:7.2f} {slots:7.2f} {ll / slots:6.2f}")
            print(f"  {kind:9}{size:>6} {' | '.join(cells)}")
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        record = {"sizes": options.sizes, "emulate_nodes": options.emulate_nodes, "us": us}
        record["samples"] = samples
        options.json.write_text(json.dumps(record, indent=1))
    return 0

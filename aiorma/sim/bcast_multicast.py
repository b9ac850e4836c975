"""Experiment ``bcast-multicast``: the two-stage broadcast of Hoefler, Siebert and Rehm (2007) over a
lossy multicast, simulated.

Stage 1: the root multicasts the message (payload and sequence flag in one datagram) to every
rank; each copy is lost with probability ``loss`` (the receiver was not ready, or the fabric
dropped it).  Stage 2 makes it reliable without acknowledgements: ranks form a ring
``rank → rank + 1`` and, as soon as a rank holds the message — from the multicast or from its
predecessor, whichever comes first — it puts it to its successor (the root's predecessor skips
the put: the root is the source).  A rank that got the multicast is done after one put; a rank
that lost it waits one "penalty round" per lost predecessor in a row, ``loss / (1 - loss)`` rounds
on average, independent of P.  Compared with the binomial tree (reliable puts, ``ceil(log2 P)``
rounds), whose time grows with P: the library's own :func:`aiorma.collectives.bcast.knomial_bcast`
with ``k = 2`` on :class:`~aiorma.sim.lite.LiteLanding` ranks (a data put and a flag put per edge).

Every run checks that every rank ends with exactly the root's payload.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from pathlib import Path

import attrs
import numpy as np

from ..collectives.bcast import knomial_bcast
from ..collectives.topology import Topology
from . import _report
from .clock import run_virtual
from .cost import NetworkModel, NetworkParams
from .lite import LiteFabric, LiteLanding, LiteWindow

PAYLOAD_WORDS = 8  # 64-byte message, as in Hoefler, Siebert and Rehm's (2007) small-message focus

DEFAULT_SIZES = [32, 64, 128, 256, 512, 1024]
DEFAULT_LOSSES = [0.0, 0.01, 0.05, 0.1, 0.2, 0.5]


async def two_stage_bcast(win: LiteWindow, root: int, seq: int) -> None:
    """Broadcast the root's ``win.memory[:-1]`` to every rank; the last word is the flag that
    carries ``seq``.  Returns once this rank holds the message and has posted its forward put."""
    rank, size = win.rank, win.size
    successor = (rank + 1) % size
    if rank == root:
        win.memory[-1] = seq
        message = win.memory.copy()
        win.multicast(message)
    else:
        await win.wait_until(win.memory.size - 1, seq)
        message = win.memory.copy()
    if successor != root:
        await win.put(message, successor)


ALGORITHMS = ("two-stage multicast", "binomial tree")


@attrs.frozen
class BcastRun:
    finish: tuple[float, ...]  # when each rank returned
    correct: bool  # every rank holds the root's payload
    multicast_lost: int  # copies of the multicast that never arrived


def simulate_bcast(algorithm: str, size: int, params: NetworkParams, root: int = 0) -> BcastRun:
    """One broadcast of a 64-byte message on ``size`` simulated ranks (flat cluster)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose from {ALGORITHMS}")
    model = NetworkModel(Topology.flat(size), params)
    payload = np.random.default_rng(params.seed).integers(1, 2**62, PAYLOAD_WORDS, dtype=np.int64)

    async def run() -> BcastRun:
        loop = asyncio.get_running_loop()
        fabric = LiteFabric(model)
        finish = [0.0] * size
        if algorithm == "two-stage multicast":
            wins = fabric.allocate(PAYLOAD_WORDS + 1, np.int64)
            wins[root].memory[:PAYLOAD_WORDS] = payload
            held = [w.memory[:PAYLOAD_WORDS] for w in wins]

            async def bcast(rank: int) -> None:
                await two_stage_bcast(wins[rank], root, 1)

        else:
            # the baseline is the library's own binomial broadcast (Comm.bcast's small-message tree)
            landings = LiteLanding.group(fabric, slot_bytes=payload.nbytes)
            held = [np.zeros_like(payload) for _ in range(size)]
            held[root][:] = payload
            group = list(range(size))

            async def bcast(rank: int) -> None:
                await knomial_bcast(landings[rank], held[rank].view(np.uint8), group, root, 2)

        async def rank_main(rank: int) -> None:
            await bcast(rank)
            finish[rank] = loop.time()

        await asyncio.gather(*(rank_main(r) for r in range(size)))
        correct = all(np.array_equal(h, payload) for h in held)
        return BcastRun(tuple(finish), correct, sum(c.multicast_copies_lost for c in model.counters))

    return run_virtual(run())


def records_for(algorithm: str, size: int, loss: float, trials: int, seed: int) -> dict:
    finishes: list[float] = []
    maxima: list[float] = []
    correct = True
    lost = 0
    for trial in range(trials):
        params = NetworkParams(multicast_loss=loss, seed=seed * 1_000_003 + trial)
        run = simulate_bcast(algorithm, size, params)
        finishes.extend(run.finish)
        maxima.append(max(run.finish))
        correct = correct and run.correct
        lost += run.multicast_lost
    return {
        "algorithm": algorithm,
        "P": size,
        "loss": loss,
        "trials": trials,
        "mean_time": statistics.fmean(finishes),
        "max_time": max(maxima),
        "mean_max_time": statistics.fmean(maxima),
        "lost_fraction": lost / (trials * (size - 1)) if algorithm == "two-stage multicast" else 0.0,
        "all_ranks_correct": correct,
    }


def plot(records: list[dict], directory: Path) -> None:
    plt = _report.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for loss in sorted({r["loss"] for r in records if r["algorithm"] == "two-stage multicast"}):
        rows = sorted(
            (r for r in records if r["algorithm"] == "two-stage multicast" and r["loss"] == loss),
            key=lambda r: r["P"],
        )
        ax.plot(
            [r["P"] for r in rows],
            [r["mean_time"] * 1e6 for r in rows],
            "o-",
            ms=3,
            label=f"two-stage, loss {loss:g}",
        )
    rows = sorted((r for r in records if r["algorithm"] == "binomial tree"), key=lambda r: r["P"])
    ax.plot([r["P"] for r in rows], [r["mean_time"] * 1e6 for r in rows], "s-k", label="binomial tree")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("P (ranks)")
    ax.set_ylabel("mean completion time per rank (µs, simulated)")
    ax.set_title("broadcast of 64 B: two-stage multicast (Hoefler, Siebert and Rehm, 2007) vs binomial tree")
    ax.legend(fontsize=7)
    _report.save(fig, directory, "sim_bcast_multicast.png")
    plt.close(fig)


def main(argv: list[str]) -> int:
    p = _report.parser("bcast-multicast", __doc__)
    p.add_argument(
        "--sizes", type=_report.int_list, default=DEFAULT_SIZES, help="comma-separated rank counts P"
    )
    p.add_argument(
        "--losses",
        type=_report.float_list,
        default=DEFAULT_LOSSES,
        help="comma-separated multicast loss probabilities, each in [0, 1)",
    )
    p.add_argument("--trials", type=int, default=20, help="broadcasts per (P, loss), each with its own seed")
    args = p.parse_args(argv)
    if min(args.sizes) < 2 or args.trials < 1 or not all(0 <= x < 1 for x in args.losses):
        p.error("need P >= 2, trials >= 1 and 0 <= loss < 1")
    runs = len(args.sizes) * (len(args.losses) + 1)
    progress = _report.Progress("bcast-multicast", runs)
    records = []
    for size in args.sizes:
        for loss in args.losses:
            records.append(records_for("two-stage multicast", size, loss, args.trials, args.seed))
            progress.step(f"two-stage P={size} loss={loss:g}")
        # the binomial tree uses reliable puts only: loss does not matter and it is deterministic
        records.append(records_for("binomial tree", size, 0.0, 1, args.seed))
        progress.step(f"binomial P={size}")
    _report.write_json(
        args.json,
        "bcast-multicast",
        NetworkParams(seed=args.seed),
        {
            "sizes": args.sizes,
            "losses": args.losses,
            "trials": args.trials,
            "payload_bytes": PAYLOAD_WORDS * 8,
        },
        records,
    )
    if args.plot is not None:
        plot(records, args.plot)
    _report.print_table(
        [
            ("algorithm", "algorithm", ""),
            ("P", "P", "d"),
            ("loss", "loss", "g"),
            ("trials", "trials", "d"),
            ("mean µs", "mean_time", ".2f"),
            ("mean of max µs", "mean_max_time", ".2f"),
            ("max µs", "max_time", ".2f"),
            ("lost copies", "lost_fraction", ".3f"),
        ],
        records,
    )
    small, large = min(args.sizes), max(args.sizes)
    for loss in args.losses:
        a = next(
            r
            for r in records
            if r["algorithm"] == "two-stage multicast" and r["P"] == small and r["loss"] == loss
        )
        b = next(
            r
            for r in records
            if r["algorithm"] == "two-stage multicast" and r["P"] == large and r["loss"] == loss
        )
        ratio = b["mean_time"] / a["mean_time"]
        print(
            f"[bcast-multicast] loss {loss:g}: mean time P={large} / P={small} = {ratio:.3f}", file=sys.stderr
        )
    if not all(r["all_ranks_correct"] for r in records):
        print("[bcast-multicast] ERROR: some rank did not end with the root's data", file=sys.stderr)
        return 1
    return 0

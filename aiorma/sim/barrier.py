"""Experiment ``barrier``: the n-way dissemination barrier (Hoefler et al., 2006) at P = 2..1024, simulated.

The barrier run is the library's own :func:`aiorma.collectives.barrier.nway_barrier`, on
:class:`aiorma.sim.lite.LiteLanding` ranks (the signal half of the landing protocol).  In round ``r``
every rank ``p`` signals ``p + i·(n+1)^r (mod P)`` for ``i = 1..n`` — one put of a per-pair
monotonic count into the peer's flag slot for ``p`` — and waits for as many signals from
``p - i·(n+1)^r``.  ``ceil(log_{n+1} P)`` rounds suffice; in the last round a peer
``i·(n+1)^r >= P`` away would only repeat news, so it is skipped.

The ranks are :mod:`aiorma.sim.lite` ranks on a flat cluster (one rank per node, one switch), so
every message costs the same and the LogGP prediction follows one rank's timeline
(:func:`barrier_time_model`): a round with ``k`` peers takes ``max(2k·o, 2o + (k-1)·a + d + L)``
with ``a = max(o, g, d)`` and ``d = bytes / bandwidth`` — ``k`` send overheads back to back, the
last message's wire time, and ``k`` receive overheads that queue behind the sends when ``k·o``
exceeds the latency — plus any wait for the NIC gap left over from the round before.  Each record
compares the simulated time with the library's own analytic model,
:func:`aiorma.collectives.model.barrier_nway` (the one ``Comm.barrier`` chooses ``n`` with), fed
:meth:`NetworkParams.loggp`; ``barrier_time_model`` is the exact timeline the tests hold the
simulation to, also when the NIC gap carries over between rounds (where the closed form is low).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from ..collectives.barrier import nway_barrier
from ..collectives.model import barrier_nway
from ..collectives.schedules import nway_distances
from ..collectives.topology import Topology
from . import _report
from .clock import run_virtual
from .cost import NetworkModel, NetworkParams
from .lite import LiteFabric, LiteLanding

FLAG_BYTES = 8  # one int64 count per signal

DEFAULT_SIZES = [2, 3, 4, 5, 7, 8, 9, 16, 27, 32, 64, 100, 128, 243, 256, 500, 512, 729, 1000, 1024]
DEFAULT_WAYS = [1, 2, 3, 4, 5, 6, 7, 8]


def dissemination_rounds(size: int, n: int) -> int:
    """Rounds of the n-way dissemination barrier: the least ``r`` with ``(n+1)^r >= size``."""
    if size < 1 or n < 1:
        raise ValueError(f"need size >= 1 and n >= 1, not size={size}, n={n}")
    rounds, span = 0, 1
    while span < size:
        span *= n + 1
        rounds += 1
    return rounds


def round_peers(size: int, n: int, r: int) -> int:
    """How many peers each rank signals in round ``r`` of the real schedule
    (:func:`aiorma.collectives.schedules.nway_distances`: ``n``, fewer in a last partial round)."""
    return len(nway_distances(size, n)[r])


def barrier_time_model(size: int, n: int, params: NetworkParams, nbytes: int = FLAG_BYTES) -> float:
    """LogGP prediction of one barrier on a flat cluster, all ranks entering at time 0.

    Every rank does the same thing at the same time, so one rank's timeline is the barrier's.
    A round with ``k`` peers starting at ``t``: ``k`` send overheads back to back; the NIC injects
    message ``i`` at ``max(t + (i+1)·o, previous + max(g, d))`` (``d = bytes / bandwidth``); the
    peers' messages arrive ``d + L`` after their injection, at the same offsets; each costs ``o``
    to notice, after the sends.  When the NIC is never the bottleneck across rounds
    (``g <= o + L + d``) this is the closed form ``max(2k·o, 2o + (k-1)·max(o, g, d) + d + L)``.
    """
    o, L = params.o, params.L
    d = nbytes * params.G
    busy = max(params.g, d)
    t, nic_free = 0.0, 0.0
    for r in range(dissemination_rounds(size, n)):
        k = round_peers(size, n, r)
        injects = []
        for i in range(k):
            nic_free = max(t + (i + 1) * o, nic_free)
            injects.append(nic_free)
            nic_free += busy
        cpu = t + k * o
        for inject in injects:
            cpu = max(inject + d + L, cpu) + o
        t = cpu
    return t


@attrs.frozen
class BarrierRun:
    rounds: int
    entries: tuple[float, ...]  # when each rank entered its last barrier
    exits: tuple[float, ...]  # when each rank left its last barrier
    puts_per_rank: tuple[int, ...]


def simulate_barrier(
    size: int,
    n: int,
    params: NetworkParams | None = None,
    *,
    repeats: int = 1,
    entry_delays: Sequence[float] | None = None,
) -> BarrierRun:
    """Run ``repeats`` back-to-back barriers on ``size`` simulated ranks; rank ``r`` first waits
    ``entry_delays[r]`` simulated seconds (skew).  Deterministic."""
    params = params or NetworkParams()
    if entry_delays is not None and len(entry_delays) != size:
        raise ValueError(f"entry_delays has {len(entry_delays)} entries for {size} ranks")
    model = NetworkModel(Topology.flat(size), params)

    async def run() -> BarrierRun:
        loop = asyncio.get_running_loop()
        landings = LiteLanding.group(LiteFabric(model))
        entries = [0.0] * size
        exits = [0.0] * size

        async def rank_main(rank: int) -> None:
            if entry_delays is not None and entry_delays[rank] > 0:
                await asyncio.sleep(entry_delays[rank])
            for _ in range(repeats):
                entries[rank] = loop.time()
                await nway_barrier(landings[rank], n)
                exits[rank] = loop.time()

        await asyncio.gather(*(rank_main(r) for r in range(size)))
        return BarrierRun(
            rounds=len(nway_distances(size, n)),
            entries=tuple(entries),
            exits=tuple(exits),
            puts_per_rank=tuple(c.puts for c in model.counters),
        )

    return run_virtual(run())


def record(size: int, n: int, params: NetworkParams) -> dict:
    run = simulate_barrier(size, n, params)
    time_sim = max(run.exits)
    # the prediction the runtime chooses n with (collectives.model), from the simulator's parameters
    time_model = barrier_nway(params.loggp(FLAG_BYTES), size, n)
    return {
        "algorithm": "dissemination" if n == 1 else f"{n}-way dissemination",
        "P": size,
        "n": n,
        "rounds": run.rounds,
        "rounds_formula": dissemination_rounds(size, n),
        "max_puts_per_rank": max(run.puts_per_rank),
        "time_sim": time_sim,
        "time_model": time_model,
        "rel_error": abs(time_sim - time_model) / time_model if time_model else 0.0,
    }


def plot(records: list[dict], directory: Path) -> None:
    plt = _report.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    ways = sorted({r["n"] for r in records})
    for n in ways:
        rows = sorted((r for r in records if r["n"] == n), key=lambda r: r["P"])
        xs = [r["P"] for r in rows]
        (line,) = left.plot(xs, [r["time_sim"] * 1e6 for r in rows], "o-", ms=3, label=f"n={n} sim")
        left.plot(xs, [r["time_model"] * 1e6 for r in rows], "--", color=line.get_color(), lw=0.8)
    left.set_xscale("log", base=2)
    left.set_xlabel("P (ranks)")
    left.set_ylabel("barrier time (µs, simulated)")
    left.set_title("n-way dissemination: simulation (points) vs LogP model (dashed)")
    left.legend(fontsize=7, ncol=2)
    sizes = sorted({r["P"] for r in records})
    for size in [s for s in (64, 256, 1024) if s in sizes] or sizes[-1:]:
        rows = sorted((r for r in records if r["P"] == size), key=lambda r: r["n"])
        right.plot([r["n"] for r in rows], [r["time_sim"] * 1e6 for r in rows], "o-", label=f"P={size}")
    right.set_xlabel("n (peers per round)")
    right.set_ylabel("barrier time (µs, simulated)")
    right.set_title("choice of n")
    right.legend()
    _report.save(fig, directory, "sim_barrier.png")
    plt.close(fig)


def main(argv: list[str]) -> int:
    p = _report.parser("barrier", __doc__)
    p.add_argument(
        "--sizes", type=_report.int_list, default=DEFAULT_SIZES, help="comma-separated rank counts P"
    )
    p.add_argument(
        "--ways", type=_report.int_list, default=DEFAULT_WAYS, help="comma-separated n (peers per round)"
    )
    args = p.parse_args(argv)
    if min(args.sizes) < 1 or min(args.ways) < 1:
        p.error("P and n must be >= 1")
    params = NetworkParams(seed=args.seed)
    progress = _report.Progress("barrier", len(args.sizes) * len(args.ways))
    records = []
    for size in args.sizes:
        for n in args.ways:
            records.append(record(size, n, params))
            progress.step(f"P={size} n={n}")
    bad = [r for r in records if r["rounds"] != r["rounds_formula"] or r["rel_error"] > 0.01]
    _report.write_json(
        args.json, "barrier", params, {"sizes": args.sizes, "ways": args.ways, "topology": "flat"}, records
    )
    if args.plot is not None:
        plot(records, args.plot)
    _report.print_table(
        [
            ("P", "P", "d"),
            ("n", "n", "d"),
            ("rounds", "rounds", "d"),
            ("⌈log_{n+1} P⌉", "rounds_formula", "d"),
            ("simulated µs", "time_sim", ".2f"),
            ("LogP model µs", "time_model", ".2f"),
            ("|sim - model|/model", "rel_error", ".1e"),
        ],
        records,
    )
    worst = max(r["rel_error"] for r in records)
    print(
        f"[barrier] worst |sim - model| / model = {worst:.2e}; off-target records: {len(bad)}",
        file=sys.stderr,
    )
    return 0

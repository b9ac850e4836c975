"""The transactional update pattern: exclusive lock, 256 B accumulate, unlock (Zounmevo 2014, §5.8.2).

Runs the workload :mod:`aiorma.apps.transactions` (what ``examples/transactions.py`` runs) under
the mpich wheel's ``mpiexec``, one job per rank count, and reports job throughput
(transactions/s) per mode, all measured in the same run: ``mpi4py`` (the same transactions with
raw mpi4py's blocking calls: the MPI library's own speed), then aiorma's ``blocking``,
``nonblocking`` (at most ``--inflight`` transactions outstanding) and ``nonblocking+aaar`` (the
same with the access_after_access_reorder flag).  Every mode is also reported as a ratio against
``mpi4py`` and against aiorma's ``blocking``.  Every run checks that no update was lost; the
exit status is 1 if one was.

    python -m aiorma.bench transactions --ranks 2,4,8 --json tx.json --plot docs/img
    python -m aiorma.bench transactions --ranks 2 --emulate-nodes 2   # as if on two nodes (root)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .._cli import command_parser, plot_directory
from ._app_runs import rank_counts, run_app, write_document
from ._launch import add_emulate_nodes_option

MODES = ("mpi4py", "blocking", "nonblocking", "nonblocking+aaar")
BASES = ("mpi4py", "blocking")  # the modes others are reported against


def ratios(summary: dict[str, Any]) -> dict[str, float]:
    """``"<mode>/<base>"``: throughput ratio of each mode against each of :data:`BASES` present."""
    modes = summary["modes"]
    found = {}
    for base in BASES:
        if base in modes:
            rate = modes[base]["tx_per_s"]
            found.update({f"{m}/{base}": modes[m]["tx_per_s"] / rate for m in modes if m != base})
    return found


def plot(results: dict[int, dict[str, Any]], directory: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = sorted(results)
    modes = [m for m in MODES if all(m in results[r]["modes"] for r in ranks)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for mode in modes:
        left.plot(ranks, [results[r]["modes"][mode]["tx_per_s"] for r in ranks], marker="o", label=mode)
    left.set(xlabel="ranks", ylabel="transactions / s (whole job)", title="Throughput", xticks=ranks)
    # Log scales: raw MPI and aiorma can be orders of magnitude apart.
    left.set_yscale("log")
    left.legend()
    base = next((b for b in BASES if b in modes), modes[0])
    others = [m for m in modes if m != base]
    width = 0.8 / max(1, len(others))
    for i, mode in enumerate(others):
        values = [ratios(results[r]).get(f"{mode}/{base}", 0.0) for r in ranks]
        right.bar([j + i * width for j in range(len(ranks))], values, width, label=f"{mode} / {base}")
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set_yscale("log")
    right.set_xticks([j + width * (len(others) - 1) / 2 for j in range(len(ranks))], [str(r) for r in ranks])
    right.set(xlabel="ranks", ylabel="throughput ratio", title=f"Throughput over {base} (same run)")
    right.legend()
    fig.suptitle("Exclusive lock + 256 B accumulate + unlock to random targets")
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "transactions_throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench transactions", __doc__)
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated rank counts (default %(default)s)")
    parser.add_argument(
        "--transactions", type=int, default=2000, help="transactions per rank per run (default %(default)s)"
    )
    parser.add_argument(
        "--inflight",
        type=int,
        default=16,
        help="nonblocking modes: most transactions outstanding per rank (default %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs per mode, interleaved; the median is reported (default %(default)s)",
    )
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated modes (default %(default)s)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds per mpiexec job (default %(default)s)"
    )
    parser.add_argument(
        "--json", metavar="PATH", help="write every result, the ratios and the machine as JSON"
    )
    parser.add_argument(
        "--plot",
        metavar="DIR",
        type=plot_directory,
        help="write DIR/transactions_throughput.png (needs matplotlib)",
    )
    add_emulate_nodes_option(parser)
    args = parser.parse_args(argv)
    if args.emulate_nodes < 0:
        parser.error("--emulate-nodes must be 0 (no emulation) or more")
    counts = rank_counts(parser, args.ranks)
    app_args = [
        *("--transactions", str(args.transactions), "--inflight", str(args.inflight)),
        *("--repeats", str(args.repeats), "--modes", args.modes),
    ]
    results = {n: run_app("transactions", n, app_args, args.timeout, args.emulate_nodes) for n in counts}

    print(f"\n{'ranks':>5}  " + "  ".join(f"{m:>18}" for m in results[counts[0]]["modes"]) + "  ratios")
    for n, summary in results.items():
        rates = "  ".join(f"{row['tx_per_s']:>12.0f} tx/s" for row in summary["modes"].values())
        ratio = ", ".join(f"{k} {v:.3g}" for k, v in ratios(summary).items())
        print(f"{n:>5}  {rates}  {ratio}")
    verified = all(row["verified"] for s in results.values() for row in s["modes"].values())
    print("no lost update in any run" if verified else "LOST UPDATES: see the tables above")

    extra = {"emulate_nodes": args.emulate_nodes}
    write_document("transactions", argv, results, ratios, verified, args.json, extra)
    if args.plot:
        print(f"plot: {plot(results, args.plot)}")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

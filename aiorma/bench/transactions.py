"""``python -m aiorma.bench transactions``: the transactional update pattern (seed 001 §5.8.2).

Runs ``examples/transactions.py`` under ``mpiexec`` (the one next to this interpreter) for each
rank count, collects its JSON, and reports job throughput (transactions/s) per mode with the
ratios nonblocking/blocking and nonblocking+aaar/blocking, all measured in the same run.  Every
run also checks that no update was lost; the exit status is 1 if any was.

    python -m aiorma.bench transactions --ranks 2,4,8 --json tx.json --plot docs/img

The helpers :func:`run_example` and :func:`machine` are shared with the other example-driven
benchmarks (``lu``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._example_runs import rank_counts, run_example, write_document

MODES = ("blocking", "nonblocking", "nonblocking+aaar")


def ratios(summary: dict[str, Any]) -> dict[str, float]:
    modes = summary["modes"]
    if "blocking" not in modes:
        return {}
    base = modes["blocking"]["tx_per_s"]
    return {f"{m}/blocking": modes[m]["tx_per_s"] / base for m in modes if m != "blocking"}


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
    left.set_ylim(bottom=0)
    left.legend()
    width = 0.8 / max(1, len(modes) - 1)
    for i, mode in enumerate(m for m in modes if m != "blocking"):
        values = [ratios(results[r]).get(f"{mode}/blocking", 0.0) for r in ranks]
        right.bar([j + i * width for j in range(len(ranks))], values, width, label=f"{mode} / blocking")
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set_xticks([j + width * (len(modes) - 2) / 2 for j in range(len(ranks))], [str(r) for r in ranks])
    right.set(xlabel="ranks", ylabel="throughput ratio", title="Speed-up over blocking (same run)")
    right.legend()
    fig.suptitle("Exclusive lock + 256 B accumulate + unlock to random targets")
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "transactions_throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiorma.bench transactions", description=__doc__)
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated rank counts (default %(default)s)")
    parser.add_argument("--transactions", type=int, default=2000, help="per rank per run")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode, interleaved (median)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per mpiexec job")
    parser.add_argument("--json", metavar="PATH", help="write every result, ratios and the machine")
    parser.add_argument("--plot", metavar="DIR", type=Path, help="write DIR/transactions_throughput.png")
    args = parser.parse_args(argv)
    counts = rank_counts(parser, args.ranks)
    example_args = [
        *("--transactions", str(args.transactions), "--inflight", str(args.inflight)),
        *("--repeats", str(args.repeats), "--modes", args.modes),
    ]
    results = {n: run_example("transactions.py", n, example_args, args.timeout) for n in counts}

    print(f"\n{'ranks':>5}  " + "  ".join(f"{m:>18}" for m in results[counts[0]]["modes"]) + "  ratios")
    for n, summary in results.items():
        rates = "  ".join(f"{row['tx_per_s']:>12.0f} tx/s" for row in summary["modes"].values())
        ratio = ", ".join(f"{k} {v:.2f}" for k, v in ratios(summary).items())
        print(f"{n:>5}  {rates}  {ratio}")
    verified = all(row["verified"] for s in results.values() for row in s["modes"].values())
    print("no lost update in any run" if verified else "LOST UPDATES: see the tables above")

    write_document("transactions", argv, results, ratios, verified, args.json)
    if args.plot:
        print(f"plot: {plot(results, args.plot)}")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

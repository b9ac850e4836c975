"""Plot an A/B comparison of `python -m aiorma.bench hotpath --json` runs: for each case, the
median over the runs of aiorma / mpi4py, with the runs' spread as error bars.

    python dev/plot_hotpath_ab.py OUT.png "before:DIR/hotpath_before_*.json" "after:DIR/hotpath_after_*.json"

Each argument after OUT.png is LABEL:GLOB; the runs of one label are the files its glob matches.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from ab_runs import load_series

from aiorma.bench.hotpath import CASES


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out, series = Path(argv[0]), load_series(argv[1:])
    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(series)
    for i, (label, runs) in enumerate(series):
        xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(CASES))]
        ratios = [[run["ratio"][case] for run in runs] for case in CASES]
        medians = [statistics.median(r) for r in ratios]
        below = [m - min(r) for m, r in zip(medians, ratios, strict=True)]
        above = [max(r) - m for m, r in zip(medians, ratios, strict=True)]
        bars = ax.bar(xs, medians, width, yerr=[below, above], capsize=3, label=label)
        ax.bar_label(bars, fmt="%.1f", fontsize=8, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(CASES)), CASES, fontsize=8)
    ax.set_ylabel("aiorma / raw mpi4py (same run), median")
    ax.set_title("Hot path, 8 B, 2 ranks, back to back (python -m aiorma.bench hotpath)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

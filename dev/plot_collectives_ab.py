"""Plot an A/B comparison of `python -m aiorma.bench collectives --json` runs: for each collective
and rank count, the median over the runs of aiorma's time per call, with the runs' spread as
error bars, and MPI's own (the median over every run of every label) as a mark.

    python dev/plot_collectives_ab.py [--bytes N] OUT.png \
        "before:DIR/coll_before_*.json" "after:DIR/coll_after_*.json"

Each argument after OUT.png is LABEL:GLOB; the runs of one label are the files its glob matches.
One panel per rank count; the cells are the runs' rows — of one message size: ``--bytes N`` picks
it where the runs have several.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from ab_runs import load_series


def _times(runs: list[list[dict]], ranks: int, name: str, key: str) -> list[float]:
    return [row[key] for rows in runs for row in rows if row["ranks"] == ranks and row["collective"] == name]


def main(argv: list[str]) -> int:
    nbytes = None
    if argv[:1] == ["--bytes"] and len(argv) > 1:
        nbytes, argv = int(argv[1]), argv[2:]
    if len(argv) < 2:
        print(__doc__)
        return 2
    out = Path(argv[0])
    series = [
        (label, [[row for row in run["rows"] if nbytes in (None, row["bytes"])] for run in runs])
        for label, runs in load_series(argv[1:])
    ]
    ranks = sorted({row["ranks"] for _, runs in series for rows in runs for row in rows})
    names = list(dict.fromkeys(row["collective"] for rows in series[0][1] for row in rows))
    fig, axes = plt.subplots(1, len(ranks), figsize=(5.5 * len(ranks), 4.2), squeeze=False)
    width = 0.8 / len(series)
    for ax, count in zip(axes[0], ranks, strict=True):
        for i, (label, runs) in enumerate(series):
            xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(names))]
            cells = [_times(runs, count, name, "aiorma_us") for name in names]
            # A cell a rank count did not run stays empty.
            medians = [statistics.median(cell) if cell else math.nan for cell in cells]
            low = [m - min(c) if c else 0.0 for m, c in zip(medians, cells, strict=True)]
            high = [max(c) - m if c else 0.0 for m, c in zip(medians, cells, strict=True)]
            ax.bar(xs, medians, width, yerr=[low, high], capsize=2, label=label)
        mpi_times = [[t for _, runs in series for t in _times(runs, count, name, "mpi_us")] for name in names]
        mpi = [statistics.median(times) if times else math.nan for times in mpi_times]
        ax.plot(range(len(names)), mpi, "k_", markersize=18, mew=2, label="MPI's own (median)")
        ax.set_xticks(range(len(names)), names, rotation=30)
        ax.set_ylabel("µs per call")
        ax.set_title(f"{count} ranks" + ("" if nbytes is None else f", {nbytes} B"))
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

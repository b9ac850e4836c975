"""Plot A/B runs of ``dev/probe_call_cost.py``: Python calls inside a call and the time per
collective, per collective, for each tree (median over its runs).

    python dev/plot_call_cost.py OUT.png FILE [FILE ...]

Each FILE holds lines ``TREE run N: name: call X us, C calls, Y us each | ...`` (persistent
lines are skipped); one panel row per FILE, titled with the file's name.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

_CELL = re.compile(r"(\w+): call ([\d.]+) us, (\d+) calls, ([\d.]+) us each")


def _read(path: Path) -> dict[str, dict[str, list[tuple[float, float, float]]]]:
    trees: dict[str, dict[str, list[tuple[float, float, float]]]] = defaultdict(lambda: defaultdict(list))
    for line in path.read_text().splitlines():
        tree, _, rest = line.partition(":")
        if "persistent" in tree or not rest:
            continue
        for name, call, calls, each in _CELL.findall(rest):
            trees[tree.split()[0]][name].append((float(call), float(calls), float(each)))
    return trees


def main(out: Path, files: list[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(files), 2, figsize=(12, 3.6 * len(files)), squeeze=False)
    for row, path in enumerate(files):
        trees = _read(path)
        names = list(next(iter(trees.values())))
        width = 0.8 / len(trees)
        panels = ((1, "Python calls inside the call"), (2, "µs per collective"))
        for column, (index, label) in enumerate(panels):
            ax = axes[row][column]
            for t, (tree, cells) in enumerate(trees.items()):
                values = [statistics.median(v[index] for v in cells[name]) for name in names]
                ax.bar([i + t * width for i in range(len(names))], values, width, label=tree)
            ax.set_xticks([i + width * (len(trees) - 1) / 2 for i in range(len(names))], names, rotation=30)
            ax.set_title(f"{path.stem}: {label} (median of runs)")
            ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]), [Path(a) for a in sys.argv[2:]])

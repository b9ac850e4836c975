"""Plot runs.txt: median ratio to MPI_Allreduce per algorithm, per (ranks, size) cell.

    python docs/data/halving_doubling_2026-11-28/plot.py docs/img/allreduce_algorithms_2026-11-28.png
"""

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

cells: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
for line in (Path(__file__).parent / "runs.txt").read_text().splitlines():
    head = re.match(r"(\d+) ranks allreduce\s+(\d+):", line)
    if not head:
        continue
    key = (int(head.group(1)), int(head.group(2)))
    for name, ratio in re.findall(r"([a-z_]+) ([0-9.]+)(?=\s|$)", line.split("|", 1)[1]):
        cells[key][name].append(float(ratio))

keys = sorted(cells)
algorithms = ["recursive_doubling", "ring", "direct", "halving_doubling"]
fig, ax = plt.subplots(figsize=(9, 4))
width = 0.2
for i, name in enumerate(algorithms):
    xs = [k + (i - 1.5) * width for k in range(len(keys))]
    ys = [statistics.median(cells[key][name]) for key in keys]
    ax.bar(xs, ys, width, label=name)
ax.axhline(1.3, color="grey", linestyle="--", linewidth=1, label="1.3 × MPI (target)")
ax.set_xticks(range(len(keys)), [f"{p} ranks\n{n >> 20} MiB" for p, n in keys])
ax.set_ylabel("time / MPI_Allreduce (median of 3 runs)")
ax.set_title("aiorma allreduce algorithms against MPICH's own, 2-core VM (2026-11-28)")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[1], dpi=110)
for key in keys:
    print(key, {name: round(statistics.median(cells[key][name]), 2) for name in algorithms})

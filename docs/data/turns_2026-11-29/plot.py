"""docs/img/turns_2026-11-29.png from the JSON files beside this script."""
import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = Path(__file__).parent


def medians(tree: str) -> dict:
    cells: dict = {}
    for path in sorted(here.glob(f"coll_all_{tree}_*.json")):
        for row in json.loads(path.read_text())["rows"]:
            cells.setdefault((row["ranks"], row["collective"]), []).append(row["aiorma_us"])
    return {k: statistics.median(v) for k, v in cells.items()}


base, new = medians("base"), medians("new")
names = ["barrier", "bcast", "reduce", "allreduce", "allgather", "gather", "scatter", "alltoall"]
fig, ax = plt.subplots(figsize=(9, 4))
width = 0.27
for i, ranks in enumerate((2, 4, 8)):
    ratios = [new[(ranks, n)] / base[(ranks, n)] for n in names]
    ax.bar([x + (i - 1) * width for x in range(len(names))], ratios, width, label=f"{ranks} ranks")
ax.axhline(1.0, color="black", linewidth=0.8)
ax.set_xticks(range(len(names)), names)
ax.set_ylabel("time after / before")
ax.set_title("8-byte collectives, one node, 2 cores: an await polling between loop turns\n"
             "(bench collectives --ranks 2,4,8 --sizes 8, 3 alternating runs per tree, medians)")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[1] if len(sys.argv) > 1 else "turns_2026-11-29.png", dpi=110)

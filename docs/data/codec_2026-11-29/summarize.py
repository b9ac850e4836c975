"""Before/after table of the runs in this directory: python summarize.py (from this directory).

coll_{base,main}_N.json: `python -m aiorma.bench collectives --ranks 2,4 --sizes 8 --budget 0.3
--json ...`, the trees alternating (base aadcba5, main = the LL codec in C and the one-node trims).
Prints, per cell, aiorma's µs in each run of each tree, the ratio to MPI's own (median of the runs)
and main / base (median over the runs)."""

import glob
import json
import statistics
from collections import defaultdict

cells: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
for tree in ("base", "main"):
    for path in sorted(glob.glob(f"coll_{tree}_*.json")):
        for row in json.load(open(path))["rows"]:
            cells[(row["collective"], row["ranks"])][tree].append((row["aiorma_us"], row["ratio"]))
print(f"{'cell':22} {'base µs':>16} {'main µs':>16} {'× MPI base':>10} {'× MPI main':>10} {'main/base':>9}")
for (name, ranks), runs in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    base, main = runs["base"], runs["main"]
    b = statistics.median(t for t, _ in base)
    m = statistics.median(t for t, _ in main)
    print(
        f"{name + ' ' + str(ranks) + ' ranks':22} {'/'.join(f'{t:.0f}' for t, _ in base):>16}"
        f" {'/'.join(f'{t:.0f}' for t, _ in main):>16} {statistics.median(r for _, r in base):>10.1f}"
        f" {statistics.median(r for _, r in main):>10.1f} {m / b:>9.2f}"
    )

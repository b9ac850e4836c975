"""Before/after table of the runs in this directory: python summarize.py [BASE AFTER] (from this
directory; default: base main; also base rx, base cb, base final).

coll_TREE_N.json: `python -m aiorma.bench collectives --ranks 2,4 --sizes 8 --budget 0.3 --json
...`, the trees alternating.  base: aadcba5; main: 1d2eb43 (the LL codec in C and the one-node
trims), runs 1-3 beside base runs 1-3; rx: 71cb254 (and a small message's receive without a
coroutine), runs 4-6 beside base runs 4-6; cb: ae565f9 (and a small message combined in C), runs
7-9 beside base runs 7-9; final: 4708718 (and cheaper byte views in the front end), runs 10-12
beside base runs 10-12.  Prints, per cell, aiorma's µs in each run of each
tree, the ratio to MPI's own (median of the runs) and after / base (median over the runs)."""

import glob
import json
import statistics
import sys
from collections import defaultdict

BASE, AFTER = sys.argv[1:3] if len(sys.argv) > 2 else ("base", "main")
# The base runs measured beside each "after" tree (alternating).
BASE_RUNS = {"main": ("1", "2", "3"), "rx": ("4", "5", "6"), "cb": ("7", "8", "9"), "final": ("10", "11", "12")}[AFTER]

cells: dict[tuple[str, int], dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
for tree in (BASE, AFTER):
    for path in sorted(glob.glob(f"coll_{tree}_*.json")):
        if tree == BASE and path[len(f"coll_{BASE}_") : -len(".json")] not in BASE_RUNS:
            continue
        for row in json.load(open(path))["rows"]:
            cells[(row["collective"], row["ranks"])][tree].append((row["aiorma_us"], row["ratio"]))
print(f"{'cell':22} {'base µs':>16} {AFTER + ' µs':>16} {'× MPI base':>10} {'× MPI ' + AFTER:>10} {'after/base':>10}")
for (name, ranks), runs in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    base, main = runs[BASE], runs[AFTER]
    b = statistics.median(t for t, _ in base)
    m = statistics.median(t for t, _ in main)
    print(
        f"{name + ' ' + str(ranks) + ' ranks':22} {'/'.join(f'{t:.0f}' for t, _ in base):>16}"
        f" {'/'.join(f'{t:.0f}' for t, _ in main):>16} {statistics.median(r for _, r in base):>10.1f}"
        f" {statistics.median(r for _, r in main):>10.1f} {m / b:>10.2f}"
    )

"""hotpath_{base,main}_N.json: `python -m aiorma.bench hotpath --repeats 3 --json ...`, the trees
alternating.  Prints aiorma's µs per case in each run, the ratio to mpi4py (median) and main / base
(medians): python summarize_hotpath.py (from this directory)."""

import glob
import json
import statistics

runs = {tree: [json.load(open(p)) for p in sorted(glob.glob(f"hotpath_{tree}_*.json"))] for tree in ("base", "main")}
print(f"{'case':20} {'base µs':>18} {'main µs':>18} {'× base':>7} {'× main':>7} {'main/base':>9}")
for case in runs["main"][0]["ratio"]:
    b = [r["us"][f"aiorma {case}"] for r in runs["base"]]
    m = [r["us"][f"aiorma {case}"] for r in runs["main"]]
    rb = statistics.median(r["ratio"][case] for r in runs["base"])
    rm = statistics.median(r["ratio"][case] for r in runs["main"])
    print(
        f"{case:20} {'/'.join(f'{t:.1f}' for t in b):>18} {'/'.join(f'{t:.1f}' for t in m):>18}"
        f" {rb:>7.1f} {rm:>7.1f} {statistics.median(m) / statistics.median(b):>9.2f}"
    )

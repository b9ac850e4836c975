"""Paired A/B of two trees' `bench collectives` runs: median time per cell and the median of the
run-by-run ratios.   python paired.py DIR base new   (files DIR/coll_<tree>_<i>.json)"""

import glob
import json
import statistics
import sys

folder, a, b = sys.argv[1:4]


def load(name):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{folder}/coll_{name}_*.json"))]


A, B = load(a), load(b)
n = min(len(A), len(B))
keys = [(r["collective"], r["ranks"]) for r in A[0]["rows"]]


def cell(runs, k, f):
    return [next(r[f] for r in run["rows"] if (r["collective"], r["ranks"]) == k) for run in runs[:n]]


print(f"{n} runs each; aiorma µs median {a}/{b}, ratio x MPI median {a}/{b}, paired time ratio {b}/{a}; persistent same")
every = []
for k in keys:
    ta, tb = cell(A, k, "aiorma_us"), cell(B, k, "aiorma_us")
    ra, rb = cell(A, k, "ratio"), cell(B, k, "ratio")
    pa, pb = cell(A, k, "aiorma_persistent_us"), cell(B, k, "aiorma_persistent_us")
    p = statistics.median(y / x for x, y in zip(ta, tb))
    pp = statistics.median(y / x for x, y in zip(pa, pb))
    every += [p, pp]
    print(
        f"{k[0]:10} {k[1]} {statistics.median(ta):7.1f} {statistics.median(tb):7.1f}  "
        f"x{statistics.median(ra):5.1f} x{statistics.median(rb):5.1f}  {p:5.2f}   "
        f"persistent {statistics.median(pa):7.1f} {statistics.median(pb):7.1f} {pp:5.2f}"
    )
print("median of all paired ratios", round(statistics.median(every), 3))

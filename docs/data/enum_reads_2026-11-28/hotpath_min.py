import json, glob, statistics as st, sys
# python hotpath_min.py DIR[,DIR...] TREE...: per case and tree, the fastest run and the first quartile (and mpi4py's fastest): on a VM with two speeds the fastest run is the undisturbed cost.
dirs = sys.argv[1].split(",")
trees = sys.argv[2:]
data = {t: [json.load(open(f)) for d in dirs for f in sorted(glob.glob(f"{d}/hotpath_{t}_*.json"))] for t in trees}
cases = list(data[trees[0]][0]["ratio"])
print("runs:", {t: len(v) for t, v in data.items()})
print(f"{'case':22s}" + "".join(f"{t:>24s}" for t in trees))
for c in cases:
    row = f"{c:22s}"
    for t in trees:
        a = sorted(d["us"]["aiorma " + c] for d in data[t])
        m = sorted(d["us"]["mpi4py " + c] for d in data[t])
        row += f"   min {a[0]:6.2f} q1 {a[len(a)//4]:6.2f} ({m[0]:5.2f})"
    print(row)

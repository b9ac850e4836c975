import json, glob, statistics as st, sys
# python tx_medians.py DIR TREE...: per rank count, median throughput and CPU per transaction of each mode over the
# runs tx_<tree>_<i>.json of `bench transactions --json`, and the per-run ratios.
d0 = sys.argv[1]
for t in sys.argv[2:]:
    runs = [json.load(open(f))["results"] for f in sorted(glob.glob(f"{d0}/tx_{t}_*.json"))]
    for r in runs[0]:
        rows = [x[r]["modes"] for x in runs]
        cells = " ".join(f'{m}: {st.median([x[m]["tx_per_s"] for x in rows]) / 1e3:.1f}k cpu {st.median([x[m]["cpu_us_per_tx"] for x in rows]):.0f}us'
                         for m in ("mpi4py", "blocking", "nonblocking", "nonblocking+aaar"))
        ratio = lambda a, b: [round(x[a]["tx_per_s"] / x[b]["tx_per_s"], 2) for x in rows]
        print(t, r, "ranks |", cells, "| nb/blk", ratio("nonblocking", "blocking"), "aaar/blk", ratio("nonblocking+aaar", "blocking"),
              "blk/mpi4py", ratio("blocking", "mpi4py"), "verified", all(x[m]["verified"] for x in rows for m in x))

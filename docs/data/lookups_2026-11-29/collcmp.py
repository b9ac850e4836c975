import json, statistics, sys
pre = sys.argv[1] if len(sys.argv) > 1 else "coll"
def load(t):
    out = {}
    for i in (1, 2, 3):
        for r in json.load(open(f"{pre}_{t}_{i}.json"))["rows"]:
            out.setdefault((r["collective"], r["ranks"], r["bytes"]), []).append((r["aiorma_us"], r["mpi_us"]))
    return out
b, n = load("base"), load("new")
for k in sorted(b):
    tb = statistics.median(x[0] for x in b[k]); tn = statistics.median(x[0] for x in n[k])
    rb = statistics.median(x[0] / x[1] for x in b[k]); rn = statistics.median(x[0] / x[1] for x in n[k])
    print(k, "time %.1f -> %.1f us (%.2f)" % (tb, tn, tn / tb), "x MPI %.1f -> %.1f" % (rb, rn))

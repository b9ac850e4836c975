import json, sys, statistics as st
pre = sys.argv[1]; ops = sys.argv[2].split(",")
def load(t):
    runs = [json.load(open(f"{pre}_{t}_{i}.json"))["records"] for i in (1, 2)]
    out = {}
    for recs in runs:
        for r in recs:
            if r["op"] in ops and r["test"] == "latency" and r["size_bytes"] in (8, 256, 1048576):
                out.setdefault((r["mode"], r["op"], r["size_bytes"]), []).append((r["aiorma_us"], r["ratio"]))
    return out
b, n = load("base"), load("new")
for k in sorted(b):
    bt = [x[0] for x in b[k]]; nt = [x[0] for x in n.get(k, [])]
    print("%-8s %-16s %8d  base %s us (%s x MPI) -> new %s us (%s x MPI)  time %.2f x" % (k[0], k[1], k[2],
        "/".join("%.1f" % x for x in bt), "/".join("%.2f" % x[1] for x in b[k]),
        "/".join("%.1f" % x for x in nt), "/".join("%.2f" % x[1] for x in n[k]), st.median(nt) / st.median(bt)))

import json, statistics, sys
pre = sys.argv[1]
R={t:[json.load(open(f"{pre}_{t}_{i}.json"))["records"] for i in (1,2)] for t in ("base","new")}
def get(t,mode,op,size,test="latency"):
    return [r for rr in R[t] for r in rr if r["test"]==test and r["mode"]==mode and r["op"]==op and r["size_bytes"]==size]
def fmt(v): return "/".join("%.2f" % r["ratio"] for r in v)
for mode in ("fence","pscw","lock","lock_all"):
    for op in ("put", "get"):
        for size in (8, 16384, 32768, 262144, 1048576):
            b=get("base",mode,op,size); n=get("new",mode,op,size)
            print("%-8s %s %8d: x MPI base %s  new %s  time new/base %.2f" % (mode, op, size, fmt(b), fmt(n), statistics.median(r["aiorma_us"] for r in n)/statistics.median(r["aiorma_us"] for r in b)))
for size in (32768, 1048576):
    b=get("base","lock","put",size,"bandwidth"); n=get("new","lock","put",size,"bandwidth")
    print("bw lock put %d: base %s new %s" % (size, fmt(b), fmt(n)))

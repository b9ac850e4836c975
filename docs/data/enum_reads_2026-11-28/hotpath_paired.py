import json, glob, statistics as st, sys
# python hotpath_paired.py DIR BEFORE AFTER: per case, the medians of `bench hotpath --json` runs and the median of the paired ratios (run i of one tree against run i of the other).
d0 = sys.argv[1]
def load(t):
    return [json.load(open(f)) for f in sorted(glob.glob(f"{d0}/hotpath_{t}_*.json"))]
b,n=load(sys.argv[2]),load(sys.argv[3])
print(f"{len(b)} runs each; aiorma µs median {sys.argv[2]} -> {sys.argv[3]}, × mpi4py median, paired time ratio {sys.argv[3]}/{sys.argv[2]} median (range)")
for case in b[0]["ratio"]:
    bm=[d["us"]["aiorma "+case] for d in b]; nm=[d["us"]["aiorma "+case] for d in n]
    bx=[d["ratio"][case] for d in b]; nx=[d["ratio"][case] for d in n]
    pr=[x/y for x,y in zip(nm,bm)]
    print(f"{case:22s} {st.median(bm):7.2f} -> {st.median(nm):7.2f}  xMPI {st.median(bx):.2f} -> {st.median(nx):.2f}  paired {st.median(pr):.2f} ({min(pr):.2f}-{max(pr):.2f})")

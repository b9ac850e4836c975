import json, glob, statistics as st, sys
# python transactions.py DIR BEFORE AFTER: medians of `bench transactions --json` runs per tree (tx_<tree>_<i>.json).
d0 = sys.argv[1]
for t in sys.argv[2:4]:
    runs=[json.load(open(f)) for f in sorted(glob.glob(f"{d0}/tx_{t}_*.json"))]
    for ranks in ("2","4"):
        m={mode:[r["results"][ranks]["modes"][mode]["tx_per_s"] for r in runs] for mode in runs[0]["results"][ranks]["modes"]}
        cpu={mode:[r["results"][ranks]["modes"][mode]["cpu_us_per_tx"] for r in runs] for mode in m}
        mp=st.median(m["mpi4py"]); bl=st.median(m["blocking"])
        print(t, ranks, " ".join(f"{k}={st.median(v)/1e3:.1f}k" for k,v in m.items()),
              f"| blocking/mpi4py {st.median([b/a for a,b in zip(m['mpi4py'],m['blocking'])]):.2f}",
              f"nb/blk {st.median([b/a for a,b in zip(m['blocking'],m['nonblocking'])]):.2f}",
              f"aaar/blk {st.median([b/a for a,b in zip(m['blocking'],m['nonblocking+aaar'])]):.2f}",
              "cpu/tx", {k: round(st.median(v),1) for k,v in cpu.items()}, "verified", all(r["verified"] for r in runs))

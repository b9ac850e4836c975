import json, sys
pre = sys.argv[1] if len(sys.argv) > 1 else "tx"
for t in ("base", "new"):
    for i in (1, 2):
        d = json.load(open(f"{pre}_{t}_{i}.json"))["results"]
        out = []
        for p, r in sorted(d.items(), key=lambda x: int(x[0])):
            m = r["modes"]
            b = m["blocking"]["tx_per_s"]
            out.append("%s ranks: blocking %.0f (%.3f x mpi4py, CPU %.0f us) nb %.2f aaar %.2f x blocking" % (p, b, b / m["mpi4py"]["tx_per_s"], m["blocking"]["cpu_us_per_tx"], m["nonblocking"]["tx_per_s"] / b, m["nonblocking+aaar"]["tx_per_s"] / b))
        print(t, i, " | ".join(out))

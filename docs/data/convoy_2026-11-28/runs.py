import json,glob,sys
d0=sys.argv[1]
for t in sys.argv[2:]:
    for f in sorted(glob.glob(f"{d0}/tx_{t}_*.json")):
        d=json.load(open(f))["results"]
        out=[]
        for r in d.values():
            m=r["modes"]; b=m["blocking"]["tx_per_s"]
            out.append(f'{r["ranks"]}r: blk/mpi {b/m["mpi4py"]["tx_per_s"]:.2f} nb {m["nonblocking"]["tx_per_s"]/b:.2f} aaar {m["nonblocking+aaar"]["tx_per_s"]/b:.2f} | per round nb {[round(x/y,2) for x,y in zip(m["nonblocking"]["tx_per_s_runs"],m["blocking"]["tx_per_s_runs"])]} aaar {[round(x/y,2) for x,y in zip(m["nonblocking+aaar"]["tx_per_s_runs"],m["blocking"]["tx_per_s_runs"])]}')
        print(t, f.split("/")[-1], *out, sep="\n  ")

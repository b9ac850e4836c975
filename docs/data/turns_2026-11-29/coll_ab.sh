#!/bin/bash
# usage: coll_ab.sh TAG RUNS extra-args...
tag=$1; runs=$2; shift 2
for i in $(seq 1 $runs); do for t in base new; do tree=/tmp/wt; [ $t = new ] && tree=/work/main
PYTHONPATH=$tree timeout 900 /work/main/.venv/bin/python -m aiorma.bench collectives "$@" --json /tmp/big/coll_${tag}_${t}_$i.json > /tmp/big/coll_${tag}_${t}_$i.log 2>&1
done; done
python3 - "$tag" "$runs" <<'PY'
import json,statistics,sys
tag,runs=sys.argv[1],int(sys.argv[2])
def load(t):
    out={}
    for i in range(1,runs+1):
        d=json.load(open(f'/tmp/big/coll_{tag}_{t}_{i}.json'))
        for r in (d['rows']):
            k=(r['ranks'],r['collective'],r['bytes'])
            out.setdefault(k,[]).append((r['aiorma_us'],r['mpi_us']))
    return out
a,b=load("base"),load("new")
rs=[]
for k in sorted(a):
    am=statistics.median(x[0] for x in a[k]); bm=statistics.median(x[0] for x in b[k])
    mm=statistics.median([x[1] for x in a[k]]+[x[1] for x in b[k]])
    rs.append(bm/am)
    print(k, "base %.1f us (x%.1f)  new %.1f us (x%.1f)  new/base %.2f"%(am,am/mm,bm,bm/mm,bm/am))
print("median new/base %.2f"%statistics.median(rs))
PY

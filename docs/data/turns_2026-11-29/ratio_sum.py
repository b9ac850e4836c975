import json,statistics,sys,glob
tag=sys.argv[1]
def load(t):
    out={}
    for p in sorted(glob.glob(f'/tmp/big/coll_{tag}_{t}_*.json')):
        for r in json.load(open(p))['rows']:
            out.setdefault((r['ranks'],r['collective'],r['bytes']),[]).append(r['aiorma_us']/r['mpi_us'])
    return out
a,b=load('base'),load('new')
rs=[]
for k in sorted(a):
    ra,rb=statistics.median(a[k]),statistics.median(b[k]); rs.append(rb/ra)
    print(k,"x MPI base %.1f new %.1f  new/base %.2f   runs base %s new %s"%(ra,rb,rb/ra,[round(x,1) for x in a[k]],[round(x,1) for x in b[k]]))
print("median %.2f"%statistics.median(rs))

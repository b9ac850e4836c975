"""Summarize the transactions runs of this directory: tx/s per mode, ratios, per tree and run.
python summarize_tx.py  (reads tx_base_*.json, tx_main_*.json)"""
import glob
import json

for ranks in ("2", "4", "8"):
    print(f"{ranks} ranks: tree run | mpi4py blocking nonblocking nb+aaar (k tx/s) | blocking/mpi4py nb/blocking aaar/blocking")
    for tree in ("base", "main"):
        for f in sorted(glob.glob(f"tx_{tree}_*.json")):
            m = json.load(open(f))["results"][ranks]["modes"]
            v = [m[k]["tx_per_s"] / 1e3 for k in ("mpi4py", "blocking", "nonblocking", "nonblocking+aaar")]
            print(f"  {f[3:-5]:8s} | {v[0]:6.1f} {v[1]:6.1f} {v[2]:6.1f} {v[3]:6.1f} | {v[1]/v[0]:.2f} {v[2]/v[1]:.2f} {v[3]/v[1]:.2f}")

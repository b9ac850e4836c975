"""Event-loop turns and inline waits per collective, and how often a call returns a pending Request.
AIORMA_PURE_PYTHON=1 mpiexec -n 2 python probe_turns.py COLLECTIVE ITERATIONS"""
import sys, time, collections, numpy as np, asyncio
import asyncio.base_events as be
import aiorma
from aiorma._core import await_policy
n_turns = [0]
orig = be.BaseEventLoop._run_once
def ro(self):
    n_turns[0] += 1; return orig(self)
be.BaseEventLoop._run_once = ro
cnt = collections.Counter()
opi = await_policy._poll_inline
def pi(f, d):
    r = opi(f, d); cnt[f"inline_{r}"] += 1; return r
await_policy._poll_inline = pi
async def main(comm, name, n):
    one, result = np.full(1, 1.0 + comm.rank), np.zeros(1)
    args = {"barrier": (), "bcast": (result, 0), "allreduce": (one, result)}[name]
    f = getattr(comm, name)
    for _ in range(300): await f(*args)
    await comm.barrier()
    n_turns[0] = 0; cnt.clear(); pending = 0
    t = time.perf_counter()
    for _ in range(n):
        r = f(*args)
        pending += not r.done()
        await r
    el = time.perf_counter() - t
    print(f"rank {comm.rank} {name} {el/n*1e6:.1f} us; loop turns/coll {n_turns[0]/n:.2f}; pending after call {pending/n:.2f}; {dict((k, round(v/n,2)) for k,v in cnt.items())}")
aiorma.run(main, sys.argv[1], int(sys.argv[2]))

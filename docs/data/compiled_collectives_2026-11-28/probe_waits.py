"""Counters inside the ranks (no sampling): inline waits and their outcome, parks, transport polls,
sched_yield, each timed.  AIORMA_PURE_PYTHON=1 mpiexec -n N python probe_waits.py COLLECTIVE ITERATIONS
(from source, so that the wrappers reach the calls)."""
import sys, time, collections, numpy as np
import aiorma
from aiorma._core import await_policy, waiter as waiter_mod
from aiorma.transport.mpi import endpoint as ep
cnt = collections.Counter(); tm = collections.defaultdict(float)
orig_pi = await_policy._poll_inline
import os
orig_sy = os.sched_yield
def sy():
    t = time.perf_counter(); orig_sy(); tm["sched_yield"] += time.perf_counter()-t; cnt["sched_yield"] += 1
os.sched_yield = sy
def pi(f, d):
    t = time.perf_counter(); r = orig_pi(f, d); tm["poll_inline"] += time.perf_counter()-t
    cnt[f"poll_inline_{r}"] += 1; return r
try:
    await_policy._poll_inline = pi
except Exception: pass
orig_park = waiter_mod.Waiter._park
async def park(self, fileno, timeout):
    cnt[f"park_{'bell' if fileno is not None else 'threads'}"] += 1
    t = time.perf_counter()
    r = await orig_park(self, fileno, timeout); tm["parked"] += time.perf_counter()-t
    cnt[f"park_woke_{r}"] += 1
    return r
try:
    waiter_mod.Waiter._park = park
except Exception: pass
orig_parking = ep.MpiEndpoint.parking
def parking(self, p):
    t = time.perf_counter(); r = orig_parking(self, p); tm[f"parking_{p}"] += time.perf_counter()-t; cnt[f"parking_{p}"] += 1; return r
ep.MpiEndpoint.parking = parking
orig_poll = ep.MpiEndpoint.poll
def poll(self):
    cnt["endpoint_poll"] += 1; t = time.perf_counter(); r = orig_poll(self); tm["poll"] += time.perf_counter()-t; return r
ep.MpiEndpoint.poll = poll
async def main(comm, name, n):
    one, result = np.full(1, 1.0 + comm.rank), np.zeros(1)
    args = {"barrier": (), "bcast": (result, 0), "allreduce": (one, result)}[name]
    f = getattr(comm, name)
    for _ in range(300): await f(*args)
    await comm.barrier()
    cnt.clear(); tm.clear()
    t = time.perf_counter()
    for _ in range(n): await f(*args)
    el = time.perf_counter()-t
    await comm.barrier()
    print(f"rank {comm.rank} {name} {el/n*1e6:.1f} us; per 1000:", {k: round(v*1000/n,1) for k,v in sorted(cnt.items())}, "us per coll:", {k: round(v/n*1e6,2) for k,v in tm.items()})
aiorma.run(main, sys.argv[1], int(sys.argv[2]))

"""A lock's timeline in the transactions workload: when each rank's lock requests swap in,
reach the head, are granted, released and handed on (QueueLock's steps, patched to log a
timestamp), and, in mode ``blockingev``, when the program enters each call.

    mpiexec -n 2 python lock_timeline.py MODE N INFLIGHT     (MODE: blocking, nonblocking, aaar, blockingev)

then ``timeline_holds.py`` (hold and hand-off gap per lock), ``timeline_steps.py`` (release →
pass → noticed → granted), ``timeline_calls.py`` (what the successor was doing when handed the
lock).  QueueLock must run from source for the patches to take (a tree whose
``aiorma/_native.py`` omits ``aiorma.engine.lock_protocol``, built; everything else compiled);
the logging and the interpreted lock make every time about 1.6 x longer than in the build."""
import sys, os, time, numpy as np, aiorma, json
from aiorma.apps import transactions as T
from aiorma.engine import lock_protocol as LP
events = []
pc = time.perf_counter
og, orel = LP.QueueLock._grant, LP.QueueLock.release
ocd = LP.QueueLock._check_done
oacq = LP.QueueLock.acquire
def g(self): events.append((pc(), "grant", self.target)); og(self)
def r(self): events.append((pc(), "release", self.target)); orel(self)
def a(self): events.append((pc(), "acquire", self.target)); oacq(self)

optn = LP.QueueLock._pass_to_next
def ptn(self): events.append((pc(), "pass", self.target)); optn(self)
LP.QueueLock._pass_to_next = ptn
oah = LP.QueueLock._at_head
def ah(self): events.append((pc(), "athead", self.target)); oah(self)
LP.QueueLock._at_head = ah
ots = LP.QueueLock._tail_swapped
def ts(self, old): events.append((pc(), "tailswap_alone" if old == self.me else "tailswap_awaitnext", self.target)); ots(self, old)
LP.QueueLock._tail_swapped = ts
oenq = LP.QueueLock._enqueued
def enq(self, p): events.append((pc(), "enq_free" if p == 0 else "enq_queued", self.target)); oenq(self, p)
LP.QueueLock._enqueued = enq

occ = LP.QueueLock.control_changed
def cc(self): events.append((pc(), "cc_" + self.head.value.replace(" ", "_"), self.target)); occ(self)
LP.QueueLock.control_changed = cc
LP.QueueLock._grant = g; LP.QueueLock.release = r; LP.QueueLock.acquire = a
async def main(comm, mode, n, inflight):
    plan = T.make_plan(1, comm.rank, comm.size, n, T.WINDOW)
    warm = T.make_plan(2, comm.rank, comm.size, 500, T.WINDOW)
    info = aiorma.Info(access_after_access_reorder=mode == "aaar")
    win = await comm.win_allocate(T.WINDOW, np.int64, info)
    await T.run_transactions(win, warm, mode == "blocking", inflight, None)
    await comm.barrier()
    events.clear()
    c = time.process_time()
    if mode == "blockingev":
        st = pc()
        for t in range(n):
            target = int(plan.targets[t])
            events.append((pc(), "c_lock", target))
            locked = win.lock(target, aiorma.LOCK_EXCLUSIVE)
            events.append((pc(), "c_acc", target))
            updated = win.accumulate(plan.values[t], target, int(plan.offsets[t]), aiorma.SUM)
            events.append((pc(), "c_unlock", target))
            unlocked = win.unlock(target)
            events.append((pc(), "c_await", target))
            await unlocked
            await locked
            await updated
            events.append((pc(), "c_done", target))
        s = pc() - st
    else:
        s = await T.run_transactions(win, plan, mode == "blocking", inflight, None)
    c = time.process_time() - c
    await comm.barrier()
    print(f"rank {comm.rank} {mode} K={inflight}: {s/n*1e6:.1f} us/tx wall, {c/n*1e6:.1f} cpu", flush=True)
    json.dump(events, open(f"/tmp/prof/ev{comm.rank}.json", "w"))
    await win.free()
aiorma.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))

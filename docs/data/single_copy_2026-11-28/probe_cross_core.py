"""Copy rates between two cores through shared memory, as a landing slot sees them:

    python probe_cross_core.py NBYTES [ROUNDS]

Two processes pinned to cores 0 and 1 share an anonymous mapping.  In turn, the writer copies a
private array into the shared buffer (which the reader read last), and the reader copies the
shared buffer out (which the writer just wrote); each prints its mean time and rate.  A copy
within one core (numpy.copyto of a warm array) is the reference: ~20 GB/s on this VM.
"""

import mmap
import os
import sys
import time

import numpy as np

n = int(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 100
shared = mmap.mmap(-1, n + 4096)
turn = np.frombuffer(shared, dtype=np.int64, count=1)
slot = np.frombuffer(shared, dtype=np.uint8, count=n, offset=4096)
source = np.random.default_rng(0).integers(0, 255, n, dtype=np.uint8)
target = np.zeros(n, np.uint8)
child = os.fork()
me, first = (1, 1) if child == 0 else (0, 0)
os.sched_setaffinity(0, {me})
spent = 0.0
for i in range(rounds):
    while turn[0] != 2 * i + first:
        pass
    start = time.perf_counter()
    if me == 0:
        np.copyto(slot, source)
    else:
        np.copyto(target, slot)
    spent += time.perf_counter() - start
    turn[0] = 2 * i + first + 1
what = "writer, into memory the other core read" if me == 0 else "reader, out of memory the other core wrote"
print(f"{what}: {spent / rounds * 1e6:.0f} us, {n / (spent / rounds) / 1e9:.1f} GB/s")
if child == 0:
    os._exit(0)
os.waitpid(child, 0)

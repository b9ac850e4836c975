"""Nonblocking fence epochs and what is safe to read when: the double-buffer rule.

Each step, every rank puts a step-stamped block into its right neighbour's window and reads the
block its left neighbour put.  With nonblocking epochs a faster left neighbour may already be
putting the *next* step's block while this rank is still reading: after ``await win.fence()``
the window can hold the next epoch's data.  So the window has two halves and step ``s`` writes
half ``s % 2``: a rank reads half ``s % 2`` after the fence that closes step ``s``, and its
neighbour cannot write that half again before the fence after step ``s + 1``, which needs this
rank's "done" for step ``s + 1`` — sent only after this rank has read.

    mpiexec -n 2 python examples/double_buffer.py
    python examples/double_buffer.py --local 3 --steps 50
"""

from __future__ import annotations

import argparse

import numpy as np

import aiorma

BLOCK = 64


async def main(comm: aiorma.Comm, steps: int) -> str:
    left, right = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size
    win = await comm.win_allocate(2 * BLOCK, np.int64)
    await win.fence(aiorma.MODE_NOPRECEDE)
    # --8<-- [start:loop]
    for step in range(steps):
        half = (step % 2) * BLOCK
        win.put(np.full(BLOCK, 1000 * step + comm.rank, np.int64), right, half)
        await win.fence()                                 # closes step, opens step + 1
        mine = win.memory[half : half + BLOCK]            # left's block of this step, intact
        assert (mine == 1000 * step + left).all(), (step, mine[:4])
    # --8<-- [end:loop]
    await win.fence(aiorma.MODE_NOSUCCEED)
    await win.free()
    return f"rank {comm.rank}: {steps} steps read intact"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the double-buffer rule of nonblocking fence epochs")
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in this process")
    parser.add_argument("--steps", type=int, default=200)
    options = parser.parse_args()
    if options.local:
        print("\n".join(aiorma.run(main, options.steps, nprocs=options.local)))
    else:
        print(aiorma.run(main, options.steps), flush=True)

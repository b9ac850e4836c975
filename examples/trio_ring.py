"""aiorma in a trio program: a ring exchange beside a ticking timer, with trio's cancel scopes.

Each rank runs two trio tasks in a nursery: one ticks every 5 ms, the other does 200 fence epochs
around the ring under ``trio.fail_after``.  A ``trio.move_on_after`` scope shows what cancelling
an await means: the wait is abandoned, the operation is not (the lock request still stands and is
released).

    mpiexec -n 3 python examples/trio_ring.py
    python examples/trio_ring.py --local 3
"""

from __future__ import annotations

import argparse

import numpy as np
import trio

import aiorma

STEPS = 200


async def main(comm: aiorma.Comm) -> str:
    left, right = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size
    win = await comm.win_allocate(2, np.int64)
    ticks = 0

    async def ticker(done: trio.Event) -> None:
        nonlocal ticks
        while not done.is_set():
            await trio.sleep(0.005)
            ticks += 1

    # --8<-- [start:ring]
    async def ring(done: trio.Event) -> None:
        with trio.fail_after(30):  # every wait below is bounded
            for step in range(STEPS):
                await win.fence()
                win.put(np.array([step * comm.size + comm.rank]), right, 0)
            await win.fence(aiorma.MODE_NOSUCCEED)
            assert win.memory[0] == (STEPS - 1) * comm.size + left
            with trio.move_on_after(0):  # a deadline already passed: the await may be cut short,
                await win.lock(right)  # but the lock request stands either way ...
            await win.unlock(right)  # ... so release it (it takes effect once granted)
            await comm.barrier()
        done.set()
    # --8<-- [end:ring]

    done = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker, done)
        nursery.start_soon(ring, done)
    await win.free()
    return f"rank {comm.rank}: {STEPS} fence epochs done, the timer ticked meanwhile: {ticks > 0}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="aiorma in a trio program")
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in this process")
    options = parser.parse_args()
    if options.local:
        print("\n".join(aiorma.run(main, nprocs=options.local, backend="trio")))
    else:
        print(aiorma.run(main, backend="trio"), flush=True)

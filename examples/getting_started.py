"""Getting started: every rank puts a value into its right neighbour's window, then reads its own.

    mpiexec -n 2 python examples/getting_started.py       # real processes (./dev/example.sh works too)
    python examples/getting_started.py --local 3          # three ranks in this process
"""

from __future__ import annotations

import argparse

import numpy as np

import aiorma


# --8<-- [start:main]
async def main(comm: aiorma.Comm) -> str:
    win = await comm.win_allocate(4, np.int64)           # 4 int64 elements exposed by every rank
    right = (comm.rank + 1) % comm.size

    await win.fence()                                    # open a fence epoch (awaited: blocking form)
    win.put(np.array([100 + comm.rank]), right, 0)       # returns a Request; no need to await it
    closing = win.fence(aiorma.MODE_NOSUCCEED)           # the epoch is closed *now* ...
    await closing                                        # ... and complete when this returns

    got = int(win.memory[0])                             # my left neighbour's value
    await win.free()                                     # collective
    return f"rank {comm.rank} of {comm.size} got {got}"
# --8<-- [end:main]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="aiorma's getting-started program")
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in this process")
    options = parser.parse_args()
    if options.local:
        for line in aiorma.run(main, nprocs=options.local):  # a list: one result per rank
            print(line)
    else:
        print(aiorma.run(main), flush=True)                   # this rank's result

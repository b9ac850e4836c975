"""Cost of one notice (Window.notify) against the RMA call it replaces (Window.accumulate with
REPLACE, issued and not awaited), one int64 word, rank 0 towards rank 1, inside lock_all; rank 1
waits for the last word.  Medians of 5 loops of N calls, the two forms alternating.

    mpiexec -n 2 python notice_cost.py [N]      (add the emulation flags for two nodes)
"""

import statistics
import sys
import time

import numpy as np

import aiorma


async def main(comm: aiorma.Comm) -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    win = await comm.win_allocate(4, np.int64)
    await comm.barrier()
    times: dict[str, list[float]] = {"notify": [], "accumulate": []}
    last = 0
    async with win.lock_all():
        for _ in range(5):
            for form in times:
                await comm.barrier()
                start = time.perf_counter()
                if comm.rank == 0:
                    for _ in range(n):
                        last += 1
                        if form == "notify":
                            win.notify(1, 0, last)
                        else:
                            win.accumulate(np.array([last], np.int64), 1, 0, aiorma.REPLACE)
                    await win.flush(1)
                else:
                    last += n
                    await win.wait_until(0, ">=", last)
                times[form].append((time.perf_counter() - start) / n * 1e6)
    if comm.rank == 0:
        print(" ".join(f"{form} {statistics.median(t):.1f} us" for form, t in times.items()))
    await comm.barrier()
    await win.free()


aiorma.run(main)

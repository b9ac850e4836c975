"""Producer and consumer with notified puts: data, then a signal word, no epoch call on the target.

Rank 0 streams ``--items`` blocks into rank 1's ring of ``SLOTS`` slots.  Each block goes with one
``put_signal``: the block into slot ``i % SLOTS``, then — once the block is in rank 1's memory —
rank 1's signal word ``READY`` set to ``i + 1``.  Rank 1 awaits ``wait_until(READY, ">=", i + 1)``
on its own memory (it makes no epoch call at all), checks the block, and hands the slot back by
signalling rank 0's word ``FREE``; rank 0 waits for that before it reuses the slot.  Both words
only grow and each has one writer, so ``SIGNAL_SET`` (a plain put) is enough.

    mpiexec -n 2 python examples/notified_put.py
    python examples/notified_put.py --local 2 --items 500
"""

from __future__ import annotations

import argparse

import numpy as np

import aiorma

BLOCK, SLOTS = 32, 4
READY, FREE = 0, 1  # signal words: READY on the consumer, FREE on the producer


async def main(comm: aiorma.Comm, items: int) -> str:
    ring = await comm.win_allocate(SLOTS * BLOCK, np.float64)  # the consumer's slots
    words = await comm.win_allocate(2, np.int64)
    # --8<-- [start:stream]
    async with ring.lock_all(), words.lock_all():
        if comm.rank == 0:  # the producer
            for i in range(items):
                await words.wait_until(FREE, ">=", i + 1 - SLOTS)  # slot i % SLOTS is free
                block = np.full(BLOCK, float(i))
                ring.put_signal(block, 1, (i % SLOTS) * BLOCK, words, READY, i + 1)
            await words.wait_until(FREE, ">=", items)  # everything consumed
        elif comm.rank == 1:  # the consumer
            total = 0.0
            for i in range(items):
                await words.wait_until(READY, ">=", i + 1)  # block i has landed
                slot = ring.memory[(i % SLOTS) * BLOCK : (i % SLOTS + 1) * BLOCK]
                assert (slot == i).all(), (i, slot[:4])
                total += slot.sum()
                words.signal(0, FREE, i + 1)  # hand the slot back
    # --8<-- [end:stream]
    await comm.barrier()
    await ring.free()
    await words.free()
    if comm.rank == 1:
        return f"rank 1: consumed {items} blocks in order, sum {total:.0f}"
    return f"rank {comm.rank}: done"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="producer/consumer with notified puts")
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in this process")
    parser.add_argument("--items", type=int, default=2000)
    options = parser.parse_args()
    if options.local:
        print("\n".join(aiorma.run(main, options.items, nprocs=options.local)))
    else:
        print(aiorma.run(main, options.items), flush=True)

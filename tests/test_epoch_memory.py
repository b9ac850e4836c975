"""A completed epoch is freed at once, by reference counting: its records form no reference
cycle, so a program running millions of epochs does not leave them to the cyclic GC.

(Before: a lock epoch's access record held its lock request, whose callbacks held the record —
every lock and lock_all epoch stayed alive until the next collection.)

Epochs are followed by identity among the objects the GC tracks, not by weak reference: the
compiled engine's records (aiorma._native) take no weak references."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.engine.epochs import Epoch


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["lock", "lock_all", "fence", "pscw"])
def test_a_completed_epoch_is_freed_without_the_cyclic_gc(kind: str) -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        data = np.ones(1, np.int64)
        peer = 1 - comm.rank

        # Every epoch live at track(), as (its address, its number).
        opened: set[tuple[int, int]] = set()

        def track() -> None:
            opened.update((id(epoch), epoch.id) for epoch in win.engine.live_epochs())
            # The search sees them while they live (else the test could not fail).
            assert len(alive()) == len(opened) > 0

        def alive() -> list[Epoch]:
            return [o for o in gc.get_objects() if isinstance(o, Epoch) and (id(o), o.id) in opened]

        async def epoch() -> None:
            if kind == "lock":
                await win.lock(peer, aiorma.LOCK_EXCLUSIVE)
                track()
                win.put(data, peer)
                await win.unlock(peer)
            elif kind == "lock_all":
                await win.lock_all()
                track()
                win.put(data, peer)
                await win.unlock_all()
            elif kind == "fence":
                await win.fence(aiorma.MODE_NOPRECEDE)
                track()
                win.put(data, peer)
                await win.fence(aiorma.MODE_NOSUCCEED)
            else:
                await win.post([peer])
                await win.start([peer])
                track()
                win.put(data, peer)
                await win.complete()
                await win.wait()

        await comm.barrier()
        gc.collect()
        gc.disable()
        try:
            await epoch()
            # Both ranks share this process: look once neither makes epochs any more, so that
            # no epoch of the other rank can sit at an address one of ours was freed from.
            await comm.barrier()
            freed = bool(opened) and not alive()
        finally:
            gc.enable()
        await comm.barrier()
        await win.free()
        return freed

    assert aiorma.run(main, nprocs=2) == [True, True]

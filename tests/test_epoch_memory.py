"""A completed epoch is freed at once, by reference counting: its records form no reference
cycle, so a program running millions of epochs does not leave them to the cyclic GC.

(Before: a lock epoch's access record held its lock request, whose callbacks held the record —
every lock and lock_all epoch stayed alive until the next collection.)"""

from __future__ import annotations

import gc
import weakref
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

        opened: list[weakref.ref[Epoch]] = []

        def track() -> None:  # every epoch live now, by weak reference
            opened.extend(weakref.ref(epoch) for epoch in win.engine.live_epochs())

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
            freed = bool(opened) and all(ref() is None for ref in opened)
        finally:
            gc.enable()
        await comm.barrier()
        await win.free()
        return freed

    assert aiorma.run(main, nprocs=2) == [True, True]

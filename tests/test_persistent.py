"""Persistent collectives (``comm.allreduce_init``, ``comm.bcast_init``, ...) on the local
transport: what a start skips.  Their results on every transport are the battery's
``persistent_allreduce_bcast`` and ``persistent_gathers_barrier`` checks
(tests/mpi_scripts/collectives_check.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.collectives import validate


@pytest.mark.timeout(60)
def test_arguments_are_checked_once_at_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check runs at init; 20 starts of each persistent collective run none."""
    calls: list[str] = []
    for name in ("send_buffer", "recv_buffer", "op", "root", "algorithm", "expect_size"):
        checked = getattr(validate, name)

        def counting(*args: Any, _checked: Any = checked, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _checked(*args, **kwargs)

        monkeypatch.setattr(validate, name, counting)

    async def main(comm: aiorma.Comm) -> tuple[int, int]:
        send, recv, buf = np.ones(4), np.zeros(4), np.zeros(2)
        total = comm.allreduce_init(send, recv)
        bcast = comm.bcast_init(buf, 0)
        reduced = comm.reduce_init(send, recv if comm.rank == 0 else None, root=0)
        everyone = np.zeros(4 * comm.size)
        others = [
            comm.barrier_init(),
            comm.barrier_init(algorithm="dissemination"),
            comm.allgather_init(send, everyone),
            comm.gather_init(send, everyone if comm.rank == 1 else None, 1),
            comm.scatter_init(everyone[: comm.size] if comm.rank == 1 else None, buf[:1].copy(), 1),
            comm.alltoall_init(everyone[: comm.size].copy(), np.zeros(comm.size)),
        ]
        sync = comm.barrier_init()  # a plain barrier would check its options (counted)
        await sync.start()  # every rank (all in this process, one list) has made its inits
        at_init = len(calls)
        for _ in range(20):
            await total.start()
            await bcast.start()
            await reduced.start()
            for persistent in others:
                await persistent.start()
        assert (recv == comm.size).all() and (everyone == 1).all()
        await sync.start()
        return at_init, len(calls)

    results = aiorma.run(main, nprocs=3)
    assert all(at_init > 0 and after == at_init for at_init, after in results), results


@pytest.mark.timeout(60)
def test_a_start_while_active_is_refused_and_changes_nothing() -> None:
    async def main(comm: aiorma.Comm) -> bool:
        out = np.zeros(1)
        total = comm.allreduce_init(np.ones(1), out)
        first = total.start()
        refused = False
        if not first.done():
            with pytest.raises(aiorma.RmaUsageError, match="started again"):
                total.start()
            refused = True
        await first
        assert not total.active and out[0] == comm.size
        await total.start()  # the refused start left no message behind: the next one matches
        assert out[0] == comm.size
        return refused

    assert any(aiorma.run(main, nprocs=2))

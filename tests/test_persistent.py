"""Persistent collectives (``comm.allreduce_init`` / ``comm.bcast_init``) on the local transport:
what a start skips.  Their results on every transport are the battery's
``persistent_allreduce_bcast`` check (tests/mpi_scripts/collectives_check.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.collectives import validate


@pytest.mark.timeout(60)
def test_arguments_are_checked_once_at_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every buffer check runs at init; 20 starts of allreduce, bcast and reduce run none."""
    calls: list[str] = []
    for name in ("send_buffer", "recv_buffer", "op", "root"):
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
        await comm.barrier()  # every rank (all in this process, one list) has made its inits
        at_init = len(calls)
        for _ in range(20):
            await total.start()
            await bcast.start()
            await reduced.start()
        assert (recv == comm.size).all()
        await comm.barrier()
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

"""The collectives' common call is checked by exact types first (aiorma/collectives/validate.py,
``plain``): plain C-contiguous numeric numpy arrays skip the general buffer checks, and
everything else still goes through them — accepted, converted or refused as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.collectives import validate


def test_plain_is_exactly_what_the_general_checks_pass_unchanged() -> None:
    a, b = np.ones(4), np.zeros(4)
    assert validate.plain(a, b) and validate.plain(b, b)
    read_only = np.zeros(4)
    read_only.flags.writeable = False
    not_plain = [
        ([a, "DOUBLE"], b),  # an mpi4py spec: unwrapped by the general checks
        (np.ones((4, 2))[:, 0], b),  # not contiguous: copied by send_buffer
        (a, np.zeros(8)[::2]),  # a receive buffer that is not contiguous: refused
        (a, read_only),  # nor writeable: refused
        (a, np.zeros(4, np.float32)),  # dtypes differ: refused
        (np.array(["x"] * 4), np.array(["y"] * 4)),  # not numeric: refused
        (np.ones(4).view(np.recarray), b),  # a subclass
        (a.tolist(), b),  # not an array
    ]
    for send, recv in not_plain:
        assert not validate.plain(send, recv), (send, recv)
    assert validate.send_buffer(a, "x") is a and validate.recv_buffer(b, "x") is b


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    for name in ("send_buffer", "recv_buffer", "same_dtype"):
        checked = getattr(validate, name)

        def counting(*args: Any, _checked: Any = checked, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _checked(*args, **kwargs)

        monkeypatch.setattr(validate, name, counting)
    return calls


async def _every_collective(comm: aiorma.Comm, strided: bool) -> list[np.ndarray]:
    """Each buffer collective once, with plain arrays or (``strided``) with send buffers that are
    views of every second element (the general checks copy them)."""
    size = comm.size

    def send(n: int, value: float) -> np.ndarray:
        if not strided:
            return np.full(n, value)
        wide = np.zeros(2 * n)
        wide[::2] = value
        return wide[::2]

    out = []
    total = np.zeros(3)
    await comm.allreduce(send(3, comm.rank + 1.0), total)
    out.append(total)
    reduced = np.zeros(3)
    await comm.reduce(send(3, comm.rank + 1.0), reduced, root=0)
    out.append(reduced if comm.rank == 0 else np.zeros(0))
    buf = np.full(2, 7.0) if comm.rank == 0 else np.zeros(2)
    await comm.bcast(buf, 0)
    out.append(buf)
    everyone = np.zeros(2 * size)
    await comm.allgather(send(2, float(comm.rank)), everyone)
    out.append(everyone)
    gathered = np.zeros(2 * size)
    await comm.gather(send(2, float(comm.rank)), gathered, 0)
    out.append(gathered if comm.rank == 0 else np.zeros(0))
    mine = np.zeros(2)
    await comm.scatter(send(2 * size, 5.0), mine, 0)
    out.append(mine)
    swapped = np.zeros(size)
    await comm.alltoall(send(size, float(comm.rank)), swapped)
    out.append(swapped)
    return out


@pytest.mark.timeout(60)
def test_plain_calls_skip_the_general_checks_and_others_take_them(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    plain = aiorma.run(lambda comm: _every_collective(comm, strided=False), nprocs=2)
    assert calls == []
    strided = aiorma.run(lambda comm: _every_collective(comm, strided=True), nprocs=2)
    assert "send_buffer" in calls
    for rank in range(2):
        for got, expected in zip(strided[rank], plain[rank], strict=True):
            assert np.array_equal(got, expected)
    assert np.array_equal(plain[0][0], np.full(3, 3.0)) and np.array_equal(plain[1][6], [0.0, 1.0])

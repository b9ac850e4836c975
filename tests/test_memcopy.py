"""Copies out of landing slots avoid glibc's slow ``rep movsb`` case (aiorma._core.memcopy).

A landing slot starts on a page and a large numpy array 16 bytes into one, so a forward copy
from slot to array is the case where ``rep movsb`` on AMD Zen runs ten times slower (measured in
docs/benchmarks.md; ``dev/probe_copy_alias.py``).  Speed is the benchmark's to show; these tests
check that the copy is exact at every relative offset and size, and that every copy out of a
slot takes the careful road."""

from __future__ import annotations

import numpy as np
import pytest

import aiorma
from aiorma._core import memcopy
from aiorma.collectives import exchange, landing


def _at_page_offset(size: int, offset: int, pool: list[np.ndarray]) -> np.ndarray:
    """A uint8 array of ``size`` bytes starting ``offset`` bytes into a page (kept alive in pool)."""
    raw = np.zeros(size + 2 * 4096, np.uint8)
    pool.append(raw)
    start = (-raw.ctypes.data) % 4096 + offset
    return raw[start : start + size]


@pytest.mark.parametrize(
    "size",
    [1, 100, memcopy.SHORT_COPY - 1, memcopy.SHORT_COPY, 65536 + 3, memcopy.LONG_COPY - 1, memcopy.LONG_COPY],
)
def test_copy_bytes_is_exact_at_every_relative_offset(size: int) -> None:
    pool: list[np.ndarray] = []
    rng = np.random.default_rng(size)
    src = _at_page_offset(size, 0, pool)
    src[...] = rng.integers(0, 256, size, dtype=np.uint8)
    for offset in [*range(72), 4000, 4080, 4095]:
        out = _at_page_offset(size, offset, pool)
        memcopy.copy_bytes(out, src)
        assert out.tobytes() == src.tobytes(), offset
        # the bytes around the destination are untouched
        raw = pool[-1]
        start = out.ctypes.data - raw.ctypes.data
        assert not raw[:start].any() and not raw[start + size :].any(), offset


def test_copy_bytes_keeps_typed_values_bit_for_bit() -> None:
    """Typed arrays are copied as bytes: a NaN's payload and -0.0 survive the aliased road."""
    pool: list[np.ndarray] = []
    count = 1024
    raw_src = _at_page_offset(count * 8, 0, pool)
    src = raw_src.view(np.float64)
    src[...] = np.arange(count)
    src[::3] = -0.0
    raw_src.view(np.uint64)[1::3] = 0x7FF0_0000_0000_0001 + np.arange(1, count, 3, dtype=np.uint64)  # NaNs
    for offset in (0, 8, 16, 24, 64):
        out = _at_page_offset(count * 8, offset, pool).view(np.float64)
        memcopy.copy_bytes(out, src)
        assert out.tobytes() == src.tobytes(), offset


@pytest.mark.timeout(60)
def test_every_copy_out_of_a_landing_slot_is_a_careful_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """bcast, gather and alltoall of 64 KiB blocks into arrays 16 bytes into a page (the slow
    case): each received byte reaches the output through copy_bytes, and the results are right."""
    copied: list[int] = []

    def counting(out: np.ndarray, src: np.ndarray) -> None:
        copied.append(int(src.size))
        memcopy.copy_bytes(out, src)

    monkeypatch.setattr(landing, "copy_bytes", counting)
    monkeypatch.setattr(exchange, "copy_bytes", counting)
    block = 65536

    async def main(comm: aiorma.Comm) -> int:
        pool: list[np.ndarray] = []
        size, rank = comm.size, comm.rank
        buf = _at_page_offset(block, 16, pool)
        buf[...] = 7 if rank == 0 else 0
        await comm.bcast(buf, 0)
        assert (buf == 7).all()
        send = np.full(block, rank + 1, np.uint8)
        gathered = _at_page_offset(block * size, 16, pool)
        await comm.gather(send, gathered if rank == 0 else None, 0)
        if rank == 0:
            assert (gathered.reshape(size, block) == np.arange(1, size + 1, dtype=np.uint8)[:, None]).all()
        blocks = np.repeat(np.arange(size, dtype=np.uint8) + 10 * rank, block)
        swapped = _at_page_offset(block * size, 16, pool)
        await comm.alltoall(blocks, swapped)
        assert (swapped.reshape(size, block) == (np.arange(size, dtype=np.uint8) * 10 + rank)[:, None]).all()
        return 0

    aiorma.run(main, nprocs=3)
    # Received from peers: the bcast's block on two ranks, two blocks at the gather's root, two
    # blocks on every rank in the alltoall — at least, if some travel through tree forwarding.
    assert sum(copied) >= (2 + 2 + 3 * 2) * block

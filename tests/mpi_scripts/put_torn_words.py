"""Words of a plain put are never seen half-written on one node: run on 2 ranks by
tests/test_transport_mpi.py.

aiorma's own machinery reads words of its windows while a peer's put may be landing (a signal's
words when the call cannot finish inline, LL words): it relies on a put moving aligned 8-byte words
whole, as aiorma's stores and copies into a peer's mapped memory do (and MPICH's shared-memory
put, ``memcpy``, where a put is MPI's).  Rank 0 puts ``WORDS`` int64 words into
rank 1's window over and over, flushing after each, word ``i`` of write ``k`` carrying
``k << 32 | f(k, i)``; rank 1 reads its own window as fast as it can meanwhile and counts the words
whose low half is not ``f`` of their own high half (a word mixing two writes).  Each rank writes
``{"torn", "reads", "writes"}`` with tests.mpi_harness.write_rank_result.

Usage: ``mpiexec -n 2 python put_torn_words.py WORDS SECONDS``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma._core.memcopy import load_words
from tests.mpi_harness import write_rank_result

_A, _B, _MASK = np.uint64(0x9E37_79B1), np.uint64(0x85EB_CA77), np.uint64(0xFFFF_FFFF)


def words_of(k: int, n: int) -> np.ndarray:
    index = np.arange(n, dtype=np.uint64)
    return ((np.uint64(k) << np.uint64(32)) | ((np.uint64(k) * _A + index * _B) & _MASK)).view(np.int64)


def torn(words: np.ndarray) -> int:
    raw = words.view(np.uint64)
    high = raw >> np.uint64(32)
    index = np.arange(raw.size, dtype=np.uint64)
    return int(((high != 0) & ((raw & _MASK) != ((high * _A + index * _B) & _MASK))).sum())


async def main(comm: aiorma.Comm) -> None:
    n, seconds = int(sys.argv[1]), float(sys.argv[2])
    win = await comm.win_allocate(n, np.int64)
    counts = {"torn": 0, "reads": 0, "writes": 0}
    await comm.barrier()
    deadline = time.monotonic() + seconds
    if comm.rank == 0:
        await win.lock_all()
        k = 1
        while time.monotonic() < deadline:
            win.put(words_of(k, n), 1)
            await win.flush(1)
            counts["writes"] += 1
            k += 1
        await win.unlock_all()
    else:
        memory = win.memory
        while time.monotonic() < deadline:
            counts["torn"] += torn(load_words(memory))  # whole words, as aiorma's readers load them
            counts["reads"] += 1
            if counts["reads"] % 64 == 0:
                await asyncio.sleep(0)  # let the loop run now and then, as a program would
    await comm.barrier()
    await win.free()
    write_rank_result(comm.rank, counts)


if __name__ == "__main__":
    aiorma.run(main)

"""Torn-word check of LL messages, run on 2 ranks by tests/test_ll.py.

LL messages (aiorma/collectives/ll.py) rely on one property of the transport: a word of the LL
landing window is never seen half-written — a reader that loads an 8-byte word sees both halves
of one write (docs/architecture.md, *One put per small message*).  This script checks exactly
that, through the Comm's own landing windows: rank 0 sends LL messages to rank 1 with
``Landing.send``; word ``i`` of every message with flag ``F`` carries the payload ``f(F, i)``.
Rank 1 reads the slot of the message it expects over and over while rank 0 writes it, and checks
every word of every read: a word whose flag is ``F != 0`` must carry ``f(F, i)`` (each slot only
ever holds such words, old or new), so a word mixing two writes is caught.  Then it receives the
message as usual (the credits flow as in any collective).

Usage: ``mpiexec -n 2 python ll_torn_words.py LL_BYTES SIZE[,SIZE...] MESSAGES``; each rank
writes its result with ``write_rank_result``: rank 1 ``{"torn": n, "reads": n, "mixed": n}``
(``mixed``: reads that caught a message partly landed — evidence the reads raced the writes).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma._core.memcopy import load_words
from aiorma.collectives import landing as landing_module
from aiorma.collectives.landing import LandingConfig
from aiorma.collectives.ll import flag_of
from tests.mpi_harness import write_rank_result

_A, _B, _MASK = np.uint64(0x9E37_79B1), np.uint64(0x85EB_CA77), np.uint64(0xFFFF_FFFF)


def payload(flag: int, nwords: int) -> np.ndarray:
    """The bytes of a message with ``flag``: word ``i`` carries ``f(flag, i)``."""
    index = np.arange(nwords, dtype=np.uint64)
    return ((np.uint64(flag) * _A + index * _B) & _MASK).astype(np.uint32).view(np.uint8)


def torn(words: np.ndarray) -> int:
    """Words (uint64) whose payload is not ``f(flag, i)`` for their own non-zero flag."""
    flags = words >> np.uint64(32)
    index = np.arange(words.size, dtype=np.uint64)
    expected = (flags * _A + index * _B) & _MASK
    return int(((flags != 0) & ((words & _MASK) != expected)).sum())


async def main(comm: aiorma.Comm) -> None:
    write_rank_result(comm.rank, await check(comm))


async def check(comm: aiorma.Comm) -> dict[str, int]:
    sizes = [int(s) for s in sys.argv[2].split(",")]
    messages = int(sys.argv[3])
    ch = comm.collectives.landing
    assert ch.ll_bytes == int(sys.argv[1]) and max(sizes) <= ch.ll_bytes
    await comm.barrier()
    counts = {"torn": 0, "reads": 0, "mixed": 0}
    for n in range(messages):
        nbytes = sizes[n % len(sizes)]
        nwords = nbytes // 4
        if comm.rank == 0:
            await ch.send(1, payload(flag_of(ch._ll_sent[1]), nwords))
            continue
        ordinal = ch._ll_expected[0]
        flag = flag_of(ordinal)
        lo = (ordinal % ch.ll_slots) * ch.ll_words  # source rank 0's slots come first
        slot = ch._ll_mem[lo : lo + ch.ll_words]
        while True:
            words = load_words(slot)  # whole words, as the LL reader loads them
            counts["reads"] += 1
            counts["torn"] += torn(words)
            landed = (words[:nwords] >> np.uint64(32)) == flag
            if landed.all():
                break
            if landed.any():
                counts["mixed"] += 1
            # Let the loop run between reads, as a receiver's awaits do: between nodes the
            # words and the credits this rank writes are accumulates, carried out by the loop.
            await asyncio.sleep(0)
        out = np.empty(nbytes, np.uint8)
        await ch.recv(0, out)
        assert (out == payload(flag, nwords)).all(), f"message {ordinal} arrived wrong"
    await comm.barrier()
    return counts


if __name__ == "__main__":
    landing_module.DEFAULT_CONFIG = LandingConfig(ll_bytes=int(sys.argv[1]))
    aiorma.run(main)

"""Measure the LogGP parameters (:mod:`.model`) on the running transport.

Ping-pongs between ranks 0 and 1 over the landing windows (the other ranks wait), then rank 0's
numbers are broadcast so that every rank gets the same :class:`~.model.LogGP` — selection must
choose identically everywhere.  Run as a collective through
:meth:`aiorma.collectives.api.Collectives.calibrate` (public: :func:`aiorma.collectives.calibrate`).
"""

from __future__ import annotations

import asyncio
import statistics
import time

import numpy as np

from .bcast import knomial_bcast
from .landing import Landing
from .model import LogGP

#: Signals per burst and round trips per measurement.
PINGS = 30


async def measure(landing: Landing, pings: int = PINGS, big_bytes: int = 256 << 10) -> LogGP:
    """Collective over the landing's ranks: the measured :class:`LogGP` (rank 0's, everywhere).

    * ``o``: time to issue one signal, from a burst of ``pings`` signals; ``g = o``.
    * ``L``: half a signal round trip minus ``2·o`` (at least 0).
    * ``d``: half a round trip of 8-byte data messages minus that of signals.
    * ``G``: the extra half round trip of ``big_bytes`` messages, per byte.
    * ``gamma``: rank 0's time per byte to sum two float64 buffers.
    """
    values = np.zeros(6, np.float64)
    if landing.rank in (0, 1):
        values[:] = await _ping_pong(landing, landing.rank, pings, min(big_bytes, 64 * landing.slot_bytes))
    await knomial_bcast(landing, values.view(np.uint8), list(range(landing.size)), 0, 2)
    return LogGP.from_array(values)


async def _ping_pong(ch: Landing, rank: int, pings: int, big: int) -> np.ndarray:
    peer = 1 - rank

    async def signals(rounds: int) -> float:
        """Median half round trip of a signal."""
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            if rank == 0:
                ch.signal(peer)
                await ch.wait_signal(peer)
            else:
                await ch.wait_signal(peer)
                ch.signal(peer)
            times.append(time.perf_counter() - start)
        return statistics.median(times) / 2

    async def data(rounds: int, nbytes: int) -> float:
        """Median half round trip of an ``nbytes`` data message."""
        buf = np.zeros(nbytes, np.uint8)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            if rank == 0:
                await ch.send(peer, buf)
                await ch.recv(peer, buf)
            else:
                await ch.recv(peer, buf)
                await ch.send(peer, buf)
            times.append(time.perf_counter() - start)
        return statistics.median(times) / 2

    await signals(5)  # warm-up
    # overhead: a burst of signals from rank 0; rank 1 waits for all of them
    start = time.perf_counter()
    if rank == 0:
        for _ in range(pings):
            ch.signal(peer)
    issue = (time.perf_counter() - start) / pings
    if rank == 1:
        for _ in range(pings):
            await ch.wait_signal(peer)
    await asyncio.sleep(0)
    half_signal = await signals(pings)
    half_small = await data(pings, 8)
    half_big = await data(max(5, pings // 3), big)
    o = issue
    L = max(0.0, half_signal - 2 * o)
    d = max(0.0, half_small - half_signal)
    G = max(0.0, (half_big - half_small) / big)
    a = np.random.default_rng(0).random(1 << 19)  # 4 MiB: beyond most caches, like large messages
    b = a.copy()
    sums = []
    for _ in range(5):
        start = time.perf_counter()
        np.add(a, b, out=a)
        sums.append(time.perf_counter() - start)
    gamma = statistics.median(sums) / a.nbytes
    return np.array([L, o, o, G, d, gamma])

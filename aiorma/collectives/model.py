"""A LogGP cost model of the collective algorithms, and its calibration on a transport.

Parameters (seconds, or seconds per byte), after Culler et al.'s LogP and Alexandrov et al.'s
LogGP, as used by Hoefler et al. (2006) to pick ``n`` for the n-way dissemination barrier:

* ``L`` — latency: from the end of the sender's overhead until the receiver could see the flag;
* ``o`` — overhead: processor time to issue (or to notice and consume) one message;
* ``g`` — gap: least time between two message injections of one rank (``≥ o`` here: in Python
  the processor, not the network, limits the rate);
* ``G`` — gap per byte: the inverse bandwidth of a data message, both copies included;
* ``d`` — extra cost of a *data* message over a flag-only signal (the flush that orders data
  before flag, and the credit returned by the receiver);
* ``gamma`` — time per byte to combine two buffers in a reduction.

One message of ``m`` bytes costs ``L + 2o + d + m·G``; a signal ``L + 2o``.  A rank that sends
``k`` messages in a row issues the last one ``(k−1)·max(g, o)`` after the first.  Large messages
move in slot-sized chunks, so trees pipeline them: ``c`` chunks down a tree of depth ``D`` take
``(D + c − 1)`` chunk steps.

The cost functions choose algorithms (:mod:`aiorma.collectives.select`), so they must give the
same answer on every rank: the parameters in use are identical everywhere (defaults, or the
result of the collective :func:`calibrate`, which rank 0 measures and broadcasts).
"""

from __future__ import annotations

import functools
import math

import attrs
import numpy as np

from .schedules import binomial_subtree, largest_power_of_two, nway_distances


@attrs.frozen(kw_only=True)
class LogGP:
    """Cost-model parameters; see the module docstring.  Times in seconds."""

    L: float
    o: float
    g: float
    G: float
    d: float = 0.0
    gamma: float = 0.5e-9

    def as_array(self) -> np.ndarray:
        return np.array([self.L, self.o, self.g, self.G, self.d, self.gamma], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> LogGP:
        L, o, g, G, d, gamma = (float(v) for v in values)
        return cls(L=L, o=o, g=g, G=G, d=d, gamma=gamma)

    # ------------------------------------------------------------------ building blocks

    def signal(self) -> float:
        """One flag-only message, end to end."""
        return self.L + 2 * self.o

    def message(self, nbytes: float) -> float:
        """One data message of ``nbytes``, end to end."""
        return self.L + 2 * self.o + self.d + nbytes * self.G

    def burst(self, k: int) -> float:
        """Issue time of ``k`` messages in a row, up to the start of the last one."""
        return max(0, k - 1) * max(self.g, self.o)


#: Measured on the development VM (2 cores, mpich 5.0.2, Python 3.11) with ``calibrate``; they
#: only need to rank algorithms sensibly until a program calibrates its own transport.
DEFAULT_MPI = LogGP(L=5e-6, o=17e-6, g=17e-6, G=0.15e-9, d=47e-6, gamma=0.05e-9)
DEFAULT_LOCAL = LogGP(L=1e-6, o=15e-6, g=15e-6, G=0.1e-9, d=55e-6, gamma=0.05e-9)


# ---------------------------------------------------------------------- cost formulas


def nway_rounds(size: int, n: int) -> int:
    """ceil(log_{n+1} size): rounds of the n-way dissemination barrier."""
    return len(nway_distances(size, n))


def barrier_nway(p: LogGP, size: int, n: int) -> float:
    """Hoefler et al.'s (2006) prediction: each round sends ``k ≤ n`` signals back to back and waits for
    ``k`` (their receive overheads queue behind the sends once ``k·o`` exceeds the latency)."""
    total = 0.0
    for distances in nway_distances(size, n):
        k = len(distances)
        total += max(2 * k * p.o, p.signal() + p.burst(k))
    return total


@functools.lru_cache(maxsize=256)
def best_nway(p: LogGP, size: int, n_max: int = 8) -> int:
    """The ``n`` that minimises :func:`barrier_nway` (the smallest one on a tie)."""
    if size <= 2:
        return 1
    candidates = range(1, max(1, min(n_max, size - 1)) + 1)
    return min(candidates, key=lambda n: (round(barrier_nway(p, size, n), 12), n))


def _chunks(nbytes: float, slot: int) -> int:
    return max(1, math.ceil(nbytes / slot))


def tree_pipelined(p: LogGP, nbytes: float, depth: int, fanout: int, slot: int) -> float:
    """``nbytes`` down a tree of ``depth`` levels whose inner nodes send to ``fanout`` children,
    in slot-sized chunks that pipeline level by level."""
    if depth == 0:
        return 0.0
    chunks = _chunks(nbytes, slot)
    piece = nbytes / chunks
    step = p.message(piece) + p.burst(fanout) + max(0, fanout - 1) * piece * p.G
    return (depth + chunks - 1) * step


def knomial_depth(size: int, k: int) -> int:
    depth, span = 0, 1
    while span < size:
        span *= k
        depth += 1
    return depth


def bcast_knomial(p: LogGP, size: int, nbytes: float, k: int, slot: int) -> float:
    return tree_pipelined(p, nbytes, knomial_depth(size, k), k - 1, slot)


def bcast_scatter_allgather(p: LogGP, size: int, nbytes: float, slot: int) -> float:
    """Binomial scatter of ``size`` blocks, then a ring allgather of them."""
    if size == 1:
        return 0.0
    block = nbytes / size
    scatter = knomial_depth(size, 2) * p.message(0) + (size - 1) * block * p.G
    return scatter + allgather_ring(p, size, block, slot)


def reduce_binomial(p: LogGP, size: int, nbytes: float, slot: int) -> float:
    depth = knomial_depth(size, 2)
    if depth == 0:
        return 0.0
    chunks = _chunks(nbytes, slot)
    piece = nbytes / chunks
    return (depth + chunks - 1) * (p.message(piece) + piece * p.gamma)


def reduce_scatter_gather(p: LogGP, size: int, nbytes: float, slot: int) -> float:
    if size == 1:
        return 0.0
    block = nbytes / size
    scatter = (size - 1) * (p.message(block) + block * p.gamma)
    gather = p.message(block) + p.burst(size - 1) + (size - 1) * block * p.G
    return scatter + gather


def allreduce_recursive_doubling(p: LogGP, size: int, nbytes: float) -> float:
    if size == 1:
        return 0.0
    pof2 = largest_power_of_two(size)
    rounds = pof2.bit_length() - 1 + (2 if pof2 != size else 0)
    return rounds * (p.message(nbytes) + nbytes * p.gamma)


def allreduce_direct(p: LogGP, size: int, nbytes: float) -> float:
    """Reduce-scatter and allgather, each one round of direct messages of ``nbytes/size``."""
    if size == 1:
        return 0.0
    block = nbytes / size
    return 2 * alltoall_direct(p, size, block) + (size - 1) * block * p.gamma


def allreduce_ring(p: LogGP, size: int, nbytes: float) -> float:
    if size == 1:
        return 0.0
    block = nbytes / size
    return (size - 1) * (2 * p.message(block) + block * p.gamma)


def allgather_ring(p: LogGP, size: int, block: float, slot: int) -> float:
    return (size - 1) * p.message(block)


def allgather_recursive_doubling(p: LogGP, size: int, block: float) -> float:
    rounds = knomial_depth(size, 2)
    return rounds * p.message(0) + (size - 1) * block * p.G


def allgather_bruck(p: LogGP, size: int, block: float) -> float:
    rounds = knomial_depth(size, 2)
    # two local rotations of the whole result on top of recursive doubling's traffic
    return rounds * p.message(0) + (size - 1) * block * p.G + 2 * size * block * p.G / 2


def allgather_direct(p: LogGP, size: int, block: float) -> float:
    """Every rank puts its block to every other at once: the traffic of the direct alltoall."""
    return alltoall_direct(p, size, block)


def alltoall_direct(p: LogGP, size: int, block: float) -> float:
    """All ``size − 1`` messages at once.  After the first, each adds its issue gap, its flush
    and one copy (half of ``G``): the puts of different senders overlap the receivers' copies
    out of the slots, so only each rank's own copies queue up.  This is what makes the one-round
    algorithms win for large blocks over the ones whose rounds wait for each other's whole
    messages (recursive doubling, ring), which charge every byte of every round in full."""
    if size == 1:
        return 0.0
    return p.message(block) + p.burst(size - 1) + (size - 2) * (p.d + block * p.G / 2)


def alltoall_pairwise(p: LogGP, size: int, block: float) -> float:
    return (size - 1) * p.message(block)


def gather_direct(p: LogGP, size: int, block: float) -> float:
    """Everyone puts to the root at once; the root consumes ``size − 1`` messages."""
    if size == 1:
        return 0.0
    return p.message(block) + (size - 2) * (p.o + p.d + block * p.G)


def gather_binomial(p: LogGP, size: int, block: float) -> float:
    """Every block is forwarded once per tree level it crosses: ``size/2 · log2(size)`` blocks
    travel the edges in all against ``size − 1`` for the direct algorithm.  The extra blocks
    count in full — an inner rank's whole subtree must land before it forwards, and where ranks
    share cores every copy takes CPU from the others."""
    depth = knomial_depth(size, 2)
    forwarded = sum(binomial_subtree(v, size) for v in range(1, size))
    return depth * p.message(0) + forwarded * block * p.G

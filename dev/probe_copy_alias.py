"""How fast a copy is for each relative page offset of its destination: glibc's ``memcpy`` against
numpy's vector loop (``np.positive`` on bytes, what :func:`aiorma._core.memcopy.copy_bytes` takes
in the slow window).

    python dev/probe_copy_alias.py [BYTES]

For BYTES (default 256 KiB) copied from a page-aligned source to a destination ``d`` bytes after
a page boundary, ``d`` in 0..64 and a few near 4096: the median of 300 copies of each kind, in µs.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from aiorma._core.memcopy import copy_bytes


def _median_us(copy: object, repeats: int = 300) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        copy()  # type: ignore[operator]
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6


def main(nbytes: int) -> None:
    pool = np.zeros(2 * nbytes + 3 * 4096, np.uint8)
    start = (-pool.ctypes.data) % 4096
    src = pool[start : start + nbytes]
    src[...] = 1
    base = start + nbytes + (-nbytes) % 4096 + 4096
    print(f"{nbytes} bytes; median of 300 copies, µs")
    print("offset  memcpy  np.positive  copy_bytes")
    for offset in [*range(0, 65, 4), 4064, 4080, 4092]:
        out = pool[base + offset : base + offset + nbytes]
        plain = _median_us(lambda out=out: out.__setitem__(Ellipsis, src))
        loop = _median_us(lambda out=out: np.positive(src, out=out))
        chosen = _median_us(lambda out=out: copy_bytes(out, src))
        print(f"{offset:6d}  {plain:6.1f}  {loop:11.1f}  {chosen:10.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256 << 10)

"""The CPU atomics the MPI transport uses for control words when every rank is on one node."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from aiorma.transport.mpi.cpu_atomics import SEQ_CST, CpuAtomics, load

atomics = load()
pytestmark = pytest.mark.skipif(atomics is None, reason="libatomic.so.1 is not installed here")


def _word() -> tuple[np.ndarray, int]:
    words = np.zeros(4, np.int64)
    return words, words.ctypes.data + 8  # word 1: its neighbours must stay untouched


def test_each_op_returns_the_old_value_and_leaves_the_neighbours() -> None:
    assert isinstance(atomics, CpuAtomics)
    words, address = _word()
    assert atomics.fetch_add(address, 5, SEQ_CST) == 0
    assert atomics.fetch_add(address, -7, SEQ_CST) == 5
    assert atomics.exchange(address, 9, SEQ_CST) == -2
    assert atomics.compare_exchange(address, 1, 3) == 9  # fails: unchanged
    assert words[1] == 9
    assert atomics.compare_exchange(address, 9, 4) == 9  # succeeds
    assert atomics.fetch_max(address, 2) == 4 and words[1] == 4
    assert atomics.fetch_max(address, 11) == 4 and words[1] == 11
    assert words[[0, 2, 3]].tolist() == [0, 0, 0]


def test_int64_edges_wrap_like_int64() -> None:
    assert atomics is not None
    words, address = _word()
    top = np.iinfo(np.int64).max
    atomics.exchange(address, top, SEQ_CST)
    assert atomics.fetch_add(address, 1, SEQ_CST) == top
    assert words[1] == np.iinfo(np.int64).min
    assert atomics.compare_exchange(address, int(words[1]), -1) == np.iinfo(np.int64).min
    assert words[1] == -1


def test_threads_racing_lose_no_update() -> None:
    """ctypes lets go of the interpreter lock during the call, so the threads' instructions really
    race: a load-then-store would lose updates here."""
    assert atomics is not None
    words, address = _word()
    adds, threads = 20000, 4

    def add() -> None:
        mine = load()  # one per thread: compare_exchange keeps its expected value in the object
        assert mine is not None
        for _ in range(adds):
            mine.fetch_add(address, 1, SEQ_CST)
            old = mine.compare_exchange(address, 0, 0)  # a read
            while (seen := mine.compare_exchange(address, old, old + 1)) != old:
                old = seen

    workers = [threading.Thread(target=add) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert words[1] == 2 * adds * threads


def test_a_missing_library_gives_none() -> None:
    assert load("libno-such-atomics.so.9") is None

"""The CPU atomics the MPI transport uses for control words when every rank is on one node: both
forms, the compiled one (where the build made it) and the one through ctypes (its fallback)."""

from __future__ import annotations

import json
import mmap
import multiprocessing
import threading
from pathlib import Path

import numpy as np
import pytest

from aiorma import _native
from aiorma._core.memcopy import load_words
from aiorma.constants import Op
from aiorma.transport.mpi.cpu_atomics import (
    SEQ_CST,
    Accumulator,
    Atomics,
    WordsChanged,
    WordStores,
    load,
    load_accumulator,
    load_compiled,
    load_library,
    load_word_stores,
    load_words_changed,
)

from .mpi_harness import run_python
from .native_forms import compiled

FORMS = {"ctypes": load_library(), "compiled": load_compiled()}


@pytest.fixture(params=sorted(FORMS))
def atomics(request: pytest.FixtureRequest) -> Atomics:
    form = FORMS[request.param]
    if form is None:
        if request.param == "compiled" and _native.choose().compiled:
            pytest.fail("the build is in use but left no compiled atomics")
        pytest.skip(f"no {request.param} atomics here")
    return form


def _word() -> tuple[np.ndarray, int]:
    words = np.zeros(4, np.int64)
    return words, words.ctypes.data + 8  # word 1: its neighbours must stay untouched


def test_each_op_returns_the_old_value_and_leaves_the_neighbours(atomics: Atomics) -> None:
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


def test_int64_edges_wrap_like_int64(atomics: Atomics) -> None:
    words, address = _word()
    top = np.iinfo(np.int64).max
    atomics.exchange(address, top, SEQ_CST)
    assert atomics.fetch_add(address, 1, SEQ_CST) == top
    assert words[1] == np.iinfo(np.int64).min
    assert atomics.compare_exchange(address, int(words[1]), -1) == np.iinfo(np.int64).min
    assert words[1] == -1
    assert atomics.exchange(address, 2**64 - 1, SEQ_CST) == -1  # taken modulo 2**64, as ctypes does
    assert words[1] == -1


def _add_and_increment(atomics: Atomics, address: int, adds: int) -> None:
    for _ in range(adds):
        atomics.fetch_add(address, 1, SEQ_CST)
        old = atomics.compare_exchange(address, 0, 0)  # a read
        while (seen := atomics.compare_exchange(address, old, old + 1)) != old:
            old = seen
        atomics.fetch_max(address, old)  # below the word by now: changes nothing


def test_threads_racing_lose_no_update() -> None:
    """ctypes lets go of the interpreter lock during the call, so the threads' instructions really
    race: a load-then-store would lose updates here."""
    words, address = _word()
    adds, threads = 20000, 4

    def add() -> None:
        mine = load_library()  # one per thread: compare_exchange keeps its expected value in the object
        assert mine is not None
        _add_and_increment(mine, address, adds)

    workers = [threading.Thread(target=add) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert words[1] == 2 * adds * threads


def _race_in_child(form: str, memory: mmap.mmap, adds: int) -> None:
    atomics = load_library() if form == "ctypes" else load()
    assert atomics is not None
    address = np.frombuffer(memory, np.int64).ctypes.data + 8
    _add_and_increment(atomics, address, adds)


@pytest.mark.timeout(120)
def test_processes_racing_on_shared_memory_lose_no_update(atomics: Atomics) -> None:
    """Processes, as the ranks are: each form's instructions race on a word of memory every
    process maps (the compiled form holds the interpreter lock, so only processes race it)."""
    memory = mmap.mmap(-1, 64)  # shared with the forked children
    form = next(name for name, value in FORMS.items() if value is atomics)
    adds, processes = 20000, 2
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_race_in_child, args=(form, memory, adds)) for _ in range(processes)]
    for child in children:
        child.start()
    _add_and_increment(atomics, np.frombuffer(memory, np.int64).ctypes.data + 8, adds)
    for child in children:
        child.join(100)
        assert child.exitcode == 0
    assert np.frombuffer(memory, np.int64)[1] == 2 * adds * (processes + 1)


def _word_stores() -> WordStores:
    return compiled(load_word_stores(), "word stores", "puts stay MPI's")


def test_word_stores_copy_at_an_offset_and_refuse_what_does_not_fit() -> None:
    store_words = _word_stores()
    words = np.zeros(6, np.int64)
    store_words(words, 16, np.array([-1, 2**62], np.int64))
    assert words.tolist() == [0, 0, -1, 2**62, 0, 0]
    raw = np.zeros(11, np.uint8)  # unaligned: a byte copy, same result
    store_words(raw, 3, np.arange(1, 6, dtype=np.uint8))
    assert raw.tolist() == [0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0]
    store_words(words, 40, np.array([7], np.int64), True)  # the stores, then a full barrier
    assert words.tolist() == [0, 0, -1, 2**62, 0, 7]
    words[5] = 0
    with pytest.raises(TypeError):
        store_words(words, 0, np.ones(1, np.int64), True, 1)  # type: ignore[call-arg]
    before = words.copy()
    read_only = np.zeros(2, np.int64)
    read_only.flags.writeable = False
    for destination, offset, source in [
        (words, 40, np.ones(2, np.int64)),  # one word past the end
        (words, -8, np.ones(1, np.int64)),
        (words[::2], 0, np.ones(1, np.int64)),  # not contiguous
        (read_only, 0, np.ones(1, np.int64)),
    ]:
        with pytest.raises(ValueError):
            store_words(destination, offset, source)
    assert np.array_equal(words, before)


def _store_patterns(memory: mmap.mmap, rounds: int) -> None:
    store_words = load_word_stores()
    assert store_words is not None
    target = np.frombuffer(memory, np.int64)
    patterns = [np.full(target.size, value, np.int64) for value in (0, -1, 0x5555555555555555)]
    for i in range(rounds):
        store_words(target, 0, patterns[i % 3])


@pytest.mark.timeout(120)
def test_a_reader_never_sees_a_word_half_stored() -> None:
    """A process storing whole patterns over 4 KiB (the size where glibc's memcpy turns to
    ``rep movsb``) while this one loads every word: each word read is one of the patterns."""
    _word_stores()
    memory = mmap.mmap(-1, 4096)
    child = multiprocessing.get_context("fork").Process(target=_store_patterns, args=(memory, 20000))
    child.start()
    words = np.frombuffer(memory, np.int64)
    seen: set[int] = set()
    while child.is_alive():
        seen.update(np.unique(load_words(words)).tolist())
    child.join(100)
    assert child.exitcode == 0
    assert seen <= {0, -1, 0x5555555555555555}, sorted(seen)


def _words_changed() -> WordsChanged:
    return compiled(load_words_changed(), "words_changed", "a poll syncs through MPI and compares a copy")


def test_words_changed_reports_a_change_once_and_refuses_what_does_not_match() -> None:
    words_changed = _words_changed()
    region = np.zeros(5, np.int64)
    seen = bytearray(region.tobytes())
    assert words_changed(region, seen) is False
    region[3] = -7
    assert words_changed(region, seen) is True
    assert bytes(seen) == region.tobytes()  # the copy follows, so the same change is not reported twice
    assert words_changed(region, seen) is False
    read_only = bytes(seen)
    for other_region, other_seen in [
        (region, bytearray(32)),  # one word short
        (region[::2], bytearray(24)),  # not contiguous
        (np.zeros(10, np.uint8)[1:9], bytearray(8)),  # not aligned
        (region, read_only),  # the copy must be writable
    ]:
        with pytest.raises((ValueError, TypeError, BufferError)):
            words_changed(other_region, other_seen)
    assert bytes(seen) == region.tobytes()


def _add_to_words(memory: mmap.mmap, rounds: int) -> None:
    atomics = load_compiled()
    assert atomics is not None
    base = np.frombuffer(memory, np.int64).ctypes.data
    for i in range(rounds):
        atomics.fetch_add(base + 8 * (i % 4), 1, SEQ_CST)


@pytest.mark.timeout(120)
def test_words_changed_sees_every_word_another_process_adds_to() -> None:
    """A process adding to four shared words while this one polls them: every look that finds a
    change finds the words grown (none half-written, none going back), and the last look after
    the writer ended finds the final counts."""
    words_changed = _words_changed()
    memory = mmap.mmap(-1, 32)
    region = np.frombuffer(memory, np.int64)
    seen = bytearray(32)
    copy = np.frombuffer(seen, np.int64)
    child = multiprocessing.get_context("fork").Process(target=_add_to_words, args=(memory, 200000))
    child.start()
    last = copy.copy()
    changes = 0
    while child.is_alive():
        if words_changed(region, seen):
            changes += 1
            assert (copy >= last).all() and (copy <= 50000).all(), (last, copy)
            last = copy.copy()
    child.join(100)
    assert child.exitcode == 0
    words_changed(region, seen)
    assert copy.tolist() == [50000] * 4 and changes > 0


def test_a_missing_library_gives_none() -> None:
    assert load_library("libno-such-atomics.so.9") is None


def test_load_prefers_the_compiled_form() -> None:
    # (Each ctypes form is a new object: compare the forms, not the objects.)
    assert type(load()) is type(load_compiled() or load_library())


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_bench_atomics_mpi_tiny(tmp_path: Path) -> None:
    """``python -m aiorma.bench atomics`` swaps the endpoint's form between batches and times
    both (it needs both: the build and libatomic)."""
    if None in FORMS.values():
        pytest.skip("one form of the atomics is missing here: nothing to compare")
    out = tmp_path / "atomics.json"
    args = ["--iters", "20", "--repeats", "2", "--json", str(out)]
    run_python("-m", "aiorma.bench", "atomics", *args, timeout=170)
    summary = json.loads(out.read_text())["summary"]
    assert set(summary) == {"lock/put/unlock", "transaction"}
    for case in summary.values():
        assert case["ctypes"] > 0 and case["compiled"] > 0 and case["ratio"] > 0


def _accumulator() -> Accumulator:
    return compiled(load_accumulator(), "accumulate_elements", "accumulates stay MPI's")


_ACCUMULATE_DTYPES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "?", "m8[s]", "M8[s]"]


def _values(dtype: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
    """Edges (zero, extremes, NaN, -0.0) and random values of ``dtype``."""
    if dtype.kind == "b":
        return rng.integers(0, 2, n).astype(dtype)
    if dtype.kind == "f":
        edges = [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, np.finfo(dtype).max]
        return np.concatenate([np.array(edges, dtype), rng.normal(0, 1e3, n - len(edges)).astype(dtype)])
    info = np.iinfo(dtype if dtype.kind in "iu" else np.int64)
    edges = np.array([0, 1, info.max, info.min, info.max - 1, -1 if info.min else 2], dtype=info.dtype)
    spread = rng.integers(info.min, info.max, n - len(edges), dtype=info.dtype, endpoint=True)
    return (
        np.concatenate([edges, spread]).view(dtype) if dtype.kind in "mM" else np.concatenate([edges, spread])
    )


@pytest.mark.parametrize("name", _ACCUMULATE_DTYPES)
def test_accumulate_elements_computes_as_mpi_does(name: str) -> None:
    """Every op a dtype takes in the accumulate family, element by element against the one table
    of arithmetic (aiorma.ops.combine, what the local transport and MPI compute): the new
    contents, the old values returned, the neighbours untouched; compare-and-swap on integers."""
    from aiorma.ops import arithmetic_ops, combine
    from aiorma.transport.mpi.cpu_atomics import COMPARE_AND_SWAP, element_type

    accumulate = _accumulator()
    dtype = np.dtype(name)
    kind = element_type(dtype)
    assert kind != 0, dtype
    rng = np.random.default_rng(7)
    gate, gate_address = _word()
    n = 24
    ops = sorted(arithmetic_ops(dtype) | {Op.REPLACE, Op.NO_OP})
    if dtype.kind == "b":  # the accumulate family's own rule (ops.check_accumulate_dtype)
        ops = [op for op in ops if op in {Op.LAND, Op.LOR, Op.LXOR, Op.REPLACE, Op.NO_OP}]
    for op in ops:
        memory = np.zeros(n + 2, dtype)
        current = _values(dtype, rng, n)
        operand = _values(dtype, rng, n)
        memory[1:-1] = current
        memory[0] = memory[-1] = operand[0]
        before_edges = memory[[0, -1]].copy()
        old = np.zeros(n, dtype)
        origin = None if op is Op.NO_OP else operand
        accumulate(memory[1:].ctypes.data, kind, op, origin, old, None, gate_address)
        expected = combine(op, current, operand)
        assert memory[1:-1].tobytes() == expected.tobytes() or (
            dtype.kind == "f" and np.array_equal(memory[1:-1], expected, equal_nan=True)
        ), (op, current, operand, memory[1:-1], expected)
        assert old.tobytes() == current.tobytes(), op
        assert memory[[0, -1]].tobytes() == before_edges.tobytes(), op
        assert gate.tolist() == [0, 0, 0, 0], op  # released
    if dtype.kind in "iub":
        memory = _values(dtype, rng, n)
        before = memory.copy()
        compare = before.copy()
        compare[::2] = ~compare[::2]  # half the elements differ: those stay
        swap = _values(dtype, rng, n)
        old = np.zeros(n, dtype)
        accumulate(memory.ctypes.data, kind, COMPARE_AND_SWAP, swap, old, compare, gate_address)
        assert old.tobytes() == before.tobytes()
        assert memory.tobytes() == np.where(compare == before, swap, before).tobytes()


def test_accumulate_elements_refuses_what_it_cannot_do() -> None:
    from aiorma.transport.mpi.cpu_atomics import COMPARE_AND_SWAP, element_type

    accumulate = _accumulator()
    gate, gate_address = _word()
    words = np.zeros(4, np.float64)
    f8, i8 = element_type(np.dtype("f8")), element_type(np.dtype("i8"))
    one = np.ones(1)
    with pytest.raises(ValueError, match="no op"):
        accumulate(words.ctypes.data, f8, Op.BAND, one, None, None, gate_address)  # no bitwise ops on floats
    with pytest.raises(ValueError, match="no op"):
        accumulate(words.ctypes.data, f8, COMPARE_AND_SWAP, one, None, one, gate_address)
    with pytest.raises(ValueError, match="aligned"):
        accumulate(words.ctypes.data + 4, i8, Op.SUM, np.ones(1, np.int64), None, None, gate_address)
    with pytest.raises(ValueError, match="buffers"):
        accumulate(words.ctypes.data, i8, Op.SUM, None, None, None, gate_address)  # SUM needs an operand
    with pytest.raises(ValueError, match="buffers"):
        two, one_old = np.ones(2, np.int64), np.zeros(1, np.int64)
        accumulate(words.ctypes.data, i8, Op.SUM, two, one_old, None, gate_address)
    assert words.tolist() == [0.0] * 4 and gate.tolist() == [0, 0, 0, 0]
    for dtype in ("c16", "f2", ">i8", "U2", [("a", "i4"), ("b", "f4")]):
        assert element_type(np.dtype(dtype)) == 0, dtype


def test_a_held_gate_is_waited_for_without_the_interpreter() -> None:
    """Another rank holds the target's gate (inside its accumulate): the call waits, letting the
    interpreter go, and applies its op once the gate opens — here opened by a thread of this
    process, which could not run if the wait held the interpreter."""
    from aiorma.transport.mpi.cpu_atomics import element_type

    accumulate = _accumulator()
    gate, gate_address = _word()
    words = np.zeros(2, np.int64)
    gate[1] = 1  # held
    opener = threading.Timer(0.05, gate.__setitem__, (1, 0))
    opener.start()
    old = np.zeros(2, np.int64)
    i8 = element_type(np.dtype("i8"))
    accumulate(words.ctypes.data, i8, Op.SUM, np.array([3, 4]), old, None, gate_address)
    opener.join()
    assert words.tolist() == [3, 4] and old.tolist() == [0, 0] and gate[1] == 0


def _adds_in_child(memory: mmap.mmap, adds: int) -> None:
    """Add 1.0 to element 1 and 1 to elements 2-5 (a run of four), ``adds`` times each; word 0
    is the gate."""
    from aiorma.transport.mpi.cpu_atomics import element_type

    accumulate = load_accumulator()
    assert accumulate is not None
    gate = np.frombuffer(memory, np.int64).ctypes.data
    base = np.frombuffer(memory, np.float64).ctypes.data
    one, ones = np.ones(1), np.ones(4, np.int64)
    f8, i8 = element_type(np.dtype("f8")), element_type(np.dtype("i8"))
    for _ in range(adds):
        accumulate(base + 8, f8, Op.SUM, one, None, None, gate)
        accumulate(base + 16, i8, Op.SUM, ones, None, None, gate)


@pytest.mark.timeout(120)
def test_processes_racing_accumulates_lose_no_update() -> None:
    """Processes racing on the same elements of shared memory under one gate, as ranks do on a
    window's: no addition lost, floats (read, add, write) as integers, and the gate released."""
    _accumulator()
    memory = mmap.mmap(-1, 64)
    adds, processes = 20000, 2
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_adds_in_child, args=(memory, adds)) for _ in range(processes)]
    for child in children:
        child.start()
    _adds_in_child(memory, adds)
    for child in children:
        child.join(100)
        assert child.exitcode == 0
    total = adds * (processes + 1)
    assert np.frombuffer(memory, np.float64)[1] == total
    assert np.frombuffer(memory, np.int64)[[0, 2, 3, 4, 5]].tolist() == [0, total, total, total, total]

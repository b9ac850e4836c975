"""Fuzzed arguments for every public Window call (hypothesis), on the local transport.

Each generated call either succeeds or raises a typed :class:`aiorma.RmaUsageError` that changed
nothing (engine snapshot and memory); never another exception, a warning or a hang.  After every
example a plain lock/put/unlock epoch must still run and land its data.

One local run serves every example: the two ranks create their windows once, on an event loop
this module owns, and each hypothesis example is one coroutine run on that loop.  Rank 0's
window takes the fuzzed call; the test drives rank 1's window from the same coroutine (all ranks
live in this process) wherever a call needs a partner (fence, post/start) or a clean-up.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import aiorma
from aiorma import LOCK_EXCLUSIVE, LOCK_SHARED, MODE_NOCHECK, MODE_NOSUCCEED, Op, RmaUsageError
from aiorma.runtime import run_ranks
from aiorma.transport.local import LocalNetwork

from .engine_net import snapshot

COUNT = 8
#: (name, dtype, elements on rank 0, elements on rank 1)
WINDOWS = [
    ("bool", np.bool_, COUNT, COUNT),
    ("int8", np.int8, COUNT, COUNT),
    ("int32", np.int32, COUNT, COUNT),
    ("int64", np.int64, COUNT, COUNT),
    ("int64-ragged", np.int64, COUNT, 5),
    ("uint8", np.uint8, COUNT, COUNT),
    ("uint64", np.uint64, COUNT, COUNT),
    ("float32", np.float32, COUNT, COUNT),
    ("float64", np.float64, COUNT, COUNT),
    ("complex128", np.complex128, COUNT, COUNT),
]
DTYPES = [np.dtype(d) for _, d, _, _ in WINDOWS]
STEP = 10.0  # seconds any single example may take before it counts as a hang


class Rig:
    """Two local ranks, their windows, and the loop they run on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.windows: dict[str, list[aiorma.Window]] = {name: [] for name, *_ in WINDOWS}
        self.ready = self.loop.create_future()
        self.stop = self.loop.create_future()
        self.arrived = 0
        self.task = self.loop.create_task(run_ranks(self._main, (), LocalNetwork(2)))
        self.loop.run_until_complete(asyncio.wait_for(asyncio.shield(self.ready), STEP))

    async def _main(self, comm: aiorma.Comm) -> None:
        mine = []
        for name, dtype, count0, count1 in WINDOWS:
            win = await comm.win_allocate((count0, count1)[comm.rank], dtype)
            self.windows[name].append(win)
            mine.append(win)
        self.arrived += 1
        if self.arrived == comm.size:
            for wins in self.windows.values():
                wins.sort(key=lambda w: w.rank)
            self.ready.set_result(None)
        await self.stop
        for win in mine:
            await win.free()

    def run(self, job: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(job, STEP))

    def close(self) -> None:
        try:
            if not self.stop.done():
                self.stop.set_result(None)
            self.loop.run_until_complete(asyncio.wait_for(self.task, STEP))
        finally:
            self.loop.close()


# ---------------------------------------------------------------------------- strategies

odd_scalars = st.sampled_from(
    [None, 1.0, 0.5, "1", b"\x01", 2**64, 2**63, -(2**63), 2**100, -(2**100), np.True_, np.False_, 1j]
)
ranks = st.one_of(
    st.integers(0, 1),  # valid ranks about half the time: the calls must also succeed often
    st.integers(0, 1),
    st.integers(0, 1),
    st.integers(-3, 4),
    st.booleans(),
    odd_scalars,
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.integers(0, 3).map(np.uint64),
    st.integers(-5, 5).map(np.int8),
)
disps = st.one_of(
    st.integers(0, 7),
    st.integers(0, 7),
    st.integers(0, 7),
    st.integers(-3, 12),
    st.booleans(),
    odd_scalars,
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.integers(0, 9).map(np.uint64),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.integers(-5, 12).map(np.int16),
)
shapes = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)
finite = {"allow_nan": False, "allow_infinity": False}


@st.composite
def arrays(draw: st.DrawFn, window: np.dtype) -> np.ndarray:
    dtype = draw(st.sampled_from([window] * 6 + DTYPES))
    if dtype.kind == "f":
        elements: st.SearchStrategy[Any] = st.floats(
            -(2.0**100), 2.0**100, width=8 * dtype.itemsize, **finite
        )
    elif dtype.kind == "c":
        elements = st.complex_numbers(max_magnitude=1e30, **finite)
    else:
        elements = hnp.from_dtype(dtype)
    shape = draw(st.one_of(st.just((1,)), st.just(()), shapes))
    array = draw(hnp.arrays(dtype, shape, elements=elements))
    layout = draw(st.sampled_from(["plain", "plain", "plain", "plain", "strided", "readonly", "fortran"]))
    if layout == "strided" and array.ndim:
        array = np.repeat(array, 2, axis=0)[::2]
    elif layout == "readonly":
        array.flags.writeable = False
    elif layout == "fortran":
        array = np.asfortranarray(array)
    return array


def values(window: np.dtype) -> st.SearchStrategy[Any]:
    return st.one_of(arrays(window), arrays(window), others)


others = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(-1e300, 1e300, **finite),
    st.lists(st.integers(-(2**65), 2**65), max_size=3),
    st.lists(st.floats(-1e40, 1e40, **finite), max_size=3),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.integers(-128, 127).map(np.int8),
    st.floats(-1e300, 1e300, **finite).map(np.float64),
    st.sampled_from([None, "abc", [[1], [1, 2]], {"a": 1}, object(), 1j, True, [True, False], ()]),
)
ops = st.one_of(st.sampled_from(list(Op)), st.sampled_from([0, 13, 99, -1, "sum", None, 1.0, True]))
modes = st.integers(0, 31)
assertions = st.one_of(
    modes, modes, st.integers(-2, 64), st.sampled_from([True, None, 1.0, np.int64(1), 1 << 40])
)
lock_types = st.sampled_from([LOCK_EXCLUSIVE, LOCK_SHARED, 0, 3, -1, True, 1.0, None, "x", np.int64(1), 2])
groups = st.one_of(
    st.lists(ranks, max_size=3),
    st.lists(st.integers(0, 1), max_size=2, unique=True),
    st.lists(st.integers(0, 1), max_size=2, unique=True).map(tuple),
    st.sampled_from([None, 5, "x", "01", {0: 1}, [None]]),
)

RMA = ["put", "get", "accumulate", "get_accumulate", "fetch_and_op", "compare_and_swap"]
IN_LOCK = ["unlock", "flush", "flush_local", "flush_all", "flush_local_all"]
BARE = ["lock", "lock_all", "fence", "post", "start", "complete", "wait", "test", "unlock_all"]
REQUIRED = {"put": 2, "get": 2, "accumulate": 2, "get_accumulate": 3, "fetch_and_op": 3}
REQUIRED.update({"compare_and_swap": 4, "unlock": 1, "flush": 1, "flush_local": 1, "lock": 1})
REQUIRED.update({"post": 1, "start": 1})


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, str, tuple[Any, ...]]:
    """(window name, method, positional arguments); trailing defaults are sometimes left out."""
    window = draw(st.sampled_from([name for name, *_ in WINDOWS]))
    dtype = np.dtype(next(d for name, d, _, _ in WINDOWS if name == window))
    good = st.integers(0, 1).map(lambda v: np.full(1, v, dtype))  # well-formed, so calls succeed too
    values_ = st.one_of(good, values(dtype))
    results_ = st.one_of(good, arrays(dtype), arrays(dtype), others)
    method = draw(st.sampled_from(RMA + IN_LOCK + BARE))
    args: tuple[Any, ...]
    if method in ("put", "accumulate"):
        args = (draw(values_), draw(ranks), draw(disps), draw(ops))
        args = args[:3] if method == "put" else args
    elif method == "get":
        args = (draw(results_), draw(ranks), draw(disps))
    elif method in ("get_accumulate", "fetch_and_op"):
        args = (draw(values_), draw(results_), draw(ranks), draw(disps), draw(ops))
    elif method == "compare_and_swap":
        args = (draw(values_), draw(values_), draw(results_), draw(ranks), draw(disps))
    elif method in ("unlock", "flush", "flush_local"):
        args = (draw(ranks),)
    elif method == "lock":
        args = (draw(ranks), draw(lock_types), draw(assertions))
    elif method in ("lock_all", "fence"):
        args = (draw(assertions),)
    elif method in ("post", "start"):
        args = (draw(groups), draw(assertions))
    else:
        args = ()
    required = REQUIRED.get(method, 0)
    return window, method, args[: draw(st.integers(required, len(args)))]


# ------------------------------------------------------------------------------- the test


async def both(*requests: Any) -> None:
    for request in requests:
        await request


async def settle(win: aiorma.Window) -> None:
    """Best effort after an unexpected failure: close the lock epochs the example opened."""
    for epoch in win.engine.open_epochs():
        try:
            if epoch.kind.value == "lock_all":
                await win.unlock_all()
            elif epoch.kind.value == "lock":
                await win.unlock(epoch.group[0])
        except Exception:
            pass


async def exercise(rig: Rig, window: str, method: str, args: tuple[Any, ...], serial: int) -> None:
    w0, w1 = rig.windows[window]
    wins = (w0, w1)
    for w in wins:  # each example starts from zeroed memory: no overflow builds up across examples
        w.memory[...] = 0
    if method in RMA:
        await w0.lock_all()
    elif method in IN_LOCK:
        await w0.lock(1)
    before = snapshot(w0.engine)
    memory = w0.memory.copy()
    try:
        request = getattr(w0, method)(*args)
    except RmaUsageError:
        assert snapshot(w0.engine) == before, (method, args)
        assert np.array_equal(w0.memory, memory)
        request = None
    except BaseException:
        await settle(w0)  # so that the next examples (hypothesis shrinking) start clean
        raise
    ok = request is not None
    if method == "test":
        ok = False  # a bool, not a Request
    if ok:
        ok_args = list(args)
        if method in ("fence", "lock_all"):
            assertion = ok_args[0] if ok_args else 0
        elif method in ("post", "start", "lock"):
            assertion = ok_args[-1] if len(ok_args) == (2 if method != "lock" else 3) else 0
        else:
            assertion = 0
        if method == "fence":
            await both(request, w1.fence(assertion))
            if not assertion & MODE_NOSUCCEED:
                await both(w0.fence(MODE_NOSUCCEED), w1.fence(MODE_NOSUCCEED))
        elif method == "post":
            members = [operator.index(r) for r in args[0]]
            nocheck = assertion & MODE_NOCHECK
            closing = []
            for m in members:
                wins[m].start([0], nocheck)
                closing.append(wins[m].complete())
            await both(request, w0.wait(), *closing)
        elif method == "start":
            members = [operator.index(r) for r in args[0]]
            nocheck = assertion & MODE_NOCHECK
            for m in members:
                wins[m].post([0], nocheck)
            await both(request, w0.complete(), *(wins[m].wait() for m in members))
        elif method == "lock":
            await both(request, w0.unlock(operator.index(args[0])))
        elif method == "lock_all":
            await both(request, w0.unlock_all())
        else:
            await request
    if method in RMA:
        await w0.unlock_all()
    elif method in IN_LOCK and not (ok and method == "unlock"):
        await w0.unlock(1)
    for w in wins:
        assert w.engine.open_epochs() == [], (method, args)
    # the window is still usable: a plain epoch lands its data
    value = np.array([serial % 2 if w0.dtype.kind == "b" else serial % 100 + 1]).astype(w0.dtype)
    await w0.lock(1, LOCK_EXCLUSIVE)
    w0.put(value, 1, 4)
    await w0.unlock(1)
    assert w1.memory[4] == value[0]


def test_every_window_call_survives_fuzzed_arguments() -> None:
    rig = Rig()
    serial = iter(range(1, 1 << 30))

    @settings(
        max_examples=1000,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(call=calls())
    def check(call: tuple[str, str, tuple[Any, ...]]) -> None:
        window, method, args = call
        rig.run(exercise(rig, window, method, args, next(serial)))

    try:
        check()
    finally:
        rig.close()

"""Request semantics and Info, on the local transport (docs/semantics.md rules 4 and 10,
*Requests, cancellation, progress*)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import anyio
import attrs
import numpy as np
import pytest

import aiorma
from aiorma import EngineFailure, Info, RmaUsageError
from aiorma.engine.control import Word
from aiorma.request import FAIR_SLICE
from aiorma.transport.local import Notice
from aiorma.win_info import as_info

# ------------------------------------------------------------------------------------ Request


def test_request_pending_then_done() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(2, np.int64)
        win.memory[:] = [5, 6]
        post = win.post([0])
        lock = win.start([0])  # the grant lands through the event loop, even from oneself
        assert lock.done() is False
        assert repr(lock) == "<Request start pending>"
        with pytest.raises(asyncio.InvalidStateError):
            lock.result()
        with pytest.raises(asyncio.InvalidStateError):
            lock.exception()
        polls = 0
        while not lock.test():
            polls += 1
            await asyncio.sleep(0)
        assert polls >= 1
        assert (lock.done(), lock.result(), lock.exception()) == (True, None, None)
        assert repr(lock) == "<Request start done>"
        assert post.done()

        out = np.zeros(2, np.int64)
        get = win.get(out, 0, 0)
        seen: list[aiorma.Request] = []
        get.add_done_callback(seen.append)
        unlock = win.complete()
        assert await unlock is None
        await win.wait()
        assert get.done() is True
        assert get.result() is out  # get-like calls return their result buffer
        assert out.tolist() == [5, 6]
        await asyncio.sleep(0)
        assert seen == [get]
        await win.free()

    aiorma.run(main, nprocs=1)


def test_request_carries_engine_failure() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(2, np.int64)
        lock = win.start([0])
        # the result of an atomic nobody asked for is an internal inconsistency
        win.engine.fetched(12345, 0)
        aiorma.progress()
        assert lock.done() is True
        error = lock.exception()
        assert type(error) is EngineFailure
        with pytest.raises(EngineFailure) as caught:
            lock.result()
        assert caught.value is error
        with pytest.raises(EngineFailure):
            await lock
        with pytest.raises(EngineFailure):  # the window refuses every later call
            win.fence()

    aiorma.run(main, nprocs=1)


def test_awaiting_finished_requests_yields_once_per_fair_slice() -> None:
    """A Request finished inside its call is returned at once when awaited, but awaiting yields
    to the loop at least once per FAIR_SLICE, so awaiting in a loop never starves other tasks."""

    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(2, np.int64)
        loop = asyncio.get_running_loop()
        ran: list[int] = []

        nocheck = win.lock(0, aiorma.LOCK_EXCLUSIVE, aiorma.MODE_NOCHECK)
        assert nocheck.done() is True  # completed synchronously, inside the call
        await nocheck  # (may yield: the slice clock starts here)
        loop.call_soon(ran.append, 1)
        await nocheck
        await nocheck
        assert ran == []  # within the slice: no yield
        deadline = time.perf_counter() + 2 * FAIR_SLICE
        while time.perf_counter() < deadline:
            pass
        await nocheck  # the slice has passed: this await is a checkpoint
        assert ran == [1]

        unlock = win.unlock(0)
        await unlock
        loop.call_soon(ran.append, 2)
        await unlock  # finished earlier, within the slice: awaiting again does not yield
        assert ran == [1]
        await asyncio.sleep(0)
        assert ran == [1, 2]
        await win.free()

    aiorma.run(main, nprocs=1)


def _delay_grants(src: int, dest: int, notice: Notice) -> float:
    return 0.25 if notice.word is Word.GRANT else 0.0  # far beyond the 5 ms timeouts


def test_cancelled_waiter_does_not_cancel_the_operation() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        win = await comm.win_allocate(4, np.int64)
        if comm.rank == 0:
            start = win.start([1])
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.005):
                    await start
            assert start.done() is False
            with pytest.raises(TimeoutError), anyio.fail_after(0.005):
                await start
            assert start.done() is False

            win.put(np.full(2, 7, np.int64), 1, 1)
            complete = win.complete()

            async def waiter() -> None:
                await complete

            task = asyncio.create_task(waiter())
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert complete.done() is False

            assert await start is None  # the same Requests complete normally
            assert await complete is None
            assert start.exception() is None
        else:
            win.post([0])
            await win.wait()  # the peer's epoch completes too
        await comm.barrier()
        memory = win.memory.tolist()
        await win.free()
        return memory

    assert aiorma.run(main, nprocs=2, notice_delay=_delay_grants) == [[0, 0, 0, 0], [0, 7, 7, 0]]


# --------------------------------------------------------------------------------------- Info

FLAGS = [
    ("access_after_access_reorder", "MPI_WIN_ACCESS_AFTER_ACCESS_REORDER"),
    ("access_after_exposure_reorder", "MPI_WIN_ACCESS_AFTER_EXPOSURE_REORDER"),
    ("exposure_after_exposure_reorder", "MPI_WIN_EXPOSURE_AFTER_EXPOSURE_REORDER"),
    ("exposure_after_access_reorder", "MPI_WIN_EXPOSURE_AFTER_ACCESS_REORDER"),
]


def test_info_defaults_are_all_off() -> None:
    info = Info()
    assert attrs.asdict(info) == {name: False for name, _ in FLAGS}
    assert info.to_mapping() == {key: "0" for _, key in FLAGS}
    assert as_info(None) == info


@pytest.mark.parametrize(("name", "key"), FLAGS)
def test_info_both_spellings_agree(name: str, key: str) -> None:
    expected = {n: n == name for n, _ in FLAGS}
    for info in (
        Info(**{name: True}),
        Info.from_mapping({key: "1"}),
        Info.from_mapping({name: "true"}),
        as_info({key: "1"}),
    ):
        assert attrs.asdict(info) == expected
    assert Info(**{name: True}).to_mapping() == {k: "1" if k == key else "0" for _, k in FLAGS}


@pytest.mark.parametrize("bits", list(itertools.product([False, True], repeat=4)))
def test_info_to_mapping_round_trip(bits: tuple[bool, ...]) -> None:
    info = Info(**{name: bit for (name, _), bit in zip(FLAGS, bits, strict=True)})
    mapping = info.to_mapping()
    assert mapping == {key: "1" if bit else "0" for (_, key), bit in zip(FLAGS, bits, strict=True)}
    assert Info.from_mapping(mapping) == info


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), ("true", True), (" YES ", True), ("On", True), (True, True), (1, True),
     ("0", False), ("false", False), ("no", False), ("OFF", False), (False, False), (0, False)],
)  # fmt: skip
def test_info_value_spellings(value: object, expected: bool) -> None:
    info = Info.from_mapping({"MPI_WIN_ACCESS_AFTER_EXPOSURE_REORDER": value})
    assert info.access_after_exposure_reorder is expected


@pytest.mark.parametrize("value", ["maybe", "", "2", "1.0", None, 2, -1, 0.5])
def test_info_bad_values_rejected(value: object) -> None:
    with pytest.raises(RmaUsageError) as caught:
        Info.from_mapping({"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": value})
    assert type(caught.value) is RmaUsageError


@pytest.mark.parametrize("key", ["MPI_WIN_BOGUS", "mpi_win_access_after_access_reorder", "reorder", ""])
def test_info_unknown_keys_rejected(key: str) -> None:
    with pytest.raises(RmaUsageError) as caught:
        Info.from_mapping({key: "1"})
    assert type(caught.value) is RmaUsageError


def test_info_is_immutable() -> None:
    info = Info()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        info.access_after_access_reorder = True  # type: ignore[misc]
    assert info.access_after_access_reorder is False


def test_info_attribute_spelling_parses_like_mapping() -> None:
    assert Info(access_after_access_reorder="0").access_after_access_reorder is False
    with pytest.raises(RmaUsageError):
        Info(access_after_access_reorder="maybe")


def test_info_accepts_mapping_as_documented() -> None:
    info = Info.from_mapping({"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "1"})
    assert info.access_after_access_reorder is True
    assert info == Info(access_after_access_reorder=True)
    with pytest.raises(TypeError):  # positional mappings are not a third spelling
        Info({"MPI_WIN_ACCESS_AFTER_ACCESS_REORDER": "1"})  # type: ignore[misc]


def test_window_info_from_both_spellings() -> None:
    async def main(comm: aiorma.Comm) -> Any:
        a = await comm.win_allocate(1, np.int64, info=Info(exposure_after_access_reorder=True))
        b = await comm.win_create(
            np.zeros(1, np.int64), info={"MPI_WIN_EXPOSURE_AFTER_ACCESS_REORDER": "true"}
        )
        c = await comm.win_allocate(1, np.int64)
        infos = [w.engine.info for w in (a, b, c)]
        for w in (a, b, c):
            await w.free()
        return infos

    expected = [Info(exposure_after_access_reorder=True)] * 2 + [Info()]
    assert aiorma.run(main, nprocs=1) == [expected]

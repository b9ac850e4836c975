"""Settings read from the environment, and the per-thread Context (aiorma._core)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import aiorma
from aiorma._core.context import context, process
from aiorma._core.settings import Settings


def test_settings_defaults_and_each_switch() -> None:
    assert Settings.from_environment({}) == Settings()
    on = Settings(inline=True, progress_thread=True, liveness=True, mpich_nolocal=False, trace=None)
    assert Settings() == on
    off = Settings.from_environment(
        {
            "AIORMA_INLINE": "0",
            "AIORMA_PROGRESS_THREAD": "",
            "AIORMA_LIVENESS": "0",
            "MPIR_CVAR_CH4_NOLOCAL": "1",
            "AIORMA_TRACE": "t.json",
        }
    )
    assert off == Settings(
        inline=False, progress_thread=False, liveness=False, mpich_nolocal=True, trace="t.json"
    )
    # As before Settings existed: an empty AIORMA_INLINE leaves the inline steps on, an empty
    # trace path traces nothing.
    assert Settings.from_environment({"AIORMA_INLINE": "", "AIORMA_TRACE": ""}) == Settings()


def test_the_retired_name_of_the_inline_switch_is_honoured_unless_the_new_one_is_set() -> None:
    assert not Settings.from_environment({"AIORMA_THIN": "0"}).inline
    assert Settings.from_environment({"AIORMA_THIN": "0", "AIORMA_INLINE": "1"}).inline


def test_settings_are_read_when_the_connection_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    async def inline(comm: aiorma.Comm) -> bool:
        return comm.world.driver.inline

    monkeypatch.setenv("AIORMA_INLINE", "0")
    assert aiorma.run(inline, nprocs=2) == [False, False]
    monkeypatch.delenv("AIORMA_INLINE")
    assert aiorma.run(inline, nprocs=2) == [True, True]


def test_each_thread_has_its_own_context_and_the_process_one() -> None:
    seen: list[object] = []

    def look() -> None:
        seen.append(context())
        seen.append(context())

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    assert seen[0] is seen[1] and seen[0] is not context()
    assert context() is context()
    assert process.connected == []


@pytest.mark.timeout(60)
def test_two_threads_run_aiorma_side_by_side() -> None:
    """Each thread's loop runs its own ranks; aiorma.progress() in one drives only its own."""

    async def main(comm: aiorma.Comm) -> tuple[int, int]:
        win = await comm.win_allocate(4, np.int64)
        for i in range(200):
            async with win.lock(1 - comm.rank):
                win.accumulate(np.array([1]), 1 - comm.rank, 0, aiorma.SUM)
            if i % 50 == 0:
                aiorma.progress()
        await comm.barrier()
        value = int(win.memory[0])
        await win.free()
        return value, len(context().drivers)

    results: dict[str, object] = {}

    def run(name: str) -> None:
        try:
            results[name] = aiorma.run(main, nprocs=2)
        except BaseException as error:  # reported by the assertion below
            results[name] = error

    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 200 accumulates into each rank; each thread saw its own two ranks' drivers only.
    assert results == {"a": [(200, 2), (200, 2)], "b": [(200, 2), (200, 2)]}


def test_a_finished_request_awaited_in_a_fresh_thread() -> None:
    """The first await of a thread (no connection made its Context) still works."""
    request = aiorma.Request.finished(7, None, "x")

    async def twice() -> list[object]:
        return [await request, await request]

    out: list[object] = []
    thread = threading.Thread(target=lambda: out.extend(asyncio.run(twice())))
    thread.start()
    thread.join()
    assert out == [7, 7]

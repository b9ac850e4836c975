"""Seeded random RMA programs whose outcome does not depend on timing, and that outcome computed
independently in plain Python.

A program is a list of steps that every rank runs together: fence epochs with puts, GATS rings,
lock epochs (exclusive or shared) with accumulates and fetch-and-ops, lock_all with put + flush +
get.  Puts write slots only their origin writes (no races between writers); accumulates add
(commutative); a fetch_and_op's fetched value is not recorded (it depends on who came first).
Requests are sometimes awaited at once and sometimes held and awaited at the end of the step.
So the final window contents and every recorded get are fixed by the seed: the inline paths on and
off (``AIORMA_INLINE``), and every transport, must give exactly :func:`expected_outcome`.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

import aiorma

SLOTS = 8  # put slots per origin
ACC = 4  # accumulate slots after the put slots


def window_size(size: int) -> int:
    return size * SLOTS + ACC


def make_program(seed: int, size: int, steps: int = 24) -> list[dict[str, Any]]:
    """The steps of program ``seed`` for ``size`` ranks (the same list on every rank)."""
    rng = random.Random(seed)
    program = []
    for step in range(steps):
        kind = rng.choice(["fence", "fence", "pscw", "lock", "lock", "lock_all"])
        entry: dict[str, Any] = {"kind": kind, "hold": rng.random() < 0.4, "step": step}
        entry["targets"] = [rng.randrange(size) for _ in range(size)]  # one per origin
        entry["slot"] = rng.randrange(SLOTS)
        entry["acc"] = rng.randrange(ACC)
        entry["exclusive"] = [rng.random() < 0.5 for _ in range(size)]
        entry["middle"] = rng.random() < 0.3  # fence: close with a plain fence (and reopen)
        entry["fetch"] = rng.random() < 0.3
        program.append(entry)
    return program


def _value(step: int, rank: int) -> int:
    return 1000 * (step + 1) + rank


async def _await(request: aiorma.Request) -> Any:
    return await request


async def _no_fault(step: int) -> None:
    return None


async def run_program(
    comm: aiorma.Comm,
    program: list[dict[str, Any]],
    wait: Callable[[aiorma.Request], Awaitable[Any]] = _await,
    fault: Callable[[int], Awaitable[None]] = _no_fault,
) -> dict[str, Any]:
    """Run ``program`` on this rank; returns its final window contents and its recorded gets.
    ``wait(request)`` awaits each Request the program waits for (the soak test abandons some
    of those waits first, tests/soak.py); ``fault(step)`` runs before each step (the soak test
    makes one rank fail there)."""
    rank, size = comm.rank, comm.size
    win = await comm.win_allocate(window_size(size), np.int64)
    gets: list[int] = []
    fence_open = False
    for entry in program:
        step, hold = entry["step"], entry["hold"]
        await fault(step)
        target = entry["targets"][rank]
        slot = rank * SLOTS + entry["slot"]
        value = np.array([_value(step, rank)], np.int64)
        held: list[aiorma.Request] = []

        def later(request: aiorma.Request, hold: bool = hold, held: list[aiorma.Request] = held) -> Any:
            held.append(request)
            return request if hold else None

        if entry["kind"] != "fence" and fence_open:
            await wait(win.fence(aiorma.MODE_NOSUCCEED))
            fence_open = False
        if entry["kind"] == "fence":
            if not fence_open:
                await wait(win.fence(aiorma.MODE_NOPRECEDE))
            later(win.put(value, target, slot))
            if entry["middle"]:
                await wait(win.fence())  # closes this epoch and opens the next
                fence_open = True
            else:
                closing = win.fence(aiorma.MODE_NOSUCCEED)
                if not hold:
                    await wait(closing)
                held.append(closing)
                fence_open = False
        elif entry["kind"] == "pscw":
            right, left = (rank + 1) % size, (rank - 1) % size
            exposure = win.post([left]) if size > 1 else None
            access = win.start([right])
            if not hold:
                await wait(access)
            later(win.put(value, right, slot))
            held.append(win.complete())
            if exposure is not None:
                held.append(win.wait())
        elif entry["kind"] == "lock":
            kind = aiorma.LOCK_EXCLUSIVE if entry["exclusive"][rank] else aiorma.LOCK_SHARED
            locked = win.lock(target, kind)
            if not hold:
                await wait(locked)
            later(win.accumulate(value, target, size * SLOTS + entry["acc"], aiorma.SUM))
            if entry["fetch"]:
                old = np.zeros(1, np.int64)
                later(win.fetch_and_op(np.ones(1, np.int64), old, target, size * SLOTS + entry["acc"]))
            held.append(win.unlock(target))
        else:  # lock_all
            await wait(win.lock_all())
            win.put(value, target, slot)
            await wait(win.flush(target))
            back = np.zeros(1, np.int64)
            await wait(win.get(back, target, slot))
            await wait(win.flush(target))
            gets.append(int(back[0]))
            await wait(win.unlock_all())
        for request in held:
            await wait(request)
        if entry["kind"] in ("lock", "lock_all", "pscw"):
            await wait(comm.barrier())  # every rank's passive updates are in before the next step reads
    if fence_open:
        await wait(win.fence(aiorma.MODE_NOSUCCEED))
    await comm.barrier()
    memory = [int(x) for x in win.memory]
    await comm.barrier()
    await win.free()
    return {"rank": rank, "memory": memory, "gets": gets}


def expected_outcome(program: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """What :func:`run_program` must return on each rank, computed without aiorma."""
    memory = np.zeros((size, window_size(size)), np.int64)
    gets: list[list[int]] = [[] for _ in range(size)]
    for entry in program:
        step = entry["step"]
        for rank in range(size):
            target = entry["targets"][rank]
            slot = rank * SLOTS + entry["slot"]
            value = _value(step, rank)
            if entry["kind"] == "fence":
                memory[target, slot] = value
            elif entry["kind"] == "pscw":
                memory[(rank + 1) % size, slot] = value
            elif entry["kind"] == "lock":
                acc = size * SLOTS + entry["acc"]
                memory[target, acc] += value + (1 if entry["fetch"] else 0)
            else:
                memory[target, slot] = value
                gets[rank].append(value)
    return [{"rank": r, "memory": [int(x) for x in memory[r]], "gets": gets[r]} for r in range(size)]

"""Landing windows: the only way collectives move data — puts, flushes and monotonic flags.

Every Comm owns two windows, created collectively at start-up (``Comm._start``) and kept under
one long-lived shared ``lock_all(MODE_NOCHECK)`` epoch each:

* ``flags`` (int64, ``3·P`` counters on every rank).  Each has one writer and only grows, so it
  is written with :meth:`Window.signal` (a put, flushed, after everything issued before it to
  that rank): no atomic, so no work for the receiver's CPU on any node, and never overtaken:

  ===============  =========================================================================
  ``SIG + s``      flag-only messages ("signals") rank ``s`` has sent us (barrier, ...)
  ``DATA + s``     data chunks from rank ``s`` that have fully landed in our slots
  ``CREDIT + d``   data chunks of ours that rank ``d`` has consumed (its slots are free)
  ===============  =========================================================================

* ``data`` (bytes): for every source rank ``s``, ``K`` slots of ``S`` bytes at
  ``(s·K + j)·S``.  Chunk number ``o`` (counted per ordered pair) from ``s`` lands in slot
  ``o mod K``.

Protocol for one chunk ``o`` from ``A`` to ``B`` (per-pair counts agree on both sides because a
Comm's collectives run in call order on every rank, see :mod:`.runner`):

1. **credit**: ``A`` waits until its ``CREDIT + B ≥ o + 1 − K`` — ``B`` has consumed the chunk
   that used the slot before;
2. **data**: ``A`` puts the bytes into ``B``'s slot ``o mod K``;
3. **flush**: ``A`` awaits ``flush(B)`` on the data window: the data is *remotely complete*;
4. **flag**: only then ``A`` sets ``B``'s ``DATA + A`` to ``o + 1`` (data before flag).  A
   one-chunk message with a free slot does 2–4 inside the call, as one
   :meth:`Window.put_signal`;
5. ``B`` sees ``DATA + A ≥ o + 1``, copies (or reduces) the slot out, and raises ``A``'s
   ``CREDIT + B`` to the number of chunks it has consumed — only once every ``K`` chunks: ``A``
   needs credit ``o + 1 − K`` for chunk ``o``, so ``K − 1`` unreported chunks never hold it up,
   and a small message costs the receiver no RMA call at all most of the time.

Several chunks are batched when credits allow (one flush and one flag for all of them).  Messages
larger than a slot are split into chunks, which pipelines them through the ``K`` slots.  A
one-chunk message that has landed already is taken inside the call that receives it.

A long-lived passive epoch costs the engine O(1) per RMA call (it keeps a per-target issue
sequence number, not a record of the calls), so one epoch serves the Comm's whole life.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import attrs
import numpy as np

from .._core.watch import MemoryWatcher
from .._core.world import World
from ..constants import MODE_NOCHECK, Op
from ..request import Request, finish_as
from ..win_info import Info
from ..window import Window
from .reduce_ops import reduce_into

#: Window ids of the landing windows.  They come from the top of the id space so that the ids of
#: the application's windows stay as they were (``World.create_window`` counts them from 1).
FLAGS_WIN_ID = 0xFFFF_FF00
DATA_WIN_ID = 0xFFFF_FF01

_PIPELINE_BYTES = 64 << 10  # chunks from this size on are flagged one at a time

Consume = Callable[[np.ndarray, int, int], None]


@attrs.frozen(kw_only=True)
class LandingConfig:
    """Sizes of the landing slots.  ``slot_bytes=None`` derives the slot size from the budget:
    ``budget_bytes / (P · slots_per_peer)``, rounded down to a power of two and clamped to
    ``[min_slot_bytes, max_slot_bytes]``."""

    slots_per_peer: int = 4
    slot_bytes: int | None = None
    budget_bytes: int = 16 << 20
    min_slot_bytes: int = 4 << 10
    max_slot_bytes: int = 1 << 20

    def resolve(self, size: int) -> tuple[int, int]:
        """(slot bytes S, slots per peer K) for a Comm of ``size`` ranks."""
        slots = max(1, int(self.slots_per_peer))
        if self.slot_bytes is not None:
            slot = int(self.slot_bytes)
        else:
            raw = self.budget_bytes // max(1, size * slots)
            slot = 1 << max(0, int(raw).bit_length() - 1)
            slot = min(self.max_slot_bytes, max(self.min_slot_bytes, slot))
        if slot < 16 or slot & (slot - 1):
            raise ValueError(f"slot size must be a power of two >= 16 bytes, not {slot}")
        return slot, slots


#: The configuration new Comms use; replace it (before ``aiorma.run``) to change slot sizes.
DEFAULT_CONFIG = LandingConfig()


class _LongEpoch:
    """A window's ``lock_all(MODE_NOCHECK)`` epoch for the Comm's whole life."""

    def __init__(self, win: Window) -> None:
        self.win = win
        self.opened = win.lock_all(MODE_NOCHECK)

    async def close(self) -> None:
        await self.win.unlock_all()
        await self.win.free()


class Landing:
    """One rank's side of the landing protocol: signals, chunked sends and receives."""

    def __init__(self, world: World, flags: Window, data: Window, slot_bytes: int, slots: int) -> None:
        size = world.size
        self.rank = world.rank
        self.size = size
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.SIG, self.DATA, self.CREDIT = 0, size, 2 * size
        self._flags = _LongEpoch(flags)
        self._data = _LongEpoch(data)
        self._flag_mem = flags.memory
        self._data_mem = data.memory
        self._progress = world.driver.progress
        self.polling = world.polled
        self.watcher = MemoryWatcher(flags.memory, world.driver.waiter)
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._done.set_result(None)
        # per-pair counts of signals and data chunks (sent, expected)
        self._sig_sent = [0] * size
        self._sig_expected = [0] * size
        self._chunks_sent = [0] * size
        self._chunks_expected = [0] * size
        self._credit_written = [0] * size  # the credit last written back to each source
        # per-pair chains: a message to/from a peer starts only after the previous one finished
        self._send_tail: list[asyncio.Future[None]] = [self._done] * size
        self._recv_tail: list[asyncio.Future[None]] = [self._done] * size
        self.failure: BaseException | None = None

    @classmethod
    async def open(cls, world: World, config: LandingConfig | None = None) -> Landing:
        """Collective: create both landing windows and open their epochs."""
        slot_bytes, slots = (config or DEFAULT_CONFIG).resolve(world.size)
        flags = await world.create_window(
            None, 3 * world.size, np.dtype(np.int64), Info(), win_id=FLAGS_WIN_ID, notify=True
        )
        data_count = world.size * slots * slot_bytes
        data = await world.create_window(None, data_count, np.dtype(np.uint8), Info(), win_id=DATA_WIN_ID)
        landing = cls(world, flags, data, slot_bytes, slots)
        await landing._flags.opened
        await landing._data.opened
        return landing

    async def close(self) -> None:
        """Collective: close the epochs (every RMA complete at its target) and free the windows."""
        self.watcher.close()
        await self._flags.close()
        await self._data.close()

    def progress(self) -> None:
        """Drive the transport once and re-check the flags (``Request.test`` of a collective)."""
        self._progress()
        self.watcher.check()

    # ------------------------------------------------------------------ signals

    def signal(self, dst: int) -> None:
        """Send a flag-only message to ``dst`` (issued now; nothing to wait for locally)."""
        self._sig_sent[dst] += 1
        self._raise_flag(dst, self.SIG + self.rank, self._sig_sent[dst])

    def wait_signal(self, src: int) -> asyncio.Future[None]:
        """The next signal from ``src``: a future finished once it has arrived."""
        self._sig_expected[src] += 1
        return self.watcher.wait(self.SIG + src, self._sig_expected[src])

    # ------------------------------------------------------------------ data

    def chunks(self, nbytes: int) -> int:
        return math.ceil(nbytes / self.slot_bytes)

    def send(self, dst: int, data: np.ndarray) -> Awaitable[None]:
        """Send the bytes of ``data`` (1-D uint8, contiguous) to ``dst``, which must receive
        exactly as many bytes from us at the same point of the same collective.  The numbering is
        fixed at the call; the awaitable finishes when every chunk is flagged at ``dst``, after
        which ``data`` may be reused."""
        nbytes = int(data.size)
        if nbytes == 0:
            return self._done
        count = self.chunks(nbytes)
        first = self._chunks_sent[dst]
        if count == 1 and self._send_tail[dst].done():
            sent = self._send_now(dst, data, first)
            if sent is not None:
                return sent
        self._chunks_sent[dst] += count
        before, self._send_tail[dst] = self._send_tail[dst], self._loop.create_future()
        return self._send(dst, data, first, count, before, self._send_tail[dst])

    def _send_now(self, dst: int, data: np.ndarray, ordinal: int) -> asyncio.Future[None] | None:
        """Send a one-chunk message inside the call when its slot at ``dst`` is free (credit) and
        no earlier message to ``dst`` is in flight: one notified put (:meth:`Window.put_signal`:
        the data, then its flag once the data is complete at ``dst``).  Returns what the sender
        awaits (finished when the put and flag completed inside the call), or None when the slot
        is not free yet (the general path then waits for the credit)."""
        if self._flag_mem[self.CREDIT + dst] < ordinal + 1 - self.slots:
            return None
        disp = (self.rank * self.slots + ordinal % self.slots) * self.slot_bytes
        self._chunks_sent[dst] = ordinal + 1
        sent = self._data.win.put_signal(data, dst, disp, self._flags.win, self.DATA + self.rank, ordinal + 1)
        if sent.done() and sent.exception() is None:
            return self._done
        tail = self._send_tail[dst] = self._loop.create_future()
        sent.add_done_callback(lambda request: finish_as(tail, request))
        return tail

    def recv(self, src: int, out: np.ndarray) -> Awaitable[None]:
        """Receive ``out.size`` bytes from ``src`` into ``out`` (1-D uint8, contiguous)."""

        def copy(slot: np.ndarray, lo: int, hi: int) -> None:
            out[lo:hi] = slot

        return self.recv_with(src, int(out.size), copy)

    def recv_reduce(
        self,
        src: int,
        acc: np.ndarray,
        op: Op,
        incoming_higher: bool,
        out: np.ndarray | None = None,
    ) -> Awaitable[None]:
        """Receive ``acc.nbytes`` bytes from ``src`` and combine them with ``acc`` (1-D, typed)
        straight from the landing slots: ``acc op incoming`` when the incoming data comes from
        higher ranks, else ``incoming op acc`` (matters only for REPLACE and NO_OP).  The result
        goes to ``out`` (same shape and dtype), by default into ``acc`` itself."""
        flat = acc.reshape(-1)
        target = flat if out is None else out.reshape(-1)
        itemsize = acc.dtype.itemsize

        def combine(slot: np.ndarray, lo: int, hi: int) -> None:
            a, b = lo // itemsize, hi // itemsize
            reduce_into(op, flat[a:b], slot.view(acc.dtype), incoming_higher, target[a:b])

        return self.recv_with(src, int(acc.nbytes), combine)

    def recv_with(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]:
        """Receive ``nbytes`` from ``src``, handing each chunk to ``consume(slot, lo, hi)`` (the
        chunk's bytes and its byte range in the message) while it is still in the slot."""
        if nbytes == 0:
            return self._done
        count = self.chunks(nbytes)
        first = self._chunks_expected[src]
        self._chunks_expected[src] += count
        if count == 1 and self._flag_mem[self.DATA + src] > first and self._recv_tail[src].done():
            # Landed already, and nothing earlier from src is still being received: take it now.
            start = (src * self.slots + first % self.slots) * self.slot_bytes
            consume(self._data_mem[start : start + nbytes], 0, nbytes)
            self._consumed(src, first + 1)
            return self._done
        before, self._recv_tail[src] = self._recv_tail[src], self._loop.create_future()
        return self._recv(src, nbytes, consume, first, count, before, self._recv_tail[src])

    async def _send(
        self,
        dst: int,
        data: np.ndarray,
        first: int,
        count: int,
        before: asyncio.Future[None],
        done: asyncio.Future[None],
    ) -> None:
        try:
            if not before.done():
                await asyncio.wait([before])
            slot_bytes, slots, nbytes = self.slot_bytes, self.slots, int(data.size)
            base = self.rank * slots
            win = self._data.win
            sent = 0
            while sent < count:
                ordinal = first + sent
                await self.watcher.wait(self.CREDIT + dst, ordinal + 1 - slots)
                credit = int(self._flag_mem[self.CREDIT + dst])
                batch = min(count - sent, credit + slots - ordinal)
                if slot_bytes >= _PIPELINE_BYTES:
                    # Large chunks are flagged one by one, so the receiver copies chunk o out
                    # while we put chunk o+1 (one flush and flag more per chunk, cheap next to
                    # the copy); small ones share a flush and a flag.
                    batch = 1
                for j in range(batch):
                    lo = (sent + j) * slot_bytes
                    disp = (base + (ordinal + j) % slots) * slot_bytes
                    win.put(data[lo : min(nbytes, lo + slot_bytes)], dst, disp)
                flushed = win.flush(dst)
                if self.polling and not flushed.done():
                    # A polled transport carries the flush out at its next poll: do that poll now
                    # rather than a turn of the event loop later.
                    self._progress()
                await flushed
                sent += batch
                self._raise_flag(dst, self.DATA + self.rank, first + sent)
        finally:
            done.set_result(None)

    async def _recv(
        self,
        src: int,
        nbytes: int,
        consume: Consume,
        first: int,
        count: int,
        before: asyncio.Future[None],
        done: asyncio.Future[None],
    ) -> None:
        try:
            if not before.done():
                await asyncio.wait([before])
            slot_bytes, slots = self.slot_bytes, self.slots
            base = src * slots
            memory = self._data_mem
            got = 0
            while got < count:
                ordinal = first + got
                await self.watcher.wait(self.DATA + src, ordinal + 1)
                batch = min(count - got, int(self._flag_mem[self.DATA + src]) - ordinal)
                for j in range(batch):
                    lo = (got + j) * slot_bytes
                    hi = min(nbytes, lo + slot_bytes)
                    start = (base + (ordinal + j) % slots) * slot_bytes
                    consume(memory[start : start + hi - lo], lo, hi)
                got += batch
                self._consumed(src, first + got)
        finally:
            done.set_result(None)

    def _consumed(self, src: int, consumed: int) -> None:
        """``consumed`` chunks from ``src`` are out of their slots.  Credits are written back in
        batches of K: the sender of chunk o needs credit >= o + 1 - K, and at most K - 1 consumed
        chunks are ever unreported, so it is never held up by a credit we still owe (module
        docstring, step 5)."""
        if consumed - self._credit_written[src] >= self.slots:
            self._credit_written[src] = consumed
            self._raise_flag(src, self.CREDIT + self.rank, consumed)

    # ------------------------------------------------------------------ flags

    def _raise_flag(self, dst: int, index: int, value: int) -> None:
        """Set ``dst``'s ``flags[index]`` to ``value`` with :meth:`Window.signal`: a put after
        everything we issued to ``dst`` on the flag window, flushed.  Every flag has one writer
        (this rank) and only grows, so a plain put is enough — no atomic, hence no work for
        ``dst``'s CPU even on another node; ``signal`` writes successive signals to one rank one
        after the other, so a later value never lands before an earlier one."""
        written = self._flags.win.signal(dst, index, value)
        if not written.done():
            # Nobody awaits it: a failure reaches the collectives through the Comm's failure, so
            # only mark it seen here (asyncio would log it as never retrieved).
            written.add_done_callback(_retrieve)


def _retrieve(request: Request) -> None:
    request.exception()

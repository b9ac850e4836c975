"""Landing windows: the only way collectives move data — puts, flushes and monotonic flags.

Every Comm owns three windows, created collectively at start-up (``Comm._start``) and kept under
one long-lived shared ``lock_all(MODE_NOCHECK)`` epoch each:

* ``flags`` (int64, ``4·P`` counters on every rank).  Each has one writer and only grows.  On
  this node it is written with :meth:`Window.notify` (a store into the receiver's memory,
  mapped here): no atomic, no work for the receiver's CPU.  Towards another node, where a put's
  bytes may land in pieces and the receiver reads the flag meanwhile, the notice is an
  accumulate with REPLACE, which lands whole; successive values of one flag land in order (MPI's
  default ``accumulate_ordering``), so a flag is never seen to go back:

  ===============  =========================================================================
  ``SIG + s``      flag-only messages ("signals") rank ``s`` has sent us (barrier, ...)
  ``DATA + s``     data chunks from rank ``s`` that have fully landed in our slots
  ``CREDIT + d``   data chunks of ours that rank ``d`` has consumed (its slots are free)
  ``LL_CREDIT+d``  LL messages of ours that rank ``d`` has consumed
  ===============  =========================================================================

* ``data`` (bytes): for every source rank ``s``, ``K`` slots of ``S`` bytes at
  ``(s·K + j)·S``.  Chunk number ``o`` (counted per ordered pair) from ``s`` lands in slot
  ``o mod K``.
* ``ll`` (int64 words): for every source rank ``s``, ``L`` slots of ``W`` words at
  ``(s·L + j)·W``, for messages of at most ``4·W`` bytes (:mod:`.ll`).

**Small messages** (at most ``LandingConfig.ll_bytes``, 8 bytes by default) are LL messages: one
write of words that each carry 4 payload bytes and the message's sequence number (one
:meth:`Window.notify` of the words: on this node stores inside the call; towards another node
one accumulate with REPLACE) — the receiver knows the message has landed
when every word of the slot carries the number it expects, so there is no flag write (:mod:`.ll`;
why a word is never seen half-written: docs/architecture.md, *One put per small message*).  LL
message ``o`` (counted per ordered pair) from ``s`` lands in LL slot ``o mod L`` once ``s``'s
``LL_CREDIT`` from the receiver is at least ``o + 1 − L``; credits go back once every ``L``
messages, as below.  Larger messages take the protocol below.

Protocol for one chunk ``o`` from ``A`` to ``B`` (per-pair counts agree on both sides because a
Comm's collectives run in call order on every rank, see :mod:`.runner`):

1. **credit**: ``A`` waits until its ``CREDIT + B ≥ o + 1 − K`` — ``B`` has consumed the chunk
   that used the slot before;
2. **data**: ``A`` puts the bytes into ``B``'s slot ``o mod K``;
3. **flush**: ``A`` awaits ``flush(B)`` on the data window: the data is *remotely complete*;
4. **flag**: only then ``A`` sets ``B``'s ``DATA + A`` to ``o + 1`` (data before flag).  On this
   node a one-chunk message with a free slot does 2–4 inside the call, as one
   :meth:`Window.put_signal`;
5. ``B`` sees ``DATA + A ≥ o + 1``, copies (or reduces) the slot out, and raises ``A``'s
   ``CREDIT + B`` to the number of chunks it has consumed — only once every ``K`` chunks: ``A``
   needs credit ``o + 1 − K`` for chunk ``o``, so ``K − 1`` unreported chunks never hold it up,
   and a small message costs the receiver no RMA call at all most of the time.

Several chunks are batched when credits allow (one flush and one flag for all of them).  Messages
larger than a slot are split into chunks, which pipelines them through the ``K`` slots.  A
one-chunk message that has landed already is taken inside the call that receives it.

**Wide chunks.**  A message larger than a slot travels in chunks of ``m`` adjacent slots
(:meth:`Landing.span`: ``m`` is a power of two, at most ``K/2`` and dividing ``K``, and no wider
than the message needs), so a large message takes fewer puts, flushes, flags and hand-offs
between ranks (each costs a wait for the other rank to be scheduled where ranks share cores) and
two of them still pipeline.  A wide chunk counts as ``m`` chunks and starts at a multiple of
``m`` (both sides skip the same ordinals to get there, from the message size alone), so it never
wraps around the peer's slots; it needs credit ``o + m − K``.  A receiver about to wait for one
first reports any credit it still owes that the chunk needs (step 5 only guarantees ``o + 1 −
K``).  Messages of at most one slot (``m = 1``) are exactly as above.

**Large messages in one copy.**  Between ranks that can read each other's memory (one node,
where the kernel allows cross-memory attach: ``Endpoint.reads_memory_of``), a message of at least
``LandingConfig.single_copy_bytes`` skips the slots: the sender sends, as one ordinary chunk,
where the message is (its address and size); the receiver copies the bytes straight out of the
sender's buffer into its own (``Endpoint.read_memory``, at most ``single_copy_slice_bytes`` per
read, the event loop getting a turn between two reads: a read holds it for the whole copy) and
raises the sender's credit past that chunk once the copy is done — nothing later from that
sender is taken before, since a later chunk's credit would free the buffer as well; the
sender's send finishes when it sees that credit, and only then may its buffer change.  One copy
instead of two, and the copy through the slots crosses between cores twice (docs/benchmarks.md,
*Large messages in one copy*).  MPI libraries move large on-node messages
the same way.  Such a message is never split: a tree forwards it once it has all of it.  A
message sent with ``send(..., via_slots=True)`` takes the slots anyway: one the receiver combines
into its data (a reduction's; read out of the sender's process first, it cost more than combined
straight from a slot), and a gather's (the root takes many at once: senders filling slots in
parallel beat the root reading each sender in turn).  The receiver then passes a consumer that
is not an :class:`Into`.

A long-lived passive epoch costs the engine O(1) per RMA call (it keeps a per-target issue
sequence number, not a record of the calls), so one epoch serves the Comm's whole life.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import attrs
import numpy as np

from .._core.memcopy import copy_bytes
from .._core.watch import MemoryWatcher
from .._core.world import World
from ..constants import MODE_NOCHECK, Op
from ..errors import RmaUsageError
from ..request import Request, finish_as
from ..win_info import Info
from ..window import Window
from .ll import SlotWatcher, decode_into, encode, encode_word, flag_of, words_for
from .reduce_ops import combiner

#: Window ids of the landing windows.  They come from the top of the id space so that the ids of
#: the application's windows stay as they were (``World.create_window`` counts them from 1).
FLAGS_WIN_ID = 0xFFFF_FF00
DATA_WIN_ID = 0xFFFF_FF01
LL_WIN_ID = 0xFFFF_FF02

_PIPELINE_BYTES = 64 << 10  # chunks from this size on are flagged one at a time
_WHERE_BYTES = 16  # a single-copy message's chunk: the address and size of the message

Consume = Callable[[np.ndarray, int, int], None]


@attrs.frozen(kw_only=True)
class LandingConfig:
    """Sizes of the landing slots.  ``slot_bytes=None`` derives the slot size from the budget:
    ``budget_bytes / (P · slots_per_peer)``, rounded down to a power of two and clamped to
    ``[min_slot_bytes, max_slot_bytes]``; when the clamp leaves budget unused (few ranks), up to
    twice ``slots_per_peer`` slots per peer, a power of two (2 ranks: 8 slots of 1 MiB).

    Messages of at most ``ll_bytes`` bytes are LL messages (one put each, twice the bytes: see
    :mod:`.ll`); ``ll_bytes=0`` sends every message through the data slots.  Each peer gets
    ``ll_slots`` LL slots, fewer when ``P · ll_slots · 2·ll_bytes`` would exceed the budget
    (at least one)."""

    slots_per_peer: int = 4
    slot_bytes: int | None = None
    budget_bytes: int = 16 << 20
    min_slot_bytes: int = 4 << 10
    max_slot_bytes: int = 1 << 20
    #: Measured on the MPI transport, 2 ranks (docs/collectives.md, *Where LL messages pay*), when
    #: every LL message was one ``Window.signal`` of its words (a notice since).  On one node a
    #: one-word message (up to 4 bytes) costs 10-20% less than a data-slot message and 8-16 bytes
    #: about the same; across nodes, where it saves a network round trip, 4-8 bytes cost 10-27%
    #: less.  8 bytes: a float64 reduction or bcast is one LL message.
    ll_bytes: int = 8
    ll_slots: int = 8
    #: Messages of at least this many bytes between ranks that can read each other's memory (one
    #: node, cross-memory attach allowed: ``Endpoint.reads_memory_of``) travel in one copy: the
    #: receiver copies them straight out of the sender's buffer (*Large messages in one copy*
    #: in the module docstring).  0: never.  Measured on the MPI transport, 2 ranks
    #: (docs/benchmarks.md, *Large messages in one copy*).
    single_copy_bytes: int = 2 << 20
    #: The threshold instead (when lower) on a node with more ranks than cores, where every
    #: hand-off of the slot path waits for the other rank to be scheduled: measured at 4 ranks on
    #: 2 cores, 1 MiB messages in one copy took 0.5-0.9 x the time of the slots' (same section).
    single_copy_bytes_shared_cores: int = 512 << 10
    #: Messages above this many bytes take the slots even so (0: no bound).
    single_copy_max_bytes: int = 0
    #: A message in one copy is read at most this many bytes at a time (0: all at once), the event
    #: loop getting a turn between two reads: a read holds the loop for the whole copy (~0.65 ms
    #: for 4 MiB here), and the rank's other tasks and timers must keep their turns — as the
    #: slots copy at most a wide chunk (4 MiB) per step.
    single_copy_slice_bytes: int = 4 << 20

    def resolve(self, size: int) -> tuple[int, int]:
        """(slot bytes S, slots per peer K) for a Comm of ``size`` ranks."""
        slots = max(1, int(self.slots_per_peer))
        if self.slot_bytes is not None:
            slot = int(self.slot_bytes)
        else:
            raw = self.budget_bytes // max(1, size * slots)
            slot = 1 << max(0, int(raw).bit_length() - 1)
            slot = min(self.max_slot_bytes, max(self.min_slot_bytes, slot))
            if slot < raw:
                # Slots at their largest with budget left (few ranks): up to twice as many of
                # them, a power of two, so that a peer can land a large message while the previous
                # one is still being copied out of the first half.
                more = self.budget_bytes // (size * slot)
                slots = max(slots, min(2 * slots, 1 << (int(more).bit_length() - 1)))
        if slot < 16 or slot & (slot - 1):
            raise ValueError(f"slot size must be a power of two >= 16 bytes, not {slot}")
        return slot, slots

    def resolve_single_copy(self, ranks_on_node: int, cores: int) -> int:
        """The single-copy threshold (0: off) for a rank whose node runs ``ranks_on_node`` ranks
        on ``cores`` cores.  Both are the same for every rank of a node (host names, the
        machine's CPU count — not a process's affinity), so the two ends of a pair, which share
        a node, agree."""
        if self.single_copy_bytes <= 0:
            return 0
        if ranks_on_node > cores and self.single_copy_bytes_shared_cores > 0:
            return min(self.single_copy_bytes, self.single_copy_bytes_shared_cores)
        return self.single_copy_bytes

    def resolve_ll(self, size: int) -> tuple[int, int]:
        """(largest LL message in bytes, LL slots per peer) for a Comm of ``size`` ranks; (0, 0)
        when LL messages are off."""
        nbytes = int(self.ll_bytes)
        if nbytes < 0 or nbytes % 4:
            raise ValueError(f"ll_bytes must be a multiple of 4 bytes (0: off), not {nbytes}")
        if nbytes == 0:
            return 0, 0
        slots = max(1, min(int(self.ll_slots), self.budget_bytes // max(1, size * 2 * nbytes)))
        return nbytes, slots


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

    def __init__(
        self,
        world: World,
        flags: Window,
        data: Window,
        slot_bytes: int,
        slots: int,
        ll: Window,
        ll_bytes: int,
        ll_slots: int,
        single_copy_bytes: int = 0,
        single_copy_max_bytes: int = 0,
        single_copy_slice_bytes: int = 0,
    ) -> None:
        size = world.size
        self.rank = world.rank
        self.size = size
        self.slot_bytes = slot_bytes
        self.slots = slots
        #: The widest chunk, in slots: the largest power of two that divides K and is at most K/2
        #: (two wide chunks in flight per pair; 1 when K < 4: no wide chunks).
        low = slots & -slots  # the largest power of two dividing K (K itself when K is one)
        self.widest = low if low <= slots // 2 else max(1, slots // 2)
        #: Messages of at most this many bytes are LL messages (0: none are).
        self.ll_bytes = ll_bytes
        self.ll_slots = ll_slots
        self.ll_words = ll_bytes // 4  # words per LL slot
        self.SIG, self.DATA, self.CREDIT, self.LL_CREDIT = 0, size, 2 * size, 3 * size
        self._flags = _LongEpoch(flags)
        self._data = _LongEpoch(data)
        self._ll = _LongEpoch(ll)
        self._flag_mem = flags.memory
        self._data_mem = data.memory
        self._progress = world.driver.progress
        self.polling = world.polled
        # Where a put of words lands them whole (this node), flags and LL words are signals, put
        # and flushed inside the call; elsewhere accumulates (see _write_words).
        self._words_whole = [world.endpoint.stores_words_whole(rank) for rank in range(size)]
        # Whose buffers we may copy out of (single-copy messages), and from which size on.
        self._endpoint = world.endpoint
        self._readable = [world.endpoint.reads_memory_of(rank) for rank in range(size)]
        self.single_copy_bytes = max(int(single_copy_bytes), ll_bytes + 1) if single_copy_bytes > 0 else 0
        #: Messages above this take the slots (0: no bound; LandingConfig.single_copy_max_bytes).
        self.single_copy_max_bytes = max(0, int(single_copy_max_bytes))
        #: At most this many bytes per read of such a message (0: one read; see LandingConfig).
        self.single_copy_slice_bytes = max(0, int(single_copy_slice_bytes))
        self.watcher = MemoryWatcher(flags.memory, world.driver.waiter)
        self.ll_watcher = SlotWatcher(ll.memory, world.driver.waiter)
        self._ll_mem = self.ll_watcher.memory  # the LL window's words as uint64
        # A decoded LL message's bytes, one buffer per size, reused: its consumer takes it at once.
        self._ll_payloads: dict[int, np.ndarray] = {}
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._done.set_result(None)
        # per-pair counts of signals and data chunks (sent, expected)
        self._sig_sent = [0] * size
        self._sig_expected = [0] * size
        self._chunks_sent = [0] * size
        self._chunks_expected = [0] * size
        self._credit_written = [0] * size  # the credit last written back to each source
        self._ll_sent = [0] * size
        self._ll_expected = [0] * size
        self._ll_credit_written = [0] * size
        self._ll_recv_tail: list[asyncio.Future[None]] = [self._done] * size
        # per-pair chains: a message to/from a peer starts only after the previous one finished
        self._send_tail: list[asyncio.Future[None]] = [self._done] * size
        self._recv_tail: list[asyncio.Future[None]] = [self._done] * size
        self.failure: BaseException | None = None

    @classmethod
    async def open(cls, world: World, config: LandingConfig | None = None) -> Landing:
        """Collective: create both landing windows and open their epochs."""
        config = config or DEFAULT_CONFIG
        slot_bytes, slots = config.resolve(world.size)
        ll_bytes, ll_slots = config.resolve_ll(world.size)
        # Used only under lock_all(MODE_NOCHECK): no rank ever writes their control regions, so a
        # poll does not look at them (peers_write_control=False).
        flags = await world.create_window(
            None,
            4 * world.size,
            np.dtype(np.int64),
            Info(),
            win_id=FLAGS_WIN_ID,
            notify=True,
            peers_write_control=False,
        )
        data_count = world.size * slots * slot_bytes
        data = await world.create_window(
            None, data_count, np.dtype(np.uint8), Info(), win_id=DATA_WIN_ID, peers_write_control=False
        )
        # At least one word, so that the window exists (and is freed) on every rank alike.  A flush
        # towards a rank rings it (notify), as for the flags: an LL message is its own flag.
        ll_count = max(1, world.size * ll_slots * (ll_bytes // 4))
        ll = await world.create_window(
            None,
            ll_count,
            np.dtype(np.int64),
            Info(),
            win_id=LL_WIN_ID,
            notify=True,
            peers_write_control=False,
        )
        on_node = getattr(world.endpoint, "ranks_on_node", 1)
        single_copy = config.resolve_single_copy(on_node, os.cpu_count() or 1)
        landing = cls(
            world,
            flags,
            data,
            slot_bytes,
            slots,
            ll,
            ll_bytes,
            ll_slots,
            single_copy,
            config.single_copy_max_bytes,
            config.single_copy_slice_bytes,
        )
        await landing._flags.opened
        await landing._data.opened
        await landing._ll.opened
        return landing

    async def close(self) -> None:
        """Collective: close the epochs (every RMA complete at its target) and free the windows."""
        self.watcher.close()
        self.ll_watcher.close()
        await self._flags.close()
        await self._data.close()
        await self._ll.close()

    def progress(self) -> None:
        """Drive the transport once and re-check the flags (``Request.test`` of a collective)."""
        self._progress()
        self.watcher.check()
        self.ll_watcher.check()

    def fail(self, exc: BaseException) -> list[asyncio.Future[None]]:
        """Fail every pending wait for a flag or an LL slot, and every later one (a peer failed:
        what we wait for may never come); the futures it failed."""
        return self.watcher.fail(exc) + self.ll_watcher.fail(exc)

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

    def span(self, nbytes: int) -> int:
        """Slots per chunk of an ``nbytes`` message: 1 up to one slot, else the smallest power of
        two of slots that holds the message, at most :attr:`widest`."""
        if nbytes <= self.slot_bytes:
            return 1
        return min(self.widest, 1 << (math.ceil(nbytes / self.slot_bytes) - 1).bit_length())

    def chunks(self, nbytes: int, span: int = 1) -> int:
        return math.ceil(nbytes / (self.slot_bytes * span))

    @staticmethod
    def _aligned(ordinal: int, span: int) -> int:
        """The first ordinal from ``ordinal`` on where a chunk of ``span`` slots may start."""
        return -(-ordinal // span) * span

    def send(
        self, dst: int, data: np.ndarray, part_of: int | None = None, via_slots: bool = False
    ) -> Awaitable[None]:
        """Send the bytes of ``data`` (1-D uint8, contiguous) to ``dst``, which must receive
        exactly as many bytes from us at the same point of the same collective.  The numbering is
        fixed at the call; the awaitable finishes when every chunk is flagged at ``dst`` (a
        single-copy message: once ``dst`` has copied it out), after which ``data`` may be
        reused.  One not finished inside the call moves only while it is awaited: await it
        together with the step's receives (``await_all``), never after them.

        ``part_of``: ``data`` is one chunk, handed to a :meth:`recv_with` consumer, of a message
        of ``part_of`` bytes, forwarded as it arrives (``dst`` receives the whole message at
        once).  The message's size, not the chunk's, decides whether it travels as an LL message.

        ``via_slots``: the message takes the slots even where it could travel in one copy, because
        ``dst`` receives it with a consumer that is not an :class:`Into` — it combines it
        (``recv_reduce``: combining straight from a slot costs less than reading the message out
        of our process first), or it is a gather's root, taking many messages at once
        (docs/benchmarks.md, *Large messages in one copy*)."""
        nbytes = int(data.size)
        if nbytes == 0:
            return self._done
        message = nbytes if part_of is None else part_of
        if message <= self.ll_bytes:
            return self._send_ll(dst, data)
        if not via_slots and self.single_copy(dst, message):
            if nbytes != message:
                raise ValueError(
                    f"a message of {message} bytes to rank {dst} is read in one copy: "
                    "send it whole, not in pieces"
                )
            return self._send_reference(dst, data)
        return self._send_slots(dst, data, message)

    def _send_slots(self, dst: int, data: np.ndarray, message: int) -> Awaitable[None]:
        """:meth:`send` through the data slots: ``data`` is the message or a piece of it
        (``message`` bytes in all)."""
        nbytes = int(data.size)
        # A forwarded piece is one chunk of the whole message: its width is the message's, as the
        # receiver computes it.
        span = self.span(message)
        count = self.chunks(nbytes, span)
        first = self._aligned(self._chunks_sent[dst], span)
        if count == 1 and self._send_tail[dst].done():
            sent = self._send_now(dst, data, first, span)
            if sent is not None:
                return sent
        self._chunks_sent[dst] = first + count * span
        before, self._send_tail[dst] = self._send_tail[dst], self._loop.create_future()
        return self._send(dst, data, first, count, span, before, self._send_tail[dst])

    def _send_now(self, dst: int, data: np.ndarray, ordinal: int, span: int) -> asyncio.Future[None] | None:
        """Send a one-chunk message inside the call when its slots at ``dst`` are free (credit)
        and no earlier message to ``dst`` is in flight: one notified put
        (:meth:`Window.put_signal`: the data, then its flag once the data is complete at
        ``dst``).  Returns what the sender awaits (finished when the put and flag completed inside
        the call), or None when the slots are not free yet (the general path then waits for the
        credit)."""
        end = ordinal + span
        if self._flag_mem[self.CREDIT + dst] < end - self.slots:
            return None
        disp = (self.rank * self.slots + ordinal % self.slots) * self.slot_bytes
        self._chunks_sent[dst] = end
        if not self._words_whole[dst]:
            return self._put_then_flag(dst, data, disp, end)
        sent = self._data.win.put_signal(data, dst, disp, self._flags.win, self.DATA + self.rank, end)
        if sent.done() and sent.exception() is None:
            return self._done
        tail = self._send_tail[dst] = self._loop.create_future()
        sent.add_done_callback(lambda request: finish_as(tail, request))
        return tail

    def _put_then_flag(self, dst: int, data: np.ndarray, disp: int, end: int) -> asyncio.Future[None]:
        """:meth:`_send_now` towards another node: the put and its flush (inside the call where
        the network completes it), then the flag, an accumulate that is issued, not waited for
        (:meth:`_write_words`) — a ``put_signal`` would wait for the flag to land."""
        win = self._data.win
        win.put(data, dst, disp)
        flushed = win.flush(dst)
        if flushed.done() and flushed.exception() is None:
            self._raise_flag(dst, self.DATA + self.rank, end)
            return self._done
        tail = self._send_tail[dst] = self._loop.create_future()

        def then(request: Request) -> None:
            error = request.exception()
            if error is None:
                try:
                    self._raise_flag(dst, self.DATA + self.rank, end)
                except Exception as exc:  # the window failed or closed meanwhile
                    error = exc
            if tail.done():
                return
            if error is None:
                tail.set_result(None)
            else:
                tail.set_exception(error)

        flushed.add_done_callback(then)
        return tail

    def recv(self, src: int, out: np.ndarray) -> Awaitable[None]:
        """Receive ``out.size`` bytes from ``src`` into ``out`` (1-D uint8, contiguous)."""
        return self.recv_with(src, int(out.size), Into(out))

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
        target = None if out is None else out.reshape(-1)
        return self.recv_with(src, int(acc.nbytes), combiner(op, acc.reshape(-1), incoming_higher, target))

    def recv_with(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]:
        """Receive ``nbytes`` from ``src``, handing each chunk to ``consume(slot, lo, hi)`` (the
        chunk's bytes and its byte range in the message) while it is still in the slot.  An
        :class:`Into` consumer of a single-copy message gets the bytes copied straight into its
        target instead (then only its ``landed`` is called); any other consumer takes the slots,
        and its sender sent ``via_slots``."""
        if nbytes == 0:
            return self._done
        if nbytes <= self.ll_bytes:
            return self._recv_ll(src, nbytes, consume)
        if isinstance(consume, Into) and self.single_copy(src, nbytes):
            return self._recv_reference(src, nbytes, consume)
        return self._recv_slots(src, nbytes, consume)

    def _recv_slots(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]:
        """:meth:`recv_with` through the data slots."""
        span = self.span(nbytes)
        count = self.chunks(nbytes, span)
        first = self._aligned(self._chunks_expected[src], span)
        self._chunks_expected[src] = first + count * span
        if count == 1 and self._flag_mem[self.DATA + src] >= first + span and self._recv_tail[src].done():
            # Landed already, and nothing earlier from src is still being received: take it now.
            start = (src * self.slots + first % self.slots) * self.slot_bytes
            consume(self._data_mem[start : start + nbytes], 0, nbytes)
            self._consumed(src, first + span)
            return self._done
        before, self._recv_tail[src] = self._recv_tail[src], self._loop.create_future()
        return self._recv(src, nbytes, consume, first, count, span, before, self._recv_tail[src])

    async def _send(
        self,
        dst: int,
        data: np.ndarray,
        first: int,
        count: int,
        span: int,
        before: asyncio.Future[None],
        done: asyncio.Future[None],
    ) -> None:
        try:
            if not before.done():
                await asyncio.wait([before])
            slots, nbytes = self.slots, int(data.size)
            chunk_bytes = self.slot_bytes * span
            base = self.rank * slots
            win = self._data.win
            sent = 0
            while sent < count:
                ordinal = first + sent * span
                await self.watcher.wait(self.CREDIT + dst, ordinal + span - slots)
                credit = int(self._flag_mem[self.CREDIT + dst])
                batch = min(count - sent, (credit + slots - ordinal) // span)
                if chunk_bytes >= _PIPELINE_BYTES:
                    # Large chunks are flagged one by one, so the receiver copies chunk o out
                    # while we put chunk o+1 (one flush and flag more per chunk, cheap next to
                    # the copy); small ones share a flush and a flag.
                    batch = 1
                for j in range(batch):
                    lo = (sent + j) * chunk_bytes
                    disp = (base + (ordinal + j * span) % slots) * self.slot_bytes
                    win.put(data[lo : min(nbytes, lo + chunk_bytes)], dst, disp)
                flushed = win.flush(dst)
                if self.polling and not flushed.done():
                    # A polled transport carries the flush out at its next poll: do that poll now
                    # rather than a turn of the event loop later.
                    self._progress()
                await flushed
                sent += batch
                self._raise_flag(dst, self.DATA + self.rank, first + sent * span)
        finally:
            done.set_result(None)

    async def _recv(
        self,
        src: int,
        nbytes: int,
        consume: Consume,
        first: int,
        count: int,
        span: int,
        before: asyncio.Future[None],
        done: asyncio.Future[None],
    ) -> None:
        try:
            if not before.done():
                await asyncio.wait([before])
            slots = self.slots
            chunk_bytes = self.slot_bytes * span
            base = src * slots
            memory = self._data_mem
            got = 0
            while got < count:
                ordinal = first + got * span
                if (
                    span > 1
                    and ordinal + span - slots > self._credit_written[src]
                    and self._flag_mem[self.DATA + src] < ordinal + span
                ):
                    # Everything before ``ordinal`` is consumed; the sender needs credit
                    # ordinal + span - K for this chunk, which the every-K rule may still owe.
                    self._credit_written[src] = ordinal
                    self._raise_flag(src, self.CREDIT + self.rank, ordinal)
                await self.watcher.wait(self.DATA + src, ordinal + span)
                batch = min(count - got, (int(self._flag_mem[self.DATA + src]) - ordinal) // span)
                for j in range(batch):
                    lo = (got + j) * chunk_bytes
                    hi = min(nbytes, lo + chunk_bytes)
                    start = (base + (ordinal + j * span) % slots) * self.slot_bytes
                    consume(memory[start : start + hi - lo], lo, hi)
                got += batch
                self._consumed(src, first + got * span)
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

    # ------------------------------------------------------------------ single-copy messages

    def single_copy(self, peer: int, nbytes: int) -> bool:
        """Whether a message of ``nbytes`` to or from ``peer`` travels in one copy: the receiver
        reads it out of the sender's buffer.  Both ends give the same answer (the transport's
        ``reads_memory_of`` is symmetric, the threshold the Comm's).  Such a message is sent
        whole: a tree forwards it once it has all of it."""
        bound = self.single_copy_max_bytes
        if bound and nbytes > bound:
            return False
        return 0 < self.single_copy_bytes <= nbytes and self._readable[peer]

    def _send_reference(self, dst: int, data: np.ndarray) -> Awaitable[None]:
        """Send where ``data`` is (its address and size, one chunk through the data slots); the
        awaitable finishes once ``dst`` has copied the bytes out — it raises our credit past that
        chunk at once — so ``data`` stays referenced, and unchanged, until then."""
        where = np.array([data.ctypes.data, data.size], dtype=np.int64).view(np.uint8)
        sent = self._send_slots(dst, where, _WHERE_BYTES)
        read = self._chunks_sent[dst]  # the descriptor's ordinal + 1
        if isinstance(sent, asyncio.Future) and sent.done() and sent.exception() is None:
            copied = self.watcher.wait(self.CREDIT + dst, read)
            if not copied.done():
                copied.add_done_callback(lambda _: data)  # keeps the buffer alive meanwhile
            return copied
        return self._sent_then_copied(sent, dst, read, data)

    async def _sent_then_copied(self, sent: Awaitable[None], dst: int, read: int, data: np.ndarray) -> None:
        await sent
        await self.watcher.wait(self.CREDIT + dst, read)
        assert data is not None  # referenced until here (this frame holds it): dst reads it

    def _recv_reference(self, src: int, nbytes: int, consume: Into) -> Awaitable[None]:
        """Receive a single-copy message: take the chunk saying where it is through the slots
        (inside the call when it has landed and nothing earlier from ``src`` is pending), copy
        the message out of ``src``'s memory, then raise ``src``'s credit past that chunk at once
        (the sender waits for it; the slots' every-``K`` rule would hold it up).  A message
        longer than one slice is copied slice by slice, with a turn of the event loop between
        two (:meth:`_copy_in_slices`)."""
        ordinal = self._chunks_expected[src]  # the chunk's (one slot: nothing to skip)
        if not 0 < self.single_copy_slice_bytes < nbytes:

            def take(slot: np.ndarray, _lo: int, _hi: int) -> None:
                self._copy_reference(src, self._address(src, slot, nbytes), 0, nbytes, nbytes, consume)
                self._credit_written[src] = ordinal + 1
                self._raise_flag(src, self.CREDIT + self.rank, ordinal + 1)

            return self._recv_slots(src, _WHERE_BYTES, take)
        where = np.empty(_WHERE_BYTES, np.uint8)

        def keep(slot: np.ndarray, _lo: int, _hi: int) -> None:
            where[:] = slot
            # Counted as written back, so that the slots' every-K rule does not raise the credit
            # past this chunk before the copy is done: that credit frees the sender's buffer.
            self._credit_written[src] = ordinal + 1

        received = self._recv_slots(src, _WHERE_BYTES, keep)
        # Nothing later from src is taken before the copy is done (a later chunk's credit would
        # free the sender's buffer too): the chain waits for it.
        self._recv_tail[src] = self._loop.create_future()
        return self._copy_in_slices(src, where, nbytes, consume, ordinal, received, self._recv_tail[src])

    async def _copy_in_slices(
        self,
        src: int,
        where: np.ndarray,
        nbytes: int,
        consume: Into,
        ordinal: int,
        received: Awaitable[None],
        done: asyncio.Future[None],
    ) -> None:
        try:
            await received
            address = self._address(src, where, nbytes)
            step = self.single_copy_slice_bytes
            if consume.landed is not None:  # whole pieces of the slot path (_copy_reference)
                piece = self.slot_bytes * self.span(nbytes)
                step = max(piece, step // piece * piece)
            for lo in range(0, nbytes, step):
                if lo:
                    await asyncio.sleep(0)  # the rank's other tasks and timers, between two reads
                self._copy_reference(src, address, lo, min(nbytes, lo + step), nbytes, consume)
            self._raise_flag(src, self.CREDIT + self.rank, ordinal + 1)
        finally:
            done.set_result(None)

    @staticmethod
    def _address(src: int, where: np.ndarray, nbytes: int) -> int:
        """The address in ``src``'s memory that the chunk ``where`` gives, checked against the
        size this rank receives."""
        address, size = (int(word) for word in where.view(np.int64))
        if size != nbytes:
            raise RmaUsageError(
                f"rank {src} sent a message of {size} bytes where this rank receives {nbytes}: "
                "the ranks called different collectives or sizes"
            )
        return address

    def _copy_reference(self, src: int, address: int, lo: int, hi: int, nbytes: int, consume: Into) -> None:
        """Copy bytes ``lo:hi`` of the ``nbytes``-byte message at ``address`` in ``src``'s memory
        into the consumer's target."""
        read, target, landed = self._endpoint.read_memory, consume.target, consume.landed
        if landed is None:
            read(src, address + lo, target[lo:hi])
            return
        # In the slot path's chunks: a tree forwards each as it lands, and children that take the
        # slots expect those.  (``lo`` is a multiple of a piece: _copy_in_slices.)
        piece = self.slot_bytes * self.span(nbytes)
        for start in range(lo, hi, piece):
            end = min(hi, start + piece)
            read(src, address + start, target[start:end])
            landed(start, end)

    # ------------------------------------------------------------------ LL messages

    def _send_ll(self, dst: int, data: np.ndarray) -> Awaitable[None]:
        """Send a small message as LL words (the data is copied into them at the call, so it may
        be reused at once): one put and one flush, inside the call when the LL slot at ``dst`` is
        free.  LL messages to one peer need no chain: each lands in its own slot, which the
        receiver reads only when all its words carry that message's flag, and a later message's
        credit implies the earlier one's."""
        ordinal = self._ll_sent[dst]
        self._ll_sent[dst] = ordinal + 1
        flag = flag_of(ordinal)
        # One word as a Python int: a notice's cheapest form (no array to check).
        words = encode_word(data, flag) if data.size <= 4 else encode(data, flag)
        disp = (self.rank * self.ll_slots + ordinal % self.ll_slots) * self.ll_words
        needed = ordinal + 1 - self.ll_slots
        if self._flag_mem[self.LL_CREDIT + dst] >= needed:
            return self._put_ll(dst, words, disp)
        return self._send_ll_later(dst, words, disp, needed)

    async def _send_ll_later(self, dst: int, words: np.ndarray | int, disp: int, needed: int) -> None:
        await self.watcher.wait(self.LL_CREDIT + dst, needed)
        await self._put_ll(dst, words, disp)

    def _put_ll(self, dst: int, words: np.ndarray | int, disp: int) -> Awaitable[None]:
        """Write the words (:meth:`_write_words`: one :meth:`Window.notify`; on this node stores
        inside the call).

        The send is complete once the notice is issued: the words are a copy, so nothing waits
        for them to land — as a data-slot message is sent once its flag is issued.  That matters
        between nodes, where the notice is an accumulate that ``dst``'s progress applies
        (docs/architecture.md, *One put per small message*): the sender does not wait for it."""
        self._write_words(self._ll.win, dst, disp, words)
        return self._done

    def _recv_ll(self, src: int, nbytes: int, consume: Consume) -> Awaitable[None]:
        """Receive a small message from its LL slot: inside the call when it has landed and
        nothing earlier from ``src`` is still being received (consumption stays in order, which
        the credits count on)."""
        ordinal = self._ll_expected[src]
        self._ll_expected[src] = ordinal + 1
        lo = (src * self.ll_slots + ordinal % self.ll_slots) * self.ll_words
        hi = lo + words_for(nbytes)
        flag = flag_of(ordinal)
        before = self._ll_recv_tail[src]
        if before.done():
            payload = self._ll_payload(lo, flag, nbytes)
            if payload is not None:
                consume(payload, 0, nbytes)
                self._ll_consumed(src, ordinal + 1)
                return self._done
        done = self._ll_recv_tail[src] = self._loop.create_future()
        receive = LLReceive(self, src, nbytes, consume, ordinal, flag, lo, hi, done)
        return receive if before.done() else self._recv_ll_after(before, receive)

    async def _recv_ll_after(self, before: asyncio.Future[None], receive: LLReceive) -> None:
        """``receive`` once the receive before it from the same source is done (consumption
        stays in order)."""
        try:
            await asyncio.wait([before])
        except BaseException:
            receive.close()
            raise
        await receive

    def _ll_payload(self, lo: int, flag: int, nbytes: int) -> np.ndarray | None:
        """The ``nbytes`` of the LL message in the slot from word ``lo`` on when every word carries
        ``flag`` (:func:`~.ll.decode_into`), else None.  The bytes are in a buffer this landing
        reuses for the next message of their size: the caller hands them to its consumer at once,
        which copies or combines them (as it does a chunk still in a data slot)."""
        out = self._ll_payloads.get(nbytes)
        if out is None:
            out = self._ll_payloads[nbytes] = np.empty(nbytes, np.uint8)
        return out if decode_into(out, self._ll_mem, lo, flag) else None

    def _ll_consumed(self, src: int, consumed: int) -> None:
        """As :meth:`_consumed`, for LL slots: credits go back once every ``L`` messages."""
        if consumed - self._ll_credit_written[src] >= self.ll_slots:
            self._ll_credit_written[src] = consumed
            self._raise_flag(src, self.LL_CREDIT + self.rank, consumed)

    # ------------------------------------------------------------------ flags

    def _write_words(self, win: Window, dst: int, index: int, words: np.ndarray | int) -> None:
        """Write int64 ``words`` (or one word) at ``index`` of ``dst``'s ``win``, each seen whole
        by ``dst``, whose collectives read them while they may be landing: a
        :meth:`Window.notify`, not waited for (a failure reaches the collectives through the
        Comm's failure).  On this node stores into ``dst``'s memory, mapped here, inside the
        call; towards another node, where a put's bytes may land in pieces, accumulates with
        REPLACE, which MPI applies element by element (docs/architecture.md, *One put per small
        message*).  No order is needed with anything but the earlier writes of the same words,
        which a notice keeps (an LL slot is rewritten only after its credit, a flag only
        grows); the windows' free completes them."""
        win.notify(dst, index, words)

    def _raise_flag(self, dst: int, index: int, value: int) -> None:
        """Set ``dst``'s ``flags[index]`` to ``value`` (:meth:`_write_words`).  Every flag has one
        writer (this rank) and only grows, so on this node a plain store is enough (no atomic);
        towards another node an accumulate with REPLACE, which lands whole.  Either way a later
        value never lands before an earlier one (a notice keeps the order of one word's
        writes)."""
        self._write_words(self._flags.win, dst, index, value)


class LLReceive:
    """The rest of a small message's receive whose words had not all landed at the call: a state
    machine that an :class:`~.exchange.Exchange` steps in place (:meth:`step`), or an awaitable for
    any other caller — no coroutine per receive (its frame, and the ``StopIteration`` that ends
    it, cost more than the steps).  It takes its source's turn: the next receive from that source
    waits until this one is :meth:`close`-d (consumed, failed or abandoned)."""

    __slots__ = (
        "_consume",
        "_done",
        "_flag",
        "_hi",
        "_landing",
        "_lo",
        "_nbytes",
        "_ordinal",
        "_src",
        "_waiting",
    )

    def __init__(
        self,
        landing: Landing,
        src: int,
        nbytes: int,
        consume: Consume,
        ordinal: int,
        flag: int,
        lo: int,
        hi: int,
        done: asyncio.Future[None],
    ) -> None:
        self._landing = landing
        self._src = src
        self._nbytes = nbytes
        self._consume = consume
        self._ordinal = ordinal
        self._flag = flag  # flag_of(ordinal)
        self._lo = lo
        self._hi = hi
        self._done = done  # the source's turn, finished by close()
        self._waiting: asyncio.Future[None] | None = None  # the slot watcher's, while it waits

    def step(self) -> asyncio.Future[None] | None:
        """Consume the message if every word of it has landed (and send the credit back when
        due): None.  Else the future to wait for before stepping again.  Raises what the wait
        or the consumer raised (the receive is then closed)."""
        waiting = self._waiting
        if waiting is not None:
            if not waiting.done():
                return waiting
            self._waiting = None
            try:
                waiting.result()  # a failed rank fails the watcher's waits
            except BaseException:
                self.close()
                raise
        landing = self._landing
        payload = landing._ll_payload(self._lo, self._flag, self._nbytes)
        if payload is None:
            self._waiting = waiting = landing.ll_watcher.wait_slot(self._lo, self._hi, self._flag)
            return waiting
        try:
            self._consume(payload, 0, self._nbytes)
            landing._ll_consumed(self._src, self._ordinal + 1)
        finally:
            self.close()
        return None

    def close(self) -> None:
        """End this receive's turn: later receives from its source may go on."""
        if not self._done.done():
            self._done.set_result(None)

    def __await__(self) -> Generator[Any, None, None]:
        try:
            while (waiting := self.step()) is not None:
                yield from waiting
        finally:
            self.close()


class Into:
    """A receive's consumer that copies each chunk to ``target[lo:hi]`` (1-D uint8), then tells
    ``landed(lo, hi)`` (a tree forwards the piece).  The landing copies a single-copy message
    straight into ``target`` instead of handing it over from a slot."""

    __slots__ = ("landed", "target")

    def __init__(self, target: np.ndarray, landed: Callable[[int, int], None] | None = None) -> None:
        self.target = target
        self.landed = landed

    def __call__(self, slot: np.ndarray, lo: int, hi: int) -> None:
        copy_bytes(self.target[lo:hi], slot)
        if self.landed is not None:
            self.landed(lo, hi)

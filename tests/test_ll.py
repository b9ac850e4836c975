"""LL messages (aiorma/collectives/ll.py): the word format, the landing protocol with tiny LL
slots, and — under mpiexec — that the transport never lets a reader see a torn word."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import numpy as np
import pytest

import aiorma
from aiorma.bench._launch import emulation_unavailable
from aiorma.collectives import landing, ll
from aiorma.collectives.landing import LandingConfig
from aiorma.collectives.ll import decode, encode, encode_word, flag_of, words_for
from aiorma.runtime import run_ranks

from .mpi_harness import REPO_ROOT, run_mpi_json
from .mpi_scripts.collectives_check import QUICK, run_checks
from .native_forms import compiled
from .tearing_network import TearingNetwork


@pytest.mark.parametrize("nbytes", [1, 3, 4, 5, 6, 7, 8, 9, 17, 32, 33, 1024])
def test_words_round_trip(nbytes: int) -> None:
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    words = encode(data, flag_of(41))
    assert words.dtype == np.int64 and words.size == words_for(nbytes)
    assert words.flags.writeable  # mpi4py refuses a read-only origin on some transport paths
    got = decode(words, flag_of(41), nbytes)
    assert got is not None and got.tobytes() == data.tobytes()


@pytest.mark.parametrize("nbytes", [1, 4, 5, 8, 32])
@pytest.mark.parametrize("ordinal", [0, 2**31 - 1, 2**31, 2**32 - 2])
def test_words_carry_every_flag(nbytes: int, ordinal: int) -> None:
    """Flags of 2**31 and more make the words negative int64 values (what ``Window.signal``
    writes); they decode from the window's memory, and only with their own flag."""
    data = np.arange(1, nbytes + 1, dtype=np.uint8)
    memory = encode(data, flag_of(ordinal)).copy()
    got = decode(memory, flag_of(ordinal), nbytes)
    assert got is not None and got.tobytes() == data.tobytes()
    assert decode(memory, flag_of(ordinal + 1), nbytes) is None


@pytest.mark.parametrize("nbytes", [1, 2, 3, 4])
@pytest.mark.parametrize("ordinal", [0, 2**31 - 1, 2**31, 2**32 - 2])
def test_one_word_messages_are_signal_values(nbytes: int, ordinal: int) -> None:
    """A message of at most 4 bytes is one word, sent as the int64 value ``Window.signal``
    writes (flags of 2**31 and more make it negative); it decodes from the window's memory."""
    data = np.arange(1, nbytes + 1, dtype=np.uint8)
    value = encode_word(data, flag_of(ordinal))
    assert -(2**63) <= value < 2**63
    memory = np.array([value], np.int64)
    assert (memory == encode(data, flag_of(ordinal))).all()
    got = decode(memory, flag_of(ordinal), nbytes)
    assert got is not None and got.tobytes() == data.tobytes()
    assert decode(memory, flag_of(ordinal + 1), nbytes) is None


def test_a_word_without_the_flag_means_not_landed() -> None:
    """Any word still carrying an older message's flag (or the initial 0) keeps the message
    unlanded, wherever it is in the slot."""
    for nbytes, positions in ((40, (0, 5, 9)), (8, (0, 1)), (5, (0, 1))):
        data = np.arange(nbytes, dtype=np.uint8)
        for stale_flag in (0, flag_of(6)):
            for position in positions:
                words = encode(data, flag_of(7))
                words[position] = encode(data[:4], stale_flag)[0]
                assert decode(words, flag_of(7), nbytes) is None


def _compiled_codec() -> Any:
    return compiled(ll.COMPILED, "LL codec", "the Python codec runs, which the tests above cover")


@pytest.mark.parametrize("nbytes", [1, 3, 4, 5, 8, 9, 32, 33, 300, 1024])
@pytest.mark.parametrize("ordinal", [0, 2**31, 2**32 - 2])
def test_the_compiled_codec_writes_and_reads_the_python_codecs_words(nbytes: int, ordinal: int) -> None:
    """The C codec's words are the Python codec's, bit for bit; it decodes them from anywhere in
    the window's memory, and a word with another flag anywhere leaves the message unlanded and
    the output untouched (longer than its stack buffer too: 1024 bytes are 256 words)."""
    codec = _compiled_codec()
    data = np.random.default_rng(nbytes + ordinal).integers(0, 256, nbytes, dtype=np.uint8)
    flag = flag_of(ordinal)
    words = np.zeros(words_for(nbytes), np.int64)
    assert codec.encode_into(words, data, flag) is None
    assert words.tobytes() == ll.encode_python(data, flag).tobytes()
    memory = np.zeros(words.size + 3, np.uint64)
    memory[2 : 2 + words.size] = words.view(np.uint64)
    out = np.zeros(nbytes, np.uint8)
    assert codec.decode_into(out, memory, 2, flag) is True
    assert out.tobytes() == data.tobytes()
    for position in sorted({0, words.size // 2, words.size - 1}):
        stale = memory.copy()
        stale[2 + position] = ll.encode_python(data[:4], flag_of(ordinal + 1)).view(np.uint64)[0]
        untouched = np.full(nbytes, 7, np.uint8)
        assert codec.decode_into(untouched, stale, 2, flag) is False
        assert (untouched == 7).all()


def test_the_compiled_codec_refuses_what_does_not_fit() -> None:
    codec = _compiled_codec()
    with pytest.raises(ValueError, match="words"):
        codec.encode_into(np.zeros(1, np.int64), np.zeros(5, np.uint8), 1)  # 5 bytes: 2 words
    with pytest.raises(ValueError, match="32-bit"):
        codec.encode_into(np.zeros(2, np.int64), np.zeros(8, np.uint8), 2**32)
    with pytest.raises(ValueError, match="words"):
        codec.decode_into(np.zeros(8, np.uint8), np.zeros(3, np.uint64), 2, 1)  # words 2 and 3 of 3
    with pytest.raises(ValueError, match="words"):
        codec.decode_into(np.zeros(8, np.uint8), np.zeros(3, np.uint64), -1, 1)
    with pytest.raises((BufferError, ValueError)):
        codec.decode_into(np.zeros(8, np.uint8)[::2], np.zeros(3, np.uint64), 0, 1)


@pytest.mark.parametrize("nbytes", [3, 8, 40])
def test_decode_into_leaves_the_buffer_alone_until_the_message_landed(nbytes: int) -> None:
    """``decode_into`` (whichever form runs): False and the caller's buffer as it was while a word
    of the message is missing, True and the payload once all landed."""
    data = np.arange(1, nbytes + 1, dtype=np.uint8)
    words = encode(data, flag_of(3))
    memory = np.zeros(words.size + 1, np.uint64)
    memory[1:] = words.view(np.uint64)
    memory[-1] = 0  # the last word not landed yet
    out = np.full(nbytes, 9, np.uint8)
    assert ll.decode_into(out, memory, 1, flag_of(3)) is False
    assert (out == 9).all()
    memory[-1] = words.view(np.uint64)[-1]
    assert ll.decode_into(out, memory, 1, flag_of(3)) is True
    assert out.tobytes() == data.tobytes()


def test_flags_never_repeat_on_a_slot_and_are_never_zero() -> None:
    assert flag_of(0) == 1 and flag_of(2**32 - 2) == 2**32 - 1
    for slots in (1, 2, 8):
        assert all(flag_of(o) != flag_of(o - slots) for o in range(slots, 100))


TINY_LL = [(2, 0, 1), (3, 16, 1), (4, 8, 2), (5, 64, 3)]
TINY_CASES = [(n, ll, slots, name) for n, ll, slots in TINY_LL for name in QUICK]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("size", "ll_bytes", "ll_slots", "name"),
    TINY_CASES,
    ids=[f"{size}-ll{ll}x{slots}-{name}" for size, ll, slots, name in TINY_CASES],
)
def test_tiny_ll_slots(
    monkeypatch: pytest.MonkeyPatch, size: int, ll_bytes: int, ll_slots: int, name: str
) -> None:
    """With one to three LL slots per peer, LL messages wait for credits, and LL and chunked
    messages between one pair interleave (the data slots are small too): every check of the
    battery must still agree with numpy.  ``ll_bytes=0``: no LL message at all."""
    config = LandingConfig(slot_bytes=32, slots_per_peer=2, ll_bytes=ll_bytes, ll_slots=ll_slots)
    monkeypatch.setattr(landing, "DEFAULT_CONFIG", config)
    assert aiorma.run(functools.partial(run_checks, names=[name]), nprocs=size) == [[name]] * size


def test_ll_config() -> None:
    assert LandingConfig().resolve_ll(4) == (8, 8)  # a float64 is one LL message
    assert LandingConfig(ll_bytes=1024).resolve_ll(4) == (1024, 8)
    assert LandingConfig(ll_bytes=0).resolve_ll(4) == (0, 0)
    assert LandingConfig(ll_bytes=4096, budget_bytes=1 << 20).resolve_ll(64) == (4096, 2)
    assert LandingConfig(ll_bytes=4096, budget_bytes=1 << 10).resolve_ll(64) == (4096, 1)
    with pytest.raises(ValueError, match="multiple of 4"):
        LandingConfig(ll_bytes=6).resolve_ll(2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("ll_bytes", [8, 1024])
def test_collectives_never_take_a_torn_word(monkeypatch: pytest.MonkeyPatch, ll_bytes: int) -> None:
    """On a network whose puts leave words half-written for a while (flag half first: the worst
    case for an LL word), the quick battery still agrees with numpy on every rank: LL words and
    flags towards another rank are written with accumulates, which land whole.  The default
    (messages up to 8 bytes as LL messages, one or two words) and multi-word LL messages."""
    monkeypatch.setattr(landing, "DEFAULT_CONFIG", LandingConfig(ll_bytes=ll_bytes))
    network = TearingNetwork(3)

    async def main(comm: aiorma.Comm) -> list[str]:
        passed = await run_checks(comm, QUICK)
        writes = network.endpoints[comm.rank].writes
        assert ("accumulate/REPLACE", 1) in writes or ("accumulate/REPLACE", 2) in writes, writes
        return passed

    async def all_ranks() -> list[list[str]]:
        return await run_ranks(main, (), network)

    assert asyncio.run(all_ranks()) == [QUICK] * 3


TORN = REPO_ROOT / "tests" / "mpi_scripts" / "ll_torn_words.py"
BATTERY = REPO_ROOT / "tests" / "mpi_scripts" / "ll_battery.py"


#: Where the ranks run: one node; two emulated nodes; the same with UCX, the wheel's network module,
#: kept to TCP, which delivers a put only with the target's progress (the emulated nodes' default,
#: cross-memory attach, needs none: docs/architecture.md, *Across nodes*).
NETWORKS = [(1, None), (2, None), (2, {"UCX_TLS": "tcp,self"})]
NETWORK_IDS = ["one_node", "two_emulated_nodes", "two_emulated_nodes_tcp"]


@pytest.mark.mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize(("nodes", "env"), NETWORKS, ids=NETWORK_IDS)
def test_battery_with_multiword_ll_under_mpiexec(nodes: int, env: dict[str, str] | None) -> None:
    """The quick battery under mpiexec with LL messages up to 1 KiB in 2 slots per peer (the
    default sends only one-word messages as LL): every check must pass on every rank."""
    if nodes == 2 and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    emulate = nodes if nodes > 1 else 0
    ranks = run_mpi_json(BATTERY, 3, "1024", "2", timeout=360, emulate_nodes=emulate, env=env)
    assert ranks == [QUICK] * 3


# Long messages on one node only: between nodes every run of two words is an accumulate of its
# own (hundreds per message: a minute a case), which a long message adds nothing to.
TORN_CASES = [(1024, "4,8,64,1024", *network) for network in NETWORKS]
TORN_CASES.append((4096, "2048,4096", *NETWORKS[0]))
TORN_IDS = [f"1024-{name}" for name in NETWORK_IDS] + [f"4096-{NETWORK_IDS[0]}"]


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("ll_bytes", "sizes", "nodes", "env"), TORN_CASES, ids=TORN_IDS)
def test_no_torn_words_under_mpiexec(
    ll_bytes: int, sizes: str, nodes: int, env: dict[str, str] | None
) -> None:
    """The property LL messages stand on, measured on the MPI transport: rank 1 reads the slot
    rank 0 is writing, again and again, and no word it ever reads mixes two writes — also for
    messages far larger than the default ``ll_bytes`` (written in runs of two words: a 64 KiB
    put was once seen tearing a word on one node), and between two emulated nodes (MPICH's
    network module instead of shared memory)."""
    if nodes == 2 and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    emulate = nodes if nodes > 1 else 0
    ranks = run_mpi_json(TORN, 2, str(ll_bytes), sizes, "3000", timeout=240, emulate_nodes=emulate, env=env)
    reader = ranks[1]
    assert reader["torn"] == 0, reader
    assert reader["reads"] >= 3000


@pytest.mark.timeout(30)
def test_a_peer_failing_fails_a_wait_for_an_ll_message() -> None:
    """Rank 0 waits for a one-word LL message (a 4-byte allreduce) from rank 1, which raises
    instead: rank 0's Request fails with PeerFailed within seconds, it does not hang, and the
    wait for the LL slot fails too instead of staying registered."""
    seen: dict[str, Any] = {}

    class Boom(Exception):
        pass

    async def main(comm: aiorma.Comm) -> None:
        await comm.barrier()
        if comm.rank == 1:
            await asyncio.sleep(0.05)
            raise Boom("no allreduce from me")
        try:
            async with asyncio.timeout(5):
                await comm.allreduce(np.ones(1, np.int32), np.zeros(1, np.int32))
        except Exception as exc:
            seen["allreduce"] = exc
        # ... and the wait for the slot failed with it, not left behind for good
        seen["left waiting"] = comm.collectives.landing.ll_watcher.waiting()

    with pytest.raises(Boom):
        aiorma.run(main, nprocs=2)
    failure = seen.get("allreduce")
    assert isinstance(failure, aiorma.PeerFailed) and failure.rank == 1, seen
    assert seen["left waiting"] is False, seen

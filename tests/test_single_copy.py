"""Large collective messages in one copy (aiorma/collectives/landing.py, *Large messages in one
copy*): the receiver copies a message straight out of the sender's buffer, and the sender's send
finishes only once it has.  The battery runs with every message of more than 64 bytes travelling
that way, in-process (all ranks reading each other, or only ranks of the same parity: trees whose
children take a message partly whole, partly in pieces) and under mpiexec (cross-memory attach
between processes; between two emulated nodes never)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np
import pytest

import aiorma
from aiorma.bench._launch import MPICH, emulation_unavailable, locate_mpiexec, mpiexec_library
from aiorma.collectives import landing
from aiorma.collectives.landing import LandingConfig
from aiorma.errors import TransportError
from aiorma.runtime import run_ranks
from aiorma.transport.local import LocalEndpoint, LocalNetwork
from aiorma.transport.mpi.cross_memory import ProcessMemoryReader

from .mpi_harness import OUTLIVE, REPO_ROOT, RESULTS_DIR, launch_mpi, run_mpi_json
from .mpi_scripts.collectives_check import QUICK, run_checks

Readable = Callable[[int, int], bool]


class ReadingEndpoint(LocalEndpoint):
    """A local rank that may read only the peers ``readable`` allows, and records its reads."""

    def __init__(self, network: LocalNetwork, rank: int, readable: Readable) -> None:
        super().__init__(network, rank)
        self._may_read = readable
        self.reads: list[tuple[int, int]] = []  # (peer, bytes)

    def reads_memory_of(self, peer: int) -> bool:
        return self._may_read(self.rank, peer)

    def read_memory(self, peer: int, address: int, out: np.ndarray) -> None:
        assert self._may_read(self.rank, peer), f"rank {self.rank} read rank {peer}'s memory"
        self.reads.append((peer, int(out.nbytes)))
        super().read_memory(peer, address, out)


class ReadingNetwork(LocalNetwork):
    def __init__(self, size: int, readable: Readable) -> None:
        super().__init__(size)
        self.endpoints = [ReadingEndpoint(self, rank, readable) for rank in range(size)]


def everyone(rank: int, peer: int) -> bool:
    return True


def same_parity(rank: int, peer: int) -> bool:
    """Two "nodes": the even ranks and the odd ones."""
    return rank % 2 == peer % 2


def run_on(network: ReadingNetwork, main: Callable[..., object]) -> list[object]:
    async def all_ranks() -> list[object]:
        return await run_ranks(main, (), network)  # type: ignore[arg-type]

    return asyncio.run(all_ranks())


#: Slots of 64 bytes; every message longer than that is read out of the sender's buffer.
TINY = LandingConfig(slot_bytes=64, slots_per_peer=4, single_copy_bytes=65)
#: The same, read at most 128 bytes at a time (in slices, with the loop's turns between them).
TINY_SLICED = attrs.evolve(TINY, single_copy_slice_bytes=128)
BATTERY = [*QUICK, "bcast_large"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("size", [2, 3, 5])
@pytest.mark.parametrize("readable", [everyone, same_parity], ids=["everyone", "same_parity"])
@pytest.mark.parametrize("config", [TINY, TINY_SLICED], ids=["whole", "sliced"])
def test_battery_with_large_messages_in_one_copy(
    monkeypatch: pytest.MonkeyPatch, size: int, readable: Readable, config: LandingConfig
) -> None:
    """Every check of the battery agrees with numpy when messages above 64 bytes are copied out
    of the sender's buffer, in one read or in slices of 128 bytes — and some were, only between
    ranks allowed to read each other (none at 2 ranks of different parity: every message takes
    the slots)."""
    monkeypatch.setattr(landing, "DEFAULT_CONFIG", config)
    network = ReadingNetwork(size, readable)

    async def main(comm: aiorma.Comm) -> list[str]:
        return await run_checks(comm, BATTERY)

    assert run_on(network, main) == [BATTERY] * size
    reads = [read for endpoint in network.endpoints for read in endpoint.reads]
    pairs = any(readable(rank, peer) for rank in range(size) for peer in range(size) if rank != peer)
    assert bool(reads) == pairs and all(nbytes > 0 for _, nbytes in reads)


@pytest.mark.timeout(60)
def test_a_send_finishes_only_once_the_receiver_has_copied() -> None:
    """Rank 0's bcast of 4 KiB (threshold 1 KiB) stays pending while rank 1 has not called its
    bcast — the bytes are still only in rank 0's buffer — and finishes once rank 1 copied them;
    what rank 0 writes into its buffer afterwards does not reach rank 1."""
    config = LandingConfig(single_copy_bytes=1024)
    network = ReadingNetwork(2, everyone)
    seen: dict[str, object] = {}

    async def main(comm: aiorma.Comm) -> None:
        data = np.arange(512, dtype=np.float64) if comm.rank == 0 else np.zeros(512)
        await comm.barrier()
        if comm.rank == 0:
            request = comm.bcast(data, 0)
            await asyncio.sleep(0.05)
            seen["pending while the receiver is away"] = not request.done()
            await request
            data[:] = -1.0  # ours again: the receiver must have its copy already
            await comm.barrier()
        else:
            await asyncio.sleep(0.1)
            await comm.bcast(data, 0)
            await comm.barrier()
            seen["received"] = bool((data == np.arange(512)).all())
        return None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(landing, "DEFAULT_CONFIG", config)
        run_on(network, main)
    assert seen == {"pending while the receiver is away": True, "received": True}
    assert network.endpoints[1].reads == [(0, 4096)]


@pytest.mark.timeout(60)
def test_only_messages_from_the_threshold_on_are_read_and_a_copy_is_one_read() -> None:
    """Below ``single_copy_bytes`` messages take the slots; from it on, a message copied into
    the receiver's buffer is one read of all of it, and one combined into an accumulator
    (allreduce, reduce) or gathered at a root still takes the slots, as does one above
    ``single_copy_max_bytes`` (a read holds the event loop for the whole copy)."""
    config = LandingConfig(
        slot_bytes=1024, slots_per_peer=4, single_copy_bytes=2048, single_copy_max_bytes=16384
    )
    network = ReadingNetwork(2, everyone)

    async def main(comm: aiorma.Comm) -> None:
        for count in (128, 255):  # 1 KiB, 2040 bytes: below
            await comm.bcast(np.zeros(count), 0)
        assert network.endpoints[comm.rank].reads == []
        buf = np.arange(1024.0) if comm.rank == 0 else np.zeros(1024)  # 8 KiB: above
        await comm.bcast(buf, 0, algorithm="binomial")
        assert (buf == np.arange(1024.0)).all()
        large = np.arange(2049.0) if comm.rank == 0 else np.zeros(2049)  # above the upper bound
        await comm.bcast(large, 0, algorithm="binomial")
        assert (large == np.arange(2049.0)).all()
        out = np.zeros(1024)
        await comm.allreduce(np.full(1024, comm.rank + 1.0), out)
        assert (out == 3.0).all()
        await comm.reduce(np.full(1024, comm.rank + 1.0), out if comm.rank == 0 else None, root=0)
        gathered = np.zeros(2048) if comm.rank == 0 else None
        for algorithm in ("direct", "binomial"):
            await comm.gather(np.full(1024, comm.rank + 1.0), gathered, 0, algorithm=algorithm)
            if gathered is not None:
                assert (gathered == np.repeat([1.0, 2.0], 1024)).all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(landing, "DEFAULT_CONFIG", config)
        run_on(network, main)
    assert network.endpoints[1].reads == [(0, 8192)]
    assert network.endpoints[0].reads == []


@pytest.mark.timeout(60)
def test_a_long_message_is_read_in_slices_the_loop_running_between_them() -> None:
    """A 16 KiB bcast read 4 KiB at a time: four reads, the rank's other tasks run between two
    of them (a read holds the event loop), and the root's send stays pending until the last one
    (its buffer is read until then: the root overwrites it as soon as its send finishes) — also
    where three one-slot messages before it left the receiver owing a credit report, which the
    slots' every-K rule would otherwise send right after the chunk saying where the message is."""
    config = LandingConfig(
        slot_bytes=1024, slots_per_peer=4, single_copy_bytes=2048, single_copy_slice_bytes=4096
    )
    network = ReadingNetwork(2, everyone)
    root_sends: list[aiorma.Request] = []
    sender_done_at_reads: list[bool] = []
    reads_seen_by_other_task: set[int] = set()
    reader = network.endpoints[1]
    read_memory = reader.read_memory

    def read_and_look(peer: int, address: int, out: np.ndarray) -> None:
        sender_done_at_reads.append(root_sends[0].done())
        read_memory(peer, address, out)

    reader.read_memory = read_and_look  # type: ignore[method-assign]

    async def main(comm: aiorma.Comm) -> None:
        data = np.arange(2048.0) if comm.rank == 0 else np.zeros(2048)
        small = np.arange(200.0) if comm.rank == 0 else np.zeros(200)
        await comm.barrier()
        for _ in range(3):  # one slot each (1 KiB slots): the credit for them is still owed
            await comm.bcast(np.zeros(100), 0, algorithm="binomial")
        if comm.rank == 0:
            root_sends.append(comm.bcast(data, 0, algorithm="binomial"))
            await root_sends[0]
            data[:] = -1.0  # ours again: the receiver must have copied all of it
            await comm.bcast(small, 0, algorithm="binomial")
            return
        running = True

        async def other_task() -> None:
            while running:
                reads_seen_by_other_task.add(len(reader.reads))
                await asyncio.sleep(0)

        watcher = asyncio.ensure_future(other_task())
        await asyncio.sleep(0.01)  # the root's sends are out first
        await comm.bcast(data, 0, algorithm="binomial")
        await comm.bcast(small, 0, algorithm="binomial")
        running = False
        await watcher
        assert (data == np.arange(2048.0)).all() and (small == np.arange(200.0)).all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(landing, "DEFAULT_CONFIG", config)
        run_on(network, main)
    assert reader.reads == [(0, 4096)] * 4
    assert sender_done_at_reads == [False] * 4
    assert reads_seen_by_other_task & {1, 2, 3}, reads_seen_by_other_task


def test_single_copy_threshold_is_lower_where_ranks_share_cores() -> None:
    config = LandingConfig()
    assert config.resolve_single_copy(2, 2) == 2 << 20
    assert config.resolve_single_copy(4, 2) == 512 << 10
    assert LandingConfig(single_copy_bytes=1024).resolve_single_copy(8, 2) == 1024
    assert LandingConfig(single_copy_bytes=0).resolve_single_copy(8, 2) == 0
    assert LandingConfig(single_copy_bytes_shared_cores=0).resolve_single_copy(8, 2) == 2 << 20


def test_process_memory_reader_copies_and_refuses_clearly() -> None:
    """The MPI transport's reader: a copy out of a process (here our own), and a clear
    TransportError for an address that is not mapped — never a crash."""
    reader = ProcessMemoryReader()
    source = np.arange(100_000, dtype=np.int64)
    out = np.zeros_like(source)
    reader.read(os.getpid(), source.ctypes.data, out)
    assert (out == source).all()
    with pytest.raises(TransportError, match="process_vm_readv"):
        reader.read(os.getpid(), 8, out)


SINGLE_COPY_BATTERY = REPO_ROOT / "tests" / "mpi_scripts" / "single_copy_battery.py"


@pytest.mark.mpi
@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("nodes", "nprocs"), [(1, 3), (1, 5), (2, 3)], ids=["one_node", "one_node_5_ranks", "two_emulated_nodes"]
)
def test_battery_in_one_copy_under_mpiexec(nodes: int, nprocs: int) -> None:
    """The battery under mpiexec with messages from 1 KiB on read out of the sender's process
    (``process_vm_readv``): every check passes; on one node the ranks read each other, and no
    rank ever reads one on another (emulated) node — under MPICH's ``MPIR_CVAR_NOLOCAL``, which
    the emulation sets, not even one on its own node: every message takes the slots."""
    if nodes == 2 and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    emulate = nodes if nodes > 1 else 0
    ranks = run_mpi_json(SINGLE_COPY_BATTERY, nprocs, "1024", timeout=360, emulate_nodes=emulate)
    hosts = [result["host"] for result in ranks]
    assert len(set(hosts)) == nodes, hosts
    for rank, result in enumerate(ranks):
        assert result["passed"] == BATTERY, result
        same_host = [peer for peer in range(nprocs) if peer != rank and hosts[peer] == hosts[rank]]
        if nodes == 1:
            assert result["readable"] == same_host and result["reads"] > 0, result
        else:
            assert set(result["readable"]) <= set(same_host), result
            assert bool(result["reads"]) == bool(result["readable"]), result
    if nodes == 2 and mpiexec_library(locate_mpiexec() or "mpiexec") == MPICH:
        assert all(result["readable"] == [] for result in ranks), ranks


KILLED = REPO_ROOT / "tests" / "mpi_scripts" / "single_copy_killed.py"


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_read_out_of_a_killed_rank_fails_with_peer_failed(tmp_path: Path) -> None:
    """Rank 1 sends a 4 MiB bcast's address and is killed; rank 0, reading it afterwards, fails
    with PeerFailed naming rank 1 — the read itself tells it (the liveness ring is off) — and
    leaves ``connect``."""
    env = {RESULTS_DIR: str(tmp_path), "AIORMA_LIVENESS": "0"}
    outcome = launch_mpi(KILLED, 2, timeout=90, env=env, wrapper=OUTLIVE)
    results = {r: json.loads(p.read_text()) for r in range(2) if (p := tmp_path / f"rank{r}.json").exists()}
    assert results[1]["done"] is False, (results, outcome.describe())  # it waits for the read
    got = results[0]
    assert got.get("error") == "PeerFailed" and got.get("rank") == 1, (results, outcome.describe())
    assert "process_vm_readv" in got["cause"], got
    assert got["left_at"] - results[1]["killed_at"] < 30, got

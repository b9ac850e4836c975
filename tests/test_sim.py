"""The simulated network, the topology-aware tree builder and the simulated collectives
(aiorma.sim, aiorma.collectives.topology).  All on virtual time: no
assertion here depends on wall-clock speed."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import aiorma
from aiorma.collectives.barrier import nway_barrier
from aiorma.collectives.bcast import knomial_bcast
from aiorma.collectives.model import barrier_nway
from aiorma.collectives.topology import (
    Topology,
    TreeCosts,
    binomial_tree,
    build_bcast_tree,
    count_inter_node_edges,
    count_inter_switch_edges,
    default_bcast_tree,
    greedy_bcast_tree,
    hierarchical_bcast_tree,
    predicted_bcast_time,
    tree_depth,
    validate_tree,
)
from aiorma.errors import RmaRangeError
from aiorma.sim import barrier, bcast_multicast, bcast_topology
from aiorma.sim.clock import EventQueue, SimulationStalled, run_virtual
from aiorma.sim.cost import NetworkModel, NetworkParams
from aiorma.sim.lite import LiteFabric, LiteLanding
from aiorma.sim.network import SimNetwork
from aiorma.sim.run import run_simulated
from aiorma.transport.base import RmaKind, RmaOp

ROOT = Path(__file__).resolve().parents[1]

# Parameter sets that make each branch of the round-time formula the larger one.
PARAM_SETS = [
    NetworkParams(),  # latency-bound rounds
    NetworkParams(L=0.2e-6, o=0.5e-6, g=0.3e-6),  # overhead-bound: 2k·o dominates
    NetworkParams(L=1.0e-6, o=0.2e-6, g=1.5e-6),  # gap-bound NIC
]


# ----------------------------------------------------------------------------- virtual clock


def test_virtual_clock_sleeps_take_no_wall_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600.0)
        await asyncio.sleep(1e-6)
        return loop.time()

    started = time.monotonic()
    assert run_virtual(main()) == pytest.approx(3600.0 + 1e-6, rel=1e-12)
    assert time.monotonic() - started < 5.0  # an hour of simulated time, not of real time


def test_deadlocked_simulation_raises_instead_of_hanging() -> None:
    async def main() -> None:
        await asyncio.get_running_loop().create_future()  # nobody will ever set it

    with pytest.raises(SimulationStalled):
        run_virtual(main())


def test_event_queue_runs_callbacks_in_time_then_submission_order() -> None:
    async def main() -> list[tuple[float, str]]:
        loop = asyncio.get_running_loop()
        queue = EventQueue()
        seen: list[tuple[float, str]] = []

        def note(what: str) -> None:
            seen.append((loop.time(), what))

        def chain() -> None:  # schedules a later event while an earlier one is pending
            note("chain")
            queue.at(5.0, note, "late")

        queue.at(1.0, chain)
        queue.at(2.0, note, "early")
        queue.at(2.0, note, "early-second")
        queue.at_fifo("pair", 4.0, note, "fifo-1")
        queue.at_fifo("pair", 3.0, note, "fifo-2")  # may not overtake fifo-1
        await asyncio.sleep(10.0)
        return seen

    assert run_virtual(main()) == [
        (1.0, "chain"),
        (2.0, "early"),
        (2.0, "early-second"),
        (4.0, "fifo-1"),
        (4.0, "fifo-2"),
        (5.0, "late"),
    ]


# ----------------------------------------------------------------------------- network model


def test_message_costs_by_distance_and_speed() -> None:
    params = NetworkParams()
    # ranks 0,1 on node 0 (switch 0); rank 2 on node 1 (switch 0); rank 3 on node 2 (switch 1)
    topo = Topology([0, 0, 1, 2], [0, 0, 1], node_speed=[1e9, 1e9, 0.25e9])
    o, nbytes = params.o, 1000

    def one(src: int, dest: int) -> float:
        return NetworkModel(topo, params).send(src, dest, nbytes, 0.0)

    assert one(0, 1) == pytest.approx(o + params.L_intra_node + nbytes * params.G_intra_node)
    assert one(0, 2) == pytest.approx(o + nbytes / 1e9 + params.L)
    # across switches, and limited by the slow link of node 2
    assert one(0, 3) == pytest.approx(o + nbytes / 0.25e9 + params.L_inter_switch)

    model = NetworkModel(topo, params)
    first = model.send(0, 2, nbytes, 0.0)
    second = model.send(0, 2, nbytes, 0.0)  # CPU: o each; NIC: busy max(g, bytes/speed)
    assert second - first == pytest.approx(max(o, params.g, nbytes / 1e9))
    assert model.receive(2, first) == pytest.approx(first + o)
    assert model.receive(2, first) == pytest.approx(first + 2 * o)  # receive overheads queue


def test_rma_counters_and_round_trips() -> None:
    params = NetworkParams()
    model = NetworkModel(Topology.flat(2), params)
    data = np.ones(4)
    put = model.rma(0, RmaOp(RmaKind.PUT, 1, 0, origin=data), 0.0)
    get = NetworkModel(Topology.flat(2), params).rma(0, RmaOp(RmaKind.GET, 1, 0, result=data), 0.0)
    model.rma(0, RmaOp(RmaKind.FETCH_AND_OP, 1, 0, origin=data[:1], result=data[:1]), 0.0)
    model.rma(0, RmaOp(RmaKind.ACCUMULATE, 1, 0, origin=data), 0.0)
    assert get > put  # a get is a round trip
    counters = model.counters[0]
    assert (counters.puts, counters.gets, counters.atomics) == (1, 0, 2)


def test_multicast_loss_follows_its_probability_and_seed() -> None:
    topo = Topology.flat(2001)
    dests = list(range(1, 2001))
    a = NetworkModel(topo, NetworkParams(multicast_loss=0.25, seed=7)).multicast(0, dests, 8, 0.0)
    b = NetworkModel(topo, NetworkParams(multicast_loss=0.25, seed=7)).multicast(0, dests, 8, 0.0)
    c = NetworkModel(topo, NetworkParams(multicast_loss=0.25, seed=8)).multicast(0, dests, 8, 0.0)
    assert a == b and a != c
    assert 0.70 < len(a) / len(dests) < 0.80
    assert len({t for _, t in a}) == 1  # constant cost: one arrival time for everyone


@pytest.mark.parametrize(
    "kwargs", [{"o": -1.0}, {"L": math.inf}, {"multicast_loss": 1.0}, {"multicast_loss": -0.1}]
)
def test_bad_network_params_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        NetworkParams(**kwargs)


# ----------------------------------------------------------------------------------- barrier


@pytest.mark.parametrize(
    ("size", "n", "rounds"),
    [
        *[(1, 1, 0), (2, 1, 1), (3, 1, 2), (1024, 1, 10), (1025, 1, 11), (9, 2, 2), (10, 2, 3)],
        *[(27, 2, 3), (28, 2, 4), (1000, 9, 3), (1001, 9, 4), (4096, 7, 4), (4097, 7, 5), (100, 3, 4)],
    ],
)
def test_rounds_formula(size: int, n: int, rounds: int) -> None:
    assert barrier.dissemination_rounds(size, n) == rounds
    if size > 1:
        assert rounds == math.ceil(math.log(size, n + 1) - 1e-9)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("params", PARAM_SETS, ids=["latency", "overhead", "gap"])
def test_barrier_simulation_matches_logp_model(params: NetworkParams) -> None:
    for size in (2, 3, 5, 8, 13, 16, 27):
        for n in (1, 2, 3, 5):
            run = barrier.simulate_barrier(size, n, params)
            model = barrier.barrier_time_model(size, n, params)
            assert run.rounds == math.ceil(math.log(size, n + 1) - 1e-9)
            assert max(run.exits) == pytest.approx(model, rel=0.01), (size, n)
            if params.g <= params.o + params.L:  # the closed form holds
                # ... and it is the library's own model, the one the collectives choose n with
                closed = barrier_nway(params.loggp(barrier.FLAG_BYTES), size, n)
                assert model == pytest.approx(closed, rel=1e-9)
            peers = sum(barrier.round_peers(size, n, r) for r in range(run.rounds))
            assert set(run.puts_per_rank) == {peers}
            assert peers <= n * run.rounds


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("size", "n"), [(7, 1), (12, 2), (30, 3), (64, 7)])
def test_barrier_holds_everyone_until_the_last_arrives(size: int, n: int) -> None:
    rng = np.random.default_rng(size)
    delays = list(rng.uniform(0, 50e-6, size))
    run = barrier.simulate_barrier(size, n, entry_delays=delays, repeats=3)
    # the last of three back-to-back barriers: nobody leaves before everybody entered
    assert min(run.exits) >= max(run.entries)
    late = int(np.argmax(delays))
    once = barrier.simulate_barrier(size, n, entry_delays=delays)
    assert min(once.exits) >= delays[late]


def test_barrier_is_deterministic() -> None:
    a = barrier.simulate_barrier(100, 3, NetworkParams(seed=1))
    b = barrier.simulate_barrier(100, 3, NetworkParams(seed=1))
    assert a == b


# ------------------------------------------------------------------------------ topology


def _layouts() -> list[tuple[str, Topology]]:
    names = ["block", "round-robin", "scattered", "block-mixed", "scattered-mixed", "scattered-4ppn"]
    return [(name, bcast_topology.make_layout(name, seed)) for name in names for seed in (0, 1)]


def test_binomial_tree_shape() -> None:
    for m in (1, 2, 3, 7, 8, 9, 33):
        tree = binomial_tree(list(range(m)))
        validate_tree(tree, 0, range(m))
        # position v is reached through one edge per set bit of v
        assert tree_depth(tree, 0) == max(bin(v).count("1") for v in range(m))
    assert binomial_tree(list(range(8)))[0] == [4, 2, 1]  # largest subtree first


BUILDERS = {
    "aware": lambda topo, root, ranks: build_bcast_tree(topo, root, ranks),
    "greedy": lambda topo, root, ranks: greedy_bcast_tree(topo, root, ranks),
    "hierarchical": lambda topo, root, ranks: hierarchical_bcast_tree(topo, root, ranks),
    "default": lambda topo, root, ranks: default_bcast_tree(
        root, range(topo.size) if ranks is None else ranks
    ),
}


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_trees_reach_every_rank_once_from_the_root(builder: str) -> None:
    rng = np.random.default_rng(3)
    for _name, topo in _layouts():
        for root in (0, 5, topo.size - 1):
            subset = sorted({root, *(int(r) for r in rng.choice(topo.size, 40, replace=False))})
            for ranks in (None, subset):
                tree = BUILDERS[builder](topo, root, ranks)
                validate_tree(tree, root, range(topo.size) if ranks is None else ranks)


def test_aware_tree_crosses_switches_least() -> None:
    for name, topo in _layouts():
        default = default_bcast_tree(0, range(topo.size))
        for nbytes in (64, 65536):
            aware = build_bcast_tree(topo, 0, nbytes=nbytes)
            assert count_inter_switch_edges(aware, topo) == topo.switches - 1, name
            assert count_inter_switch_edges(aware, topo) <= count_inter_switch_edges(default, topo)
            assert count_inter_node_edges(aware, topo) == topo.nodes - 1
            if name.startswith("scattered"):
                assert count_inter_switch_edges(aware, topo) <= 0.7 * count_inter_switch_edges(default, topo)


def test_equal_speeds_keep_the_binomial_on_block_layouts() -> None:
    topo = bcast_topology.make_layout("block")
    assert hierarchical_bcast_tree(topo, 0) == default_bcast_tree(0, range(topo.size))


def test_slow_links_go_to_the_leaves() -> None:
    topo = bcast_topology.make_layout("scattered-mixed", 0)
    slow = {r for r in range(topo.size) if topo.link_speed(topo.node(r)) < bcast_topology.FAST}
    for tree in (hierarchical_bcast_tree(topo, 0), build_bcast_tree(topo, 0, nbytes=65536)):
        forwarding_slow = sum(1 for r in slow if any(topo.node(c) != topo.node(r) for c in tree[r]))
        forwarding_fast = sum(
            1
            for r in range(topo.size)
            if r not in slow and any(topo.node(c) != topo.node(r) for c in tree[r])
        )
        assert forwarding_slow < forwarding_fast


def test_builder_prediction_is_never_worse_than_its_candidates() -> None:
    costs = TreeCosts()
    for _name, topo in _layouts():
        aware = build_bcast_tree(topo, 0, nbytes=4096, costs=costs)
        chosen = predicted_bcast_time(aware, topo, 0, 4096, costs)
        for other in (greedy_bcast_tree(topo, 0, None, 4096, costs), hierarchical_bcast_tree(topo, 0)):
            assert chosen <= predicted_bcast_time(other, topo, 0, 4096, costs)


def test_bad_topologies_and_roots_raise() -> None:
    with pytest.raises(ValueError):
        Topology([0, 3], [0, 0])  # node 3 does not exist
    with pytest.raises(ValueError):
        Topology([0, 1], [0, 0], node_speed=[1.0])
    with pytest.raises(ValueError):
        Topology([0, 1], [0, 0], node_speed=[1.0, 0.0])
    topo = Topology.flat(4)
    with pytest.raises(ValueError):
        build_bcast_tree(topo, 7)
    with pytest.raises(ValueError):
        build_bcast_tree(topo, 0, [0, 1, 1])
    with pytest.raises(ValueError):
        build_bcast_tree(topo, 3, [0, 1])
    with pytest.raises(ValueError):
        validate_tree({0: [1], 1: [0]}, 0, [0, 1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("layout", ["round-robin", "scattered", "scattered-mixed", "block-mixed"])
def test_aware_bcast_is_not_slower_in_simulation(layout: str) -> None:
    for nbytes in (64, 65536):
        r = bcast_topology.record(layout, nbytes, NetworkParams(), seed=0)
        assert r["all_ranks_correct"]
        assert r["aware_time"] <= r["default_time"]
        assert r["aware_predicted_time"] == pytest.approx(r["aware_time"], rel=0.1)


# ------------------------------------------------------------- lite ranks, real algorithms


def _lite_run(size: int, body) -> list:
    async def run() -> list:
        landings = LiteLanding.group(LiteFabric(NetworkModel(Topology.flat(size))), slot_bytes=64)
        return await asyncio.gather(*(body(ch) for ch in landings))

    return run_virtual(run())


@pytest.mark.parametrize("size", [1, 2, 5, 16, 37])
@pytest.mark.parametrize("k", [2, 3])
def test_real_knomial_bcast_on_lite_ranks_delivers_from_every_root(size: int, k: int) -> None:
    payload = np.arange(1, 41, dtype=np.uint8)
    for root in {0, size // 2, size - 1}:

        async def body(ch: LiteLanding, root: int = root) -> np.ndarray:
            buf = payload.copy() if ch.rank == root else np.zeros_like(payload)
            await knomial_bcast(ch, buf, list(range(size)), root, k)
            return buf

        assert all(np.array_equal(b, payload) for b in _lite_run(size, body))


def test_real_nway_barrier_on_lite_ranks_holds_until_the_last_enters() -> None:
    size, late = 13, 7

    async def body(ch: LiteLanding) -> float:
        loop = asyncio.get_running_loop()
        if ch.rank == late:
            await asyncio.sleep(1e-3)
        for _ in range(3):  # back to back: the per-pair counts keep calls apart
            await nway_barrier(ch, 2)
        return loop.time()

    assert min(_lite_run(size, body)) >= 1e-3


def test_lite_landing_refuses_a_message_larger_than_its_slot() -> None:
    async def body(ch: LiteLanding) -> None:
        if ch.rank == 0:
            with pytest.raises(RmaRangeError):
                ch.send(1, np.zeros(65, np.uint8))
            with pytest.raises(RmaRangeError):
                ch.recv(1, np.zeros(65, np.uint8))
            assert ch.flags.memory.sum() == 0 and ch.data.memory.sum() == 0  # nothing was sent

    _lite_run(2, body)


# ----------------------------------------------------------------------------- multicast


@pytest.mark.timeout(60)
def test_two_stage_bcast_delivers_to_everyone_despite_losses() -> None:
    for seed in range(4):
        for loss in (0.1, 0.5, 0.9):
            run = bcast_multicast.simulate_bcast(
                "two-stage multicast", 50, NetworkParams(multicast_loss=loss, seed=seed)
            )
            assert run.correct
            assert run.multicast_lost > 0  # stage 2 really had to repair
    base = bcast_multicast.simulate_bcast("two-stage multicast", 50, NetworkParams(seed=1))
    assert base.correct and base.multicast_lost == 0
    tree = bcast_multicast.simulate_bcast("binomial tree", 37, NetworkParams(seed=2))
    assert tree.correct


def test_multicast_bcast_is_deterministic_for_a_seed() -> None:
    a = bcast_multicast.simulate_bcast("two-stage multicast", 64, NetworkParams(multicast_loss=0.3, seed=5))
    b = bcast_multicast.simulate_bcast("two-stage multicast", 64, NetworkParams(multicast_loss=0.3, seed=5))
    c = bcast_multicast.simulate_bcast("two-stage multicast", 64, NetworkParams(multicast_loss=0.3, seed=6))
    assert a == b
    assert a.finish != c.finish


# ------------------------------------------------------------------------- full engine


async def _ring_put(comm: aiorma.Comm) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    win = await comm.win_allocate(4, np.float64)
    await win.fence()
    win.put(np.full(4, comm.rank + 1.0), (comm.rank + 1) % comm.size)
    await win.fence(aiorma.MODE_NOSUCCEED)
    value = float(win.memory[0])
    await win.free()
    return value, loop.time()


@pytest.mark.timeout(60)
def test_real_ranks_run_on_the_simulated_network() -> None:
    topo = Topology([0, 0, 1, 2, 3, 3], [0, 0, 1, 1])
    network = SimNetwork(topo)
    results = run_simulated(_ring_put, network)
    assert [v for v, _ in results] == [float((r - 1) % 6 + 1) for r in range(6)]
    assert all(t > 0 for _, t in results)  # the fences cost simulated time
    # the ring's put, and at close one word to each rank: its number of collective calls
    assert [c.puts for c in network.counters] == [1 + 6] * 6
    assert all(c.packets > 0 for c in network.counters)
    again = run_simulated(_ring_put, SimNetwork(topo))
    assert again == results  # deterministic


@pytest.mark.timeout(60)
def test_engine_tree_bcast_on_the_simulated_network() -> None:
    topo = Topology([i // 2 for i in range(12)], [n // 3 for n in range(6)])
    trees = [default_bcast_tree(0, range(12)), build_bcast_tree(topo, 0, nbytes=800)]
    timings = bcast_topology.time_trees_engine(topo, trees, 0, 800, NetworkParams())
    assert all(t.correct for t in timings)
    assert all(max(t.finish) > 0 for t in timings)


async def _boom(comm: aiorma.Comm) -> None:
    if comm.rank == 1:
        raise RuntimeError("rank 1 failed")
    await asyncio.sleep(1.0)


def test_a_failing_simulated_rank_propagates() -> None:
    with pytest.raises(RuntimeError, match="rank 1 failed"):
        run_simulated(_boom, SimNetwork(Topology.flat(3)))


# ------------------------------------------------------------------------------------ CLI


def _load(path: Path) -> dict:
    document = json.loads(path.read_text())
    assert set(document) >= {"experiment", "network", "config", "machine", "records"}
    assert document["records"]
    return document


@pytest.mark.timeout(60)
def test_cli_barrier_writes_json_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "barrier.json"
    options = ["--json", str(out), "--plot", str(tmp_path), "--sizes", "2,5,9", "--ways", "1,2"]
    proc = subprocess.run(
        [sys.executable, "-m", "aiorma.sim", "barrier", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[barrier]" in proc.stderr  # progress lines
    records = _load(out)["records"]
    assert len(records) == 6
    keys = {"algorithm", "P", "n", "rounds", "max_puts_per_rank", "time_sim", "time_model"}
    for r in records:
        assert keys <= set(r)
        assert r["rounds"] == barrier.dissemination_rounds(r["P"], r["n"])
        assert abs(r["time_sim"] - r["time_model"]) <= 0.01 * r["time_model"]
    assert (tmp_path / "sim_barrier.png").stat().st_size > 0


@pytest.mark.timeout(60)
def test_cli_bcast_topology_and_multicast_json(tmp_path: Path) -> None:
    out = tmp_path / "topology.json"
    assert (
        bcast_topology.main(["--json", str(out), "--layouts", "block,scattered-mixed", "--bytes", "64"]) == 0
    )
    keys = {
        "layout",
        "P",
        "default_inter_switch_edges",
        "aware_inter_switch_edges",
        "default_time",
        "aware_time",
    }
    for r in _load(out)["records"]:
        assert keys <= set(r) and r["P"] == 64
    out = tmp_path / "multicast.json"
    argv = ["--json", str(out), "--sizes", "8,16", "--losses", "0,0.3", "--trials", "2"]
    assert bcast_multicast.main(argv) == 0
    records = _load(out)["records"]
    assert {(r["algorithm"], r["P"]) for r in records} >= {("binomial tree", 16), ("two-stage multicast", 8)}
    assert all(r["all_ranks_correct"] and r["mean_time"] > 0 for r in records)


def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    from aiorma.sim.__main__ import main

    assert main(["no-such-experiment"]) == 2
    with pytest.raises(SystemExit):
        barrier.main(["--json", str(tmp_path / "x.json"), "--sizes", "two"])
    with pytest.raises(SystemExit):
        bcast_topology.main(["--json", str(tmp_path / "x.json"), "--layouts", "diagonal"])
    assert not (tmp_path / "x.json").exists()

"""Experiment ``bcast-topology``: topology-/speed-aware broadcast trees (Subramoni et al. 2011) vs
the binomial tree on rank order, on a simulated 64-node cluster with 4 leaf switches.

Each layout places the ranks differently on the nodes (block, round-robin across switches,
scattered at random) and some make half of the node links slow.  For each layout both trees are
built (:func:`~aiorma.collectives.topology.default_bcast_tree` and
:func:`~aiorma.collectives.topology.build_bcast_tree`), their inter-switch edges counted, and the
broadcast run along each tree by the library's own :func:`aiorma.collectives.bcast.tree_bcast`
(the algorithm ``Comm.bcast`` runs) on lightweight ranks (:class:`~aiorma.sim.lite.LiteLanding`:
a data put and a flag put per edge), or with ``--transport engine`` by real aiorma ranks —
windows, the progress engine, GATS epochs — on the :class:`~aiorma.sim.network.SimNetwork`: each
rank posts to its parent and waits (its data is then in place), then starts an access epoch to
its children, puts the message to each in the tree's order, and completes.  The time is when the
last rank holds the data.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np

from ..collectives.bcast import tree_bcast as coll_tree_bcast
from ..collectives.topology import (
    Topology,
    Tree,
    TreeCosts,
    build_bcast_tree,
    count_inter_switch_edges,
    default_bcast_tree,
    hierarchical_bcast_tree,
    predicted_bcast_time,
    tree_depth,
    validate_tree,
)
from ..comm import Comm
from . import _report
from .clock import run_virtual
from .cost import NetworkModel, NetworkParams
from .lite import LiteFabric, LiteLanding
from .network import SimNetwork
from .run import run_simulated

NODES, SWITCHES = 64, 4
FAST = 12.5e9  # bytes/s of a fast node link (the model's nominal G)
SLOW = FAST / 2  # Subramoni et al.'s (2011) SDR next to DDR: half the speed
SETTLE = 1e-3  # simulated seconds to let start-up traffic drain before measuring

DEFAULT_LAYOUTS = ["block", "round-robin", "scattered", "block-mixed", "scattered-mixed", "scattered-4ppn"]
DEFAULT_SIZES_BYTES = [64, 65536]


def make_layout(name: str, seed: int = 0) -> Topology:
    """The cluster (64 nodes, node ``n`` on switch ``n // 16``) with ranks placed as ``name`` says:

    * ``block``: rank ``r`` on node ``r``;
    * ``round-robin``: consecutive ranks on consecutive switches;
    * ``scattered``: a random permutation of the nodes;
    * ``…-mixed``: the same placement with a random half of the node links at half speed;
    * ``…-4ppn``: 256 ranks, 4 per node, the nodes in that order.
    """
    rng = np.random.default_rng(seed)
    base, extra = name, ""
    for suffix in ("-mixed", "-4ppn"):
        if name.endswith(suffix):
            base, extra = name[: -len(suffix)], suffix[1:]
    per_node = 4 if extra == "4ppn" else 1
    per_switch = NODES // SWITCHES
    if base == "block":
        nodes = list(range(NODES))
    elif base == "round-robin":
        nodes = [(i % SWITCHES) * per_switch + i // SWITCHES for i in range(NODES)]
    elif base == "scattered":
        nodes = [int(n) for n in rng.permutation(NODES)]
    else:
        raise ValueError(f"unknown layout {name!r}")
    # with several ranks per node, rank r lives on the (r // per_node)-th node of the order
    node_of_rank = [nodes[r // per_node] for r in range(NODES * per_node)]
    speeds = None
    if extra == "mixed":
        slow = set(int(n) for n in rng.permutation(NODES)[: NODES // 2])
        speeds = [SLOW if n in slow else FAST for n in range(NODES)]
    return Topology(node_of_rank, [n // per_switch for n in range(NODES)], node_speed=speeds)


def lite_tree_costs(params: NetworkParams) -> TreeCosts:
    """The tree builder's cost model calibrated on the simulated network for the landing protocol
    on lightweight ranks (:class:`~aiorma.sim.lite.LiteLanding`): per child a data put and a flag
    put, each ``o`` of CPU and one NIC gap ``g``; the child notices both (``o`` each) and acts on
    the flag."""
    return TreeCosts(
        overhead=2 * params.o,
        gap=max(2 * params.o, 2 * params.g),
        latency_node=params.L_intra_node + 2 * params.o,
        latency_switch=params.L + 2 * params.o,
        latency_inter_switch=params.L_inter_switch + 2 * params.o,
        bandwidth=1.0 / params.G if params.G else math.inf,
    )


def engine_tree_costs(params: NetworkParams) -> TreeCosts:
    """The same calibrated for a GATS epoch per parent on the full engine: per child a put and a
    "done" packet, each costing the parent ``o``; the child learns of its data from the packet.
    (The model ignores that the done packets queue behind all of the parent's puts.)"""
    o = params.o
    return TreeCosts(
        overhead=2 * o,
        gap=max(2 * o, params.g),
        latency_node=2 * params.L_intra_node + o,
        latency_switch=2 * params.L + o,
        latency_inter_switch=2 * params.L_inter_switch + o,
        bandwidth=1.0 / params.G if params.G else math.inf,
    )


@attrs.frozen
class TreeTiming:
    finish: tuple[float, ...]  # when each rank held the data, from the common start
    correct: bool


def _payload(nbytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, 2**62, max(1, nbytes // 8), dtype=np.int64)


def time_trees_lite(
    topology: Topology, trees: Sequence[Tree], root: int, nbytes: int, params: NetworkParams
) -> list[TreeTiming]:
    """Broadcast ``nbytes`` along each tree on lightweight simulated ranks (fresh network each)."""
    payload = _payload(nbytes, params.seed)
    timings = []
    for tree in trees:
        model = NetworkModel(topology, params)

        async def run(tree: Tree = tree, model: NetworkModel = model) -> TreeTiming:
            loop = asyncio.get_running_loop()
            landings = LiteLanding.group(LiteFabric(model), slot_bytes=payload.nbytes)
            bufs = [np.zeros_like(payload) for _ in range(topology.size)]
            bufs[root][:] = payload
            parent_of = {c: p for p, cs in tree.items() for c in cs}
            finish = [0.0] * topology.size

            async def rank_main(rank: int) -> None:
                data = bufs[rank].view(np.uint8)
                await coll_tree_bcast(landings[rank], data, parent_of.get(rank), tree[rank])
                finish[rank] = loop.time()

            await asyncio.gather(*(rank_main(r) for r in range(topology.size)))
            held = [0.0 if r == root else t for r, t in enumerate(finish)]
            return TreeTiming(tuple(held), all(np.array_equal(b, payload) for b in bufs))

        timings.append(run_virtual(run()))
    return timings


def time_trees_engine(
    topology: Topology, trees: Sequence[Tree], root: int, nbytes: int, params: NetworkParams
) -> list[TreeTiming]:
    """Broadcast ``nbytes`` along each tree in turn on real aiorma ranks (windows, engine, GATS
    epochs) over a :class:`SimNetwork`: a rank posts to its parent and waits, then starts an
    epoch to its children, puts to each and completes."""
    payload = _payload(nbytes, params.seed)
    parents = [{c: p for p, cs in tree.items() for c in cs} for tree in trees]

    async def rank_main(comm: Comm) -> list[tuple[float, bool]]:
        loop = asyncio.get_running_loop()
        results = []
        for tree, parent_of in zip(trees, parents, strict=True):
            buf = np.zeros(payload.size, dtype=np.int64)
            if comm.rank == root:
                buf[:] = payload
            win = await comm.win_create(buf)
            await asyncio.sleep(SETTLE)  # start-up traffic drains; every rank wakes at one instant
            start = loop.time()
            if comm.rank != root:
                win.post([parent_of[comm.rank]])
                await win.wait()  # the parent's data is in buf
            held = loop.time() - start
            children = tree[comm.rank]
            if children:
                win.start(children)
                for child in children:
                    win.put(buf, child)
                await win.complete()
            results.append((held, bool(np.array_equal(buf, payload))))
            await win.free()
        return results

    per_rank = run_simulated(rank_main, SimNetwork(topology, params))
    return [
        TreeTiming(tuple(r[i][0] for r in per_rank), all(r[i][1] for r in per_rank))
        for i in range(len(trees))
    ]


TRANSPORTS = {"lite": (time_trees_lite, lite_tree_costs), "engine": (time_trees_engine, engine_tree_costs)}


def record(layout: str, nbytes: int, params: NetworkParams, seed: int, transport: str = "lite") -> dict:
    timer, calibrate = TRANSPORTS[transport]
    topology = make_layout(layout, seed)
    root = 0
    costs = calibrate(params)
    default = default_bcast_tree(root, range(topology.size))
    aware = build_bcast_tree(topology, root, nbytes=nbytes, costs=costs)
    # the binomial shape mapped onto the topology: separates what the mapping gives from the shape
    hierarchical = hierarchical_bcast_tree(topology, root)
    for tree in (default, aware, hierarchical):
        validate_tree(tree, root, range(topology.size))
    d, a, h = timer(topology, [default, aware, hierarchical], root, nbytes, params)
    return {
        "layout": layout,
        "P": topology.size,
        "nbytes": nbytes,
        "transport": transport,
        "default_inter_switch_edges": count_inter_switch_edges(default, topology),
        "aware_inter_switch_edges": count_inter_switch_edges(aware, topology),
        "default_time": max(d.finish),
        "aware_time": max(a.finish),
        "default_mean_time": sum(d.finish) / len(d.finish),
        "aware_mean_time": sum(a.finish) / len(a.finish),
        "hierarchical_time": max(h.finish),
        "aware_predicted_time": predicted_bcast_time(aware, topology, root, nbytes, costs),
        "aware_shape": "hierarchical binomial" if aware == hierarchical else "greedy postal",
        "aware_depth": tree_depth(aware, root),
        "default_depth": tree_depth(default, root),
        "all_ranks_correct": d.correct and a.correct,
    }


def plot(records: list[dict], directory: Path) -> None:
    plt = _report.pyplot()
    sizes = sorted({r["nbytes"] for r in records})
    fig, axes = plt.subplots(1, len(sizes) + 1, figsize=(5 * (len(sizes) + 1), 4.5))
    layouts = list(dict.fromkeys(r["layout"] for r in records))
    x = np.arange(len(layouts))
    first = [next(r for r in records if r["layout"] == lay) for lay in layouts]
    edges = axes[0]
    edges.bar(x - 0.2, [r["default_inter_switch_edges"] for r in first], 0.4, label="binomial (rank order)")
    edges.bar(x + 0.2, [r["aware_inter_switch_edges"] for r in first], 0.4, label="topology-aware")
    edges.set_xticks(x, layouts, rotation=30, ha="right", fontsize=8)
    edges.set_ylabel("inter-switch edges of the tree")
    edges.legend(fontsize=8)
    for ax, nbytes in zip(axes[1:], sizes, strict=True):
        rows = [next(r for r in records if r["layout"] == lay and r["nbytes"] == nbytes) for lay in layouts]
        ax.bar(x - 0.27, [r["default_time"] * 1e6 for r in rows], 0.27, label="binomial (rank order)")
        ax.bar(x, [r["hierarchical_time"] * 1e6 for r in rows], 0.27, label="binomial mapped on topology")
        ax.bar(x + 0.27, [r["aware_time"] * 1e6 for r in rows], 0.27, label="topology-aware (built)")
        ax.set_xticks(x, layouts, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("broadcast time (µs, simulated)")
        ax.set_title(f"{nbytes} B message")
        ax.legend(fontsize=7)
    fig.suptitle("64 nodes on 4 switches: binomial tree vs topology-/speed-aware tree")
    suffix = "" if records[0].get("transport", "lite") == "lite" else "_" + records[0]["transport"]
    _report.save(fig, directory, f"sim_bcast_topology{suffix}.png")
    plt.close(fig)


def main(argv: list[str]) -> int:
    p = _report.parser("bcast-topology", __doc__)
    p.add_argument(
        "--layouts",
        type=lambda s: [x for x in s.split(",") if x],
        default=DEFAULT_LAYOUTS,
        help="comma-separated layouts: block, round-robin, scattered, with optional -mixed or -4ppn",
    )
    p.add_argument(
        "--bytes",
        type=_report.int_list,
        default=DEFAULT_SIZES_BYTES,
        help="comma-separated message sizes in bytes",
    )
    p.add_argument(
        "--transport",
        choices=sorted(TRANSPORTS),
        default="lite",
        help="lite: one put (data + flag) per tree edge on lightweight ranks (default); "
        "engine: real aiorma ranks, a GATS epoch per parent",
    )
    args = p.parse_args(argv)
    for layout in args.layouts:
        try:
            make_layout(layout)
        except ValueError as exc:
            p.error(str(exc))
    params = NetworkParams(seed=args.seed)
    progress = _report.Progress("bcast-topology", len(args.layouts) * len(args.bytes))
    records = []
    for layout in args.layouts:
        for nbytes in args.bytes:
            records.append(record(layout, nbytes, params, args.seed, args.transport))
            progress.step(f"{layout} {nbytes} B")
    config = {
        "layouts": args.layouts,
        "bytes": args.bytes,
        "transport": args.transport,
        "nodes": NODES,
        "switches": SWITCHES,
        "fast": FAST,
        "slow": SLOW,
    }
    _report.write_json(args.json, "bcast-topology", params, config, records)
    if args.plot is not None:
        plot(records, args.plot)
    _report.print_table(
        [
            ("layout", "layout", ""),
            ("bytes", "nbytes", "d"),
            ("binomial inter-switch edges", "default_inter_switch_edges", "d"),
            ("aware", "aware_inter_switch_edges", "d"),
            ("binomial µs", "default_time", ".2f"),
            ("aware µs", "aware_time", ".2f"),
        ],
        records,
    )
    if not all(r["all_ranks_correct"] for r in records):
        print("[bcast-topology] ERROR: some rank did not end with the root's data", file=sys.stderr)
        return 1
    return 0

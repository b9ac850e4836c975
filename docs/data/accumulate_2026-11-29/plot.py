"""docs/img/accumulate_transactions_2026-11-29.png from the tx_*.json of this directory."""
import json
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

modes = ["mpi4py", "blocking", "nonblocking", "nonblocking+aaar"]
ranks = ["2", "4", "8"]
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), sharey=False)
for ax, p in zip(axes, ranks):
    for k, tree in enumerate(("base", "new")):
        vals = []
        for m in modes:
            runs = [json.load(open(f"tx_{tree}_{i}.json"))["results"][p]["modes"][m]["tx_per_s"] for i in (1, 2)]
            vals.append(statistics.median(runs) / 1e3)
        xs = [i + (k - 0.5) * 0.38 for i in range(len(modes))]
        ax.bar(xs, vals, 0.38, label="before (c1c7c53)" if tree == "base" else "after: the gated loop (1adde13)")
    ax.set_xticks(range(len(modes)), ["mpi4py", "blocking", "nonbl.", "nonbl.+aaar"])
    ax.set_title(f"{p} ranks, one node")
    ax.set_ylabel("k transactions/s")
axes[0].legend(fontsize=8)
fig.suptitle("Transactions (lock, 256 B accumulate, unlock): the accumulate family on one node without MPI's RMA path")
fig.tight_layout()
fig.savefig("../../img/accumulate_transactions_2026-11-29.png", dpi=110)

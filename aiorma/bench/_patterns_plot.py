"""PNG plots of the patterns benchmark, in the manner of Zounmevo (2014), Figs 5.13–5.22.

One figure per experiment (``patterns_<experiment>.png``): a panel per message size, and for
each series two bars side by side — the victim's latency without the delay and with it — labelled
with the share of the delay that propagated.  ``patterns_summary.png`` puts every propagated share
on one chart with the 25 % and 75 % targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def plot_experiment(records: Sequence[dict[str, Any]], out: Path, title_note: str = "") -> Path:
    plt = _plt()
    name = records[0]["experiment"]
    sizes = sorted({r["size_bytes"] for r in records})
    series = list(dict.fromkeys(r["series"] for r in records))
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.6), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        rows = {r["series"]: r for r in records if r["size_bytes"] == size}
        for i, s in enumerate(series):
            r = rows.get(s)
            if r is None:
                continue
            base = r["victim_us"] - r["propagated_us"]
            ax.bar(i - 0.18, base, width=0.36, color="#9ecae1", label="without delay" if i == 0 else None)
            ax.bar(
                i + 0.18, r["victim_us"], width=0.36, color="#3182bd", label="with delay" if i == 0 else None
            )
            share = r["propagated_us"] / r["delay_us"] if r["delay_us"] > 0 else float("nan")
            ax.annotate(
                f"{r['propagated_us']:+.0f} µs\n({share:.0%} of {r['delay_us']:.0f})",
                (i + 0.18, r["victim_us"]),
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ax.set_xticks(range(len(series)), series, fontsize=8)
        ax.set_title(_size(size), fontsize=9)
        ax.set_ylabel("victim latency (µs, median)")
        ax.margins(y=0.25)
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2)
    fig.suptitle(f"{name} — {title_note}" if title_note else name, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path = out / f"patterns_{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_summary(records: Sequence[dict[str, Any]], out: Path, title_note: str = "") -> Path:
    plt = _plt()
    labels = list(dict.fromkeys(f"{r['experiment']}\n{_size(r['size_bytes'])}" for r in records))
    series = list(dict.fromkeys(r["series"] for r in records))
    width = 0.8 / max(1, len(series))
    colours = {"blocking": "#d62728", "nonblocking": "#1f77b4", "nonblocking+flag": "#2ca02c"}
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(labels)), 4.2))
    for j, s in enumerate(series):
        xs, ys = [], []
        for r in records:
            if r["series"] != s or r["delay_us"] <= 0:
                continue
            xs.append(
                labels.index(f"{r['experiment']}\n{_size(r['size_bytes'])}")
                + (j - (len(series) - 1) / 2) * width
            )
            ys.append(100 * r["propagated_us"] / r["delay_us"])
        ax.bar(xs, ys, width=width, label=s, color=colours.get(s))
    ax.axhline(25, color="black", linestyle=":", linewidth=1, label="25 % / 75 % targets")
    ax.axhline(75, color="black", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(labels)), labels, fontsize=6.5, rotation=60, ha="right")
    ax.set_ylabel("delay propagated to the victim (%)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"Propagated share of the injected delay — {title_note}", fontsize=10)
    fig.tight_layout()
    path = out / "patterns_summary.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(records: Sequence[dict[str, Any]], out: Path, title_note: str = "") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in dict.fromkeys(r["experiment"] for r in records):
        paths.append(plot_experiment([r for r in records if r["experiment"] == name], out, title_note))
    if records:
        paths.append(plot_summary(records, out, title_note))
    return paths

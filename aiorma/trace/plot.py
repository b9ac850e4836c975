"""Draw the two lifetimes of every traced epoch, per rank (Zounmevo 2014, Figs 5.6).

For each epoch: a thin bar from ``open`` to ``close`` (application level) above a thick bar from
``activate`` to ``complete`` (internal), ticks where its RMA calls were issued.  A gap between
``open`` and ``activate`` is the time the epoch spent deferred; an internal bar running on after
the application bar is what the program no longer waits for.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._cli import import_extra
from . import CATEGORY, load

KIND_COLOURS = {
    "fence": "#7f7f7f",
    "post": "#1f77b4",
    "start": "#d62728",
    "lock": "#2ca02c",
    "lock_all": "#9467bd",
}


@attrs.define
class EpochSpan:
    rank: int
    win: int
    epoch: int
    kind: str
    times: dict[str, float] = attrs.field(factory=dict)  # step -> µs
    issues: list[float] = attrs.field(factory=list)


def epochs_from_events(events: Iterable[dict[str, Any]]) -> list[EpochSpan]:
    """Rebuild each epoch's steps from the instant events of a trace."""
    spans: dict[tuple[int, int, int], EpochSpan] = {}
    for event in events:
        if event.get("cat") != CATEGORY or event.get("ph") != "i":
            continue
        args = event["args"]
        key = (args["rank"], args["win"], args["epoch"])
        span = spans.setdefault(key, EpochSpan(*key, args["kind"]))
        step = event["name"].split(" ", 1)[0]
        if step == "issue":
            span.issues.append(event["ts"])
        else:
            span.times.setdefault(step, event["ts"])
    return sorted(spans.values(), key=lambda s: (s.rank, s.times.get("open", 0.0), s.win, s.epoch))


def plot(
    paths: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    windows: Sequence[int] | None = None,
    title: str | None = None,
    tail_us: float | None = None,
) -> Path:
    """Draw the epochs found in the trace files ``paths`` into the PNG ``out``: only those of
    ``windows`` if given, only those opened in the last ``tail_us`` µs of the trace if given.
    Needs matplotlib: raises ModuleNotFoundError naming the extra to install without it."""
    matplotlib = import_extra("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    spans = [s for s in epochs_from_events(load(paths)) if windows is None or s.win in windows]
    if spans and tail_us is not None:
        last = max(t for s in spans for t in [*s.times.values(), *s.issues])
        spans = [s for s in spans if s.times.get("open", s.times.get("activate", 0.0)) >= last - tail_us]
    if not spans:
        raise ValueError(f"no epoch events in {', '.join(map(str, paths))}")
    origin = min(t for s in spans for t in [*s.times.values(), *s.issues])
    end = max(t for s in spans for t in [*s.times.values(), *s.issues]) - origin
    ranks = sorted({s.rank for s in spans})
    rows = {r: [s for s in spans if s.rank == r] for r in ranks}
    heights = [max(1, len(rows[r])) for r in ranks]
    fig, axes = plt.subplots(
        len(ranks),
        1,
        sharex=True,
        squeeze=False,
        figsize=(10, 1.6 + 0.45 * sum(heights)),
        gridspec_kw={"height_ratios": heights},
    )
    for ax, rank in zip(axes[:, 0], ranks, strict=True):
        ticks, labels = [], []
        for y, span in enumerate(rows[rank]):
            colour = KIND_COLOURS.get(span.kind, "black")
            t = {k: v - origin for k, v in span.times.items()}
            if "open" in t:
                stop = t.get("close", end)
                ax.barh(y - 0.24, stop - t["open"], left=t["open"], height=0.16, color=colour, alpha=0.45)
            if "activate" in t:
                stop = t.get("complete", end)
                ax.barh(
                    y + 0.08,
                    max(stop - t["activate"], end * 0.002),
                    left=t["activate"],
                    height=0.36,
                    color=colour,
                )
            for issue in span.issues:
                ax.plot([issue - origin] * 2, [y - 0.14, y + 0.3], color="black", linewidth=0.8)
            ticks.append(y)
            labels.append(f"w{span.win} #{span.epoch} {span.kind}")
        ax.set_yticks(ticks, labels, fontsize=8)
        ax.set_ylim(-0.6, len(rows[rank]) - 0.4)
        ax.invert_yaxis()
        ax.set_ylabel(f"rank {rank}")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time since the first traced event (µs)")
    kinds = sorted({s.kind for s in spans})
    handles = [Patch(color=KIND_COLOURS.get(k, "black"), label=k) for k in kinds]
    handles += [
        Patch(facecolor="grey", alpha=0.45, label="application: open → close (thin)"),
        Patch(facecolor="grey", label="internal: activate → complete (thick)"),
        Patch(facecolor="black", label="| RMA issued"),
    ]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles))
    fig.suptitle(title or "aiorma epoch lifetimes")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    target = Path(out)
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target

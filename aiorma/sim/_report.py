"""What every experiment shares: progress lines, the JSON file, plots, argument parsing."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .._cli import command_parser, plot_directory
from .cost import NetworkParams


class Progress:
    """Periodic progress lines on stderr (at most one every ``every`` seconds, plus the last)."""

    def __init__(self, experiment: str, total: int, every: float = 2.0) -> None:
        self.experiment = experiment
        self.total = total
        self.every = every
        self.done = 0
        self.started = time.monotonic()
        self._last = 0.0

    def step(self, what: str) -> None:
        self.done += 1
        now = time.monotonic()
        if now - self._last >= self.every or self.done == self.total:
            self._last = now
            print(
                f"[{self.experiment}] {self.done}/{self.total} {what} ({now - self.started:.1f} s)",
                file=sys.stderr,
                flush=True,
            )


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The experiment's parser, its description the module docstring as plain text, with the
    options every experiment has."""
    p = command_parser(f"python -m aiorma.sim {prog}", description)
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the records here as JSON")
    p.add_argument(
        "--plot",
        type=plot_directory,
        default=None,
        metavar="DIR",
        help="write PNG plots into DIR (needs matplotlib)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    return p


def int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, not {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def float_list(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, not {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def print_table(columns: Sequence[tuple[str, str, str]], records: Sequence[dict]) -> None:
    """The results on standard output, one row per record: ``columns`` are (heading, record
    key, format spec); times (keys naming a time) are printed in µs."""
    cells = [
        [format(r[key] * 1e6 if "time" in key else r[key], spec) for _, key, spec in columns] for r in records
    ]
    widths = [max(len(heading), *(len(row[i]) for row in cells)) for i, (heading, _, _) in enumerate(columns)]
    print("  ".join(heading.rjust(w) for (heading, _, _), w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))


def write_json(
    path: Path | None,
    experiment: str,
    params: NetworkParams,
    config: dict[str, Any],
    records: Sequence[dict],
) -> None:
    """Write ``{"experiment", "network", "config", "machine", "records"}`` to ``path`` (nothing
    when ``path`` is None: the table on standard output is the result)."""
    if path is None:
        return
    document = {
        "experiment": experiment,
        "network": attrs.asdict(params),
        "config": config,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "nproc": os.cpu_count(),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        },
        "records": list(records),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1) + "\n")
    print(f"[{experiment}] wrote {len(records)} records to {path}", file=sys.stderr, flush=True)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"wrote {path}", file=sys.stderr, flush=True)
    return path

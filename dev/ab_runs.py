"""The runs an A/B plot compares (dev/plot_*_ab.py): arguments LABEL:GLOB, one series each."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any


def load_series(specs: list[str]) -> list[tuple[str, list[Any]]]:
    """For each ``LABEL:GLOB``, ("LABEL (N runs)", the JSON files the glob matches, sorted by
    name, as parsed); exits with a message when a glob matches nothing."""
    series = []
    for spec in specs:
        label, pattern = spec.split(":", 1)
        runs = [json.loads(Path(path).read_text()) for path in sorted(glob.glob(pattern))]
        if not runs:
            raise SystemExit(f"no file matches {pattern}")
        series.append((f"{label} ({len(runs)} runs)", runs))
    return series

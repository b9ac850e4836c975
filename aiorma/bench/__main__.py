"""``python -m aiorma.bench NAME [options]``: run one benchmark (``--help`` after NAME for its
options); with no NAME, list them."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import aiorma.bench


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(aiorma.bench.__path__) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        print("benchmarks:", ", ".join(names) if names else "(none)")
        return 0
    name, rest = argv[0].replace("-", "_"), argv[1:]
    if name not in names:
        print(f"unknown benchmark {argv[0]!r}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"aiorma.bench.{name}").main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

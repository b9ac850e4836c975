"""Run one of aiorma's benchmarks.

NAME --help describes a benchmark and its options.  The MPI benchmarks start their ranks
themselves under the mpiexec of the mpich wheel (pip install 'aiorma[mpich]'); --plot needs
matplotlib (pip install 'aiorma[plot]')."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import textwrap

import aiorma.bench

from .._cli import WIDTH, summary


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(aiorma.bench.__path__) if not m.name.startswith("_"))


def usage(names: list[str]) -> str:
    """The top-level help: what the command does and every benchmark with its one-line summary."""
    width = max(map(len, names), default=0)
    docs = {name: importlib.import_module(f"aiorma.bench.{name}").__doc__ for name in names}
    indent = " " * (width + 4)
    lines = [
        textwrap.fill(f"  {name:<{width}}  {summary(doc)}", WIDTH, subsequent_indent=indent)
        for name, doc in docs.items()
    ]
    return "\n".join([f"usage: python -m aiorma.bench NAME [options]\n\n{__doc__}\n\nbenchmarks:", *lines])


def main(argv: list[str]) -> int:
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(names))
        return 0
    name, rest = argv[0].replace("-", "_"), argv[1:]
    if name not in names:
        print(f"unknown benchmark {argv[0]!r}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"aiorma.bench.{name}").main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

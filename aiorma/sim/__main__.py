"""Run one of aiorma's simulated experiments: many ranks on a simulated network, in this process.

EXPERIMENT --help describes an experiment and its options; --plot needs matplotlib
(pip install 'aiorma[plot]')."""

from __future__ import annotations

import importlib
import sys

EXPERIMENTS = {
    "barrier": "aiorma.sim.barrier",
    "bcast-topology": "aiorma.sim.bcast_topology",
    "bcast-multicast": "aiorma.sim.bcast_multicast",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m aiorma.sim EXPERIMENT [--json PATH] [--plot DIR] [options]\n\n{__doc__}")
        print("\nexperiments:", ", ".join(EXPERIMENTS))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in EXPERIMENTS:
        print(f"unknown experiment {name!r}; available: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    return int(importlib.import_module(EXPERIMENTS[name]).main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

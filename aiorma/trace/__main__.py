"""``python -m aiorma.trace plot TRACE... --out PNG`` | ``merge TRACE... --out TRACE``.

``plot`` draws application-level (open → close) and internal (activate → complete) lifetimes of
every epoch, one panel per rank; it reads merged or per-rank files.  ``merge`` joins the per-rank
files of an mpiexec run into one file for Perfetto.
"""

from __future__ import annotations

import argparse
import sys

from . import merge


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiorma.trace", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p_plot = commands.add_parser("plot", help="draw epoch lifetimes into a PNG")
    p_plot.add_argument("traces", nargs="+", help="trace files (merged or one per rank)")
    p_plot.add_argument("--out", required=True, help="PNG to write")
    p_plot.add_argument("--window", type=int, action="append", help="only this window id (repeatable)")
    p_plot.add_argument("--tail-us", type=float, help="only epochs opened in the last N µs of the trace")
    p_plot.add_argument("--title")
    p_merge = commands.add_parser("merge", help="merge per-rank trace files into one")
    p_merge.add_argument("traces", nargs="+")
    p_merge.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "plot":
            from .plot import plot

            path = plot(args.traces, args.out, windows=args.window, title=args.title, tail_us=args.tail_us)
        else:
            path = merge(args.traces, args.out)
    except (OSError, ValueError, KeyError) as exc:
        print(f"python -m aiorma.trace {args.command}: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Look at the epoch traces aiorma writes (AIORMA_TRACE=PATH; one file per rank under mpiexec).

plot draws the application-level (open to close) and internal (activate to complete) lifetimes of
every epoch, one panel per rank, into a PNG; it reads merged or per-rank files and needs
matplotlib (pip install 'aiorma[plot]').  merge joins the per-rank files of an mpiexec run into
one file for Perfetto (ui.perfetto.dev) or chrome://tracing.

    python -m aiorma.trace plot trace.rank*.json --out epochs.png
    python -m aiorma.trace merge trace.rank*.json --out trace.json
"""

from __future__ import annotations

import sys

from .._cli import command_parser, missing_extra
from . import merge


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.trace", __doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_plot = commands.add_parser(
        "plot",
        help="draw epoch lifetimes into a PNG (needs matplotlib)",
        description="Draw the application-level and internal lifetimes of every traced epoch, one "
        "panel per rank, into a PNG.  Needs matplotlib (pip install 'aiorma[plot]').",
    )
    p_plot.add_argument("traces", nargs="+", metavar="TRACE", help="trace files (merged or one per rank)")
    p_plot.add_argument("--out", required=True, metavar="PNG", help="the PNG file to write")
    p_plot.add_argument(
        "--window", type=int, action="append", metavar="ID", help="only this window id (repeatable)"
    )
    p_plot.add_argument(
        "--tail-us", type=float, metavar="US", help="only epochs opened in the last US µs of the trace"
    )
    p_plot.add_argument("--title", help="the figure's title (default: aiorma epoch lifetimes)")
    p_merge = commands.add_parser(
        "merge",
        help="merge per-rank trace files into one",
        description="Merge the per-rank trace files of an mpiexec run into one trace file.",
    )
    p_merge.add_argument("traces", nargs="+", metavar="TRACE", help="per-rank trace files")
    p_merge.add_argument("--out", required=True, metavar="TRACE", help="the merged trace file to write")
    args = parser.parse_args(argv)
    try:
        if args.command == "plot":
            if (problem := missing_extra("matplotlib", "plot")) is not None:
                p_plot.error(problem)
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

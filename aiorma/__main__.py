"""aiorma's own commands.

info prints what a bug report needs: the versions of aiorma, Python, numpy, mpi4py and the MPI
library, MPI's thread level, the transports and event-loop backends usable here, where every rank
runs, and the environment switches that are set.  Under mpiexec every rank takes part and rank 0
prints for all.  Paste its output into bug reports.

    python -m aiorma info
    python -m aiorma info --json
    mpiexec -n 4 python -m aiorma info
"""

from __future__ import annotations

import json
import sys

from ._cli import command_parser
from .diagnostics import info


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma", __doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p_info = commands.add_parser(
        "info",
        help="versions, MPI thread level, transports, rank placement and switches, for bug reports",
        description="Print the versions of aiorma, Python, numpy, mpi4py and the MPI library, MPI's "
        "thread level, the usable transports and event-loop backends, every rank's host and the "
        "ranks sharing memory with it, and the aiorma and MPI environment variables that are set.  "
        "Under mpiexec every rank takes part and rank 0 prints for all.",
    )
    p_info.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p_info.add_argument("--no-mpi", action="store_true", help="do not import mpi4py (which initialises MPI)")
    if not argv:
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    report = info(mpi=not args.no_mpi)
    if report.rank not in (None, 0):
        return 0  # rank 0 prints every rank's place
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

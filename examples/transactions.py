"""Transactional updates: many small exclusive-lock accumulates to random peers (Zounmevo 2014,
§5.4.2, §5.8.2).

    mpiexec -n 4 python examples/transactions.py --json out.json
    python examples/transactions.py --local 4 --transactions 500

The workload is :mod:`aiorma.apps.transactions` (read it for the modes and the exact check), so
that ``python -m aiorma.bench transactions`` runs from an installed package too.
"""

import sys

from aiorma.apps.transactions import cli

if __name__ == "__main__":
    sys.exit(cli())

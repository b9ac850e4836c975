"""Dense LU with partial pivoting over fence epochs, blocking vs nonblocking (Zounmevo 2014, §5.8.3).

    mpiexec -n 4 python examples/lu_solver.py --n 2048 --json lu.json
    python examples/lu_solver.py --local 4 --n 256

The solver is :mod:`aiorma.apps.lu_solver` (read it for the algorithm and the two variants), so
that ``python -m aiorma.bench lu`` runs from an installed package too; this script pins BLAS to
one thread per rank and runs it.
"""

import os
import sys

# Before numpy is loaded, or OpenBLAS ignores it; an explicit setting in the environment wins.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from aiorma.apps.lu_solver import cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(cli())

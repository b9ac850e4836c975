"""One round of the soak test under mpiexec (tests/soak.py: mpi_round); the plan is its argument,
as JSON.  Ends with ``os._exit``: MPI_Finalize after a peer died is the MPI library's business."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from tests.mpi_harness import RESULTS_DIR
from tests.soak import Round, mpi_rank

if __name__ == "__main__":
    asyncio.run(mpi_rank(Round(**json.loads(sys.argv[1])), os.environ[RESULTS_DIR]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

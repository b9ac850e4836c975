"""``python -m aiorma info`` under mpiexec, run on every rank by tests/test_info.py.

Every rank runs the command's ``main`` (rank 0 prints the JSON report for all ranks, the others
print nothing), then writes its own ``aiorma.info()`` for the test
(tests/mpi_harness.write_rank_result), so the test can check that every rank saw the same
placement and its own rank.
"""

from __future__ import annotations

import os
import socket
import sys

from mpi4py import MPI

import aiorma
from aiorma.__main__ import main
from tests.mpi_harness import RESULTS_DIR, write_rank_result

status = main(["info", "--json"])
sys.stdout.flush()
report = aiorma.info().to_dict()
report["status"] = status
report["own_host"] = socket.gethostname()
if RESULTS_DIR in os.environ:  # run by run_mpi_json (launch_mpi alone only reads stdout)
    write_rank_result(MPI.COMM_WORLD.Get_rank(), report)

"""The quick collectives battery under mpiexec with a given LL threshold, run by tests/test_ll.py.

The registry runs the battery with the default configuration, whose LL messages are one word;
this runs it with longer LL messages (several words, ``put`` + ``flush``), interleaved with
chunked ones.  Usage: ``mpiexec -n N python ll_battery.py LL_BYTES LL_SLOTS``; each rank writes
the names of the checks that passed (``write_rank_result``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma.collectives import landing
from aiorma.collectives.landing import LandingConfig
from tests.mpi_harness import write_rank_result
from tests.mpi_scripts.collectives_check import QUICK, run_checks


async def main(comm: aiorma.Comm) -> None:
    write_rank_result(comm.rank, await run_checks(comm, QUICK))


if __name__ == "__main__":
    landing.DEFAULT_CONFIG = LandingConfig(ll_bytes=int(sys.argv[1]), ll_slots=int(sys.argv[2]))
    aiorma.run(main)

"""The collectives battery under mpiexec with large messages read out of the sender's process,
run by tests/test_single_copy.py.

Usage: ``mpiexec -n N python single_copy_battery.py SINGLE_COPY_BYTES``: messages of at least
that many bytes between ranks that can read each other (one node: ``process_vm_readv``) skip the
landing slots.  Each rank writes the checks that passed, the peers it may read, how many reads it
made and its host name (``write_rank_result``).
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from aiorma.collectives import landing
from aiorma.collectives.landing import LandingConfig
from aiorma.transport.mpi.endpoint import MpiEndpoint
from tests.mpi_harness import write_rank_result
from tests.mpi_scripts.collectives_check import QUICK, run_checks

READS = [0]


def counted_read(self: MpiEndpoint, peer: int, address: int, out: np.ndarray) -> None:
    READS[0] += 1
    read_memory(self, peer, address, out)


read_memory = MpiEndpoint.read_memory


async def main(comm: aiorma.Comm) -> None:
    passed = await run_checks(comm, [*QUICK, "bcast_large"])
    endpoint = comm.world.endpoint
    readable = [peer for peer in range(comm.size) if endpoint.reads_memory_of(peer)]
    result = {"passed": passed, "readable": readable, "reads": READS[0], "host": socket.gethostname()}
    write_rank_result(comm.rank, result)


if __name__ == "__main__":
    landing.DEFAULT_CONFIG = LandingConfig(single_copy_bytes=int(sys.argv[1]))
    MpiEndpoint.read_memory = counted_read  # type: ignore[method-assign]
    aiorma.run(main)

"""The MPI transport: one rank per process under ``mpiexec``, over mpi4py.

One job per module:

* :mod:`~aiorma.transport.mpi.endpoint` — :class:`MpiEndpoint`, the
  :class:`~aiorma.transport.base.Endpoint`: windows, RMA issue and flush, control-region atomics,
  polling, close and abandon;
* :mod:`~aiorma.transport.mpi.windows` — an aiorma window's two MPI windows, created and freed
  collectively;
* :mod:`~aiorma.transport.mpi.cpu_atomics` — the CPU's own atomics on a peer's control words,
  mapped here, when every rank is on one node;
* :mod:`~aiorma.transport.mpi.datatypes` — aiorma's element types and operations as MPI's;
* :mod:`~aiorma.transport.mpi.doorbell` — the UDP doorbells: which peer to ring and when, and
  the parked flag that asks peers to ring us;
* :mod:`~aiorma.transport.mpi.workers` — the collectives thread and the blocking-RMA thread.

The presence words, the ring liveness and the busy-progress thread the endpoint also uses sit
beside this package (:mod:`aiorma.transport.presence`, :mod:`~aiorma.transport.liveness`,
:mod:`~aiorma.transport.busy_progress`).
"""

from .endpoint import MpiEndpoint

__all__ = ["MpiEndpoint"]

"""Collectives built only on aiorma's RMA layer: windows, puts, flushes, monotonic flags.

The user-facing calls are methods of :class:`aiorma.Comm` (``barrier``, ``bcast``, ``reduce``,
``allreduce``, ``allgather``, ``gather``, ``scatter``, ``alltoall``); this package holds the
machinery (docs/collectives.md explains it):

* :mod:`.landing` — per-Comm landing windows and the flag/credit protocol;
* :mod:`.ll` — LL messages: small messages as one put, the completion flag inside the data;
* :mod:`.runner` — runs a Comm's collectives in call order, the first step inside the call;
* :mod:`.objects` — the object form (mpi4py's lowercase collectives: pickled Python objects);
* :mod:`.watcher` — notices flags raised by peers;
* :mod:`.barrier`, :mod:`.bcast`, :mod:`.reduce`, :mod:`.gather` — the algorithms;
* :mod:`.schedules` — their communication patterns as pure functions;
* :mod:`.model` — the LogGP cost model and :func:`calibrate`; :mod:`.select` picks algorithms;
* :mod:`.topology` — topology-/speed-aware broadcast trees (Subramoni et al., 2011).
"""

from __future__ import annotations

from .api import Collectives, calibrate
from .landing import DEFAULT_CONFIG, LandingConfig
from .model import LogGP
from .runner import CollectiveStreamBroken

__all__ = ["DEFAULT_CONFIG", "CollectiveStreamBroken", "Collectives", "LandingConfig", "LogGP", "calibrate"]

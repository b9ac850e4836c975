"""One registry of multi-rank checks: the shared scenarios (tests/scenarios.py) and the collectives
battery (tests/mpi_scripts/collectives_check.py), each with the world sizes it runs at on each
transport.

tests/test_registry.py runs every entry at each of its sizes on each transport as its own test
(``test_check[<transport>-<size>-<name>]``); under MPI one mpiexec job per (size, emulation) runs
every entry of that size (tests/mpi_scripts/run_registry.py), because starting mpiexec per check
costs about a second each on a loaded machine.

The sizes are chosen per transport explicitly: the in-process transports are cheap, so they take
the wide ranges; MPI ranks share two cores, so the collectives stop at 5 ranks there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import aiorma

from .mpi_scripts import collectives_check
from .scenarios import SCENARIOS

Body = Callable[[aiorma.Comm], Awaitable[None]]

#: The transports a check can run on.  ``mpi_2nodes`` is ``mpi`` with the ranks on two emulated
#: nodes (no shared memory between them: the off-node path, see aiorma.bench._launch).
TRANSPORTS = ("local", "simulated", "mpi", "mpi_2nodes")


@dataclass(frozen=True)
class Check:
    """A multi-rank check: ``body(comm)`` asserts on every rank; ``sizes[transport]`` are the world
    sizes it runs at there (a transport it is not listed for runs it at no size)."""

    name: str
    body: Body
    sizes: Mapping[str, tuple[int, ...]]
    timeout: float = 60.0

    async def run(self, comm: aiorma.Comm) -> None:
        """Run the check on this rank, failing with TimeoutError after ``timeout`` seconds (a hung
        check fails instead of hanging the run)."""
        async with asyncio.timeout(self.timeout):
            await self.body(comm)


REGISTRY: dict[str, Check] = {}


def _add(check: Check) -> None:
    assert check.name not in REGISTRY, f"two checks named {check.name}"
    REGISTRY[check.name] = check


# --------------------------------------------------------------------------- scenarios
#
# Each scenario declares its sizes (tests/scenarios.py); those hold on every transport.  Under two
# emulated nodes a scenario needs at least 2 ranks, and 2 and 3 ranks cover both one and two ranks
# per node.
for _name, (_body, _declared) in SCENARIOS.items():
    _add(
        Check(
            _name,
            _body,
            {
                "local": _declared,
                "simulated": tuple(n for n in _declared if n in (1, 2, 3, 4)),
                "mpi": _declared,
                "mpi_2nodes": tuple(n for n in _declared if n in (2, 3)),
            },
        )
    )

# --------------------------------------------------------------------------- collectives
#
# The quick battery at 1..9 ranks in-process; the heavy checks (1000 back-to-back collectives,
# multi-slot messages, calibration) at 3 and 6.  Under MPI every check at 2..5 ranks, and at 3
# ranks on two emulated nodes.
_HEAVY = ("back_to_back_1000", "bcast_large", "calibrate_model")
for _name, _body in collectives_check.CHECKS.items():
    _local = (3, 6) if _name in _HEAVY else tuple(range(1, 10))
    _add(
        Check(
            _name,
            _body,
            {"local": _local, "simulated": (2, 5), "mpi": (2, 3, 4, 5), "mpi_2nodes": (3,)},
            timeout=240.0,
        )
    )


def cases(transport: str) -> list[tuple[int, str]]:
    """Every (size, check name) that runs on ``transport``, by size and then registry order."""
    sizes = sorted({n for check in REGISTRY.values() for n in check.sizes.get(transport, ())})
    return [(n, name) for n in sizes for name in names_at(transport, n)]


def names_at(transport: str, size: int) -> list[str]:
    """The checks that run on ``transport`` at ``size`` ranks, in registry order."""
    return [name for name, check in REGISTRY.items() if size in check.sizes.get(transport, ())]

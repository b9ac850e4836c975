"""Soak: seeded random programs (tests/random_program.py) under faults — waits abandoned at random
points, a rank leaving by an exception, a rank killed by SIGKILL — checked for the two promises of
docs/semantics.md: nothing hangs and nothing acknowledged is lost.

A *round* is one program on every rank with one kind of fault:

* ``cancel``: every rank abandons some of its waits (a deadline of 0-2 ms), then awaits the same
  Request again; the outcome must be exactly the one computed without aiorma;
* ``exception``: at a random step one rank raises; every other rank must fail with an RmaFailure
  naming it (PeerFailed, or a collective's CollectiveStreamBroken carrying that PeerFailed)
  within :data:`BOUND` seconds;
* ``kill`` (MPI only): the same rank kills its own process with SIGKILL instead.

``tests/test_soak.py`` runs a few rounds of each kind in the default test command.  A long run:

    python -m tests.soak --minutes 10 --transport local
    python -m tests.soak --minutes 10 --transport mpi           # real processes under mpiexec
    python -m tests.soak --minutes 10 --transport mpi_2nodes    # two emulated nodes

prints one line per round and a summary, and exits non-zero on the first broken promise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiorma

from .random_program import expected_outcome, make_program, run_program

BOUND = 2.0  # seconds from a rank's failure to every survivor's (docs/semantics.md)
STEPS = 12
KINDS_LOCAL = ("cancel", "exception")
KINDS_MPI = ("cancel", "exception", "kill")
# Between emulated nodes a kill is not soaked: UCX moves their data by cross-memory attach, which
# aborts a survivor whose RMA meets the dead process, and without it (UCX_TLS=^cma, as
# test_liveness_mpi.py runs) RMA between them goes over TCP active messages that a blocking
# flush waits on; a data put into a dead process then fails an assertion in MPICH's UCX layer
# (ucx_rma.h) whatever aiorma does.  Control writes return an error there, which
# test_liveness_mpi.py covers on two emulated nodes.
KINDS_2NODES = ("cancel", "exception")
# The dying rank's shell outlives it, keeping its place in the job (see test_liveness_mpi.py).
OUTLIVE = ["sh", "-c", '"$@"; sleep 3', "rank"]


class Boom(Exception):
    """The fault a rank raises on purpose."""


@dataclass(frozen=True)
class Round:
    seed: int
    size: int
    fault: str  # "cancel", "exception" or "kill"
    faulty: int  # the rank that fails (exception, kill)
    step: int  # ... before this step
    cancel_p: float  # the share of waits first abandoned

    @classmethod
    def plan(cls, seed: int, size: int, fault: str) -> Round:
        rng = random.Random(seed)
        return cls(seed, size, fault, rng.randrange(size), rng.randrange(STEPS), rng.uniform(0.1, 0.5))


async def run_rank(comm: aiorma.Comm, plan: Round, results_dir: str | None = None) -> dict[str, Any]:
    """This rank's part of ``plan``: its program outcome, or the failure it got and when."""
    rng = random.Random(plan.seed * 1009 + comm.rank)

    async def wait(request: aiorma.Request) -> Any:
        if rng.random() < plan.cancel_p:
            try:
                async with asyncio.timeout(rng.uniform(0, 0.002)):
                    await request
            except TimeoutError:
                pass  # abandoned: the operation goes on, and is awaited again below
        return await request

    async def fault(step: int) -> None:
        if plan.fault == "cancel" or step != plan.step or comm.rank != plan.faulty:
            return
        if plan.fault == "exception":
            raise Boom(f"rank {comm.rank} fails at step {step}")
        assert results_dir is not None
        _write(results_dir, comm.rank, {"killed_at": time.time()})
        os.kill(os.getpid(), signal.SIGKILL)

    try:
        return {"outcome": await run_program(comm, make_program(plan.seed, comm.size, STEPS), wait, fault)}
    except aiorma.RmaFailure as failure:
        named = _named(failure)
        return {"failed": type(failure).__name__, "message": str(failure), "at": time.time(), **named}


def _named(failure: BaseException) -> dict[str, Any]:
    """The rank a failure names: PeerFailed's, or the one a CollectiveStreamBroken carries."""
    if isinstance(failure, aiorma.PeerFailed):
        return {"names": failure.rank}
    return {"names": None}


def check(plan: Round, results: dict[int, dict[str, Any]], failed_at: float | None) -> str | None:
    """What broke a promise in this round (None: nothing)."""
    if plan.fault == "cancel":
        expected = expected_outcome(make_program(plan.seed, plan.size, STEPS), plan.size)
        for rank in range(plan.size):
            if results.get(rank, {}).get("outcome") != expected[rank]:
                return f"rank {rank}: {results.get(rank)} != the outcome computed without aiorma"
        return None
    for rank in range(plan.size):
        if rank == plan.faulty:
            continue
        got = results.get(rank)
        if got is None or "failed" not in got:
            return f"rank {rank} did not fail after rank {plan.faulty} did: {got}"
        names = got["names"] == plan.faulty or f"rank {plan.faulty} " in got["message"]
        if not names:
            return f"rank {rank} failed without naming rank {plan.faulty}: {got}"
        if failed_at is not None and got["at"] - failed_at > BOUND:
            return f"rank {rank} learnt of rank {plan.faulty}'s failure after {got['at'] - failed_at:.2f} s"
    return None


# ------------------------------------------------------------------------------ in-process


def local_round(plan: Round) -> str | None:
    """Run ``plan`` on the in-process transport; what broke (None: nothing)."""
    results: dict[int, dict[str, Any]] = {}
    failed_at: list[float] = []

    async def main(comm: aiorma.Comm) -> None:
        async with asyncio.timeout(30):  # a hang fails the round, it does not stop the run
            try:
                results[comm.rank] = await run_rank(comm, plan)
            except Boom:
                failed_at.append(time.time())
                raise

    try:
        aiorma.run(main, nprocs=plan.size)
    except Boom:
        pass
    except TimeoutError:
        return "a rank hung (30 s)"
    if plan.fault == "exception" and not failed_at:
        return None  # the program ended before the failing step (cannot happen: steps < STEPS)
    return check(plan, results, failed_at[0] if failed_at else None)


# ------------------------------------------------------------------------------ under mpiexec


def _write(results_dir: str, rank: int, result: dict[str, Any]) -> None:
    path = Path(results_dir) / f"rank{rank}.json"
    previous = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(previous | result))


async def mpi_rank(plan: Round, results_dir: str) -> None:
    """One rank of an MPI round (tests/mpi_scripts/soak_round.py): inside ``connect``, so that a
    failing rank leaves by its exception and the survivors record what they got."""
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    try:
        async with aiorma.connect(MPI.COMM_WORLD) as comm:
            result = await run_rank(comm, plan, results_dir)
            _write(results_dir, rank, result)
    except Boom:
        _write(results_dir, rank, {"raised_at": time.time()})
    except aiorma.RmaFailure:
        pass  # leaving connect after the failure: what the rank got is written already
    if plan.fault != "cancel":
        # Every process stays a moment, as a program that goes on (or finalizes) would: between
        # emulated nodes UCX aborts a rank whose RMA meets a process that has exited, and a peer
        # may still be writing its parking flag into ours.
        time.sleep(BOUND + 1.0)


def mpi_round(plan: Round, emulate_nodes: int = 0) -> str | None:
    """Run ``plan`` under mpiexec; what broke (None: nothing)."""
    from .mpi_harness import RESULTS_DIR, launch_mpi

    script = Path(__file__).parent / "mpi_scripts" / "soak_round.py"
    with tempfile.TemporaryDirectory() as results_dir:
        env = {RESULTS_DIR: results_dir}
        outcome = launch_mpi(
            script,
            plan.size,
            json.dumps(asdict(plan)),
            timeout=90,
            emulate_nodes=emulate_nodes,
            env=env,
            wrapper=OUTLIVE if plan.fault == "kill" else (),
        )
        if outcome.returncode is None:
            return f"the job hung: {outcome.describe()}"
        results = {}
        for rank in range(plan.size):
            path = Path(results_dir) / f"rank{rank}.json"
            if path.exists():
                results[rank] = json.loads(path.read_text())
        faulty = results.get(plan.faulty, {})
        failed_at = faulty.get("raised_at", faulty.get("killed_at"))
        broken = check(plan, results, failed_at)
        return None if broken is None else f"{broken}\n{outcome.describe()}"


# ------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    parser.add_argument("--transport", choices=["local", "mpi", "mpi_2nodes"], default="local")
    parser.add_argument("--seed", type=int, default=1, help="the first round's seed")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + 60 * args.minutes
    kinds = {"local": KINDS_LOCAL, "mpi": KINDS_MPI, "mpi_2nodes": KINDS_2NODES}[args.transport]
    rounds = 0
    seed = args.seed
    while time.monotonic() < deadline:
        size = random.Random(seed).choice([2, 3, 4])
        plan = Round.plan(seed, size, kinds[seed % len(kinds)])
        started = time.monotonic()
        if args.transport == "local":
            broken = local_round(plan)
        else:
            broken = mpi_round(plan, 2 if args.transport == "mpi_2nodes" else 0)
        rounds += 1
        print(
            f"round {rounds}: seed {seed}, {size} ranks, {plan.fault}: "
            f"{'ok' if broken is None else 'BROKEN'} ({time.monotonic() - started:.1f} s)",
            flush=True,
        )
        if broken is not None:
            print(broken)
            return 1
        seed += 1
    print(f"{rounds} rounds on {args.transport}, every promise kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())

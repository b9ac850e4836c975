"""The registry under mpiexec: one job per (world size, emulated nodes) runs every check of that
size (tests/mpi_scripts/run_registry.py); each rank leaves one JSON line per check, and each check's
test reads its verdict from those lines.

A job that crashes or times out fails every check it did not finish on every rank, each failure
carrying the job's exit status and captured output, so nothing hangs and nothing passes unseen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .mpi_harness import MpiOutcome, launch_mpi
from .registry import TRANSPORTS, names_at

SCRIPT = Path(__file__).parent / "mpi_scripts" / "run_registry.py"
#: A job runs every check of its size in turn; each check has its own, shorter timeout inside.
JOB_TIMEOUT = 600.0


@dataclass
class RegistryJob:
    """One finished mpiexec job: its outcome and every rank's records, by check name."""

    size: int
    names: list[str]
    outcome: MpiOutcome
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def failure(self, name: str) -> str | None:
        """Why check ``name`` failed in this job, or None if every rank passed it."""
        mine = self.records.get(name, [])
        passed = {r["rank"] for r in mine if r["passed"]}
        if passed == set(range(self.size)):
            return None
        errors = "\n".join(f"--- rank {r['rank']} ---\n{r['error']}" for r in mine if not r["passed"])
        missing = sorted(set(range(self.size)) - {r["rank"] for r in mine})
        return (
            f"check {name} on {self.size} ranks: passed on ranks {sorted(passed)}, "
            f"no result from ranks {missing}\n{errors}\n{self.outcome.describe()}"
        )


def run_job(
    size: int,
    transport: str,
    out_dir: Path,
    names: list[str] | None = None,
    timeout: float = JOB_TIMEOUT,
    inline: bool = True,
) -> RegistryJob:
    """Run every check of ``transport`` ("mpi" or "mpi_2nodes") at ``size`` (or just ``names``, in
    that order) in one mpiexec job; ``inline=False`` with the inline paths off (``AIORMA_INLINE=0``)."""
    assert transport in TRANSPORTS and transport.startswith("mpi"), transport
    if names is None:
        names = names_at(transport, size)
    out_dir.mkdir(parents=True, exist_ok=True)
    emulate = 2 if transport == "mpi_2nodes" else 0
    env = None if inline else {"AIORMA_INLINE": "0"}
    outcome = launch_mpi(SCRIPT, size, str(out_dir), *names, timeout=timeout, emulate_nodes=emulate, env=env)
    job = RegistryJob(size, names, outcome)
    for path in sorted(out_dir.glob("rank*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():  # a rank killed mid-write leaves at most a partial last line
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                job.records.setdefault(record["check"], []).append(record)
    return job


class RegistryJobs:
    """The jobs of a test session, each run once, on first use."""

    def __init__(self, base_dir: Path) -> None:
        self._base_dir = base_dir
        self._jobs: dict[tuple[str, int, bool], RegistryJob] = {}

    def job(self, transport: str, size: int, inline: bool = True) -> RegistryJob:
        key = (transport, size, inline)
        if key not in self._jobs:
            where = self._base_dir / f"{transport}-{size}{'' if inline else '-inline_off'}"
            self._jobs[key] = run_job(size, transport, where, inline=inline)
        return self._jobs[key]

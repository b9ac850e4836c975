"""Run registry checks in turn on the MPI transport, each rank writing one JSON line per check.

Started by tests/mpi_registry.py as ``mpiexec -n N python run_registry.py OUT_DIR CHECK...``.
Rank ``r`` appends ``{"check", "rank", "size", "passed", "seconds", "error"}`` to
``OUT_DIR/rank<r>.jsonl`` (flushed at once) after each check.  A failing check is recorded with its
traceback and then re-raised, so aiorma.run aborts the whole job: a failure never leaves the other
ranks hanging, and the checks after it are reported by the harness as not reached.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import aiorma
from tests.registry import REGISTRY


def _record(out: TextIO, comm: aiorma.Comm, name: str, started: float, error: str | None) -> None:
    entry = {
        "check": name,
        "rank": comm.rank,
        "size": comm.size,
        "passed": error is None,
        "seconds": round(time.monotonic() - started, 3),
        "error": error,
    }
    out.write(json.dumps(entry) + "\n")
    out.flush()


async def main(comm: aiorma.Comm, out_dir: Path, names: list[str]) -> None:
    with open(out_dir / f"rank{comm.rank}.jsonl", "a", encoding="utf-8") as out:
        for name in names:
            started = time.monotonic()
            try:
                await REGISTRY[name].run(comm)
            except BaseException:
                _record(out, comm, name, started, traceback.format_exc())
                raise
            _record(out, comm, name, started, None)


if __name__ == "__main__":
    aiorma.run(main, Path(sys.argv[1]), sys.argv[2:])

"""``python -m aiorma.bench collectives`` runs end to end, tiny, with the persistent forms, and its
table shows what was measured.  Times, never asserted: only that every cell was measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorma.bench import collectives

from .mpi_harness import locate_mpiexec, run_python


def test_the_persistent_table_shows_only_rows_that_have_it() -> None:
    rows = [
        {"collective": "bcast", "ranks": 2, "bytes": 8, "mpi_us": 1.0, "aiorma_us": 5.0, "ratio": 5.0},
        {
            "collective": "allreduce",
            "ranks": 2,
            "bytes": 8,
            "mpi_us": 2.0,
            "aiorma_us": 8.0,
            "ratio": 4.0,
            "mpi_persistent_us": 1.5,
            "aiorma_persistent_us": 3.0,
            "persistent_ratio": 2.0,
        },
    ]
    plain = collectives.table(rows)
    assert "| bcast | 8 | 1.0 / 5 / **5.0** |" in plain and "| allreduce | 8 | 2.0 / 8 / **4.0** |" in plain
    persistent = collectives.table(rows, "persistent")
    assert "| allreduce | 8 | 1.5 / 3 / **2.0** |" in persistent and "bcast" not in persistent


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_collectives_bench_tiny_with_persistent_forms(tmp_path: Path) -> None:
    assert locate_mpiexec() is not None, "no mpiexec found (install the mpich wheel)"
    out = tmp_path / "collectives.json"
    args = ["--ranks", "2", "--sizes", "8,4096", "--collectives", ",".join(collectives.COLLECTIVES)]
    args += ["--budget", "0.01", "--persistent", "--json", str(out)]
    result = run_python("-m", "aiorma.bench", "collectives", *args, timeout=170)
    assert "freeing inactive persistent request" not in result.stderr  # MPI's requests are freed
    rows = json.loads(out.read_text())["rows"]
    cells = {(r["collective"], r["bytes"]) for r in rows}
    sizes = {"barrier": [0]}
    assert cells == {(name, n) for name in collectives.COLLECTIVES for n in sizes.get(name, [8, 4096])}
    for row in rows:
        for key in ("mpi_us", "aiorma_us", "mpi_persistent_us", "aiorma_persistent_us"):
            assert row[key] > 0, (key, row)
    assert "persistent: MPI µs / aiorma µs / ratio" in result.stdout

"""``python -m aiorma.bench patterns`` runs end to end, tiny: JSON schema and completeness only.

No timing is asserted: a unit test never asserts wall-clock speed (a loaded machine would fail it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiorma.bench import patterns
from aiorma.bench._patterns_experiments import EXPERIMENTS, FLAG, NONBLOCKING

from .mpi_harness import REPO_ROOT, locate_mpiexec

KEYS = {"experiment", "size_bytes", "series", "delay_us", "propagated_us", "victim_us", "reps"}


def expected_rows(names: list[str]) -> set[tuple[str, int, str]]:
    return {(n, size, s) for n in names for size in EXPERIMENTS[n].sizes for s in EXPERIMENTS[n].series}


def check_records(records: list[dict], names: list[str], reps: int) -> None:
    assert isinstance(records, list)
    for r in records:
        assert set(r) == KEYS, r
        assert isinstance(r["experiment"], str) and isinstance(r["series"], str)
        assert isinstance(r["size_bytes"], int) and r["size_bytes"] > 0
        for key in ("delay_us", "propagated_us", "victim_us"):
            assert isinstance(r[key], int | float)
        assert r["victim_us"] > 0
        assert r["reps"] == reps
    rows = [(r["experiment"], r["size_bytes"], r["series"]) for r in records]
    assert len(set(rows)) == len(rows)
    assert {(r["experiment"], r["size_bytes"], r["series"]) for r in records} == expected_rows(names)
    for r in records:
        if r["experiment"] != "early_fence":
            assert r["delay_us"] == 1000.0


@pytest.mark.timeout(120)
def test_patterns_local_every_experiment_and_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "patterns.json"
    plots = tmp_path / "img"
    assert (
        patterns.main(["--transport", "local", "--reps", "2", "--json", str(out), "--plot", str(plots)]) == 0
    )
    records = json.loads(out.read_text())
    check_records(records, list(EXPERIMENTS), reps=2)
    table = capsys.readouterr().out
    assert table.count("\n| ") == len(records) + 1  # header + one row per record
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert pngs == sorted([f"patterns_{n}.png" for n in EXPERIMENTS] + ["patterns_summary.png"])
    for png in plots.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_patterns_filters_and_bad_arguments(tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    argv = ["--transport", "local", "--reps", "1", "--only", "exposure_after_access", "--sizes", "1"]
    assert patterns.main([*argv, "--series", FLAG, "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert [(r["experiment"], r["size_bytes"], r["series"]) for r in records] == [
        ("exposure_after_access", 1, FLAG)
    ]
    for bad in (
        ["--only", "nope"],
        ["--reps", "0"],
        ["--ranks", "2", "--only", "late_post"],
        ["--series", "x"],
    ):
        with pytest.raises(SystemExit) as caught:
            patterns.main(["--transport", "local", *bad])
        assert caught.value.code not in (0, None)


def test_helper_modules_are_not_benchmarks() -> None:
    from aiorma.bench.__main__ import available

    names = available()
    assert "patterns" in names
    assert not [name for name in names if name.startswith("_")]


@pytest.mark.mpi
@pytest.mark.timeout(180)
def test_patterns_mpi_tiny(tmp_path: Path) -> None:
    """Re-executes itself under the mpich wheel's mpiexec: a 2-rank and a 3-rank job."""
    assert locate_mpiexec() is not None, "no mpiexec found (install the mpich wheel)"
    names = ["wait_at_fence", "exposure_after_exposure"]
    out = tmp_path / "mpi.json"
    cmd = [sys.executable, "-m", "aiorma.bench", "patterns", "--transport", "mpi", "--reps", "2"]
    cmd += ["--only", ",".join(names), "--json", str(out), "--timeout", "150"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=170, env=env)
    assert result.returncode == 0, result.stderr
    assert "2 ranks: wait_at_fence" in result.stderr and "3 ranks: exposure_after_exposure" in result.stderr
    check_records(json.loads(out.read_text()), names, reps=2)
    assert {r["series"] for r in json.loads(out.read_text())} >= {NONBLOCKING, FLAG}

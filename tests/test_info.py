"""aiorma.info() and ``python -m aiorma info``: the report a bug report needs, in-process, in a
fresh interpreter, and under mpiexec (every rank takes part; rank 0 prints for all)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import aiorma
from aiorma import diagnostics
from aiorma.__main__ import main
from aiorma.bench._launch import OPEN_MPI, emulation_unavailable, locate_mpiexec, mpiexec_library

from .mpi_harness import REPO_ROOT, launch_mpi, run_mpi_json

SCRIPTS = Path(__file__).parent / "mpi_scripts"
PACKAGE = REPO_ROOT / "aiorma"


def run_python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python args`` with the repository on PYTHONPATH, outside mpiexec."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_"))}
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), full.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, env=full)


def test_info_is_public() -> None:
    assert callable(aiorma.info) and aiorma.info is diagnostics.info


def test_info_without_mpi_reports_versions_and_the_local_transport() -> None:
    report = aiorma.info(mpi=False)
    assert report.aiorma == aiorma.__version__
    assert report.python.split()[1] == ".".join(map(str, sys.version_info[:3]))
    assert report.transports == ("local",)
    assert report.mpi_problem is not None and report.mpi_library is None
    assert "asyncio" in report.backends
    assert ("trio" in report.backends) == (__import__("importlib").util.find_spec("trio") is not None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        report.aiorma = "x"  # type: ignore[misc]


def test_set_switches_are_reported_with_what_they_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIORMA_INLINE", "0")
    monkeypatch.setenv("AIORMA_NOT_A_SWITCH", "1")
    monkeypatch.setenv("MPIR_CVAR_NOLOCAL", "1")
    monkeypatch.setenv("UCX_TLS", "tcp")
    report = aiorma.info(mpi=False)
    assert report.aiorma_environment["AIORMA_INLINE"] == "0"
    assert report.mpi_environment["MPIR_CVAR_NOLOCAL"] == "1"
    assert report.mpi_environment["UCX_TLS"] == "tcp"
    assert "AIORMA_INLINE" not in report.mpi_environment
    text = report.text()
    assert f"AIORMA_INLINE=0  ({diagnostics.SWITCHES['AIORMA_INLINE']})" in text
    assert "AIORMA_NOT_A_SWITCH=1  (not a variable aiorma reads)" in text


def test_every_aiorma_variable_the_package_reads_is_described() -> None:
    # The report explains each switch: a new AIORMA_ variable must be added to SWITCHES.
    read = set()
    for path in PACKAGE.rglob("*.py"):
        read.update(re.findall(r"\bAIORMA_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    assert read, "the scan found no variable at all"
    assert read == set(diagnostics.SWITCHES)


def test_python_m_aiorma_info_prints_the_report() -> None:
    done = run_python("-m", "aiorma", "info")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"aiorma        {aiorma.__version__}"
    facts = dict(line.split(None, 1) for line in lines if line and not line.startswith(" ") and "  " in line)
    for key in ("python", "numpy", "mpi4py", "transports", "backends"):
        assert key in facts, done.stdout
    assert facts["transports"].startswith("local, mpi")
    assert re.search(r"^MPI library +\S", done.stdout, re.M)
    assert re.search(r"^thread level +THREAD_MULTIPLE$", done.stdout, re.M)
    assert re.search(r"^  rank 0 +on \S+; shares memory with ranks 0$", done.stdout, re.M)


def test_python_m_aiorma_info_json_parses() -> None:
    done = run_python("-m", "aiorma", "info", "--json", env={"AIORMA_TRACE": "/nonexistent/x.json"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["aiorma"] == aiorma.__version__
    assert report["transports"] == ["local", "mpi"] and report["mpi_problem"] is None
    assert report["thread_level"] == "THREAD_MULTIPLE"
    assert re.fullmatch(r"\d+\.\d+", report["mpi_standard"])
    assert report["mpi_library"] and "\n" not in report["mpi_library"]
    assert report["size"] == 1 and report["rank"] == 0
    assert report["nodes"] == [{"rank": 0, "host": report["nodes"][0]["host"], "shared_memory": [0]}]
    assert report["aiorma_environment"]["AIORMA_TRACE"] == "/nonexistent/x.json"
    assert set(report) == {f.name for f in attrs.fields(diagnostics.Diagnostics)}


def test_main_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json", "--no-mpi"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["transports"] == ["local"] and report["nodes"] == []
    assert main([]) == 0
    assert "info" in capsys.readouterr().out


def test_info_leaves_mpi_uninitialised_when_the_program_initialises_it_itself() -> None:
    script = """
import json, mpi4py
mpi4py.rc.initialize = False
import aiorma
report = aiorma.info()
from mpi4py import MPI
print(json.dumps({"problem": report.mpi_problem, "initialized": MPI.Is_initialized()}))
"""
    done = run_python("-c", script)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["initialized"] is False
    assert "not initialised" in result["problem"]


def test_a_lower_thread_level_makes_the_mpi_transport_unusable() -> None:
    script = """
import json, mpi4py
mpi4py.rc.thread_level = "serialized"
import aiorma
report = aiorma.info()
print(json.dumps([report.thread_level, list(report.transports), report.mpi_problem]))
"""
    done = run_python("-c", script)
    assert done.returncode == 0, done.stderr
    level, transports, problem = json.loads(done.stdout)
    assert level == "THREAD_SERIALIZED"
    assert transports == ["local"]
    assert "THREAD_MULTIPLE" in problem


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_info_under_mpiexec_at_two_ranks() -> None:
    outcome = launch_mpi(SCRIPTS / "info_check.py", 2, timeout=120, env={"AIORMA_INLINE": "0"})
    assert outcome.ok, outcome.describe()
    printed = json.loads(outcome.stdout)  # rank 0 alone printed, one JSON object
    assert printed["size"] == 2 and printed["rank"] == 0
    assert [place["rank"] for place in printed["nodes"]] == [0, 1]
    assert printed["aiorma_environment"]["AIORMA_INLINE"] == "0"
    # The launcher's variables: hydra's PMI_*, Open MPI's OMPI_*.
    assert any(name.startswith(("PMI_", "OMPI_")) for name in printed["mpi_environment"])


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_every_rank_sees_every_ranks_place() -> None:
    reports = run_mpi_json(SCRIPTS / "info_check.py", 2, timeout=120)
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["status"] == 0 and r["size"] == 2 for r in reports)
    assert reports[0]["nodes"] == reports[1]["nodes"]
    nodes = reports[0]["nodes"]
    assert [n["host"] for n in nodes] == [r["own_host"] for r in reports]
    # One machine: both ranks on one host, sharing memory.
    assert [n["shared_memory"] for n in nodes] == [[0, 1], [0, 1]]


@pytest.mark.mpi
@pytest.mark.timeout(150)
def test_emulated_nodes_show_as_two_hosts() -> None:
    if (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    reports = run_mpi_json(SCRIPTS / "info_check.py", 2, timeout=120, emulate_nodes=2)
    nodes = reports[0]["nodes"]
    assert [n["host"] for n in nodes] == ["node0", "node1"]
    mpiexec = locate_mpiexec()
    assert mpiexec is not None
    # MPICH's shared-memory groups follow the hostname; Open MPI's follow its launcher, which
    # still sees one machine (emulation only keeps its traffic off shared memory).
    together = mpiexec_library(mpiexec) == OPEN_MPI
    assert [n["shared_memory"] for n in nodes] == ([[0, 1], [0, 1]] if together else [[0], [1]])
    assert reports[1]["aiorma_environment"]["AIORMA_EMULATE_NODES"] == "2"

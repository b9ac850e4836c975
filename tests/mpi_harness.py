"""Run a Python script on N ranks under the mpich wheel's ``mpiexec`` (used by the MPI tests).

MPICH's hydra starts more ranks than cores without extra flags.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from aiorma.bench._launch import locate_mpiexec, mpiexec_command

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["REPO_ROOT", "locate_mpiexec", "run_mpi", "run_mpi_json", "write_rank_result"]


def run_mpi(
    script: str | Path, nprocs: int, *args: str, timeout: float = 120, emulate_nodes: int = 0
) -> subprocess.CompletedProcess[str]:
    """Run ``mpiexec -n nprocs python script args`` with the repository on ``PYTHONPATH``.

    ``emulate_nodes >= 2`` runs the ranks on that many emulated nodes (see
    :func:`aiorma.bench._launch.mpiexec_command`); the caller checks ``emulation_unavailable()``
    first.  Raises AssertionError, with the captured stdout/stderr, on a non-zero exit or a timeout;
    on a timeout the whole process group (mpiexec and every rank) is killed first.
    """
    assert locate_mpiexec() is not None, "no mpiexec found (install the mpich wheel)"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    cmd = mpiexec_command(nprocs, [sys.executable, str(script), *args], emulate_nodes)
    # A new session makes mpiexec and its ranks one process group that a timeout can kill whole.
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            raise AssertionError(
                f"{' '.join(cmd)} timed out after {timeout} s\n"
                f"--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
            ) from None
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited with {result.returncode}\n"
            f"--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        )
    return result


#: Environment variable naming the directory where a script run by :func:`run_mpi_json` writes
#: its per-rank result (see :func:`write_rank_result`).
RESULTS_DIR = "AIORMA_TEST_RESULTS"


def run_mpi_json(
    script: str | Path, nprocs: int, *args: str, timeout: float = 120, emulate_nodes: int = 0
) -> list[Any]:
    """:func:`run_mpi`, then each rank's result as written by :func:`write_rank_result`, in rank
    order (mpiexec interleaves the ranks' stdout, so results travel in files, not in text)."""
    with tempfile.TemporaryDirectory() as results:
        os.environ[RESULTS_DIR] = results
        try:
            proc = run_mpi(script, nprocs, *args, timeout=timeout, emulate_nodes=emulate_nodes)
        finally:
            del os.environ[RESULTS_DIR]
        found = sorted(Path(results).glob("rank*.json"), key=lambda p: int(p.stem[4:]))
        assert len(found) == nprocs, f"{len(found)}/{nprocs} ranks wrote a result\n{proc.stdout}{proc.stderr}"
        return [json.loads(p.read_text()) for p in found]


def write_rank_result(rank: int, result: Any) -> None:
    """In a script run by :func:`run_mpi_json`: this rank's JSON-serialisable result."""
    path = Path(os.environ[RESULTS_DIR]) / f"rank{rank}.json"
    path.write_text(json.dumps(result))

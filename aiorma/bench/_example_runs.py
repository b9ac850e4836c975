"""What the example-driving benchmarks (transactions, lu) share: running an example under the
mpich wheel's ``mpiexec``, describing the machine, and writing the result document."""

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

from ._launch import emulation_unavailable, mpiexec_command

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


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
        "mpich": version("mpich"),
        "mpi4py": version("mpi4py"),
        "numpy": version("numpy"),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run_example(
    script: str, ranks: int, args: list[str], timeout: float, emulate_nodes: int = 0
) -> dict[str, Any]:
    """Run ``examples/<script>`` on ``ranks`` processes with ``--json``; return what it wrote.

    ``emulate_nodes >= 2`` spreads the ranks over that many emulated nodes (see
    :mod:`aiorma.bench._launch`).  The example's table goes to our stdout, its progress lines
    straight to our stderr.  On a timeout the whole job (mpiexec and every rank) is killed.  Raises
    SystemExit on failure, or if emulation was asked for and cannot run here.
    """
    path = EXAMPLES / script
    if not path.exists():
        raise SystemExit(f"{path} not found: run the benchmark from a source checkout")
    if emulate_nodes >= 2 and (reason := emulation_unavailable()) is not None:
        raise SystemExit(reason)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = mpiexec_command(ranks, [sys.executable, str(path), *args, "--json", str(out)], emulate_nodes)
        print(f"$ {shlex.join(cmd)}", file=sys.stderr, flush=True)
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
        ) as proc:
            try:
                stdout, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise SystemExit(f"{script} on {ranks} ranks timed out after {timeout} s") from None
        print(stdout, end="", flush=True)
        if not out.exists():
            raise SystemExit(f"{script} on {ranks} ranks failed (exit {proc.returncode}); no result")
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

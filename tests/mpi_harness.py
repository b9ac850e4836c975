"""Run a Python script on N ranks under the mpich wheel's ``mpiexec`` (used by the MPI tests).

MPICH's hydra starts more ranks than cores without extra flags.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorma.bench._launch import locate_mpiexec, mpiexec_command

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "REPO_ROOT",
    "MpiOutcome",
    "launch_mpi",
    "locate_mpiexec",
    "run_mpi",
    "run_mpi_json",
    "run_smoke",
    "write_rank_result",
]


@dataclass(frozen=True)
class MpiOutcome:
    """How an mpiexec job ended: ``returncode`` None means it was killed at its timeout."""

    command: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timeout: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self, tail: int = 6000) -> str:
        """The exit status and the end of the captured output, for a failure message."""
        if self.returncode is None:
            ended = f"timed out after {self.timeout} s"
        else:
            ended = f"exited with {self.returncode}"
        return (
            f"{' '.join(self.command)} {ended}\n"
            f"--- stdout ---\n{self.stdout[-tail:]}\n--- stderr ---\n{self.stderr[-tail:]}"
        )


def launch_mpi(
    script: str | Path,
    nprocs: int,
    *args: str,
    timeout: float = 120,
    emulate_nodes: int = 0,
    env: dict[str, str] | None = None,
    wrapper: Sequence[str] = (),
) -> MpiOutcome:
    """Run ``mpiexec -n nprocs python script args`` with the repository on ``PYTHONPATH`` and return
    how it ended, never raising for a failed job.  ``emulate_nodes >= 2`` runs the ranks on that
    many emulated nodes (see :func:`aiorma.bench._launch.mpiexec_command`); the caller checks
    ``emulation_unavailable()`` first; ``env`` adds variables to the ranks' environment (e.g.
    ``AIORMA_INLINE=0``); ``wrapper`` is a command each rank's python runs under (its arguments
    follow).  On a timeout the whole process group (mpiexec and every
    rank) is killed before the output is collected, so nothing is left running."""
    assert locate_mpiexec() is not None, "no mpiexec found (install the mpich wheel)"
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    cmd = mpiexec_command(nprocs, [*wrapper, sys.executable, str(script), *args], emulate_nodes)
    with tempfile.TemporaryDirectory() as stacks:
        env[STACKS_DIR] = stacks
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
                hung = _stacks_of_ranks(str(script), Path(stacks))
                os.killpg(proc.pid, signal.SIGKILL)
                stdout, stderr = proc.communicate()
                return MpiOutcome(cmd, None, stdout, stderr + hung, timeout)
    return MpiOutcome(cmd, proc.returncode, stdout, stderr, timeout)


#: Environment variable naming the directory where a rank writes its stacks when sent SIGUSR1
#: (set by :func:`launch_mpi` for every job; a timed-out job's failure message shows them).
STACKS_DIR = "AIORMA_TEST_STACKS"


def _stacks_of_ranks(script: str, directory: Path) -> str:
    """Ask every rank process running ``script`` for its stacks (SIGUSR1: see
    :func:`_dump_stacks_when_asked`) and return what they wrote, for a hung job's failure
    message.  Only the rank processes are signalled: mpiexec and its proxies would die of it."""
    asked = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if script.encode() in argv and b"python" in argv[0]:
            try:
                os.kill(int(entry.name), signal.SIGUSR1)
                asked += 1
            except OSError:
                pass
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and len(list(directory.glob("stacks-*.txt"))) < asked:
        time.sleep(0.1)
    time.sleep(0.2)  # (let the last writer finish)
    dumps = [
        f"\n--- {path.name} ---\n{path.read_text(errors='replace')}"
        for path in sorted(directory.glob("stacks-*.txt"))
    ]
    return f"\n--- stacks of the {asked} hung rank processes ---" + "".join(dumps) if asked else ""


def _dump_stacks_when_asked() -> None:
    """In a rank started by :func:`launch_mpi`: on SIGUSR1, write every thread's stack and every
    asyncio task's to ``$AIORMA_TEST_STACKS/stacks-<rank>.txt`` (a hung job then says where each
    rank waits)."""
    directory = os.environ.get(STACKS_DIR)
    if not directory or "PMI_RANK" not in os.environ:
        return
    path = Path(directory) / f"stacks-{os.environ['PMI_RANK']}.txt"

    def dump(_signum: int, _frame: object) -> None:
        with path.open("w") as out:
            faulthandler.dump_traceback(out, all_threads=True)
            try:
                tasks = asyncio.all_tasks()  # (the handler runs inside the running loop)
            except RuntimeError:
                return
            for task in tasks:
                out.write(f"\n{task!r}\n")
                _write_await_chain(task.get_coro(), out)

    signal.signal(signal.SIGUSR1, dump)


def _write_await_chain(coro: Any, out: Any) -> None:
    """Where a suspended task waits: every coroutine or generator it awaits, innermost last (a
    task's own stack shows only its outermost frame), with the Request an ``__await__`` waits for."""
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            code = frame.f_code
            out.write(f"  {code.co_filename}:{frame.f_lineno} in {code.co_name}")
            if code.co_name == "__await__" and "self" in frame.f_locals:
                out.write(f"  awaiting {frame.f_locals['self']!r}")
            out.write("\n")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


_dump_stacks_when_asked()


def run_mpi(
    script: str | Path,
    nprocs: int,
    *args: str,
    timeout: float = 120,
    emulate_nodes: int = 0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """:func:`launch_mpi`, raising AssertionError with the captured stdout/stderr on a non-zero
    exit or a timeout."""
    outcome = launch_mpi(script, nprocs, *args, timeout=timeout, emulate_nodes=emulate_nodes, env=env)
    if not outcome.ok:
        raise AssertionError(outcome.describe(tail=1 << 20))
    return subprocess.CompletedProcess(outcome.command, outcome.returncode, outcome.stdout, outcome.stderr)


SMOKE = Path(__file__).parent / "mpi_scripts" / "transport_smoke.py"


def run_smoke(nprocs: int, out_dir: Path, timeout: float, emulate_nodes: int = 0) -> None:
    """Run the MpiEndpoint smoke test (mpi_scripts/transport_smoke.py) and assert that every rank
    wrote its passing result file to ``out_dir``."""
    result = run_mpi(SMOKE, nprocs, str(out_dir), timeout=timeout, emulate_nodes=emulate_nodes)
    reports = [json.loads(path.read_text()) for path in sorted(out_dir.glob("rank*.json"))]
    expected = [{"rank": rank, "size": nprocs, "passed": True} for rank in range(nprocs)]
    assert sorted(reports, key=lambda report: report["rank"]) == expected, (reports, result.stdout)


#: Environment variable naming the directory where a script run by :func:`run_mpi_json` writes
#: its per-rank result (see :func:`write_rank_result`).
RESULTS_DIR = "AIORMA_TEST_RESULTS"


def run_mpi_json(
    script: str | Path,
    nprocs: int,
    *args: str,
    timeout: float = 120,
    emulate_nodes: int = 0,
    env: dict[str, str] | None = None,
) -> list[Any]:
    """:func:`run_mpi`, then each rank's result as written by :func:`write_rank_result`, in rank
    order (mpiexec interleaves the ranks' stdout, so results travel in files, not in text)."""
    with tempfile.TemporaryDirectory() as results:
        os.environ[RESULTS_DIR] = results
        try:
            proc = run_mpi(script, nprocs, *args, timeout=timeout, emulate_nodes=emulate_nodes, env=env)
        finally:
            del os.environ[RESULTS_DIR]
        found = sorted(Path(results).glob("rank*.json"), key=lambda p: int(p.stem[4:]))
        assert len(found) == nprocs, f"{len(found)}/{nprocs} ranks wrote a result\n{proc.stdout}{proc.stderr}"
        return [json.loads(p.read_text()) for p in found]


def run_python(*args: str, timeout: float = 50) -> subprocess.CompletedProcess[str]:
    """``python *args`` from the repository's root with the tree importable; the finished process
    (its exit status checked)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def write_rank_result(rank: int, result: Any) -> None:
    """In a script run by :func:`run_mpi_json`: this rank's JSON-serialisable result."""
    path = Path(os.environ[RESULTS_DIR]) / f"rank{rank}.json"
    path.write_text(json.dumps(result))


#: A launch wrapper: the shell keeps the rank's place in the job (and its PMI connection) for a
#: while after python dies, so that the launcher does not end the job when a test kills a rank.
OUTLIVE = ["sh", "-c", '"$@"; sleep 8', "rank"]


def leave_after_a_death(rank: int, result: Any) -> None:
    """In a script where a peer was killed: write this rank's result and end the process without
    MPI_Finalize (finalizing with a dead rank is the MPI library's business, not the test's)."""
    write_rank_result(rank, result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

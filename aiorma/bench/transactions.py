"""``python -m aiorma.bench transactions``: the transactional update pattern (seed 001 §5.8.2).

Runs ``examples/transactions.py`` under ``mpiexec`` (the one next to this interpreter) for each
rank count, collects its JSON, and reports job throughput (transactions/s) per mode with the
ratios nonblocking/blocking and nonblocking+aaar/blocking, all measured in the same run.  Every
run also checks that no update was lost; the exit status is 1 if any was.

    python -m aiorma.bench transactions --ranks 2,4,8 --json tx.json --plot docs/img

The helpers :func:`run_example` and :func:`machine` are shared with the other example-driven
benchmarks (``lu``).
"""

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
from importlib import metadata
from pathlib import Path
from typing import Any

from ._launch import find_mpiexec

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
MODES = ("blocking", "nonblocking", "nonblocking+aaar")


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


def run_example(script: str, ranks: int, args: list[str], timeout: float) -> dict[str, Any]:
    """Run ``examples/<script>`` on ``ranks`` processes with ``--json``; return what it wrote.

    The example's table goes to our stdout, its progress lines straight to our stderr.  On a
    timeout the whole job (mpiexec and every rank) is killed.  Raises SystemExit on failure.
    """
    path = EXAMPLES / script
    if not path.exists():
        raise SystemExit(f"{path} not found: run the benchmark from a source checkout")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [find_mpiexec(), "-n", str(ranks), sys.executable, str(path), *args, "--json", str(out)]
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


def ratios(summary: dict[str, Any]) -> dict[str, float]:
    modes = summary["modes"]
    if "blocking" not in modes:
        return {}
    base = modes["blocking"]["tx_per_s"]
    return {f"{m}/blocking": modes[m]["tx_per_s"] / base for m in modes if m != "blocking"}


def plot(results: dict[int, dict[str, Any]], directory: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranks = sorted(results)
    modes = [m for m in MODES if all(m in results[r]["modes"] for r in ranks)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for mode in modes:
        left.plot(ranks, [results[r]["modes"][mode]["tx_per_s"] for r in ranks], marker="o", label=mode)
    left.set(xlabel="ranks", ylabel="transactions / s (whole job)", title="Throughput", xticks=ranks)
    left.set_ylim(bottom=0)
    left.legend()
    width = 0.8 / max(1, len(modes) - 1)
    for i, mode in enumerate(m for m in modes if m != "blocking"):
        values = [ratios(results[r]).get(f"{mode}/blocking", 0.0) for r in ranks]
        right.bar([j + i * width for j in range(len(ranks))], values, width, label=f"{mode} / blocking")
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set_xticks([j + width * (len(modes) - 2) / 2 for j in range(len(ranks))], [str(r) for r in ranks])
    right.set(xlabel="ranks", ylabel="throughput ratio", title="Speed-up over blocking (same run)")
    right.legend()
    fig.suptitle("Exclusive lock + 256 B accumulate + unlock to random targets")
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "transactions_throughput.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiorma.bench transactions", description=__doc__)
    parser.add_argument("--ranks", default="2,4,8", help="comma-separated rank counts (default %(default)s)")
    parser.add_argument("--transactions", type=int, default=2000, help="per rank per run")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode, interleaved (median)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per mpiexec job")
    parser.add_argument("--json", metavar="PATH", help="write every result, ratios and the machine")
    parser.add_argument("--plot", metavar="DIR", type=Path, help="write DIR/transactions_throughput.png")
    args = parser.parse_args(argv)
    try:
        counts = [int(r) for r in args.ranks.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--ranks takes comma-separated integers, not {args.ranks!r}")
    if not counts or min(counts) < 1:
        parser.error("--ranks needs positive rank counts")
    example_args = [
        *("--transactions", str(args.transactions), "--inflight", str(args.inflight)),
        *("--repeats", str(args.repeats), "--modes", args.modes),
    ]
    results = {n: run_example("transactions.py", n, example_args, args.timeout) for n in counts}

    print(f"\n{'ranks':>5}  " + "  ".join(f"{m:>18}" for m in results[counts[0]]["modes"]) + "  ratios")
    for n, summary in results.items():
        rates = "  ".join(f"{row['tx_per_s']:>12.0f} tx/s" for row in summary["modes"].values())
        ratio = ", ".join(f"{k} {v:.2f}" for k, v in ratios(summary).items())
        print(f"{n:>5}  {rates}  {ratio}")
    verified = all(row["verified"] for s in results.values() for row in s["modes"].values())
    print("no lost update in any run" if verified else "LOST UPDATES: see the tables above")

    document = {
        "benchmark": "transactions",
        "command": shlex.join(["python", "-m", "aiorma.bench", "transactions", *argv]),
        "machine": machine(),
        "results": {str(n): s for n, s in results.items()},
        "ratios": {str(n): ratios(s) for n, s in results.items()},
        "verified": verified,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2))
    if args.plot:
        print(f"plot: {plot(results, args.plot)}")
    return 0 if verified else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Dense LU over fence epochs, blocking vs nonblocking (Zounmevo 2014, §5.8.3).

Runs the solver :mod:`aiorma.apps.lu_solver` (what ``examples/lu_solver.py`` runs) under the
mpich wheel's ``mpiexec``, one job per rank count, each rank with one BLAS thread, and reports
per variant the time spent waiting for epochs, the time in communication calls and the
factorisation time (Zounmevo 2014, Figs 5.24–5.26), with the nonblocking/blocking ratios of the same run
and the scaled residual.  Exit status 1 if a residual exceeds 1e-12 or the variants disagree.

    python -m aiorma.bench lu --n 2048 --ranks 4 --json lu.json --plot docs/img
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .._cli import command_parser, plot_directory
from ._app_runs import rank_counts, run_app, write_document

RESIDUAL_BOUND = 1e-12


def ratios(summary: dict[str, Any]) -> dict[str, float]:
    variants = summary["variants"]
    if not {"blocking", "nonblocking"} <= variants.keys():
        return {}
    slow, fast = variants["blocking"], variants["nonblocking"]
    return {
        f"nonblocking/blocking {key}": fast[key] / slow[key] if slow[key] else float("nan")
        for key in ("wait_s", "comm_s", "total_s")
    }


def plot(results: dict[int, dict[str, Any]], directory: Path, n: int) -> Path:
    """Stacked bars per variant and rank count: wait, other communication, computation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, waits, comms, others = [], [], [], []
    for ranks in sorted(results):
        for name, row in results[ranks]["variants"].items():
            labels.append(f"{name}\n{ranks} ranks" if len(results) > 1 else name)
            waits.append(row["wait_s"])
            comms.append(row["comm_s"] - row["wait_s"])
            others.append(max(row["total_s"] - row["comm_s"], 0.0))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(labels)) + 3.5, 4.2), layout="constrained")
    x = range(len(labels))
    ax.bar(x, waits, 0.6, label="waiting for epochs\n(awaits of closing fences)")
    ax.bar(x, comms, 0.6, bottom=waits, label="other communication calls\n(fence, put, progress)")
    ax.bar(x, others, 0.6, bottom=[w + c for w, c in zip(waits, comms, strict=True)], label="computation")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("seconds")
    residual = max(s["residual"] for s in results.values())
    ax.set_title(f"LU factorisation, n = {n} (scaled residual {residual:.1e})")
    fig.legend(
        loc="outside right upper",
        fontsize="small",
        title="bar height = total (slowest rank);\nwait, comm: mean over ranks",
        title_fontsize="x-small",
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "lu_times.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    parser = command_parser("python -m aiorma.bench lu", __doc__)
    parser.add_argument("--n", type=int, default=2048, help="matrix order (default %(default)s)")
    parser.add_argument("--nb", type=int, default=64, help="column block (default %(default)s)")
    parser.add_argument("--ranks", default="4", help="comma-separated rank counts (default %(default)s)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs per variant, interleaved; the median is reported (default %(default)s)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds per mpiexec job (default %(default)s)"
    )
    parser.add_argument(
        "--json", metavar="PATH", help="write every result, the ratios and the machine as JSON"
    )
    parser.add_argument(
        "--plot", metavar="DIR", type=plot_directory, help="write DIR/lu_times.png (needs matplotlib)"
    )
    args = parser.parse_args(argv)
    counts = rank_counts(parser, args.ranks)
    app_args = ["--n", str(args.n), "--nb", str(args.nb), "--repeats", str(args.repeats)]
    results = {r: run_app("lu_solver", r, app_args, args.timeout) for r in counts}

    print(f"\n{'ranks':>5} {'variant':<12} {'wait s':>8} {'comm s':>8} {'total s':>8}")
    for ranks, summary in results.items():
        for name, row in summary["variants"].items():
            print(f"{ranks:>5} {name:<12} {row['wait_s']:>8.3f} {row['comm_s']:>8.3f} {row['total_s']:>8.3f}")
        for key, value in ratios(summary).items():
            print(f"{ranks:>5} {key}: {value:.2f}")
    ok = all(s["residual"] <= RESIDUAL_BOUND and s["variants_agree"] for s in results.values())
    residual = max(s["residual"] for s in results.values())
    print(f"scaled residual {residual:.2e} ({'ok' if ok else 'FAILED'}: bound {RESIDUAL_BOUND:g})")

    write_document("lu", argv, results, ratios, ok, args.json)
    if args.plot:
        print(f"plot: {plot(results, args.plot, args.n)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

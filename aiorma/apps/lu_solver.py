"""Dense LU with partial pivoting over fence epochs, blocking vs nonblocking (Zounmevo 2014, §5.8.3).

    mpiexec -n 4 python -m aiorma.apps.lu_solver --n 2048 --json lu.json
    python -m aiorma.apps.lu_solver --local 4 --n 256

(``examples/lu_solver.py`` runs the same with the same options; ``python -m aiorma.bench lu``
drives it for several rank counts.)

Solves ``A x = b`` for a reproducible, well-conditioned dense ``n × n`` matrix: ``A = P0 · D`` where
``D`` has entries uniform in [-1, 1] plus ``sqrt(n)`` on the diagonal (diagonally dominant, so its
condition number is small) and ``P0`` is a random row permutation — partial pivoting must find and
undo ``P0``, so the pivots are real row exchanges, not the identity.

**Distribution.** Columns are split into blocks of ``nb`` (1-D block cyclic): block ``j`` lives on
rank ``j % P``.  Each rank holds its blocks side by side in one ``n × n_local`` array.

**Right-looking LU, one fence epoch per panel.**  At step ``k`` the owner of block ``k`` has
factored that panel (rows ``k·nb`` to ``n``) with partial pivoting.  It makes the factored panel
and its pivot indices available to everyone by *putting* them into every other rank's **landing
window** inside a fence epoch (``fence(MODE_NOPRECEDE)`` … puts … ``fence(MODE_NOSUCCEED)``); the
other ranks open and close the same epoch without RMA calls.  Once the epoch has completed,
every rank applies the panel to its own columns: row exchanges, a triangular solve for the block
row of U, and the rank-``nb`` update of its trailing blocks.

**Look-ahead.**  During step ``k`` the owner of block ``k+1`` updates that block first and factors
it at once, so panel ``k+1`` is ready before the rest of step ``k``'s update.

The two variants differ only in synchronisation:

* ``blocking``: epoch ``k`` is opened, filled and closed at the start of step ``k`` and its
  closing fence is awaited at once — every rank waits there for the slowest one (MPI's blocking
  fence: Wait at Fence, Early Fence).
* ``nonblocking``: epoch ``k+1`` is opened, filled and closed *during* step ``k``, right after the
  look-ahead, and the closing fence's Request is held while the trailing update proceeds; it is
  awaited at the start of step ``k+1``, when panel ``k+1`` is needed.  Two landing windows
  (epochs alternate between them) make this safe: panel ``k+1`` lands in one window while the
  rank still reads panel ``k`` from the other, and an owner cannot put into a landing window
  before its rank opened the epoch that allows it (the engine grants fence access only then).
  Long compute loops call :func:`aiorma.progress` between blocks so the held epoch advances.

**Solve.**  After the factorisation every rank exposes its columns in a window and rank 0 reads
them all with ``get`` in shared-lock epochs, then does the two triangular solves (blocked, numpy)
and checks the scaled residual ``‖Ax − b‖∞ / (‖A‖∞ · ‖x‖∞)`` against a freshly generated ``A``.

**Timings per variant** (Zounmevo 2014, Figs 5.24–5.26): ``wait_s`` is time spent awaiting synchronisation
Requests (the closing fences); ``comm_s`` adds the time inside every communication call (fence,
put) — a superset of ``wait_s``; both are the mean over ranks.  ``total_s`` is the factorisation's
wall time on the slowest rank (the part where the variants differ); ``solve_s`` the gather and
triangular solves.  Run it with one BLAS thread per rank (several ranks share few cores): the
launchers set :data:`BLAS_THREAD_VARIABLES` to 1 unless the environment already sets them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import aiorma

# Set before numpy is loaded, or OpenBLAS ignores them: several ranks on few cores must not
# oversubscribe the cores with BLAS threads.  The launchers (examples/lu_solver.py,
# ``python -m aiorma.bench lu``) set them for every rank; an explicit setting wins.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

VARIANTS = ("blocking", "nonblocking")


@dataclass(frozen=True)
class Options:
    n: int = 2048
    nb: int = 64
    variants: tuple[str, ...] = VARIANTS
    repeats: int = 1
    seed: int = 7
    progress: bool = True


# ----------------------------------------------------------------------------- the problem


def column_block(options: Options, start: int, stop: int) -> np.ndarray:
    """Columns ``start:stop`` of A (one column block), the same on every rank."""
    n = options.n
    rng = np.random.default_rng([options.seed, n, start])
    block = rng.uniform(-1.0, 1.0, (n, stop - start))
    block[np.arange(start, stop), np.arange(stop - start)] += np.sqrt(n)
    return block[row_permutation(options)]


def row_permutation(options: Options) -> np.ndarray:
    return np.random.default_rng([options.seed, options.n, 1 << 40]).permutation(options.n)


def right_hand_side(options: Options) -> np.ndarray:
    return np.random.default_rng([options.seed, options.n, 1 << 41]).uniform(-1.0, 1.0, options.n)


@dataclass
class Layout:
    """1-D block-cyclic columns: block ``j`` (``nb`` wide, the last maybe narrower) on ``j % P``."""

    n: int
    nb: int
    size: int
    rank: int
    blocks: int = field(init=False)

    def __post_init__(self) -> None:
        self.blocks = -(-self.n // self.nb)

    def owner(self, j: int) -> int:
        return j % self.size

    def span(self, j: int) -> tuple[int, int]:
        return j * self.nb, min((j + 1) * self.nb, self.n)

    def mine(self) -> list[int]:
        return list(range(self.rank, self.blocks, self.size))

    def local(self, j: int) -> slice:
        """Columns of block ``j`` in its owner's local array."""
        start = (j // self.size) * self.nb
        lo, hi = self.span(j)
        return slice(start, start + hi - lo)

    def local_width(self) -> int:
        return sum(hi - lo for lo, hi in map(self.span, self.mine()))


# -------------------------------------------------------------------------- local kernels


def factor_panel(panel: np.ndarray) -> np.ndarray:
    """LU with partial pivoting of the ``m × w`` panel, in place (recursive, so that most of the
    work is matrix products).  Returns ``piv``: at column ``i``, row ``i`` was exchanged with row
    ``piv[i] >= i`` (LAPACK order, relative to the panel)."""
    w = panel.shape[1]
    if w <= 8:
        piv = np.empty(w, np.int64)
        for i in range(w):
            p = i + int(np.argmax(np.abs(panel[i:, i])))
            piv[i] = p
            if p != i:
                panel[[i, p]] = panel[[p, i]]
            if panel[i, i] == 0.0:
                raise ZeroDivisionError("singular matrix")
            panel[i + 1 :, i] /= panel[i, i]
            panel[i + 1 :, i + 1 :] -= np.outer(panel[i + 1 :, i], panel[i, i + 1 :])
        return piv
    half = w // 2
    left, right = panel[:, :half], panel[:, half:]
    piv1 = factor_panel(left)
    swap_rows(right, piv1)
    right[:half] = unit_lower_solve(left[:half], right[:half])
    right[half:] -= left[half:] @ right[:half]
    piv2 = factor_panel(panel[half:, half:])
    swap_rows(panel[half:, :half], piv2)
    return np.concatenate([piv1, piv2 + half])


def swap_rows(a: np.ndarray, piv: np.ndarray) -> None:
    """Apply the exchanges ``row i <-> row piv[i]`` in order, touching only the rows that move."""
    perm = np.arange(max(len(piv), int(piv.max()) + 1) if len(piv) else 0)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    moved = np.nonzero(perm != np.arange(len(perm)))[0]
    if len(moved):
        a[moved] = a[perm[moved]]


def unit_lower_solve(lower: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``L⁻¹ rhs`` for the unit lower triangle of the square ``lower``."""
    unit = np.tril(lower, -1) + np.eye(len(lower))
    return np.linalg.solve(unit, rhs)


def solve_factored(lu: np.ndarray, perm: np.ndarray, b: np.ndarray, nb: int) -> np.ndarray:
    """Solve ``A x = b`` given ``P A = L U`` (``lu`` packed, ``perm`` the rows of P), blocked."""
    n = len(b)
    y = b[perm].copy()
    for lo in range(0, n, nb):  # L y = P b, unit lower
        hi = min(lo + nb, n)
        y[lo:hi] -= lu[lo:hi, :lo] @ y[:lo]
        y[lo:hi] = unit_lower_solve(lu[lo:hi, lo:hi], y[lo:hi])
    x = y
    for lo in reversed(range(0, n, nb)):  # U x = y
        hi = min(lo + nb, n)
        x[lo:hi] -= lu[lo:hi, hi:] @ x[hi:]
        x[lo:hi] = np.linalg.solve(np.triu(lu[lo:hi, lo:hi]), x[lo:hi])
    return x


# ------------------------------------------------------------------------- instrumentation


class Clock:
    """Time inside communication calls (``comm``) and in awaits of sync Requests (``wait``)."""

    def __init__(self) -> None:
        self.comm = 0.0
        self.wait = 0.0

    def call(self, fn, *args):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.comm += time.perf_counter() - start

    async def await_(self, request: aiorma.Request) -> None:
        start = time.perf_counter()
        await request
        spent = time.perf_counter() - start
        self.wait += spent
        self.comm += spent


# ------------------------------------------------------------------------ the factorisation


class Factorisation:
    """One rank's part of one variant's LU: local columns, landing windows, pivots, clock."""

    def __init__(self, comm: aiorma.Comm, options: Options, variant: str, landing: list[aiorma.Window]):
        self.comm = comm
        self.options = options
        self.nonblocking = variant == "nonblocking"
        self.layout = Layout(options.n, options.nb, comm.size, comm.rank)
        self.landing = landing
        self.clock = Clock()
        self.label = f"[lu {variant}]"
        lay = self.layout
        self.local = np.empty((options.n, lay.local_width()))
        for j in lay.mine():
            self.local[:, lay.local(j)] = column_block(options, *lay.span(j))
        # The owner packs [pivots | panel] here and puts it; two, as epochs alternate windows.
        self.sendbuf = [np.empty(landing[0].memory.size) for _ in range(2)]
        self.pivots = np.empty(options.n, np.int64)  # global row exchanged at each column
        self.epochs: dict[int, tuple[aiorma.Request, aiorma.Request]] = {}

    # -- epochs

    def issue_epoch(self, k: int) -> None:
        """Open epoch ``k`` on its landing window; its owner puts panel ``k`` to everyone; close.
        The closing Request is kept in ``self.epochs``."""
        win = self.landing[k % 2]
        opened = self.clock.call(win.fence, aiorma.MODE_NOPRECEDE)
        if self.layout.owner(k) == self.comm.rank:
            lo, hi = self.layout.span(k)
            packed = self.sendbuf[k % 2][: self.options.nb + (self.options.n - lo) * (hi - lo)]
            for target in range(self.comm.size):
                if target != self.comm.rank:
                    self.clock.call(win.put, packed, target, 0)
        closed = self.clock.call(win.fence, aiorma.MODE_NOSUCCEED)
        self.epochs[k] = (opened, closed)

    async def finish_epoch(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Await epoch ``k``; return panel ``k`` (rows ``lo:n``) and its pivots (global rows)."""
        opened, closed = self.epochs.pop(k)
        await self.clock.await_(closed)
        await opened  # finished long ago: the epoch it opened has completed
        lo, hi = self.layout.span(k)
        nb, w = self.options.nb, hi - lo
        source = self.sendbuf[k % 2] if self.layout.owner(k) == self.comm.rank else self.landing[k % 2].memory
        packed = source[: nb + (self.options.n - lo) * w]
        pivots = packed[:w].astype(np.int64)
        return packed[nb:].reshape(self.options.n - lo, w), pivots

    # -- local work

    def factor_own_panel(self, k: int) -> None:
        """Factor block ``k`` (all earlier updates applied) into ``sendbuf[k % 2]``."""
        lo, hi = self.layout.span(k)
        cols = self.layout.local(k)
        panel = self.local[lo:, cols]
        piv = factor_panel(panel)
        self.local[lo:, cols] = panel
        buf = self.sendbuf[k % 2]
        buf[: hi - lo] = piv + lo  # global row numbers; exact in float64
        buf[self.options.nb : self.options.nb + panel.size] = panel.reshape(-1)

    def apply_pivots(self, k: int, pivots: np.ndarray) -> None:
        lo, _hi = self.layout.span(k)
        self.pivots[lo : lo + len(pivots)] = pivots
        mine = self.local[lo:]
        if self.layout.owner(k) == self.comm.rank:  # the panel itself is already exchanged
            cols = self.layout.local(k)
            others = np.ones(mine.shape[1], bool)
            others[cols] = False
            block = mine[:, others]
            swap_rows(block, pivots - lo)
            mine[:, others] = block
        else:
            swap_rows(mine, pivots - lo)

    def update_block(self, k: int, panel: np.ndarray, j: int) -> None:
        """Apply panel ``k`` to block ``j > k``: U block row, then the trailing product."""
        lo, hi = self.layout.span(k)
        w = hi - lo
        cols = self.layout.local(j)
        top = unit_lower_solve(panel[:w], self.local[lo:hi, cols])
        self.local[lo:hi, cols] = top
        self.local[hi:, cols] -= panel[w:] @ top

    async def run(self) -> float:
        """Factor; return the wall time."""
        lay, rank = self.layout, self.comm.rank
        start = time.perf_counter()
        if lay.owner(0) == rank:
            self.factor_own_panel(0)
        if self.nonblocking:
            self.issue_epoch(0)
        reported = 0  # deciles of the columns already reported
        for k in range(lay.blocks):
            if not self.nonblocking:
                self.issue_epoch(k)
            panel, pivots = await self.finish_epoch(k)
            self.apply_pivots(k, pivots)
            later = [j for j in lay.mine() if j > k]
            if k + 1 < lay.blocks:
                if lay.owner(k + 1) == rank:  # look-ahead: panel k+1 first
                    self.update_block(k, panel, k + 1)
                    self.factor_own_panel(k + 1)
                    later.remove(k + 1)
                if self.nonblocking:
                    self.issue_epoch(k + 1)  # closed now; awaited at step k+1
            for j in later:
                self.update_block(k, panel, j)
                # Let held epochs advance (flushes, "done" notices) during the long update.
                self.clock.call(aiorma.progress)
                await asyncio.sleep(0)
            decile = 10 * (k + 1) // lay.blocks
            if self.options.progress and rank == 0 and decile > reported:
                reported = decile
                print(
                    f"{self.label} {100 * (k + 1) // lay.blocks}% of columns "
                    f"({time.perf_counter() - start:.2f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        return time.perf_counter() - start

    async def gather_and_solve(self) -> np.ndarray | None:
        """Rank 0 reads every rank's columns (shared-lock gets) and solves; others return None."""
        lay = self.layout
        win = await self.comm.win_create(self.local)
        x = None
        if self.comm.rank == 0:
            lu = np.empty((lay.n, lay.n))
            parts = {}
            requests = []
            for r in range(1, self.comm.size):
                remote = Layout(lay.n, lay.nb, self.comm.size, r)
                parts[r] = np.empty((lay.n, remote.local_width()))
                win.lock(r, aiorma.LOCK_SHARED)
                win.get(parts[r], r, 0)
                requests.append(win.unlock(r))
            for request in requests:
                await request
            parts[0] = self.local
            for j in range(lay.blocks):
                owner = lay.owner(j)
                lo, hi = lay.span(j)
                lu[:, lo:hi] = parts[owner][:, Layout(lay.n, lay.nb, self.comm.size, owner).local(j)]
            perm = np.arange(lay.n)
            for i, p in enumerate(self.pivots):
                perm[i], perm[p] = perm[p], perm[i]
            x = solve_factored(lu, perm, right_hand_side(self.options), lay.nb)
        await win.free()
        return x


def scaled_residual(options: Options, x: np.ndarray) -> float:
    n, nb = options.n, options.nb
    a = np.hstack([column_block(options, lo, min(lo + nb, n)) for lo in range(0, n, nb)])
    b = right_hand_side(options)
    r = a @ x - b
    return float(np.abs(r).max() / (np.abs(a).sum(axis=1).max() * np.abs(x).max()))


async def main(comm: aiorma.Comm, options: Options) -> dict[str, object]:
    """Run each variant ``repeats`` times, interleaved; return this rank's timings per run and,
    on rank 0, each run's residual and whether every run gave the very same x."""
    landing_count = options.nb + options.n * options.nb
    landing = [await comm.win_allocate(landing_count, np.float64) for _ in range(2)]
    runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in options.variants}
    solutions = []
    for repeat in range(options.repeats):
        for variant in options.variants:
            job = Factorisation(comm, options, variant, landing)
            await comm.barrier()
            total = await job.run()
            start = time.perf_counter()
            x = await job.gather_and_solve()
            row = {
                "wait_s": job.clock.wait,
                "comm_s": job.clock.comm,
                "total_s": total,
                "solve_s": time.perf_counter() - start,
            }
            if x is not None:
                row["residual"] = scaled_residual(options, x)
                solutions.append(x)
            runs[variant].append(row)
            if options.progress and comm.rank == 0:
                print(
                    f"{job.label} run {repeat + 1}/{options.repeats}: factorised in {total:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    for win in landing:
        await win.free()
    result: dict[str, object] = {"runs": runs}
    if solutions:
        result["variants_agree"] = all(np.array_equal(solutions[0], x) for x in solutions)
    return result


def summarize(options: Options, ranks: list[dict[str, object]]) -> dict[str, object]:
    """Per run: wait and comm are the mean over ranks, total and solve the slowest rank's; then
    the median over runs."""
    variants = {}
    for variant in options.variants:
        per_rank = [r["runs"][variant] for r in ranks]  # type: ignore[index]
        per_run = list(zip(*per_rank, strict=True))
        row: dict[str, float] = {}
        for key, combine in (("wait_s", statistics.fmean), ("comm_s", statistics.fmean)):
            row[key] = statistics.median(combine(r[key] for r in run) for run in per_run)
        for key in ("total_s", "solve_s"):
            row[key] = statistics.median(max(r[key] for r in run) for run in per_run)
        row["total_s_runs"] = [max(r["total_s"] for r in run) for run in per_run]  # type: ignore[assignment]
        row["residual"] = max(r["residual"] for r in per_rank[0])
        variants[variant] = row
    return {
        "n": options.n,
        "nb": options.nb,
        "ranks": len(ranks),
        "repeats": options.repeats,
        "residual": max(v["residual"] for v in variants.values()),
        "variants_agree": ranks[0]["variants_agree"],
        "variants": variants,
    }


def print_table(summary: dict[str, object]) -> None:
    print(
        f"LU of n = {summary['n']} (nb = {summary['nb']}) on {summary['ranks']} ranks, "
        f"median of {summary['repeats']} runs"
    )
    print(f"{'variant':<12} {'wait s':>8} {'comm s':>8} {'total s':>8} {'solve s':>8} {'residual':>10}")
    for name, row in summary["variants"].items():  # type: ignore[union-attr]
        print(
            f"{name:<12} {row['wait_s']:>8.3f} {row['comm_s']:>8.3f} {row['total_s']:>8.3f} "
            f"{row['solve_s']:>8.3f} {row['residual']:>10.2e}"
        )
    print("wait/comm: mean over ranks; total: factorisation, slowest rank")


RESIDUAL_BOUND = 1e-12


def finish(options: Options, ranks: list[dict[str, object]], json_path: str | None) -> int:
    summary = summarize(options, ranks)
    print_table(summary)
    if json_path:
        with open(json_path, "w") as out:
            json.dump(summary, out, indent=2)
    ok = summary["residual"] <= RESIDUAL_BOUND and summary["variants_agree"]  # type: ignore[operator]
    verdict = "verified" if ok else "FAILED"
    print(
        f"{verdict}: scaled residual {summary['residual']:.2e} (bound {RESIDUAL_BOUND:g}); "
        f"variants give identical x: {summary['variants_agree']}"
    )
    return 0 if ok else 1


def parse(argv: list[str] | None = None) -> tuple[Options, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=Options.n, help="matrix order (default %(default)s)")
    parser.add_argument("--nb", type=int, default=Options.nb, help="column block (default %(default)s)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: %(default)s")
    parser.add_argument("--repeats", type=int, default=Options.repeats, help="runs per variant (median)")
    parser.add_argument("--seed", type=int, default=Options.seed, help="seed of the matrix")
    parser.add_argument("--local", type=int, metavar="N", help="run N ranks in-process instead of MPI")
    parser.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    if not variants or any(v not in VARIANTS for v in variants):
        parser.error(f"--variants takes a comma-separated subset of {', '.join(VARIANTS)}")
    if args.n < 1 or args.nb < 1 or args.repeats < 1:
        parser.error("--n, --nb and --repeats must be positive")
    if args.local is not None and args.local < 1:
        parser.error("--local needs at least one rank")
    options = Options(
        n=args.n,
        nb=args.nb,
        variants=variants,
        repeats=args.repeats,
        seed=args.seed,
        progress=not args.quiet,
    )
    return options, args


def cli(argv: list[str] | None = None) -> int:
    """Run from the command line: ``--local N`` ranks in this process, else one rank per
    process under ``mpiexec``; rank 0 prints the table.  Returns the exit status (1 if the
    residual is too large or the variants disagree), the same on every rank."""
    options, args = parse(argv)
    if args.local:
        return finish(options, aiorma.run(main, options, nprocs=args.local), args.json)
    from mpi4py import MPI

    mine = aiorma.run(main, options)
    everyone = MPI.COMM_WORLD.gather(mine, root=0)
    code = finish(options, everyone, args.json) if MPI.COMM_WORLD.rank == 0 else 0
    return int(MPI.COMM_WORLD.bcast(code, root=0))


if __name__ == "__main__":
    sys.exit(cli())

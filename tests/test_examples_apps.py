"""The application examples (transactions, LU, async heat diffusion) verify themselves, in-process
and under mpiexec; their benchmark drivers produce JSON and plots.  No timing is asserted."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import aiorma
from aiorma.apps import lu_solver as lu
from aiorma.apps import transactions as tx

from .mpi_harness import REPO_ROOT, run_mpi, run_python

EXAMPLES = Path(REPO_ROOT) / "examples"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


# ------------------------------------------------------------------------------ transactions

TX_ARGS = ("--transactions", "120", "--inflight", "4", "--repeats", "1", "--quiet")


def check_transactions(summary: dict, ranks: int) -> None:
    assert summary["ranks"] == ranks
    assert set(summary["modes"]) == {"blocking", "nonblocking", "nonblocking+aaar"}
    for mode, row in summary["modes"].items():
        assert row["verified"] is True, mode
        assert row["tx_per_s"] > 0


@pytest.mark.timeout(60)
def test_transactions_local(tmp_path: Path) -> None:
    out = tmp_path / "tx.json"
    result = run_python(str(EXAMPLES / "transactions.py"), "--local", "3", *TX_ARGS, "--json", str(out))
    check_transactions(read_json(out), 3)
    assert "verified: every window holds exactly the sum of all updates" in result.stdout


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_transactions_mpi(tmp_path: Path) -> None:
    out = tmp_path / "tx.json"
    run_mpi(EXAMPLES / "transactions.py", 3, *TX_ARGS, "--json", str(out), timeout=80)
    check_transactions(read_json(out), 3)


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_transactions_mpi4py_baseline(tmp_path: Path) -> None:
    """The raw mpi4py mode runs the same transactions and passes the same exact check."""
    out = tmp_path / "tx.json"
    run_mpi(EXAMPLES / "transactions.py", 2, *TX_ARGS, "--modes", "mpi4py,blocking", "--json", str(out))
    summary = read_json(out)
    assert set(summary["modes"]) == {"mpi4py", "blocking"}
    assert all(row["verified"] is True and row["tx_per_s"] > 0 for row in summary["modes"].values())


def test_transactions_mpi4py_mode_refuses_local() -> None:
    with pytest.raises(SystemExit):
        tx.parse(["--local", "2", "--modes", "mpi4py"])


def test_transactions_expected_window_is_a_plain_replay() -> None:
    options = tx.Options(transactions=50, repeats=2, window=64)
    for rank in range(3):
        naive = np.zeros(64, np.int64)
        for origin in range(3):
            plan = tx.make_plan(options.seed, origin, 3, 50, 64)
            for target, offset, values in zip(plan.targets, plan.offsets, plan.values, strict=True):
                if target == rank:
                    naive[offset : offset + tx.UPDATE] += values
        assert np.array_equal(tx.expected_window(options, rank, 3), 2 * naive)


@pytest.mark.timeout(60)
def test_transactions_check_detects_a_lost_update(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = tx.expected_window

    def one_more(options, rank, size):  # type: ignore[no-untyped-def]
        expected = honest(options, rank, size)
        expected[0] += 1  # as if one element's update had been lost
        return expected

    monkeypatch.setattr(tx, "expected_window", one_more)
    options = tx.Options(transactions=40, inflight=4, repeats=1, progress=False)
    ranks = aiorma.run(tx.main, options, nprocs=2)
    summary = tx.summarize(options, ranks)
    assert not any(row["verified"] for row in summary["modes"].values())


# -------------------------------------------------------------------------------------- LU


def check_lu(summary: dict, ranks: int, n: int) -> None:
    assert summary["ranks"] == ranks and summary["n"] == n
    assert summary["residual"] <= 1e-12
    assert summary["variants_agree"] is True
    assert set(summary["variants"]) == {"blocking", "nonblocking"}
    for row in summary["variants"].values():
        assert 0 <= row["wait_s"] <= row["comm_s"]
        assert row["total_s"] > 0


@pytest.mark.timeout(60)
def test_lu_local(tmp_path: Path) -> None:
    out = tmp_path / "lu.json"
    args = ("--local", "3", "--n", "160", "--nb", "16", "--quiet", "--json", str(out))
    result = run_python(str(EXAMPLES / "lu_solver.py"), *args)
    check_lu(read_json(out), 3, 160)
    assert "verified: scaled residual" in result.stdout


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_lu_mpi(tmp_path: Path) -> None:
    out = tmp_path / "lu.json"
    # n not a multiple of nb: the last panel is narrower.
    run_mpi(EXAMPLES / "lu_solver.py", 4, "--n", "250", "--nb", "32", "--json", str(out), timeout=80)
    check_lu(read_json(out), 4, 250)


def test_lu_kernels_match_numpy() -> None:
    options = lu.Options(n=96, nb=16)
    a = np.hstack([lu.column_block(options, lo, lo + 16) for lo in range(0, 96, 16)])
    b = lu.right_hand_side(options)
    packed = a.copy()
    piv = lu.factor_panel(packed)  # the whole matrix as one panel: recursive LU
    assert np.any(piv != np.arange(96)), "the row permutation P0 must force real exchanges"
    perm = np.arange(96)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    lower, upper = np.tril(packed, -1) + np.eye(96), np.triu(packed)
    np.testing.assert_allclose(lower @ upper, a[perm], atol=1e-12)
    x = lu.solve_factored(packed, perm, b, 16)
    np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------- async app

APP_ARGS = ("--size", "40", "--steps", "25", "--report-every", "0.01")


def check_app(summary: dict, ranks: int) -> None:
    assert summary["ranks"] == ranks
    assert summary["verified"] is True and summary["exact"] is True
    assert summary["max_abs_diff"] == 0.0
    assert summary["reports"] >= 1
    assert summary["final_step_reported"] == summary["steps"] == 25


@pytest.mark.timeout(60)
def test_async_app_local(tmp_path: Path) -> None:
    out = tmp_path / "app.json"
    result = run_python(str(EXAMPLES / "async_app.py"), "--local", "3", *APP_ARGS, "--json", str(out))
    check_app(read_json(out), 3)
    assert "[progress] step 25/25" in result.stdout


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_async_app_mpi(tmp_path: Path) -> None:
    out = tmp_path / "app.json"
    result = run_mpi(EXAMPLES / "async_app.py", 4, *APP_ARGS, "--json", str(out), timeout=80)
    check_app(read_json(out), 4)
    assert "[progress] step 25/25" in result.stdout


# ------------------------------------------------------------------------ benchmark drivers


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_bench_transactions_driver(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ("--ranks", "2", "--transactions", "60", "--repeats", "1", "--json", str(out))
    run_python("-m", "aiorma.bench", "transactions", *args, "--plot", str(tmp_path), timeout=100)
    document = read_json(out)
    assert document["verified"] is True
    aiorma_modes = ("blocking", "nonblocking", "nonblocking+aaar")
    expected = {f"{m}/mpi4py" for m in aiorma_modes} | {"mpi4py/blocking"}
    expected |= {"nonblocking/blocking", "nonblocking+aaar/blocking"}
    assert set(document["ratios"]["2"]) == expected
    assert document["emulate_nodes"] == 0
    assert (tmp_path / "transactions_throughput.png").stat().st_size > 0


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_bench_lu_driver(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ("--n", "128", "--nb", "16", "--ranks", "2", "--repeats", "1", "--json", str(out))
    run_python("-m", "aiorma.bench", "lu", *args, "--plot", str(tmp_path), timeout=100)
    document = read_json(out)
    assert document["verified"] is True
    assert document["results"]["2"]["residual"] <= 1e-12
    assert "nonblocking/blocking total_s" in document["ratios"]["2"]
    assert (tmp_path / "lu_times.png").stat().st_size > 0


@pytest.mark.mpi
def test_service_embeds_aiorma_on_even_ranks() -> None:
    """examples/service.py: asyncio.run, a heartbeat, aiorma.connect on a Split of the even ranks
    while the odd ranks use plain mpi4py; every rank checks its own part."""
    result = run_mpi(EXAMPLES / "service.py", 4, "--rounds", "10", timeout=90)
    # mpiexec may join the ranks' lines: find each rank's report in the whole text.
    reports = dict(re.findall(r"rank (\d): (aiorma on 2 even|mpi4py ring on 2 odd)", result.stdout))
    assert reports == {
        "0": "aiorma on 2 even",
        "1": "mpi4py ring on 2 odd",
        "2": "aiorma on 2 even",
        "3": "mpi4py ring on 2 odd",
    }, result.stdout
    assert result.stdout.count("every slot = 30, as expected") == 2
    assert result.stdout.count("token 10, sum 20") == 2


def test_async_app_final_report_follows_the_end() -> None:
    """The reporter's last report is read after ``stop`` was set, even when ``stop`` is set
    while a read is in flight (that read returned the second-to-last step: the test failed with
    24 == 25 under load before the reporter decided on its final read before reading)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("async_app_example", EXAMPLES / "async_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]

    async def scenario() -> list[tuple[int, float]]:
        stop = asyncio.Event()
        monitor = module.Monitor.__new__(module.Monitor)
        monitor.reports = []
        progress = {"step": 24}

        async def read() -> tuple[int, float]:
            seen = progress["step"]  # the read starts here ...
            if seen == 24:  # ... and the end arrives while it is in flight
                progress["step"] = 25
                stop.set()
            await asyncio.sleep(0)
            return seen, 0.0

        monitor.read = read
        await asyncio.wait_for(monitor.reporter(stop, 0.001, 25), 5)
        return monitor.reports

    reports = asyncio.run(scenario())
    assert reports[-1][0] == 25, reports

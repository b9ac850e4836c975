"""Epoch timelines (aiorma.trace): Chrome trace-event JSON from a traced run, the plot command,
and no observer at all when tracing is off."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aiorma
import aiorma.trace as trace
from aiorma.trace.__main__ import main as trace_cli

from .mpi_harness import run_mpi

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _tracing_follows_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(trace.ENV_VAR, raising=False)
    trace.reset()
    yield
    trace.reset()


async def late_post(comm: aiorma.Comm) -> Any:
    """Rank 0 closes an access epoch towards rank 1 before rank 1 posts (Late Post)."""
    win = await comm.win_allocate(4, np.int64)
    if comm.rank == 0:
        win.start([1])
        win.put(np.array([7]), 1, 0)
        closing = win.complete()
        await closing
    else:
        await asyncio.sleep(0.002)
        win.post([0])
        await win.wait()
    observers = (comm.observer is not None, win.engine.observer is not None)
    await win.free()
    return observers


def instants(events: list[dict[str, Any]], rank: int) -> list[tuple[str, int]]:
    """(step, epoch) of one rank's instant events, in file order."""
    return [
        (e["name"].split()[0], e["args"]["epoch"])
        for e in events
        if e.get("cat") == "aiorma" and e["ph"] == "i" and e["pid"] == rank
    ]


@pytest.mark.timeout(30)
def test_traced_local_run_writes_chrome_json_with_events_in_order(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    trace.enable(path)
    assert aiorma.run(late_post, nprocs=2) == [(True, True)] * 2
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    assert data["displayTimeUnit"] == "ns"
    for e in events:
        assert e["ph"] in {"M", "i", "b", "e"} and isinstance(e["pid"], int)
    # Rank 0's access epoch: opened and closed by the program, activated at once, its put issued
    # only when the late post's grant arrived, then completed.
    assert instants(events, 0) == [("open", 1), ("activate", 1), ("close", 1), ("issue", 1), ("complete", 1)]
    assert instants(events, 1) == [("open", 1), ("activate", 1), ("close", 1), ("complete", 1)]
    issue = next(e for e in events if e.get("cat") == "aiorma" and e["name"].startswith("issue"))
    assert issue["args"]["target"] == 1 and issue["args"]["kind"] == "start"
    times = [e["ts"] for e in events if e["ph"] == "i" and e["pid"] == 0]
    assert times == sorted(times)
    # The two lifetimes as async spans, begun and ended once each per epoch and rank.
    spans = [(e["pid"], e["cat"], e["ph"]) for e in events if e["ph"] in "be"]
    for rank in (0, 1):
        for cat in ("epoch.app", "epoch.internal"):
            assert sorted(p for r, c, p in spans if (r, c) == (rank, cat)) == ["b", "e"]
    # Rank 1 posted 2 ms after rank 0 closed: rank 0's put waits for it, its close does not.
    t = {(e["pid"], e["name"].split()[0]): e["ts"] for e in events if e["ph"] == "i"}
    assert t[(0, "close")] < t[(1, "open")] <= t[(0, "issue")]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"rank 0", "rank 1"}


@pytest.mark.timeout(30)
def test_environment_variable_enables_tracing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "env.json"
    monkeypatch.setenv(trace.ENV_VAR, str(path))
    aiorma.run(late_post, nprocs=2)
    assert instants(json.loads(path.read_text())["traceEvents"], 1)[0] == ("open", 1)


@pytest.mark.timeout(30)
def test_tracing_off_installs_no_observer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert trace.configured_path() is None
    assert aiorma.run(late_post, nprocs=2) == [(False, False)] * 2
    # disable() wins over the environment variable
    monkeypatch.setenv(trace.ENV_VAR, str(tmp_path / "never.json"))
    trace.disable()
    assert aiorma.run(late_post, nprocs=2) == [(False, False)] * 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(60)
def test_plot_and_merge_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    trace.enable(path)
    aiorma.run(late_post, nprocs=2)
    png = tmp_path / "t.png"
    assert trace_cli(["plot", str(path), "--out", str(png), "--title", "late post"]) == 0
    assert png.read_bytes()[:8] == PNG
    merged = tmp_path / "m.json"
    assert trace_cli(["merge", str(path), str(path), "--out", str(merged)]) == 0
    assert len(json.loads(merged.read_text())["traceEvents"]) == 2 * len(
        json.loads(path.read_text())["traceEvents"]
    )
    capsys.readouterr()
    assert trace_cli(["plot", str(tmp_path / "missing.json"), "--out", str(png)]) == 1
    assert "missing.json" in capsys.readouterr().err
    assert trace_cli(["plot", str(path), "--window", "999", "--out", str(png)]) == 1  # no such window


def test_rank_path() -> None:
    assert trace.rank_path("/x/trace.json", 3) == Path("/x/trace.rank3.json")
    assert trace.rank_path("t", 0) == Path("t.rank0")


MPI_SCRIPT = """
import asyncio, sys
import numpy as np
import aiorma

async def main(comm):
    win = await comm.win_allocate(4, np.int64)
    if comm.rank == 0:
        win.start([1]); win.put(np.array([7]), 1, 0); await win.complete()
    else:
        win.post([0]); await win.wait()
    await win.free()

aiorma.trace.enable(sys.argv[1])
aiorma.run(main)
"""


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_traced_mpi_run_writes_one_file_per_rank(tmp_path: Path) -> None:
    script = tmp_path / "traced.py"
    script.write_text("import aiorma.trace\n" + MPI_SCRIPT)
    run_mpi(script, 2, str(tmp_path / "mpi.json"), timeout=100)
    files = sorted(p.name for p in tmp_path.glob("mpi.rank*.json"))
    assert files == ["mpi.rank0.json", "mpi.rank1.json"]
    events = trace.load(sorted(tmp_path.glob("mpi.rank*.json")))
    assert instants(events, 0) == [
        ("open", 1),
        ("activate", 1),
        ("issue", 1),
        ("close", 1),
        ("complete", 1),
    ] or (instants(events, 0) == [("open", 1), ("activate", 1), ("close", 1), ("issue", 1), ("complete", 1)])
    assert instants(events, 1) == [("open", 1), ("activate", 1), ("close", 1), ("complete", 1)]
    out = tmp_path / "mpi.png"
    assert trace_cli(["plot", *map(str, sorted(tmp_path.glob("mpi.rank*.json"))), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG

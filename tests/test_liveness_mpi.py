"""A rank whose process dies without leaving aiorma (SIGKILL, a crash) is noticed by every
survivor: the ring neighbours see its TCP connection end without a goodbye
(aiorma.transport.liveness) and write its departure into every peer's memory, so the survivors'
waits fail with PeerFailed naming it — within BOUND seconds of the death — and leaving
``connect`` does not hang.  The dying rank runs under a shell that outlives it, so that the
launcher does not end the job for us."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorma.bench._launch import emulation_unavailable

from .mpi_harness import OUTLIVE, RESULTS_DIR, launch_mpi

SCRIPT = Path(__file__).parent / "mpi_scripts" / "rank_killed.py"
BOUND = 2.0  # seconds from the death to every survivor's PeerFailed (docs/semantics.md)


@pytest.mark.mpi
@pytest.mark.timeout(120)
@pytest.mark.parametrize("emulate_nodes", [0, 2], ids=["one_node", "two_nodes"])
def test_survivors_notice_a_killed_rank(emulate_nodes: int, tmp_path: Path) -> None:
    if emulate_nodes and (reason := emulation_unavailable()) is not None:
        pytest.skip(reason)
    env = {RESULTS_DIR: str(tmp_path)}
    if emulate_nodes:
        # Emulated nodes share one host, where UCX moves data between them by cross-memory
        # attach, which aborts the writer when the target process is gone; between real nodes
        # (and over UCX's TCP here) a write into a dead process fails with an error instead,
        # which aiorma turns into PeerFailed naming it.
        env["UCX_TLS"] = "^cma"
    outcome = launch_mpi(SCRIPT, 4, timeout=90, emulate_nodes=emulate_nodes, env=env, wrapper=OUTLIVE)
    results = {r: json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)}
    killed_at = results[1]["killed_at"]
    for rank in (0, 2, 3):
        got = results[rank]
        assert got.get("error") == "PeerFailed" and got.get("rank") == 1, (rank, results, outcome.describe())
        assert got["at"] - killed_at < BOUND, (rank, got["at"] - killed_at, results)
        assert "rank 1" in got["cause"], results  # its process ended, or a write into it failed
        assert got["left_at"] - killed_at < BOUND + 1.0, results  # and left connect promptly


SETUP = Path(__file__).parent / "mpi_scripts" / "liveness_setup.py"


@pytest.mark.mpi
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kill", [False, True], ids=["orderly", "rank_2_killed"])
def test_a_rank_that_cannot_connect_is_no_death(kill: bool, tmp_path: Path) -> None:
    """Rank 1 cannot reach its successor (2): that connection is never made, rank 2 does not
    wait for it, and nobody reports a death — neither then nor at an orderly close; the other
    connections stand, so rank 2's death is still reported by its other neighbour (0)."""
    args = ["kill"] if kill else []
    wrapper = OUTLIVE if kill else ()
    outcome = launch_mpi(SETUP, 3, *args, timeout=45, env={RESULTS_DIR: str(tmp_path)}, wrapper=wrapper)
    results = {r: json.loads(p.read_text()) for r in range(3) if (p := tmp_path / f"rank{r}.json").exists()}
    assert results[1]["neighbours"] == [0], (results, outcome.describe())
    assert results[0]["neighbours"] == ([1] if kill else [1, 2]), results  # (2's closed when it died)
    assert results[1]["deaths"] == [], results
    if kill:
        assert results[0]["deaths"] == [2], results
    else:
        assert results[2]["neighbours"] == [0], results
        assert all(r["deaths"] == [] == r["after_close"] for r in results.values()), results

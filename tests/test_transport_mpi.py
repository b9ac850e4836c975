"""MpiEndpoint against real MPI processes (the mpich wheel's mpiexec)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from aiorma.transport.mpi.cpu_atomics import load_accumulator

from .mpi_harness import run_mpi_json, run_smoke


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [2, 3, 4])
def test_transport_smoke(nprocs: int, tmp_path: Path) -> None:
    run_smoke(nprocs, tmp_path, timeout=90)


CONTROL_ATOMICS = Path(__file__).parent / "mpi_scripts" / "control_atomics.py"


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("nprocs", "inline", "emulate_nodes"), [(2, True, 0), (4, True, 0), (4, False, 0), (4, True, 2)]
)
def test_control_atomics_lose_no_update(nprocs: int, inline: bool, emulate_nodes: int) -> None:
    """Every rank hammers rank 0's control words at once (fetch-and-add, compare-and-swap loops,
    swaps, max): the sums are exact and every swapped mark is handed on once.  On one node, with
    the inline paths on, libatomic present and every control region mapped (MPICH maps them), the
    CPU's own atomics serve them and MPI's are never called; with AIORMA_INLINE=0, between nodes,
    or where the MPI maps nothing, MPI's serve them all."""
    import ctypes

    try:
        ctypes.CDLL("libatomic.so.1")
        have_libatomic = True
    except OSError:
        have_libatomic = False
    env = None if inline else {"AIORMA_INLINE": "0"}
    reports = run_mpi_json(CONTROL_ATOMICS, nprocs, timeout=180, emulate_nodes=emulate_nodes, env=env)
    root = reports[0]
    assert root["final"][:2] == root["expected"][:2] and root["final"][3] == root["expected"][3], root
    assert root["marks_once"] and root["adds_all"], root
    for report in reports:
        assert report["adds_distinct"], report
        # MPICH maps every rank's control region on one node; another MPI may map none.
        assert report["mapped"] is (not emulate_nodes) or not report["maps_memory"], report
        cpu = inline and have_libatomic and report["mapped"]
        assert report["cpu_atomics"] is cpu, report
        mpi_atomics = {"Fetch_and_op", "Compare_and_swap", "Rget_accumulate"} & set(report["calls"])
        assert bool(mpi_atomics) is not cpu, report
    # The look without a poll: where only the CPU's atomics write the control words, it sees rank
    # 1's add once, reported as a poll reports it; elsewhere it declines, and a poll finds the add.
    look = root["look"]
    assert look["looked"] is root["cpu_atomics"] and look["again"] is False, look
    assert look["reported"] == ([7] if look["looked"] else []) and look["word"] == 1, look


DATA_ATOMICS = Path(__file__).parent / "mpi_scripts" / "data_atomics.py"


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("nprocs", "inline", "emulate_nodes"), [(2, True, 0), (4, True, 0), (3, False, 0), (3, True, 2)]
)
def test_data_atomics_lose_no_update(nprocs: int, inline: bool, emulate_nodes: int) -> None:
    """Every rank hammers elements of rank 0's windows at once with the accumulate family
    (fetch-and-op SUM on int64, accumulate SUM on float64, compare-and-swap loops on int32,
    get_accumulate MAX on uint16, BXOR on uint8): the totals are exact and every fetched count is
    seen once.  On one node, with the compiled atomics and every rank's memory mapped (MPICH maps
    it), the transport's own loop under the target's gate serves every element type but complex —
    no MPI accumulate is called on those windows; with AIORMA_INLINE=0, between nodes, or without
    the build, MPI's serve them all."""
    env = None if inline else {"AIORMA_INLINE": "0"}
    reports = run_mpi_json(DATA_ATOMICS, nprocs, timeout=180, emulate_nodes=emulate_nodes, env=env)
    root = reports[0]
    assert root["final"] == root["expected"] and root["adds_all"], root
    assert root["complex_sum"] == [nprocs, 0.0], root
    compiled = load_accumulator() is not None
    for report in reports:
        assert report["mapped"] is (not emulate_nodes) or not report["maps_memory"], report
        cpu = inline and compiled and report["mapped"]
        assert report["cpu"] == {name: cpu and name != "c16" for name in report["cpu"]}, report
        for name, calls in report["calls"].items():
            mpi_atomics = {"Raccumulate", "Rget_accumulate", "Compare_and_swap", "Fetch_and_op"} & set(calls)
            assert bool(mpi_atomics) is not report["cpu"][name], report


PUT_TORN_WORDS = Path(__file__).parent / "mpi_scripts" / "put_torn_words.py"


@pytest.mark.mpi
@pytest.mark.parametrize("words", [512, 8192, 65536])
def test_a_put_moves_words_whole(words: int) -> None:
    """On one node a put into allocated memory is stores into the peer's memory, mapped here:
    up to 16 KiB ``store_words``, from 512 KiB a copy (glibc's ``memcpy``), in between MPI's
    ``Rput`` (MPICH copies it with ``memcpy``).  Its aligned words must land whole, because
    aiorma reads words of its own windows while peers' puts land.  Rank 1 reads its window
    while rank 0 puts into it for a second: no word read mixes two writes."""
    reports = run_mpi_json(PUT_TORN_WORDS, 2, str(words), "1.0", timeout=120)
    writer, reader = reports
    assert writer["writes"] > 50 and reader["reads"] > 50, reports
    assert reader["torn"] == 0, reports

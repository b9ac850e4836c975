"""Two-node emulation (``aiorma.bench._launch``): each rank gets its own hostname and the MPI library
is told that no rank is local (MPICH: ``MPIR_CVAR_NOLOCAL``; Open MPI: TCP only).  Skipped where
emulation cannot run (no ``unshare``, not root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorma.bench._launch import (
    EMULATE_ENV,
    MPICH,
    OPEN_MPI,
    emulation_unavailable,
    launcher_command,
    locate_mpiexec,
    mpiexec_command,
    mpiexec_library,
)

from .mpi_harness import run_mpi, run_smoke

# Raw mpi4py only: what is tested is the launch, not aiorma.
SCRIPT = """\
import json, os, socket
from mpi4py import MPI

comm = MPI.COMM_WORLD
seen = {
    "rank": comm.rank,
    "hostname": socket.gethostname(),
    "processor": MPI.Get_processor_name(),
    "nolocal": os.environ.get("MPIR_CVAR_NOLOCAL"),
    "btl": os.environ.get("OMPI_MCA_btl"),
    "emulate": os.environ.get(EMULATE_ENV),
}
everyone = comm.gather(seen, root=0)
if comm.rank == 0:
    print(json.dumps(everyone))
""".replace("EMULATE_ENV", repr(EMULATE_ENV))


def test_command_without_emulation_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """MPICH's hydra: only the quiet UCX level is added (hydra needs nothing else)."""
    monkeypatch.delenv("UCX_LOG_LEVEL", raising=False)
    quiet = ["-genv", "UCX_LOG_LEVEL", "error"]  # the launcher's one addition (QUIET_UCX)
    command = launcher_command(MPICH, "mpiexec", 3, ["prog", "arg"], as_root=True, cores=1)
    assert command == ["mpiexec", "-n", "3", *quiet, "prog", "arg"]
    assert launcher_command(MPICH, "mpiexec", 3, ["prog"], emulate_nodes=1)[1:] == ["-n", "3", *quiet, "prog"]
    monkeypatch.setenv("UCX_LOG_LEVEL", "info")  # the caller's own level wins
    assert launcher_command(MPICH, "mpiexec", 3, ["prog"])[1:] == ["-n", "3", "prog"]
    with pytest.raises(ValueError):
        launcher_command(MPICH, "mpiexec", 2, ["prog"], emulate_nodes=-1)
    with pytest.raises(ValueError):
        launcher_command("lam", "mpiexec", 2, ["prog"])


def test_open_mpi_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open MPI's launcher: ``-x NAME=VALUE`` for the environment, its OSC UCX query errors left
    out, root allowed only as root, more ranks than cores only with --oversubscribe."""
    monkeypatch.delenv("UCX_LOG_LEVEL", raising=False)
    monkeypatch.delenv("OMPI_MCA_osc", raising=False)
    osc = ["--mca", "osc", "^ucx"]
    quiet = ["-x", "UCX_LOG_LEVEL=error"]
    plain = launcher_command(OPEN_MPI, "mpiexec", 2, ["prog"], as_root=False, cores=2)
    assert plain == ["mpiexec", "-n", "2", *osc, *quiet, "prog"]
    crowded = launcher_command(OPEN_MPI, "mpiexec", 3, ["prog"], as_root=True, cores=2)
    assert crowded == ["mpiexec", "-n", "3", "--allow-run-as-root", "--oversubscribe", *osc, *quiet, "prog"]
    monkeypatch.setenv("OMPI_MCA_osc", "rdma")  # the caller's own choice wins
    monkeypatch.setenv("UCX_LOG_LEVEL", "info")
    own = launcher_command(OPEN_MPI, "mpiexec", 2, ["prog"], as_root=False, cores=2)
    assert own == ["mpiexec", "-n", "2", "prog"]
    emulated = launcher_command(OPEN_MPI, "mpiexec", 2, ["prog"], emulate_nodes=2, as_root=False, cores=2)
    # No shared memory between ranks whatever the caller set: TCP carries everything.
    assert emulated[3:11] == ["--mca", "btl", "self,tcp", "--mca", "pml", "ob1", "--mca", "osc"]
    assert emulated[11] == "^sm,ucx"
    assert ["-x", f"{EMULATE_ENV}=2"] == emulated[emulated.index("-x") : emulated.index("-x") + 2]
    assert "OMPI_COMM_WORLD_RANK % 2" in emulated[-3]


# A raw mpi4py program that prints the name of the MPI library it runs on.
LIBRARY_SCRIPT = """\
from mpi4py import MPI
if MPI.COMM_WORLD.rank == 0:
    print(MPI.Get_library_version().split()[0])
"""


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_launcher_matches_library(tmp_path: Path) -> None:
    """The library read from the mpiexec found is the one mpi4py runs on under it, and a clean
    job prints nothing on stderr (no warnings or errors from the MPI library)."""
    mpiexec = locate_mpiexec()
    assert mpiexec is not None
    script = tmp_path / "library.py"
    script.write_text(LIBRARY_SCRIPT)
    result = run_mpi(script, 3, timeout=50)
    expected = {MPICH: "MPICH", OPEN_MPI: "Open"}[mpiexec_library(mpiexec)]  # "Open MPI v5.0..."
    assert result.stdout.split() == [expected]
    assert result.stderr == ""
    assert mpiexec_command(3, ["prog"])[0] == mpiexec


@pytest.mark.mpi
@pytest.mark.timeout(30)
def test_two_emulated_nodes(tmp_path: Path) -> None:
    reason = emulation_unavailable()
    if reason is not None:
        pytest.skip(reason)
    script = tmp_path / "where.py"
    script.write_text(SCRIPT)
    result = run_mpi(script, 2, timeout=25, emulate_nodes=2)
    ranks = sorted(json.loads(result.stdout.strip().splitlines()[-1]), key=lambda seen: seen["rank"])
    assert [seen["hostname"] for seen in ranks] == ["node0", "node1"]
    # The library's own idea of the node follows the namespace's hostname.
    assert ranks[0]["processor"] != ranks[1]["processor"]
    assert all(seen["emulate"] == "2" for seen in ranks)
    mpiexec = locate_mpiexec()
    assert mpiexec is not None
    if mpiexec_library(mpiexec) == OPEN_MPI:
        assert all(seen["btl"] == "self,tcp" for seen in ranks)
    else:
        assert all(seen["nolocal"] == "1" for seen in ranks)


# ------------------------------------------- aiorma itself across emulated nodes (the off-node path)
#
# With no shared memory between ranks every control write, atomic and flush takes the path for
# peers on other hosts: request-based calls tested by the poll, Flush and Compare_and_swap in the
# worker thread, the target rung as the operation starts.  The scenarios and the collectives battery
# run there as the registry's ``mpi_2nodes`` transport (tests/test_registry.py,
# ``test_check[mpi_2nodes-<size>-<check>]``); the endpoint smoke test runs here.


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_transport_smoke_off_node(tmp_path: Path) -> None:
    reason = emulation_unavailable()
    if reason is not None:
        pytest.skip(reason)
    run_smoke(3, tmp_path, timeout=100, emulate_nodes=2)

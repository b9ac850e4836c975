"""Two-node emulation (``aiorma.bench._launch``): each rank gets its own hostname and MPICH is told
that no rank is local.  Skipped where emulation cannot run (no ``unshare``, not root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorma.bench._launch import EMULATE_ENV, emulation_unavailable, mpiexec_command

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
    "emulate": os.environ.get(EMULATE_ENV),
}
everyone = comm.gather(seen, root=0)
if comm.rank == 0:
    print(json.dumps(everyone))
""".replace("EMULATE_ENV", repr(EMULATE_ENV))


def test_command_without_emulation_is_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UCX_LOG_LEVEL", raising=False)
    quiet = ["-genv", "UCX_LOG_LEVEL", "error"]  # the launcher's one addition (QUIET_UCX)
    command = mpiexec_command(3, ["prog", "arg"])
    assert command[1:] == ["-n", "3", *quiet, "prog", "arg"]
    assert mpiexec_command(3, ["prog"], emulate_nodes=1)[1:] == ["-n", "3", *quiet, "prog"]
    monkeypatch.setenv("UCX_LOG_LEVEL", "info")  # the caller's own level wins
    assert mpiexec_command(3, ["prog"])[1:] == ["-n", "3", "prog"]
    with pytest.raises(ValueError):
        mpiexec_command(2, ["prog"], emulate_nodes=-1)


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
    # MPICH's own idea of the node follows the namespace's hostname.
    assert ranks[0]["processor"] != ranks[1]["processor"]
    assert all(seen["nolocal"] == "1" and seen["emulate"] == "2" for seen in ranks)


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

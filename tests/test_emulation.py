"""Two-node emulation (``aiorma.bench._launch``): each rank gets its own hostname and MPICH is told
that no rank is local.  Skipped where emulation cannot run (no ``unshare``, not root)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aiorma.bench._launch import EMULATE_ENV, emulation_unavailable, mpiexec_command

from .mpi_harness import run_mpi

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


def test_command_without_emulation_is_plain() -> None:
    command = mpiexec_command(3, ["prog", "arg"])
    assert command[1:] == ["-n", "3", "prog", "arg"]
    assert mpiexec_command(3, ["prog"], emulate_nodes=1)[1:] == ["-n", "3", "prog"]
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
# worker thread, the target rung as the operation starts.  The same checks as on one node.

_EMULATED: dict[tuple[str, int], str] = {}
SCRIPTS = Path(__file__).parent / "mpi_scripts"
EMULATED_JOBS = {
    "scenarios": (SCRIPTS / "run_scenarios.py", (2, 3)),
    "collectives": (SCRIPTS / "collectives_check.py", (3,)),
}


def _emulated_output(job: str, size: int) -> str:
    if (job, size) not in _EMULATED:
        try:
            _EMULATED[(job, size)] = run_mpi(EMULATED_JOBS[job][0], size, timeout=240, emulate_nodes=2).stdout
        except AssertionError as failure:  # keep the output: each check reports its own part
            _EMULATED[(job, size)] = str(failure)
    return _EMULATED[(job, size)]


def _emulated_cases() -> list[tuple[str, str, int]]:
    from .mpi_scripts.collectives_check import CHECKS
    from .scenarios import SCENARIOS, runs_with

    cases = [("scenarios", name, size) for size in (2, 3) for name in SCENARIOS if runs_with(name, size)]
    cases += [("collectives", name, 3) for name in CHECKS]
    return cases


EMULATED_CASES = _emulated_cases()


@pytest.mark.mpi
@pytest.mark.timeout(260)
@pytest.mark.parametrize(
    ("job", "name", "size"), EMULATED_CASES, ids=[f"{j}-{n}-{s}" for j, n, s in EMULATED_CASES]
)
def test_off_node_path(job: str, name: str, size: int) -> None:
    reason = emulation_unavailable()
    if reason is not None:
        pytest.skip(reason)
    output = _emulated_output(job, size)
    passed = {rank for found, rank in re.findall(r"PASS (\w+) (\d+)", output) if found == name}
    assert passed == {str(r) for r in range(size)}, (
        f"{job} {name} on {size} emulated ranks:\n{output[-6000:]}"
    )


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_transport_smoke_off_node() -> None:
    reason = emulation_unavailable()
    if reason is not None:
        pytest.skip(reason)
    result = run_mpi(SCRIPTS / "transport_smoke.py", 3, timeout=100, emulate_nodes=2)
    ok = sorted(re.findall(r"OK \d+/\d+", result.stdout))
    assert ok == [f"OK {rank}/3" for rank in range(3)], result.stdout

"""Start a benchmark's ranks under the mpich wheel's ``mpiexec`` when it was run without one, on one
node or on emulated nodes.

Node emulation (``emulate_nodes >= 2``) makes one machine look like several to MPICH, so that ranks
talk through its network module rather than shared memory, as ranks on different hosts would:

* ``MPIR_CVAR_NOLOCAL=1`` tells MPICH to treat every other rank as remote (no shared-memory path);
* each rank runs in its own UTS namespace (``unshare -u``) whose hostname is ``node<PMI_RANK % k>``,
  so anything that groups ranks by host name (MPICH's node detection, our reports) sees k hosts.

The rank processes learn that they are emulated only from their hostname and environment
(``MPIR_CVAR_NOLOCAL`` and ``AIORMA_EMULATE_NODES``); nothing else in them changes.  Creating a UTS
namespace and setting its hostname needs root (CAP_SYS_ADMIN); :func:`emulation_unavailable` says
why it cannot run here.  The per-rank wrapper is a ``sh -c`` one-liner on the command line, so no
executable file has to be shipped or generated.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Set in every rank's environment to the number of emulated nodes (absent without emulation).
EMULATE_ENV = "AIORMA_EMULATE_NODES"


#: Set in the ranks' environment unless the caller chose a level: MPICH's UCX layer warns at
#: exit about every registration still in use, and a rank that left by an exception (or stayed
#: behind one) cannot free its windows — freeing is collective — so each rank printed about a
#: hundred "not returned to mpool" lines that buried the failure's own traceback.  Errors still
#: print.  docs/embedding.md tells users who run their own mpiexec to set it too.
QUIET_UCX = ("UCX_LOG_LEVEL", "error")


def under_mpiexec() -> bool:
    """True inside a process started by mpiexec (hydra sets PMI_RANK)."""
    return "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ


def locate_mpiexec() -> str | None:
    """The ``mpiexec`` installed next to this interpreter (the mpich wheel's), else one on PATH,
    else None."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def find_mpiexec() -> str:
    """Like :func:`locate_mpiexec`, but raises SystemExit (with how to install one) if there is none."""
    found = locate_mpiexec()
    if found is None:
        raise SystemExit("no mpiexec found: install the mpich wheel (pip install 'aiorma[mpich]')")
    return found


def emulation_unavailable() -> str | None:
    """None if node emulation can run here, else why not (a sentence for a skip or an error).

    Probes by doing what a rank would: enter a new UTS namespace and set its hostname.
    """
    for tool in ("unshare", "hostname", "sh"):
        if shutil.which(tool) is None:
            return f"node emulation needs the {tool!r} command, which is not on PATH"
    probe = ["unshare", "-u", "sh", "-c", "hostname aiorma-probe && hostname"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"node emulation probe {' '.join(probe)!r} failed: {error}"
    if done.returncode != 0 or done.stdout.strip() != "aiorma-probe":
        why = done.stderr.strip() or f"exit status {done.returncode}"
        root = "" if os.geteuid() == 0 else " (it needs root: not running as root)"
        return f"cannot create a UTS namespace and set its hostname{root}: {why}"
    return None


def _check_emulate_nodes(emulate_nodes: int) -> None:
    if emulate_nodes < 0:
        raise ValueError(f"emulate_nodes must be 0 (no emulation) or more, not {emulate_nodes}")


def mpiexec_command(nprocs: int, argv: Sequence[str], emulate_nodes: int = 0) -> list[str]:
    """The ``mpiexec`` command line that runs ``argv`` (an executable and its arguments) on
    ``nprocs`` ranks.

    ``emulate_nodes`` 0 or 1: ranks as usual, on this one node.  ``k >= 2``: rank r runs with
    hostname ``node<r % k>`` in its own UTS namespace, and with ``MPIR_CVAR_NOLOCAL=1`` (no shared
    memory between any ranks, even two given the same emulated node).  Does not check that
    emulation can run here: see :func:`emulation_unavailable`.  Raises SystemExit without mpiexec.
    """
    _check_emulate_nodes(emulate_nodes)
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, not {nprocs}")
    command = [find_mpiexec(), "-n", str(nprocs)]
    if QUIET_UCX[0] not in os.environ:
        command += ["-genv", *QUIET_UCX]
    if emulate_nodes >= 2:
        command += ["-genv", "MPIR_CVAR_NOLOCAL", "1", "-genv", EMULATE_ENV, str(emulate_nodes)]
        # hydra sets PMI_RANK per rank; the shell reads it inside the new namespace, then becomes
        # the real program (exec), so signals and exit status are the program's own.
        rename = f'hostname "node$((PMI_RANK % {emulate_nodes}))" && exec "$@"'
        command += ["unshare", "-u", "sh", "-c", rename, "aiorma-node"]
    return [*command, *argv]


def ensure_mpi_ranks(nprocs: int, module: str, args: list[str], emulate_nodes: int = 0) -> bool:
    """Outside mpiexec: run ``python -m module args`` on ``nprocs`` ranks (on ``emulate_nodes``
    emulated nodes, see :func:`mpiexec_command`) and return True, raising SystemExit if it failed
    or emulation cannot run here.  Inside mpiexec: return False, so the caller measures."""
    if under_mpiexec():
        return False
    _check_emulate_nodes(emulate_nodes)
    if emulate_nodes >= 2 and (reason := emulation_unavailable()) is not None:
        raise SystemExit(reason)
    command = mpiexec_command(nprocs, [sys.executable, "-m", module, *args], emulate_nodes)
    print("launching:", shlex.join(command), file=sys.stderr, flush=True)
    status = subprocess.run(command, check=False).returncode
    if status != 0:
        raise SystemExit(f"mpiexec exited with {status}")
    return True


def add_emulate_nodes_option(parser: argparse.ArgumentParser) -> None:
    """The ``--emulate-nodes K`` option every MPI benchmark accepts (see :func:`mpiexec_command`)."""
    parser.add_argument(
        "--emulate-nodes",
        type=int,
        default=0,
        metavar="K",
        help="run the ranks on K emulated nodes (2: no shared memory, own hostnames; needs root)",
    )

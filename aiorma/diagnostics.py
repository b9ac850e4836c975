"""aiorma.info(): what a bug report needs to know about the machine aiorma runs on.

Versions (aiorma, Python, numpy, mpi4py, the MPI library and the MPI standard it implements), the
MPI thread level, which transports and event-loop backends work here, where the ranks run (host
name and the ranks that share memory with each), and the environment switches that change
aiorma's or MPI's behaviour.  ``python -m aiorma info`` prints it.

This is a diagnostics call, not part of the library's hot path: it uses blocking mpi4py
collectives to learn where the other ranks run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import platform
import socket
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from . import _native
from ._core.settings import Settings
from ._version import __version__

if TYPE_CHECKING:  # mpi4py is imported only when MPI is asked about: importing it initialises MPI
    from mpi4py import MPI

#: Every environment variable aiorma reads, with what it changes in a line (tests check that this
#: list names every ``AIORMA_`` variable in the package's source).  The library's own switches
#: are documented in full by ``aiorma._core.settings.Settings.from_environment``.
SWITCHES: Mapping[str, str] = {
    "AIORMA_INLINE": "0 turns off inline waiting, inline signals and the MPI transport's off-node fast paths",
    "AIORMA_THIN": "the retired name of AIORMA_INLINE, read when that is unset",
    "AIORMA_PROGRESS_THREAD": "0 turns off the MPI transport's progress thread for ranks that compute",
    "AIORMA_LIVENESS": "0 turns off the MPI transport's liveness ring (TCP connections to the ring "
    "neighbours that notice a rank whose process died)",
    "AIORMA_TRACE": "trace every epoch into this file (one file per rank under mpiexec)",
    "AIORMA_EMULATE_NODES": "set by the benchmarks' --emulate-nodes: ranks run on this many emulated nodes",
    "AIORMA_PURE_PYTHON": "1 runs the engine from source even where its compiled build exists",
}

#: Prefixes of the MPI implementations' and their networks' variables worth showing: MPICH's
#: control variables, MPICH's own, libfabric's (MPICH's ch4:ofi), UCX's (ch4:ucx, Open MPI),
#: Open MPI's, and hydra's/PMI's rank placement.
MPI_PREFIXES = ("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "OMPI_", "PMI_")

_THREAD_LEVELS = ("THREAD_SINGLE", "THREAD_FUNNELED", "THREAD_SERIALIZED", "THREAD_MULTIPLE")


@attrs.frozen(kw_only=True)
class RankPlace:
    """Where one rank runs: its host name and the ranks (of the communicator asked) that share
    memory with it, as MPI sees it (``Split_type(COMM_TYPE_SHARED)``, which includes the rank)."""

    rank: int
    host: str
    shared_memory: tuple[int, ...]


@attrs.frozen(kw_only=True)
class Diagnostics:
    """What :func:`info` found.  ``None`` for a version means that package is not installed (or,
    for the MPI fields, that MPI was not usable: :attr:`mpi_problem` says why)."""

    aiorma: str
    python: str
    platform: str
    numpy: str | None
    mpi4py: str | None
    #: The first line of ``MPI.Get_library_version()``.
    mpi_library: str | None
    #: The MPI standard version the library implements, e.g. "4.1".
    mpi_standard: str | None
    #: ``MPI.Query_thread()`` by name, e.g. "THREAD_MULTIPLE" (what aiorma's MPI transport needs).
    thread_level: str | None
    #: The transports usable here: "local" always, "mpi" when MPI initialised with THREAD_MULTIPLE.
    transports: tuple[str, ...]
    #: Why the MPI transport is not usable here (None when it is).
    mpi_problem: str | None
    #: The event-loop backends installed (name -> version): asyncio always, trio when importable.
    backends: Mapping[str, str]
    #: How the engine's modules run: "compiled (...)" or "from source (why)" (aiorma._native).
    engine: str
    #: This process's rank and the number of ranks (1 without mpiexec; None without MPI).
    rank: int | None
    size: int | None
    #: Every rank's place, in rank order (empty without MPI).
    nodes: tuple[RankPlace, ...]
    #: aiorma's switches that are set (name -> value).
    aiorma_environment: Mapping[str, str]
    #: The MPI implementation's variables that are set (prefixes in :data:`MPI_PREFIXES`).
    mpi_environment: Mapping[str, str]
    #: The switches a connection opened now would run with (name -> value), as
    #: ``aiorma._core.settings.Settings`` reads them from the environment.
    settings: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field (``nodes`` as a list of dicts)."""
        return attrs.asdict(self, value_serializer=_plain)

    def text(self) -> str:
        """The report as plain text, one fact a line, for pasting into a bug report."""
        lines = [
            f"aiorma        {self.aiorma}",
            f"python        {self.python}",
            f"platform      {self.platform}",
            f"numpy         {self.numpy or 'not installed'}",
            f"mpi4py        {self.mpi4py or 'not installed'}",
            f"MPI library   {self.mpi_library or '-'}",
            f"MPI standard  {self.mpi_standard or '-'}",
            f"thread level  {self.thread_level or '-'}",
            f"transports    {', '.join(self.transports)}"
            + (f"  (mpi: {self.mpi_problem})" if self.mpi_problem else ""),
            f"backends      {', '.join(f'{name} {version}' for name, version in self.backends.items())}",
            f"engine        {self.engine}",
        ]
        if self.size is not None:
            lines.append(f"ranks         {self.size} (this is rank {self.rank})")
        if self.nodes:
            lines.append("nodes:")
            for place in self.nodes:
                shared = ", ".join(map(str, place.shared_memory))
                lines.append(f"  rank {place.rank:<4} on {place.host}; shares memory with ranks {shared}")
        lines.append("aiorma environment:")
        lines += _environment_lines(self.aiorma_environment, described=True) or ["  (none set)"]
        lines.append("MPI environment:")
        lines += _environment_lines(self.mpi_environment, described=False) or ["  (none set)"]
        lines.append("settings      " + ", ".join(f"{name}={value}" for name, value in self.settings.items()))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def info(mpi_comm: MPI.Intracomm | None = None, *, mpi: bool = True) -> Diagnostics:
    """What a bug report needs: versions, MPI's thread level, the usable transports and loop
    backends, where every rank runs, and the environment switches that are set.

    ``mpi=False`` leaves MPI alone (no mpi4py import, which would initialise MPI).  Otherwise
    mpi4py is imported (initialising MPI as usual, unless ``mpi4py.rc.initialize`` is False and
    the program has not initialised it yet: then MPI is reported unusable, not initialised here).

    Collective over ``mpi_comm`` (default ``MPI.COMM_WORLD``) when it has more than one rank:
    every rank must call it, and every rank gets every rank's place.  It uses blocking mpi4py
    calls and returns when they do; do not call it from inside a running aiorma program's ranks
    on one event loop (the ``local`` transport), only from a process of its own.
    """
    mpi4py_version = _version("mpi4py")
    fields: dict[str, Any] = {
        "mpi4py": mpi4py_version,
        "mpi_library": None,
        "mpi_standard": None,
        "thread_level": None,
        "rank": None,
        "size": None,
        "nodes": (),
    }
    problem: str | None
    if not mpi:
        problem = "not looked at: MPI left alone"
    elif mpi4py_version is None:
        problem = "mpi4py is not installed: pip install 'aiorma[mpich]' (or mpi4py over your MPI)"
    else:
        problem = _ask_mpi(mpi_comm, fields)
    return Diagnostics(
        aiorma=__version__,
        python=f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        platform=platform.platform(),
        numpy=_version("numpy"),
        transports=("local",) if problem else ("local", "mpi"),
        mpi_problem=problem,
        backends=_backends(),
        engine=_native.describe(),
        aiorma_environment={k: v for k, v in sorted(os.environ.items()) if k.startswith("AIORMA_")},
        mpi_environment={k: v for k, v in sorted(os.environ.items()) if k.startswith(MPI_PREFIXES)},
        settings=attrs.asdict(Settings.from_environment()),
        **fields,
    )


def _ask_mpi(mpi_comm: MPI.Intracomm | None, fields: dict[str, Any]) -> str | None:
    """Fill the MPI fields; return why the MPI transport is not usable, or None."""
    already = "mpi4py.MPI" in sys.modules
    try:
        import mpi4py

        if not already and not mpi4py.rc.initialize:
            return "MPI is not initialised (mpi4py.rc.initialize is False); not initialised here"
        from mpi4py import MPI
    except Exception as error:  # a broken MPI library: the report must still come out
        return f"mpi4py failed to import: {type(error).__name__}: {error}"
    fields["mpi_library"] = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    fields["mpi_standard"] = "{}.{}".format(*MPI.Get_version())
    if MPI.Is_finalized():
        return "MPI is already finalized"
    if not MPI.Is_initialized():
        return "MPI is not initialised (mpi4py.rc.initialize is False); not initialised here"
    level = MPI.Query_thread()
    fields["thread_level"] = _THREAD_LEVELS[level] if 0 <= level < len(_THREAD_LEVELS) else str(level)
    comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
    fields["rank"], fields["size"] = comm.Get_rank(), comm.Get_size()
    fields["nodes"] = _places(MPI, comm)
    if level != MPI.THREAD_MULTIPLE:
        return f"MPI was initialised with {fields['thread_level']}; aiorma needs THREAD_MULTIPLE"
    return None


def _places(MPI: Any, comm: MPI.Intracomm) -> tuple[RankPlace, ...]:
    """Every rank's host and shared-memory group (collective over ``comm``)."""
    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        group = tuple(shared.allgather(comm.Get_rank()))
    finally:
        shared.Free()
    gathered = comm.allgather((socket.gethostname(), group))
    places = (
        RankPlace(rank=rank, host=host, shared_memory=tuple(peers))
        for rank, (host, peers) in enumerate(gathered)
    )
    return tuple(places)


def _backends() -> dict[str, str]:
    found = {"asyncio": "(standard library)"}
    if importlib.util.find_spec("trio") is not None:
        found["trio"] = _version("trio") or "installed"
    return found


def _version(distribution: str) -> str | None:
    """The installed version of ``distribution``: its metadata, else its module's __version__."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pass
    if importlib.util.find_spec(distribution) is None:
        return None
    module = importlib.import_module(distribution)
    return str(getattr(module, "__version__", "installed"))


def _environment_lines(variables: Mapping[str, str], *, described: bool) -> list[str]:
    lines = []
    for name, value in variables.items():
        line = f"  {name}={value}"
        if described:
            line += f"  ({SWITCHES.get(name, 'not a variable aiorma reads')})"
        lines.append(line)
    return lines


def _plain(_instance: object, _field: object, value: object) -> object:
    """attrs.asdict's serializer: mappings become plain dicts, tuples lists (for json)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value

"""Settings: the environment switches of aiorma, read once where a connection starts.

:func:`aiorma.connect`, :func:`aiorma.connect_local` and :func:`aiorma.run` read them
(:meth:`Settings.from_environment`) when the connection opens and hand the value down to what
they make — the transport endpoint, the progress driver, the tracer — as a constructor argument.
Nothing below reads the environment itself: the engine never does, and a test that sets a
variable (``monkeypatch.setenv``, the environment of an ``mpiexec`` run) before it connects gets
it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

import attrs

#: The names of aiorma's own variables (see :meth:`Settings.from_environment`).
INLINE_ENV = "AIORMA_INLINE"
#: Its name before the engine had one path (it also turned off a second, "thin" engine path):
#: still honoured when ``AIORMA_INLINE`` is unset.
RETIRED_INLINE_ENV = "AIORMA_THIN"
PROGRESS_THREAD_ENV = "AIORMA_PROGRESS_THREAD"
LIVENESS_ENV = "AIORMA_LIVENESS"
TRACE_ENV = "AIORMA_TRACE"
#: MPICH's variables that keep it from using shared memory between ranks of one host.
NOLOCAL_VARIABLES = ("MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NOLOCAL")
#: MPICH's switch that makes a rank spinning in MPI's progress (a blocking ``Flush``, ``Wait``)
#: sleep a microsecond after a run of polls that found nothing, handing its core on.
PROGRESS_THROTTLE_VARIABLE = "MPIR_CVAR_CH4_PROGRESS_THROTTLE"
#: What MPICH's launcher (hydra) sets: the ranks it started on this host, and in all.
LOCAL_RANKS_VARIABLE = "MPI_LOCALNRANKS"
ALL_RANKS_VARIABLE = "PMI_SIZE"


def mpich_nolocal(environ: Mapping[str, str]) -> bool:
    """MPICH is told not to use shared memory between ranks of one host (any of
    :data:`NOLOCAL_VARIABLES` set to something but ``0`` or empty)."""
    return any(environ.get(name, "0") not in ("", "0") for name in NOLOCAL_VARIABLES)


def cores_available() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def prepare_mpi_environment(
    environ: MutableMapping[str, str] | None = None, cores: int | None = None
) -> bool:
    """Before :func:`aiorma.run` initialises MPI: when the launcher started more ranks on this
    host than this process has cores (``cores``, default its CPU affinity) *and* some peers are
    reached through MPICH's network module (ranks on other hosts, or none in shared memory:
    ``MPIR_CVAR_NOLOCAL``), turn on MPICH's progress throttle (:data:`PROGRESS_THROTTLE_VARIABLE`)
    unless the environment sets it already.  That module completes a put into another node's
    memory in the target's progress, so a rank blocked in ``Flush`` would otherwise spin on the
    core its target may need to serve that very flush.  Measured (docs/benchmarks.md,
    2026-11-27): 4 ranks on two emulated nodes of a 2-core VM ran 8-byte collectives 1.1-2.8 ×
    faster with it (barrier 0.8 ms against 2.2 ms); on one node, where puts are shared-memory
    copies, it changed nothing measurable or cost a little, so it is left off there.  Returns
    True when it set the variable.  Read by MPICH at ``MPI_Init``, so it acts only when aiorma
    initialises MPI, not on a program that did so itself."""
    env = os.environ if environ is None else environ
    if PROGRESS_THROTTLE_VARIABLE in env:
        return False
    try:
        here = int(env.get(LOCAL_RANKS_VARIABLE, "0"))
        everywhere = int(env.get(ALL_RANKS_VARIABLE, str(here)))
    except ValueError:
        return False
    if here <= (cores_available() if cores is None else cores):
        return False
    if everywhere <= here and not mpich_nolocal(env):
        return False  # every peer in shared memory: puts complete without the target
    env[PROGRESS_THROTTLE_VARIABLE] = "1"
    return True


@attrs.frozen(kw_only=True)
class Settings:
    """The switches one connection runs with; the defaults are the environment's defaults.
    :meth:`from_environment` says what each one is."""

    inline: bool = True
    progress_thread: bool = True
    liveness: bool = True
    mpich_nolocal: bool = False
    trace: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The switches as the environment (``environ``, default ``os.environ``) sets them now.

        ``AIORMA_INLINE`` (default ``1``; ``AIORMA_THIN``, its retired name, is read when it is unset)
            ``0`` turns off inline waiting (awaiting a pending Request polls for a few tens of
            microseconds before it suspends), notified signals written inside the call, and the
            MPI transport's off-node fast paths (puts and gets into another node's allocated
            memory as plain ones completed by ``Flush``; atomics into a peer that runs the
            progress thread made inline) and its CPU atomics on control words when every rank
            is on one node (MPI's atomics instead).  For tests that check both ways give the
            same results; any other value leaves them on.
        ``AIORMA_PROGRESS_THREAD`` (default ``1``)
            ``0`` (or empty) turns off the MPI transport's progress thread, which drives MPI
            progress while the event loop computes without awaiting, for ranks that have peers on
            other nodes (aiorma.transport.busy_progress).  Off, atomics into a computing rank
            wait until it awaits again.
        ``AIORMA_LIVENESS`` (default ``1``)
            ``0`` (or empty) turns off the MPI transport's liveness ring: TCP connections to the
            ring neighbours, whose end without a goodbye tells a rank that a peer's process died
            (aiorma.transport.liveness).  Off (where TCP between ranks is not wanted), a rank
            that dies without leaving holds its peers until their own timeouts.
        ``AIORMA_TRACE`` (default unset)
            A path: trace every epoch into that file, one file per rank under ``mpiexec``
            (:mod:`aiorma.trace`; :func:`aiorma.trace.enable` and :func:`~aiorma.trace.disable`
            override it).
        ``MPIR_CVAR_NOLOCAL``, ``MPIR_CVAR_CH4_NOLOCAL`` (MPICH's; default unset)
            Any value but ``0`` or empty tells MPICH not to use shared memory between ranks of
            one host; the MPI transport then treats every peer as remote (no inline RMA into a
            peer on the same host).
        ``MPIR_CVAR_CH4_PROGRESS_THROTTLE`` (MPICH's)
            :func:`aiorma.run` sets it to ``1`` before it initialises MPI when the launcher put
            more ranks on the host than there are cores and some peers are off node
            (:func:`prepare_mpi_environment`); set it yourself (``0``) to keep MPICH's default.
        """
        env = os.environ if environ is None else environ
        return cls(
            inline=env.get(INLINE_ENV, env.get(RETIRED_INLINE_ENV, "1")) != "0",
            progress_thread=env.get(PROGRESS_THREAD_ENV, "1") not in ("", "0"),
            liveness=env.get(LIVENESS_ENV, "1") not in ("", "0"),
            mpich_nolocal=mpich_nolocal(env),
            trace=env.get(TRACE_ENV) or None,
        )

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
from collections.abc import Mapping

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
            MPI transport's off-node fast paths
            (puts, gets and notifications into another node's allocated memory as plain puts
            completed by ``Flush``; atomics into a peer that runs the progress thread made
            inline).  For tests that check both ways give the same results; any other value
            leaves them on.
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
        """
        env = os.environ if environ is None else environ
        return cls(
            inline=env.get(INLINE_ENV, env.get(RETIRED_INLINE_ENV, "1")) != "0",
            progress_thread=env.get(PROGRESS_THREAD_ENV, "1") not in ("", "0"),
            liveness=env.get(LIVENESS_ENV, "1") not in ("", "0"),
            mpich_nolocal=any(env.get(name, "0") not in ("", "0") for name in NOLOCAL_VARIABLES),
            trace=env.get(TRACE_ENV) or None,
        )

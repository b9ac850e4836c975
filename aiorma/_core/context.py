"""The mutable state aiorma keeps outside its objects: one :class:`Context` per thread, one
:class:`ProcessContext` per process.

Everything else aiorma holds belongs to a connection (its Comms, endpoints, drivers, windows).
What is here is what a call finds without being handed a connection: ``aiorma.progress()`` the
ranks to drive, an await of a Request when the program last yielded, the in-process transport
the memory watchers to poke, a Request under trio its hosted loop.

Per thread, because it all belongs to an event loop, and a thread runs at most one loop at a
time: asyncio's futures, timers and tasks may be touched only from their loop's thread.  Two
threads that each run a loop with aiorma open (``asyncio.run`` in each) must not drive each
other's ranks (:func:`aiorma.progress`), poke each other's watchers, or see each other's awaits
as their own (the fair-slice rule of ``await_policy.wait`` would let one thread's task run
without yielding while another thread yields).  :func:`context` returns the calling thread's.

Per process, what MPI or the user makes process-wide: the communicators with an open
:func:`aiorma.connect` (an MPI communicator is one per process, whichever thread connects it: a
second connect of it from another thread is refused like one from the same thread, so the list
is shared and guarded by a lock), and :func:`aiorma.trace.enable`/``disable``, which override the
environment variable ``AIORMA_TRACE`` and so are as process-wide as it is.  :data:`process`.

Not here: ``Request.finished``'s shared Requests (aiorma.request) are a cache of immutable
objects with no future and no loop, valid in any thread; a race fills it twice with equal
objects, which is harmless.  The turns of window creation and free
(:mod:`aiorma.transport.window_lifecycle`) are per process too, but belong to the MPI transport,
below this module: they stay there, with their own lock.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from mpi4py import MPI


# What the fields hold, by what this module's readers need of them: the modules that make them
# (driver, watch, host) sit above this one.


class ProgressEntry:
    """A rank's entry in :attr:`Context.drivers`: its progress driver's ``progress``.  Owned by
    the driver (aiorma._core.driver.ProgressDriver) and weakly referenced by the context, so it
    goes with the driver; the compiled driver itself cannot be weakly referenced."""

    __slots__ = ("__weakref__", "progress")

    def __init__(self, progress: Callable[[], None]) -> None:
        self.progress = progress


class WatchEntry:
    """A memory watcher's entry in :attr:`Context.watchers`: its loop and its ``check``.  Owned
    by the watcher (aiorma._core.watch.MemoryWatcher) and weakly referenced by the context, so it
    goes with the watcher; the compiled watcher itself cannot be weakly referenced."""

    __slots__ = ("__weakref__", "check", "loop")

    def __init__(self, check: Callable[[], bool], loop: asyncio.AbstractEventLoop) -> None:
        self.check = check
        self.loop = loop


class Context:
    """One thread's state (see the module docstring); :func:`context` returns it."""

    __slots__ = ("drivers", "hosted_loops", "last_await", "poke_scheduled", "runner_depth", "watchers")

    def __init__(self) -> None:
        #: When a task of this thread last awaited an aiorma Request and checkpointed
        #: (``time.perf_counter``).  Written by ``wait`` (aiorma._core.await_policy, where an
        #: await decides how it waits) after every suspension and fair-slice checkpoint, read
        #: there and by ``Request.__await__`` (aiorma.request) on every await (is a checkpoint
        #: due?), and by the rank's ``Waiter`` (aiorma._core.waiter): a program awaiting aiorma calls is
        #: activity even when every call finished inside itself (such calls wake no one), so
        #: the waiter keeps spinning instead of announcing a park, which costs atomics into every
        #: peer's presence word.
        self.last_await = 0.0
        #: The progress drivers of this thread's ranks, as their entries (weakly: a closed
        #: connection's driver goes with it).  Added by ``ProgressDriver.__init__``
        #: (aiorma._core.driver), read by :func:`aiorma.progress`.
        self.drivers: weakref.WeakSet[ProgressEntry] = weakref.WeakSet()
        #: The memory watchers of this thread's windows, as their entries (weakly).  Added and
        #: removed by ``MemoryWatcher`` (aiorma._core.watch), read by ``poke_all`` (which the
        #: in-process transport calls after a write lands) to re-check them.
        self.watchers: weakref.WeakSet[WatchEntry] = weakref.WeakSet()
        #: Loops with a re-check of the watchers scheduled (weakly: a loop closed before it ran
        #: must not be kept alive).  Written and read by ``poke_all`` and its callback.
        self.poke_scheduled: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        #: The asyncio loops hosted in this thread's trio runs (``HostedLoop``, one per trio run
        #: with aiorma open; normally none).  Written by ``open_host`` and the hosted loop's end
        #: (aiorma._core.host), read by ``in_trio`` there (empty: not under trio).
        self.hosted_loops: list[asyncio.AbstractEventLoop] = []
        #: How deep the collectives' SerialRunner is in stepping a job: its coroutines yield
        #: asyncio futures to the runner itself, never to trio, wherever the step happens.
        #: Counted by ``SerialRunner._step`` (aiorma.collectives.runner), read by ``in_trio``.
        self.runner_depth = 0


#: ``per_thread.context`` is the calling thread's :class:`Context` once :func:`context` made it
#: (AttributeError before): one attribute look-up, for the hot path (``Request.__await__``, which
#: falls back on :func:`context`); elsewhere call :func:`context`.  (A plain ``threading.local``:
#: a subclass whose ``__init__`` makes the Context costs 7 ns more per look-up.)
per_thread = threading.local()


def context() -> Context:
    """The calling thread's :class:`Context` (made on its first call)."""
    try:
        return per_thread.context  # type: ignore[no-any-return]
    except AttributeError:
        per_thread.context = made = Context()
        return made


class ProcessContext:
    """The process's state (see the module docstring): :data:`process`."""

    __slots__ = ("connected", "connected_lock", "trace_disabled", "trace_path")

    def __init__(self) -> None:
        #: Communicators with an open :func:`aiorma.connect` in this process (compared by
        #: handle).  Checked, added and removed by aiorma.session, always under
        #: :attr:`connected_lock` (connects may run in several threads).
        self.connected: list[MPI.Intracomm] = []
        self.connected_lock = threading.Lock()
        #: :func:`aiorma.trace.enable`'s path (None: not enabled).  Written by ``enable``,
        #: ``disable`` and ``reset``, read by ``configured_path`` (aiorma.trace).
        self.trace_path: str | None = None
        #: :func:`aiorma.trace.disable` was called (it wins over ``AIORMA_TRACE``).  Written and
        #: read as :attr:`trace_path`.
        self.trace_disabled = False


#: This process's :class:`ProcessContext`.
process = ProcessContext()

"""BusyProgress: drive MPI progress from a thread while the event loop is busy elsewhere.

Across nodes, MPICH's network module delivers puts and gets without the target's CPU, but applies
atomics (the lock words' swap, compare-and-swap, fetch-and-add) only while the target drives MPI
progress.  An awaiting rank does that at every poll of its waiter; a rank whose event loop runs a
long computation without awaiting would leave every origin's lock request hanging until it next
awaits.  This thread closes that gap: every ``period`` it looks at when the loop thread last
polled, and if that is longer ago than ``period`` it drives progress once itself.

Bound: an atomic into a rank that computes without awaiting is served within ``period`` plus the
time the thread needs to get the interpreter from the computing thread — at most Python's switch
interval (``sys.getswitchinterval()``, 5 ms by default) for pure-Python code, at once for code that
releases the GIL (numpy, I/O).  Cost: while the loop polls on its own (the rank awaits) the thread
only wakes, looks at one timestamp and sleeps; while it computes, one progress call per period
and one hand-over of the interpreter — measured in docs/architecture.md (*The MPI transport*).
The thread runs only on ranks with a peer on another node (on one node every atomic into
allocated memory is passive already), and only while the connection's
:attr:`~aiorma._core.settings.Settings.progress_thread` is on (off, atomics into a computing rank
wait until it awaits again, as before the thread existed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DEFAULT_PERIOD = 1e-3


class BusyProgress:
    """Calls ``drive()`` from its own thread whenever the loop thread has not polled for
    ``period`` seconds; the loop thread reports its polls by setting :attr:`polled_at`."""

    def __init__(self, drive: Callable[[], object], period: float = DEFAULT_PERIOD) -> None:
        self._drive = drive
        self._period = period
        #: ``time.monotonic()`` of the loop thread's last poll (written by the loop thread only).
        self.polled_at = time.monotonic()
        #: How many times the thread drove progress itself (tests and measurements read it).
        self.served = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="aiorma-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        period = self._period
        while not self._stopping.wait(period):
            if time.monotonic() - self.polled_at < period:
                continue  # the loop polls on its own
            try:
                self._drive()
            except Exception:
                # MPI is broken or being torn down: the loop thread meets the same error at its
                # next call and fails the rank's Requests with it; nothing is left to do here.
                return
            self.served += 1

    def stop(self) -> None:
        """Stop the thread and wait for it (at most one progress call long).  Idempotent."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

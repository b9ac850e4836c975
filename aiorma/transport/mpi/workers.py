"""The endpoint's two worker threads.  Collectives (window creation and free, communicator free)
run in one ("aiorma-coll"), so a collective waiting for a late peer never holds back this rank's
own flushes; one thread keeps their order the same on every rank (the MPI calls that create and
free windows also take turns with those of the process's other connects:
:mod:`aiorma.transport.window_lifecycle`).  Blocking RMA calls with no
request-based form (``Compare_and_swap``, ``Win.Flush`` for windows of derived datatypes) run in
the other ("aiorma-rma"), so that they never block the event loop (MPI is initialised with
``THREAD_MULTIPLE``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import TransportError

_T = TypeVar("_T")


class Workers:
    """The collectives thread and the blocking-RMA thread.  ``failed`` receives the error of a
    blocking call that raised (on the loop): the rank's windows then fail for good."""

    def __init__(self, failed: Callable[[TransportError], None]) -> None:
        self._failed = failed
        self._collectives = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aiorma-coll")
        self._blocking = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aiorma-rma")
        #: Blocking calls running in the RMA worker.
        self.blocking_calls = 0

    async def collective(self, fn: Callable[[], _T]) -> _T:
        """Run the blocking collective ``fn`` in the collectives thread.  Cancelling the awaiting
        task does not stop ``fn``: peers are in the same collective."""
        return await asyncio.get_running_loop().run_in_executor(self._collectives, fn)

    def in_thread(
        self, loop: asyncio.AbstractEventLoop, call: Callable[[], None], then: Callable[[Any], None]
    ) -> None:
        """Run the blocking MPI ``call`` in the RMA worker; ``then`` runs on the loop after it."""
        future = loop.run_in_executor(self._blocking, call)
        self.blocking_calls += 1

        def finished(f: asyncio.Future[None]) -> None:
            self.blocking_calls -= 1
            if f.cancelled():
                return
            error = f.exception()
            if error is not None:  # the rank's windows fail for good, with the cause
                self._failed(TransportError(f"{getattr(call, '__name__', 'call')}: {error}"))
                return
            then(None)

        future.add_done_callback(finished)

    def drain_blocking(self) -> None:
        """Wait for the blocking call still running in the RMA worker, if any, and stop that
        thread (from the collectives thread, before the windows it may use are freed)."""
        self._blocking.shutdown(wait=True)

    def stop(self) -> None:
        """Stop both threads without waiting: a collective stuck in one is left to finish on its
        own, calls not yet started are cancelled."""
        self._collectives.shutdown(wait=False, cancel_futures=True)
        self._blocking.shutdown(wait=False, cancel_futures=True)

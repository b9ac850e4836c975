"""Persistent collectives, in the spirit of MPI-4's ``MPI_Allreduce_init`` / ``MPI_Start``.

``req = comm.allreduce_init(send, recv)`` checks the arguments once and keeps the checked work as
a job; ``await req.start()`` runs it as one collective, as many times as wanted.  What a start
saves is everything a call does before its first put: argument checks, buffer views, option
parsing (and for a ``tree=``/``topology=`` broadcast, building and validating the tree).  The
algorithm is chosen when each start runs, from the same remembered plan a plain call uses, so a
start and a plain call with the same arguments run the same algorithm and may be mixed freely.

As in MPI, the buffers are bound at init: a start reads the send buffer's contents *at that
start*, and a persistent collective may not be started again before its previous start completed.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import RmaUsageError
from ..request import Request


class Persistent:
    """A persistent collective of one Comm: :meth:`start` it, await the Request, start it again.

    ``run`` starts one run with the arguments checked at init and returns its Request: for most
    collectives it queues the checked job on the Comm's runner (``Collectives.submit``); for the
    fence barrier it is the sync window's ``fence``."""

    def __init__(self, run: Callable[[], Request], description: str) -> None:
        self._run = run
        self._description = description
        self._last: Request | None = None

    @property
    def active(self) -> bool:
        """True from a :meth:`start` until its Request completes (MPI's *active* state)."""
        return self._last is not None and not self._last.done()

    def start(self) -> Request:
        """Start one run of the collective (MPI_Start); its Request completes as the plain call's
        would.  Every rank must start it at the same point of its sequence of collectives.
        Raises :class:`~aiorma.RmaUsageError`, starting nothing, while the previous start is
        still active."""
        if self.active:
            raise RmaUsageError(
                f"persistent {self._description} started again before its previous start completed"
            )
        self._last = self._run()
        return self._last

    def __repr__(self) -> str:
        return f"<persistent {self._description} {'active' if self.active else 'inactive'}>"

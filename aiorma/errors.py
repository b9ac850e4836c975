"""Exception families.

``RmaUsageError`` and its subclasses are local misuse: raised at the call site, before anything
changes, so the window stays usable.  ``RmaFailure`` and its subclasses are failures from elsewhere
(a peer, the transport, an internal inconsistency); the MPI library's errors are translated into
:class:`TransportError` where the transport calls MPI.
"""

from __future__ import annotations


class RmaError(Exception):
    """Base class of every aiorma exception."""


class RmaUsageError(RmaError):
    """A call that breaks the rules of MPI RMA; nothing was changed."""


class EpochError(RmaUsageError):
    """The call does not fit the window's epochs (RMA outside an epoch, unlock without lock, ...)."""


class RmaRangeError(RmaUsageError, IndexError):
    """A rank, displacement or length outside what the target window exposes."""


class RmaTypeError(RmaUsageError, TypeError):
    """A buffer whose dtype, layout or writability does not fit the window or the operation."""


class WindowFreedError(RmaUsageError):
    """The window was freed (or is being freed); it accepts no more calls."""


class CommClosedError(RmaUsageError):
    """The window's :class:`~aiorma.Comm` was closed (its :func:`aiorma.run` returned): the
    window, though never freed, accepts no more calls, and the Comm creates no more windows."""


class RmaMemoryError(RmaUsageError, MemoryError):
    """``win_allocate`` asked for more bytes than this machine has (physical memory), refused at
    the call before anything collective happens."""


class MpiStateError(RmaUsageError):
    """:func:`aiorma.connect` needs MPI initialised with ``MPI_THREAD_MULTIPLE`` and not yet
    finalized."""


class CommunicatorError(RmaUsageError, TypeError):
    """:func:`aiorma.connect` was given no mpi4py intracommunicator: another object,
    ``COMM_NULL`` or an intercommunicator."""


class AlreadyConnectedError(RmaUsageError):
    """This communicator already has an open :func:`aiorma.connect` in this process."""


class RmaFailure(RmaError):
    """Something outside the caller's control failed; dependent Requests carry this error."""


class TransportError(RmaFailure):
    """The transport (MPI, local network) reported an error."""


class EngineFailure(RmaFailure):
    """The engine found an internal inconsistency; the window refuses every later call."""


class PeerFailed(RmaFailure):
    """Another rank ended with an exception or was cancelled: every Request that was waiting on it
    (on the in-process transport: every pending Request of this rank) carries this error, and
    later calls on the windows and collectives raise it.  ``rank`` is the failed rank and
    ``cause`` what it ended with."""

    def __init__(self, rank: int, cause: BaseException | None = None) -> None:
        super().__init__(rank, cause)
        self.rank = rank
        self.cause = cause

    def __str__(self) -> str:
        return f"rank {self.rank} failed: {self.cause!r}"


class CollectiveStreamBroken(RmaFailure):
    """An earlier collective of this Comm failed, so the ranks' message counts are out of step and
    no later collective can run."""


class CollectiveMismatch(RmaUsageError):
    """The ranks of a Comm reached its close having called different numbers of collectives.  A
    collective that some rank never called can never complete, so instead of waiting for ever
    the close fails with this error on every rank (``counts``: how many each rank called) and
    leaves without anything collective."""

    def __init__(self, counts: list[int]) -> None:
        self.counts = counts
        super().__init__(
            "the ranks closed this Comm after calling different numbers of collectives "
            f"(by rank: {counts}); a collective that not every rank calls never completes, so the "
            "unfinished ones were abandoned"
        )


class SimulationStalled(RmaError, RuntimeError):
    """The simulated program waits for something that can never happen: nothing is ready and no
    timer is pending (a deadlock).  Raised out of the event loop instead of hanging."""

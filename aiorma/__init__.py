"""aiorma: MPI-style one-sided communication for asyncio, with entirely nonblocking epochs.

Public names are re-exported here from private modules; ``tests/test_exports.py`` keeps this list
exactly what is meant to be public.
"""

# First: decides whether the engine's modules run compiled or from source (aiorma._native), before
# anything below imports them.
from . import _native as _native
from ._core.driver import progress
from ._version import __version__ as __version__
from .comm import Comm
from .constants import (
    BAND,
    BOR,
    BXOR,
    LAND,
    LOCK_EXCLUSIVE,
    LOCK_SHARED,
    LOR,
    LXOR,
    MAX,
    MIN,
    MODE_NOCHECK,
    MODE_NOPRECEDE,
    MODE_NOPUT,
    MODE_NOSTORE,
    MODE_NOSUCCEED,
    NO_OP,
    PROD,
    REPLACE,
    SIGNAL_ADD,
    SIGNAL_SET,
    SUM,
    LockType,
    Op,
    SignalOp,
)
from .diagnostics import info
from .errors import (
    AlreadyConnectedError,
    CollectiveMismatch,
    CollectiveStreamBroken,
    CommClosedError,
    CommunicatorError,
    EngineFailure,
    EpochError,
    MpiStateError,
    PeerFailed,
    RmaError,
    RmaFailure,
    RmaMemoryError,
    RmaRangeError,
    RmaTypeError,
    RmaUsageError,
    SimulationStalled,
    TransportError,
    WindowFreedError,
)
from .request import EpochRequest, Request
from .runtime import run
from .session import connect, connect_local
from .win_info import Info
from .window import Window

__all__ = [
    "CollectiveMismatch",
    "CollectiveStreamBroken",
    "SimulationStalled",
    "AlreadyConnectedError",
    "CommunicatorError",
    "MpiStateError",
    "BAND",
    "BOR",
    "BXOR",
    "LAND",
    "LOCK_EXCLUSIVE",
    "LOCK_SHARED",
    "LOR",
    "LXOR",
    "MAX",
    "MIN",
    "MODE_NOCHECK",
    "MODE_NOPRECEDE",
    "MODE_NOPUT",
    "MODE_NOSTORE",
    "MODE_NOSUCCEED",
    "NO_OP",
    "PROD",
    "REPLACE",
    "SIGNAL_ADD",
    "SIGNAL_SET",
    "SignalOp",
    "SUM",
    "Comm",
    "CommClosedError",
    "EngineFailure",
    "EpochError",
    "Info",
    "info",
    "LockType",
    "Op",
    "PeerFailed",
    "Request",
    "EpochRequest",
    "RmaError",
    "RmaFailure",
    "RmaMemoryError",
    "RmaRangeError",
    "RmaTypeError",
    "RmaUsageError",
    "TransportError",
    "Window",
    "WindowFreedError",
    "connect",
    "connect_local",
    "progress",
    "run",
]

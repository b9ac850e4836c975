"""aiorma's public names: exactly the intended set, each resolving to the right object."""

from __future__ import annotations

import aiorma
from aiorma import constants, errors

PUBLIC = {
    # entry points and objects
    "run", "connect", "connect_local", "progress", "Comm", "Window", "Request", "EpochRequest", "Info",
    # diagnostics (python -m aiorma info)
    "info",
    # assertions
    "MODE_NOCHECK", "MODE_NOSTORE", "MODE_NOPUT", "MODE_NOPRECEDE", "MODE_NOSUCCEED",
    # ops
    "Op", "SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "REPLACE", "NO_OP",
    # lock types
    "LockType", "LOCK_EXCLUSIVE", "LOCK_SHARED",
    # signal operations of notified access
    "SignalOp", "SIGNAL_SET", "SIGNAL_ADD",
    # errors
    "RmaError", "RmaUsageError", "EpochError", "RmaRangeError", "RmaTypeError", "WindowFreedError",
    "CommClosedError", "RmaMemoryError", "MpiStateError", "CommunicatorError", "AlreadyConnectedError",
    "RmaFailure", "TransportError", "EngineFailure", "PeerFailed", "CollectiveStreamBroken",
    "CollectiveMismatch",
    "SimulationStalled",
}  # fmt: skip


def test_all_is_exactly_the_public_set() -> None:
    assert len(aiorma.__all__) == len(set(aiorma.__all__))
    assert set(aiorma.__all__) == PUBLIC


def test_every_public_name_resolves() -> None:
    missing = [name for name in aiorma.__all__ if not hasattr(aiorma, name)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec("from aiorma import *", namespace)
    assert set(namespace) - {"__builtins__"} == PUBLIC


def test_info_is_the_diagnostics_function_not_the_submodule() -> None:
    from aiorma import diagnostics

    assert aiorma.info is diagnostics.info
    assert aiorma.Info.__module__ == "aiorma.win_info"


def test_constants_are_the_named_members() -> None:
    for op in aiorma.Op:
        assert getattr(aiorma, op.name) is op
    assert [aiorma.LOCK_EXCLUSIVE, aiorma.LOCK_SHARED] == [aiorma.LockType.EXCLUSIVE, aiorma.LockType.SHARED]
    names = [f"MODE_{m}" for m in ("NOCHECK", "NOSTORE", "NOPUT", "NOPRECEDE", "NOSUCCEED")]
    modes = [getattr(aiorma, name) for name in names]
    assert modes == [getattr(constants, name) for name in names]
    assert all(m > 0 and m & (m - 1) == 0 for m in modes)  # distinct single bits
    assert len(set(modes)) == 5


def test_error_hierarchy() -> None:
    names = ("EpochError", "RmaRangeError", "RmaTypeError", "WindowFreedError", "CommClosedError")
    names += ("RmaMemoryError",)
    for name in names:
        assert issubclass(getattr(aiorma, name), aiorma.RmaUsageError)
        assert getattr(aiorma, name) is getattr(errors, name)
    for name in ("TransportError", "EngineFailure", "PeerFailed"):
        assert issubclass(getattr(aiorma, name), aiorma.RmaFailure)
    assert issubclass(aiorma.RmaRangeError, IndexError)
    assert issubclass(aiorma.RmaTypeError, TypeError)
    assert issubclass(aiorma.RmaMemoryError, MemoryError)
    assert not issubclass(aiorma.RmaFailure, aiorma.RmaUsageError)
    assert issubclass(aiorma.RmaUsageError, aiorma.RmaError)
    assert issubclass(aiorma.RmaFailure, aiorma.RmaError)

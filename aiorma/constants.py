"""Assertions, lock types and reduction operations, named as in MPI."""

from __future__ import annotations

import enum
from typing import Final

# Assertions (bit flags, combinable with |), as MPI_MODE_*.
MODE_NOCHECK: Final = 1
MODE_NOSTORE: Final = 2
MODE_NOPUT: Final = 4
MODE_NOPRECEDE: Final = 8
MODE_NOSUCCEED: Final = 16
_ALL_MODES: Final = MODE_NOCHECK | MODE_NOSTORE | MODE_NOPUT | MODE_NOPRECEDE | MODE_NOSUCCEED


class LockType(enum.IntEnum):
    EXCLUSIVE = 1
    SHARED = 2


LOCK_EXCLUSIVE = LockType.EXCLUSIVE
LOCK_SHARED = LockType.SHARED


class Op(enum.IntEnum):
    """Reduction operations for accumulate, get_accumulate and fetch_and_op."""

    SUM = 1
    PROD = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    LAND = 8
    LOR = 9
    LXOR = 10
    REPLACE = 11
    NO_OP = 12


SUM, PROD, MIN, MAX = Op.SUM, Op.PROD, Op.MIN, Op.MAX
BAND, BOR, BXOR = Op.BAND, Op.BOR, Op.BXOR
LAND, LOR, LXOR = Op.LAND, Op.LOR, Op.LXOR
REPLACE, NO_OP = Op.REPLACE, Op.NO_OP


class SignalOp(enum.IntEnum):
    """How :meth:`Window.signal` and :meth:`Window.put_signal` change the signal word, as
    OpenSHMEM's ``SHMEM_SIGNAL_SET`` and ``SHMEM_SIGNAL_ADD``."""

    SET = 1  #: store the value: a put (no atomic, no work for the target's CPU on any node)
    ADD = 2  #: add the value atomically: an accumulate (several ranks may add to one word)


SIGNAL_SET, SIGNAL_ADD = SignalOp.SET, SignalOp.ADD

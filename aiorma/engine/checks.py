"""The engine's argument checks: each returns the value as the engine keeps it, or raises the
usage error a refused call raises — before anything changed (h11's habit: a refused call is a
no-op).

What a program passed is annotated ``Any`` here and in the engine's calls that hand it on: in the
compiled engine (aiorma._native) an ``int`` parameter would turn ``True`` into 1, or refuse a
numpy integer with a TypeError, before these checks could answer."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..constants import _ALL_MODES
from ..errors import RmaRangeError, RmaUsageError


def check_rank(rank: Any, size: int) -> int:
    """``rank`` as a plain int in ``[0, size)`` (numpy integers are welcome, bools are not);
    raises RmaRangeError."""
    if type(rank) is int and 0 <= rank < size:
        return rank
    try:
        value = operator.index(rank)
    except TypeError:
        value = -1
    if isinstance(rank, bool) or not 0 <= value < size:
        raise RmaRangeError(f"rank {rank!r} is outside the window's group of {size}")
    return value


def check_group(group: Iterable[Any], size: int) -> tuple[int, ...]:
    """``group`` as a tuple of distinct ranks in ``[0, size)``; raises RmaUsageError (not an
    iterable of integers, a rank twice) or RmaRangeError (a rank out of range, a bool)."""
    if type(group) is list or type(group) is tuple:  # the common case: plain ints, no conversion
        members = tuple(group)
        for rank in members:
            if type(rank) is not int or not 0 <= rank < size:
                break
        else:
            if len(set(members)) == len(members):
                return members
    try:
        given = tuple(group)
    except TypeError:
        raise RmaUsageError(f"group must be an iterable of integer ranks, not {group!r}") from None
    for rank in given:  # operator.index would take a bool for 0 or 1
        if isinstance(rank, bool | np.bool_):
            raise RmaRangeError(f"rank {rank!r} is a bool, not a rank")
    try:
        members = tuple(operator.index(rank) for rank in given)
    except TypeError:
        raise RmaUsageError(f"group must be an iterable of integer ranks, not {group!r}") from None
    members = tuple(check_rank(rank, size) for rank in members)
    if len(set(members)) != len(members):
        raise RmaUsageError(f"group {members} names a rank twice")
    return members


def check_assertion(assertion: Any) -> int:
    """``assertion`` as an int, a combination of MODE_* flags (an int or a numpy integer, not a
    bool); raises RmaUsageError otherwise."""
    if type(assertion) is int:
        if assertion == 0:  # the common case
            return 0
        value: int = assertion
    elif isinstance(assertion, np.integer):
        value = int(assertion)
    else:
        raise RmaUsageError(f"assertion {assertion!r} is not a combination of MODE_* flags")
    if value & ~_ALL_MODES or value < 0:
        raise RmaUsageError(f"assertion {assertion!r} is not a combination of MODE_* flags")
    return value

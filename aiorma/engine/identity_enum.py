"""An Enum that hashes by identity, for the constants the engine looks up on every call.

Python's ``Enum.__hash__`` is a Python-level function (it hashes the member's name), and the
engine's tables are keyed by members and pairs of members: a fence epoch hashed members about
thirty times.  Members are singletons compared by identity, so hashing by identity gives the same
dictionaries and sets at C speed.  (Members never cross processes as hash keys: only their values
travel, in fixed binary layouts.)
"""

from __future__ import annotations

import enum


class IdentityEnum(enum.Enum):
    """An :class:`enum.Enum` whose members hash by identity (C-level ``object.__hash__``)."""

    __hash__ = object.__hash__

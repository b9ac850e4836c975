"""The engine's one road to the world: :class:`EngineIO`, the base class of its implementations.

A :class:`~.window_engine.WindowEngine` never touches a transport: every step that needs the
world — an RMA operation, an atomic on a peer's control word, a flush, a finished Request — is one
call on its ``EngineIO``.  The driver's implementation hands each call to the transport endpoint at
once; :class:`~.actions.ActionLog` records each as an action for engines driven by hand.

A base class rather than a ``Protocol``: the compiled engine makes these calls at every step, and
a call through a Protocol is a generic Python call (arguments boxed into objects, then parsed by
the callee), where a call on a compiled base class goes through its method table.  Implementations
written in Python subclass it as the compiled one does (hence ``allow_interpreted_subclasses``).
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from .control import AtomicOp


@mypyc_attr(allow_interpreted_subclasses=True)
class EngineIO:
    """What an engine asks of the world, one call per step.  Calls are made in the engine's order,
    and each takes effect before the next: a ``write`` made after a ``flush`` returned True, or
    after the engine was told ``flushed``, reaches its target after the flushed data (data before
    flag)."""

    def issue(self, token: int, target: int, payload: Any) -> None:
        """Start an RMA operation; whoever owns ``token``'s Request finishes it at local
        completion (the engine itself never does)."""
        raise NotImplementedError

    def fetch(self, token: int, dest: int, index: int, op: AtomicOp, value: int, compare: int) -> int | None:
        """Apply ``op`` to word ``index`` of ``dest``'s control region; the old value when the
        answer is in hand now, else None and :meth:`WindowEngine.fetched` with ``token`` later."""
        raise NotImplementedError

    def write(self, dest: int, index: int, op: AtomicOp, value: int) -> None:
        """Update word ``index`` of ``dest``'s control region with ``op`` (MAX or SUM); no result."""
        raise NotImplementedError

    def flush(self, target: int, upto: int) -> bool:
        """Ask for remote completion of every op issued to ``target`` up to issue number
        ``upto``: True when complete now, else :meth:`WindowEngine.flushed` later."""
        raise NotImplementedError

    def complete(self, token: int, error: BaseException | None) -> None:
        """The engine finished ``token`` (with ``error``, or successfully)."""
        raise NotImplementedError

"""The life cycle of an epoch and of each of its targets, as data.

Theory of operation
-------------------
An epoch is opened by an application call (``fence``, ``post``, ``start``, ``lock``, ``lock_all``)
and closed by another (``fence``, ``wait``/``test``, ``complete``, ``unlock``, ``unlock_all``).
Between those two calls it is *open*: RMA calls are recorded in it.  Independently of the program,
the engine *activates* it once the activation rules of :mod:`.rules` allow (Zounmevo 2014, §5.6), and
*completes* it once it is closed, its RMA is remotely complete and its closing notifications are
sent.  An epoch's phase is the pair of these two facts, and only these steps exist:

=================  ==========  =================  ==========================================
phase              event       next phase         what happens
=================  ==========  =================  ==========================================
DEFERRED           activate    ACTIVE             grants are asked for; recorded RMA replays
DEFERRED           close       CLOSED_DEFERRED    the program closed it before activation
ACTIVE             close       CLOSING            the engine pushes it towards completion
CLOSED_DEFERRED    activate    CLOSING            activated already closed: same as above
CLOSING            complete    COMPLETED          its Requests finish; later epochs may start
=================  ==========  =================  ==========================================

Every epoch is born DEFERRED (the engine then tries to activate it at once).  Completion needs
the close: an open epoch can always get more RMA calls.

Each target of an access epoch (:class:`~.epochs.AccessTarget`) has its own small life: it waits
for the target's grant (a post's grant word, a fence notice, a lock), then issues its RMA as it is
called; when the epoch is closing it is *closed out* (the "done" sent, the lock released).  An
access with no RMA calls towards a GATS or fence target sends its "done" without waiting for the
grant, so a grant may arrive after the close-out: that is the DONE_EARLY phase.

:data:`EPOCH_TRANSITIONS` and :data:`TARGET_TRANSITIONS` are the only legal steps.  The engine
moves an epoch or a target only through :meth:`~.window_engine.WindowEngine._move_epoch` and
``_move_target``, which raise :class:`~aiorma.errors.EngineFailure` on any other step; every entry
point of the engine (application call or network event) turns that into a failed window, h11's
rule: every pending Request finishes with the failure and every later call raises it.  Illegal
*application* calls never get this far: they are refused at the call with ``EpochError`` or
another usage error, and change nothing.

``python -m aiorma.engine.diagram`` draws both tables into ``docs/engine-states.md``.
"""

from __future__ import annotations

from typing import Final, TypeVar

from .identity_enum import IdentityEnum

_Phase = TypeVar("_Phase", bound=IdentityEnum)
_Step = TypeVar("_Step", bound=IdentityEnum)


class EpochPhase(IdentityEnum):
    """Where one epoch is in its life: open or closed by the program × deferred, active or done."""

    DEFERRED = "deferred"  # open, waiting for the activation rules; its calls are recorded
    ACTIVE = "active"  # open and activated; RMA is issued as targets grant access
    CLOSED_DEFERRED = "closed_deferred"  # closed by the program before the engine activated it
    CLOSING = "closing"  # closed and active: RMA completing, notifications and releases going out
    COMPLETED = "completed"  # RMA done and closing notifications sent; its Requests are finished


class EpochStep(IdentityEnum):
    """What moves an epoch; the values are the step names of :class:`~.actions.EpochEvent`."""

    ACTIVATE = "activate"  # the engine: the activation rules hold
    CLOSE = "close"  # the program: complete/wait/test/unlock/unlock_all/fence
    COMPLETE = "complete"  # the engine: remotely complete, notified, released


class TargetPhase(IdentityEnum):
    """Where one access epoch stands with one of its targets."""

    WAITING = "waiting"  # no grant yet: RMA calls are recorded for replay
    GRANTED = "granted"  # RMA calls are issued as they are made
    DONE_EARLY = "done_early"  # closed out before the grant (no RMA towards it): a grant may follow
    CLOSED_OUT = "closed_out"  # granted, then closed out ("done" sent / lock released)


class TargetStep(IdentityEnum):
    GRANT = "grant"  # the target granted access (post's grant, fence notice, lock, NOCHECK)
    CLOSE_OUT = "close_out"  # RMA remotely complete; "done" sent or lock released


EPOCH_TRANSITIONS: dict[tuple[EpochPhase, EpochStep], EpochPhase] = {
    (EpochPhase.DEFERRED, EpochStep.ACTIVATE): EpochPhase.ACTIVE,
    (EpochPhase.DEFERRED, EpochStep.CLOSE): EpochPhase.CLOSED_DEFERRED,
    (EpochPhase.ACTIVE, EpochStep.CLOSE): EpochPhase.CLOSING,
    (EpochPhase.CLOSED_DEFERRED, EpochStep.ACTIVATE): EpochPhase.CLOSING,
    (EpochPhase.CLOSING, EpochStep.COMPLETE): EpochPhase.COMPLETED,
}

TARGET_TRANSITIONS: dict[tuple[TargetPhase, TargetStep], TargetPhase] = {
    (TargetPhase.WAITING, TargetStep.GRANT): TargetPhase.GRANTED,
    (TargetPhase.WAITING, TargetStep.CLOSE_OUT): TargetPhase.DONE_EARLY,
    (TargetPhase.GRANTED, TargetStep.CLOSE_OUT): TargetPhase.CLOSED_OUT,
    (TargetPhase.DONE_EARLY, TargetStep.GRANT): TargetPhase.CLOSED_OUT,
}


def _by_step(table: dict[tuple[_Phase, _Step], _Phase]) -> dict[_Step, dict[_Phase, _Phase]]:
    by_step: dict[_Step, dict[_Phase, _Phase]] = {}
    for (phase, step), after in table.items():
        by_step.setdefault(step, {})[phase] = after
    return by_step


# The same tables keyed step first, then phase: how the engine looks a step up, every step of
# every epoch (two lookups of members hashed by identity; a (phase, step) key would be a tuple
# built, hashed and compared element by element each time).
EPOCH_STEPS: Final = _by_step(EPOCH_TRANSITIONS)
TARGET_STEPS: Final = _by_step(TARGET_TRANSITIONS)

#: Phases in which the epoch has been activated (the engine's view; :class:`.rules.EpochState`).
ACTIVATED_PHASES: Final = frozenset({EpochPhase.ACTIVE, EpochPhase.CLOSING})
#: Phases in which the program has closed the epoch.
CLOSED_PHASES: Final = frozenset({EpochPhase.CLOSED_DEFERRED, EpochPhase.CLOSING, EpochPhase.COMPLETED})
#: Target phases reached through a grant.
GRANTED_PHASES: Final = frozenset({TargetPhase.GRANTED, TargetPhase.CLOSED_OUT})
#: Target phases after the close-out.
CLOSED_OUT_PHASES: Final = frozenset({TargetPhase.DONE_EARLY, TargetPhase.CLOSED_OUT})

"""The life cycle tables of aiorma/engine/states.py: the engine takes exactly the steps they list,
an illegal step fails the window (h11-style), and the drawn diagram is the table's."""

from __future__ import annotations

import itertools
from pathlib import Path

import attrs
import pytest

from aiorma.constants import MODE_NOSUCCEED
from aiorma.engine import diagram
from aiorma.engine.epochs import AccessTarget, Epoch
from aiorma.engine.rules import NEVER_REORDERED, REORDER_FLAG, EpochKind, ReorderFlag
from aiorma.engine.states import (
    EPOCH_TRANSITIONS,
    TARGET_TRANSITIONS,
    EpochPhase,
    EpochStep,
    TargetPhase,
    TargetStep,
)
from aiorma.engine.window_engine import WindowEngine
from aiorma.errors import EngineFailure, EpochError
from aiorma.win_info import Info

from .engine_net import LIFETIME, EngineNet


def _epoch(phase: EpochPhase) -> Epoch:
    return Epoch(
        id=1,
        kind=EpochKind.START,
        group=(1,),
        assertion=0,
        predecessor=None,
        overlaps=frozenset(),
        open_token=1,
        phase=phase,
    )


@pytest.mark.parametrize(("phase", "step"), list(itertools.product(EpochPhase, EpochStep)))
def test_every_epoch_step_is_taken_exactly_as_the_table_says(phase: EpochPhase, step: EpochStep) -> None:
    engine = WindowEngine(0, 0, 2, history=True)
    epoch = _epoch(phase)
    after = EPOCH_TRANSITIONS.get((phase, step))
    if after is None:
        with pytest.raises(EngineFailure, match="illegal step"):
            engine._move_epoch(epoch, step)
        assert epoch.phase is phase  # refused: nothing moved, nothing recorded
        assert engine.history == []
    else:
        engine._move_epoch(epoch, step)
        assert epoch.phase is after
        assert [e.step for e in engine.history or ()] == [step.value]


@pytest.mark.parametrize(("phase", "step"), list(itertools.product(TargetPhase, TargetStep)))
def test_every_target_step_is_taken_exactly_as_the_table_says(phase: TargetPhase, step: TargetStep) -> None:
    engine = WindowEngine(0, 0, 2)
    access = AccessTarget(1, phase=phase)
    after = TARGET_TRANSITIONS.get((phase, step))
    if after is None:
        with pytest.raises(EngineFailure, match="illegal step"):
            engine._move_target(access, step)
        assert access.phase is phase
    else:
        engine._move_target(access, step)
        assert access.phase is after


def test_every_phase_is_reachable_and_every_epoch_ends_completed() -> None:
    reached = {EpochPhase.DEFERRED} | set(EPOCH_TRANSITIONS.values())
    assert reached == set(EpochPhase)
    assert {p for p, _ in EPOCH_TRANSITIONS} == set(EpochPhase) - {EpochPhase.COMPLETED}
    assert {TargetPhase.WAITING} | set(TARGET_TRANSITIONS.values()) == set(TargetPhase)


def test_a_network_event_taking_an_illegal_step_fails_the_window() -> None:
    """Network events run guarded: the illegal step's EngineFailure finishes every pending
    Request and every later call raises it."""
    net = EngineNet(2)
    open_token = net[0].start([1])  # deferred: rank 1 has not posted, so the token is pending
    net.settle()
    assert open_token not in net.completed[0]
    epoch = net[0].open_epochs()[0]
    net[0]._guarded(net[0]._move_epoch, epoch, EpochStep.COMPLETE)  # completing an open epoch
    failure = net[0].failure
    assert isinstance(failure, EngineFailure)
    net.step()
    assert net.errors[0] == {open_token: failure}
    with pytest.raises(EngineFailure) as caught:
        net[0].complete()
    assert caught.value is failure


def test_an_application_call_taking_an_illegal_step_fails_the_window() -> None:
    """Application calls are guarded like network events: an internal inconsistency met inside
    a call (here an epoch that a bug left CLOSING while still open) fails the window, and the
    call raises the failure instead of a bare exception."""
    net = EngineNet(2)
    open_token = net[0].start([1])
    net.settle()
    epoch = net[0].open_epochs()[0]
    epoch.phase = EpochPhase.CLOSING  # the bug: no step leads here while the epoch is open
    with pytest.raises(EngineFailure, match="illegal step: close") as caught:
        net[0].complete()
    assert net[0].failure is caught.value
    net.step()
    # The pending opening and the failed call's own token (which no caller holds) finish with it.
    assert open_token in net.errors[0]
    assert all(error is caught.value for error in net.errors[0].values())


def test_a_refused_application_call_does_not_fail_the_window() -> None:
    engine = WindowEngine(0, 0, 2)
    with pytest.raises(EpochError):
        engine.complete()
    with pytest.raises(EpochError):
        engine.flush_all()
    assert engine.failure is None


@pytest.mark.parametrize(
    "info", [Info(), Info(access_after_access_reorder=True, exposure_after_access_reorder=True)]
)
def test_recorded_lifetimes_are_paths_through_the_table(info: Info) -> None:
    """Every epoch's recorded steps, in a run of real epochs of every kind, are legal moves."""
    net = EngineNet(2, info)
    for rank in (0, 1):
        net[rank].fence()
        net[rank].rma(1 - rank, "f")
        net[rank].fence()
    net.settle()
    for rank in (0, 1):
        net[rank].fence(MODE_NOSUCCEED)  # close the fence epoch
        net[rank].post([1 - rank])
        net[rank].start([1 - rank])
        net[rank].rma(1 - rank, "g")
        net[rank].complete()
        net[rank].wait()
        net[rank].lock(1 - rank)
        net[rank].rma(1 - rank, "l")
        net[rank].unlock(1 - rank)
        net[rank].start([1 - rank])  # closed while deferred (reordering off) or not
        net[rank].complete()
        net[rank].post([1 - rank])
        net[rank].wait()
        net[rank].lock_all()
        net[rank].unlock_all()
    net.settle()
    for rank in (0, 1):
        steps: dict[int, list[str]] = {}
        for event in net[rank].history or ():
            if event.step in LIFETIME:
                steps.setdefault(event.epoch_id, []).append(event.step)
        assert len(steps) == 8  # two fences, two posts, two starts, a lock, a lock_all
        # Both ways to CLOSING are taken: closed after activation, and closed while deferred.
        closed_deferred = ("open", "close", "activate", "complete")
        assert {tuple(path) for path in steps.values()} >= {LIFETIME, closed_deferred}
        for epoch_id, path in steps.items():
            assert path[0] == "open", epoch_id
            phase = EpochPhase.DEFERRED
            for step in path[1:]:
                phase = EPOCH_TRANSITIONS[(phase, EpochStep(step))]
            assert phase is EpochPhase.COMPLETED, (epoch_id, path)
        assert net[rank].quiescent


def test_the_committed_diagram_is_the_tables() -> None:
    """docs/engine-states.md is generated from the tables: rerun the script after changing them."""
    assert diagram.DEFAULT_PATH.read_text(encoding="utf-8") == diagram.render()
    assert diagram.main(["--check"]) == 0


def test_the_diagram_check_notices_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "states.md"
    stale.write_text("old picture\n", encoding="utf-8")
    assert diagram.main(["--check", "--out", str(stale)]) == 1
    assert diagram.main(["--out", str(stale)]) == 0
    assert diagram.main(["--check", "--out", str(stale)]) == 0


def test_each_reorder_flag_is_one_info_field() -> None:
    """The engine's ReorderFlag values name Info's fields, one for one (the public keys stay)."""
    assert {flag.value for flag in ReorderFlag} == {field.name for field in attrs.fields(Info)}
    for flag in ReorderFlag:
        assert flag.enabled(Info(**{flag.value: True}))
        assert not flag.enabled(Info())


def test_no_reorder_flag_names_a_fence_or_lock_all_epoch() -> None:
    """Rules 18–19: activation looks a pair up in REORDER_FLAG and reads "absent" as "no flag",
    so the table must not hold a pair with a fence or lock_all epoch on either side."""
    for previous, later in REORDER_FLAG:
        assert previous not in NEVER_REORDERED and later not in NEVER_REORDERED

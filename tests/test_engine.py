"""Deterministic semantics of WindowEngine on EngineNet (docs/semantics.md rules 1–19; Zounmevo
2014, §5.6–§5.7).

Every test drives the engines with plain calls and control-write deliveries and asserts the full
state after each step; every illegal call must raise *and* leave the engine exactly as it was.
The lock protocol itself (queue, readers, hand-offs) is tested in tests/test_lock_protocol.py.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorma.constants import MODE_NOPRECEDE, MODE_NOSUCCEED, LockType
from aiorma.engine.actions import ControlWrite, FlushTarget, IssueRma
from aiorma.engine.control import AtomicOp, Word, pack_fence
from aiorma.engine.lock_protocol import Hold
from aiorma.engine.rules import EpochKind, EpochState
from aiorma.engine.window_engine import WindowEngine
from aiorma.errors import EpochError, RmaRangeError, RmaUsageError, WindowFreedError
from aiorma.win_info import Info

from .engine_net import EngineNet, snapshot

FENCE, POST, START = EpochKind.FENCE, EpochKind.POST, EpochKind.START
LOCK, LOCK_ALL = EpochKind.LOCK, EpochKind.LOCK_ALL
DEFERRED, ACTIVE = EpochState.DEFERRED, EpochState.ACTIVE
EXCL, SHARED = LockType.EXCLUSIVE, LockType.SHARED

REORDER_ALL = Info(
    access_after_access_reorder=True,
    access_after_exposure_reorder=True,
    exposure_after_exposure_reorder=True,
    exposure_after_access_reorder=True,
)
INFOS = pytest.mark.parametrize("info", [Info(), REORDER_ALL], ids=["default", "reorder"])


def live(engine: WindowEngine) -> list[tuple[int, EpochKind, EpochState, bool]]:
    return [(e.id, e.kind, e.state, e.closed) for e in engine.live_epochs()]


def newest(engine: WindowEngine) -> Any:
    return engine.open_epochs()[-1]


def op_tokens(net: EngineNet, rank: int, epoch: Any, target: int) -> list[int]:
    """Tokens of the RMA calls ``rank`` recorded in ``epoch`` towards ``target``: the issued ones
    (IssueRma actions, matched in order to the engine's "issue" events) and then the queued ones."""
    engine = net[rank]
    assert engine.history is not None
    issues = [e for e in engine.history if e.step == "issue"]
    rmas = net.issued[rank] + [a for a in engine._actions if isinstance(a, IssueRma)]
    assert len(issues) == len(rmas)
    issued = [
        a.token for e, a in zip(issues, rmas, strict=True) if (e.epoch_id, e.target) == (epoch.id, target)
    ]
    return issued + [token for token, _payload in epoch.access[target].queued]


def write(net: EngineNet, src: int, dst: int, word: Word, value: int) -> ControlWrite:
    """The control write by which ``src`` raises its slot of ``word`` at ``dst`` to ``value``."""
    return ControlWrite(dst, net.layout.index(word, src), AtomicOp.MAX, value)


def lock_holders(net: EngineNet, target: int) -> set[int]:
    """Origins whose lock request towards ``target`` holds the lock (NOCHECK locks not included)."""
    return {r for r, e in enumerate(net.engines) if (lk := e._locks.get(target)) and lk.hold is Hold.HELD}


def lock_words_clear(net: EngineNet) -> bool:
    """The lock words are at rest: LOCK_TAIL and LOCK_STATE are 0 (the queues are empty) and each
    LOCK_NEXT (a sum-word, never reset) holds only links its holder has consumed."""
    layout = net.layout
    for engine in net.engines:
        if engine.control[layout.lock_tail] or engine.control[layout.lock_state]:
            return False
        for t, counts in enumerate(engine._lock_counts):
            if engine.control[layout.index(Word.LOCK_NEXT, t)] != counts.linked:
                return False
    return True


def refused(engine: WindowEngine, exc_type: type[BaseException], call: Any, *args: Any) -> None:
    """``call(*args)`` raises exactly ``exc_type`` and changes nothing."""
    before = snapshot(engine)
    with pytest.raises(exc_type) as caught:
        call(*args)
    assert type(caught.value) is exc_type
    assert snapshot(engine) == before


def assert_all_done(net: EngineNet) -> None:
    for rank, engine in enumerate(net.engines):
        assert engine.quiescent, (rank, live(engine))
        assert engine.open_epochs() == []
        assert net.errors[rank] == {}
        assert all(not q for q in net.queues.values())
    assert lock_words_clear(net)


# ------------------------------------------------------------------ a full GATS round, step by step


def test_gats_round_state_after_each_step() -> None:
    net = EngineNet(2)
    t_post = net[1].post([0])
    assert live(net[1]) == [(1, POST, ACTIVE, False)]
    assert net[1].peers[0].gats_accesses_granted == 1
    t_start = net[0].start([1])
    assert live(net[0]) == [(1, START, ACTIVE, False)]
    assert newest(net[0]).access[1].ordinal == 1
    assert newest(net[0]).access[1].granted is False
    assert net.step() == 2  # rank 0: nothing yet; rank 1: CompleteRequest(post) + the grant
    assert net.completed == [set(), {t_post}]
    # the grant: a MAX write raising rank 1's GRANT slot at rank 0 to access number 1
    assert list(net.queues[(1, 0)]) == [write(net, 1, 0, Word.GRANT, 1)]
    assert net.notices(1, 0) == [(Word.GRANT, 1)]

    t_put = net[0].rma(1, "x")
    assert net.issued[0] == []  # recorded: not granted yet
    t_complete = net[0].complete()
    assert live(net[0]) == [(1, START, ACTIVE, True)]
    assert net.step() == 0

    net.hold(0, 1)
    net.settle()  # the grant arrives: replay, flush, "done" written (held)
    assert net[0].peers[1].gats_granted_access_id == 1
    assert net.payloads(0) == ["x"]
    assert [a.token for a in net.issued[0]] == [t_put]
    assert net.flush_requests[0] == [FlushTarget(1, 1)]
    assert net.completed[0] == {t_start, t_complete}  # an op token is never completed by the engine
    assert live(net[0]) == []
    assert list(net.queues[(0, 1)]) == [write(net, 0, 1, Word.DONE, 1)]

    t_wait = net[1].wait()
    net.step()
    assert live(net[1]) == [(1, POST, ACTIVE, True)]
    assert t_wait not in net.completed[1]
    net.release(0, 1)
    net.settle()
    assert net.completed[1] == {t_post, t_wait}
    assert net[1].peers[0].gats_done_received == 1
    assert net[1].control[net.layout.index(Word.DONE, 0)] == 1
    assert net.steps(1) == [("open", 1), ("activate", 1), ("close", 1), ("complete", 1)]
    assert_all_done(net)


# --------------------------------------------------------------------- rule 1: illegal calls


def _gats_open(net: EngineNet) -> None:
    net[0].post([1])
    net[0].start([1])


ILLEGAL = [
    ("complete without start", EpochError, lambda e: e.complete()),
    ("wait without post", EpochError, lambda e: e.wait()),
    ("test without post", EpochError, lambda e: e.test()),
    ("unlock without lock", EpochError, lambda e: e.unlock(1)),
    ("unlock_all without lock_all", EpochError, lambda e: e.unlock_all()),
    ("rma outside an epoch", EpochError, lambda e: e.rma(1, "x")),
    ("flush outside a lock epoch", EpochError, lambda e: e.flush(1)),
    ("flush_all outside a lock epoch", EpochError, lambda e: e.flush_all()),
    ("rank out of range", RmaRangeError, lambda e: e.lock(2)),
    ("negative rank", RmaRangeError, lambda e: e.rma(-1, "x")),
    ("bool rank", RmaRangeError, lambda e: e.lock(True)),
    ("group names a rank twice", RmaUsageError, lambda e: e.start([1, 1])),
    ("group out of range", RmaRangeError, lambda e: e.post([0, 5])),
    ("group not iterable", RmaUsageError, lambda e: e.post(3)),
    ("unknown assertion bit", RmaUsageError, lambda e: e.fence(1 << 7)),
    ("negative assertion", RmaUsageError, lambda e: e.lock(1, EXCL, -1)),
    ("bad lock type", RmaUsageError, lambda e: e.lock(1, 9)),
]


@pytest.mark.parametrize(("what", "exc", "call"), ILLEGAL, ids=[i[0] for i in ILLEGAL])
def test_rule1_illegal_call_on_fresh_engine_changes_nothing(what: str, exc: type, call: Any) -> None:
    net = EngineNet(2)
    refused(net[0], exc, call, net[0])
    assert net.step() == 0


ILLEGAL_WITH_EPOCHS = [
    ("second start before complete", lambda e: e.start([1])),
    ("second post before wait", lambda e: e.post([1])),
    ("fence while GATS epochs are open", lambda e: e.fence()),
    ("lock_all while a start epoch is open", lambda e: e.lock_all()),
    ("flush in a start epoch", lambda e: e.flush(1)),
    ("free with open epochs", lambda e: e.free()),
]


@pytest.mark.parametrize(("what", "call"), ILLEGAL_WITH_EPOCHS, ids=[i[0] for i in ILLEGAL_WITH_EPOCHS])
def test_rule1_illegal_call_with_open_epochs_changes_nothing(what: str, call: Any) -> None:
    net = EngineNet(2)
    _gats_open(net)
    net[0].rma(1, "x")
    net.settle()
    refused(net[0], EpochError, call, net[0])


def test_rule1_second_lock_of_same_rank_and_lock_all_over_lock() -> None:
    net = EngineNet(2)
    net[0].lock(1)
    net.settle()
    refused(net[0], EpochError, net[0].lock, 1, SHARED)
    refused(net[0], EpochError, net[0].lock_all)
    refused(net[0], EpochError, net[0].fence)
    net[0].unlock(1)
    net.settle()
    assert_all_done(net)


def test_rule1_nopreceede_with_rma_in_open_fence_epoch_refused() -> None:
    net = EngineNet(2)
    net[0].fence()
    net[1].fence()
    net.settle()
    net[0].rma(1, "x")
    refused(net[0], EpochError, net[0].fence, MODE_NOPRECEDE)


# ------------------------------------------------------------------------------------ rule 3


@INFOS
def test_rule3_rma_goes_to_newest_access_epoch_while_older_is_still_active(info: Info) -> None:
    net = EngineNet(2, info)
    net.manual.add(0)  # rank 0's ops stay in flight until the test completes them
    net[1].post([0])
    net.settle()
    net[0].start([1])
    first = newest(net[0])
    a = net[0].rma(1, "a")
    net[0].complete()
    net.settle()
    assert live(net[0]) == [(1, START, ACTIVE, True)]  # "a" not yet complete

    net[0].start([1])
    second = newest(net[0])
    b = net[0].rma(1, "b")
    assert op_tokens(net, 0, first, 1) == [a]
    assert op_tokens(net, 0, second, 1) == [b]
    later_state = ACTIVE if info.access_after_access_reorder else DEFERRED
    assert live(net[0]) == [(1, START, ACTIVE, True), (2, START, later_state, False)]
    net.settle()
    assert net.payloads(0) == ["a"]  # "b" waits for rank 1's second exposure

    net.manual.discard(0)
    net[0].flushed(1, 1)
    net[0].complete()
    net[1].wait()
    net[1].post([0])
    net[1].wait()
    net.settle()
    assert net.payloads(0) == ["a", "b"]
    assert second.access[1].ordinal == 2
    assert_all_done(net)


def test_rule3_rma_goes_to_lock_epoch_opened_after_start_towards_same_target() -> None:
    net = EngineNet(2)
    net[0].start([1])
    gats = newest(net[0])
    net[0].lock(1)
    lock = newest(net[0])
    assert live(net[0]) == [(1, START, ACTIVE, False), (2, LOCK, ACTIVE, False)]
    x = net[0].rma(1, "x")
    assert (op_tokens(net, 0, gats, 1), op_tokens(net, 0, lock, 1)) == ([], [x])
    net[0].unlock(1)
    y = net[0].rma(1, "y")  # the lock epoch is closed: the start epoch is the newest open one
    assert (op_tokens(net, 0, gats, 1), op_tokens(net, 0, lock, 1)) == ([y], [x])
    net[0].complete()
    net[1].post([0])
    net[1].wait()
    net.settle()
    assert sorted(net.payloads(0)) == ["x", "y"]
    assert_all_done(net)


# ------------------------------------------------------------------------- rule 7: FIFO matching

N = 50


@INFOS
def test_rule7_target_50_exposures_ahead_of_origin(info: Info) -> None:
    net = EngineNet(2, info)
    exposures, waits = [], []
    for _ in range(N):
        net[1].post([0])
        exposures.append(newest(net[1]))
        waits.append(net[1].wait())
    net.settle()
    ahead = N if info.exposure_after_exposure_reorder else 1
    assert net[0].peers[1].gats_granted_access_id == ahead
    assert net[1].peers[0].gats_accesses_granted == ahead

    accesses, closes = [], []
    for k in range(N):
        net[0].start([1])
        accesses.append(newest(net[0]))
        net[0].rma(1, f"op{k}")
        closes.append(net[0].complete())
    net.settle()

    assert net.payloads(0) == [f"op{k}" for k in range(N)]
    for k in range(N):
        assert accesses[k].access[1].ordinal == k + 1
        assert exposures[k].expected_done == {0: k + 1}
    assert [t for t in net.order[0] if t in closes] == closes
    assert [t for t in net.order[1] if t in waits] == waits
    assert attrs.astuple(net[0].peers[1])[:4] == (N, N, 0, 0)
    assert attrs.astuple(net[1].peers[0])[:4] == (0, 0, N, N)
    assert_all_done(net)


@INFOS
def test_rule7_origin_50_starts_piled_up_before_target_posts(info: Info) -> None:
    net = EngineNet(2, info)
    accesses, closes = [], []
    for k in range(N):
        net[0].start([1])
        accesses.append(newest(net[0]))
        net[0].rma(1, f"op{k}")
        closes.append(net[0].complete())
    net.settle()
    assert net.issued[0] == []
    if info.access_after_access_reorder:
        assert [a.access[1].ordinal for a in accesses] == list(range(1, N + 1))
        assert {e.state for e in accesses} == {ACTIVE}
    else:
        assert [a.access[1].ordinal for a in accesses] == [1] + [0] * (N - 1)
        assert [e.state for e in accesses] == [ACTIVE] + [DEFERRED] * (N - 1)

    for j in range(1, N + 1):
        net[1].post([0])
        exposure = newest(net[1])
        net.settle()
        # exposure j matches access j, and only it: exactly j ops are out, in order
        assert exposure.expected_done == {0: j}
        assert net.payloads(0) == [f"op{k}" for k in range(j)]
        assert accesses[j - 1].access[1].ordinal == j
        assert [t for t in net.order[0] if t in closes] == closes[:j]
        wait = net[1].wait()
        net.settle()
        assert wait in net.completed[1]
    assert_all_done(net)


@pytest.mark.parametrize("targets_first", [True, False], ids=["targets-first", "origin-first"])
@INFOS
def test_zounmevo_5_7_3_per_target_ordinals(info: Info, targets_first: bool) -> None:
    """Zounmevo (2014) §5.7.3, rule 7: P0 opens 6 access epochs towards T0..T5; P1 ∈ T0,T1,T2,T3,T5
    and P2 ∈ T4,T5."""
    net = EngineNet(3, info)
    groups = [(1,), (1,), (1,), (1,), (2,), (1, 2)]
    exposures: dict[int, list[Any]] = {1: [], 2: []}

    def targets() -> None:
        for rank, count in ((1, 5), (2, 2)):
            for _ in range(count):
                net[rank].post([0])
                exposures[rank].append(newest(net[rank]))
                net[rank].wait()

    if targets_first:
        targets()
        net.settle()
    accesses = []
    for i, group in enumerate(groups):
        net[0].start(group)
        accesses.append(newest(net[0]))
        for t in group:
            net[0].rma(t, f"T{i}->{t}")
        net[0].complete()
    if not targets_first:
        net.settle()
        assert net.issued[0] == []
        targets()
    net.settle()

    ordinals = [{t: a.ordinal for t, a in e.access.items()} for e in accesses]
    assert ordinals == [{1: 1}, {1: 2}, {1: 3}, {1: 4}, {2: 1}, {1: 5, 2: 2}]
    assert [e.expected_done for e in exposures[1]] == [{0: k} for k in range(1, 6)]
    assert [e.expected_done for e in exposures[2]] == [{0: 1}, {0: 2}]
    issued = {t: [a.payload for a in net.issued[0] if a.target == t] for t in (1, 2)}
    assert issued == {1: ["T0->1", "T1->1", "T2->1", "T3->1", "T5->1"], 2: ["T4->2", "T5->2"]}
    assert (net[1].peers[0].gats_done_received, net[2].peers[0].gats_done_received) == (5, 2)
    assert_all_done(net)


# ----------------------------------------------------------------- rule 8: serial activation

RULE8_INFO = Info(access_after_access_reorder=True, access_after_exposure_reorder=True)


def test_rule8_control_start_after_active_start_activates_alone() -> None:
    net = EngineNet(3, RULE8_INFO)
    net[0].start([1])
    net[0].rma(1, "a")
    net[0].complete()
    net[0].start([2])  # access_after_access: may activate while epoch 1 is active
    assert live(net[0]) == [(1, START, ACTIVE, True), (2, START, ACTIVE, False)]


def test_rule8_deferred_epoch_blocks_later_one_that_could_activate_alone() -> None:
    net = EngineNet(3, RULE8_INFO)  # exposure_after_access is off
    net[2].post([0])
    net[2].wait()
    net.settle()  # the grant for epoch 3 is already here
    net[0].start([1])
    net[0].rma(1, "a")
    net[0].complete()  # epoch 1: active, waits for rank 1's grant
    net[0].post([1])
    net[0].wait()  # epoch 2: start -> post needs exposure_after_access: deferred
    net[0].start([2])
    net[0].rma(2, "c")
    net[0].complete()  # epoch 3: post -> start is allowed, but epoch 2 is deferred
    net.settle()
    assert live(net[0]) == [
        (1, START, ACTIVE, True),
        (2, POST, DEFERRED, True),
        (3, START, DEFERRED, True),
    ]
    assert net.steps(0) == [
        ("open", 1), ("activate", 1), ("close", 1),
        ("open", 2), ("close", 2),
        ("open", 3), ("close", 3),
    ]  # fmt: skip
    assert net.issued[0] == []

    net[1].post([0])
    net.settle()
    assert net.payloads(0) == ["a", "c"]
    assert net.steps(0)[7:] == [("complete", 1), ("activate", 2), ("activate", 3), ("complete", 3)]
    assert live(net[0]) == [(2, POST, ACTIVE, True)]  # waits for rank 1's access

    net[1].wait()
    net[1].start([0])
    net[1].complete()
    net.settle()
    assert net.steps(0)[-1] == ("complete", 2)
    assert_all_done(net)


def test_dones_arriving_before_the_exposures_are_remembered() -> None:
    """Empty access epochs close without waiting for a grant; their "done"s (ordinals 1 and 2)
    arrive before the target posts.  Counters are compared with >=, so both exposures finish."""
    net = EngineNet(2)
    closes = []
    for _ in range(2):
        net[0].start([1])
        closes.append(net[0].complete())
    net.settle()
    assert set(closes) <= net.completed[0]
    assert net[1].peers[0].gats_done_received == 2
    waits = []
    for _ in range(2):
        net[1].post([0])
        waits.append(net[1].wait())
        net.settle()
        assert waits[-1] in net.completed[1]
    assert net[1].quiescent


def test_rules18_19_never_reorder_across_fence_or_lock_all() -> None:
    net = EngineNet(2, REORDER_ALL)
    net[0].lock_all()
    net[0].unlock_all()
    net[0].lock(1)  # even with every flag: waits for the lock_all epoch to complete
    assert live(net[0]) == [(1, LOCK_ALL, ACTIVE, True), (2, LOCK, DEFERRED, False)]
    net[0].unlock(1)
    net.settle()
    assert net.steps(0).index(("complete", 1)) < net.steps(0).index(("activate", 2))
    assert_all_done(net)

    for r in range(2):
        net[r].fence()
        net[r].rma(1 - r, "f")
        net[r].fence(MODE_NOSUCCEED)
    net[0].start([1])  # after a fence epoch: waits for its completion
    assert live(net[0])[-1] == (4, START, DEFERRED, False)
    net.settle()
    assert live(net[0]) == [(4, START, ACTIVE, False)]


# ------------------------------------------------------------------------- rule 9: fences


def test_rule9_fence_waits_for_every_peer_done_without_blocking() -> None:
    net = EngineNet(3)
    opened = [net[r].fence() for r in range(3)]
    net.settle()
    assert [t in net.completed[r] for r, t in enumerate(opened)] == [True] * 3
    for r in range(3):
        net[r].rma((r + 1) % 3, f"{r}")
    net.settle()
    assert [net.payloads(r) for r in range(3)] == [["0"], ["1"], ["2"]]

    net.hold(2, 0)
    net.hold(2, 1)
    middle = [net[r].fence() for r in range(3)]
    assert [type(t) for t in middle] == [int] * 3  # a token at once: no blocking
    net.settle()
    for r in (0, 1):
        assert middle[r] not in net.completed[r]
        assert live(net[r]) == [(1, FENCE, ACTIVE, True), (2, FENCE, DEFERRED, False)]
        assert ("activate", 2) not in net.steps(r)
    # rank 2 has everybody's "done": its F0 completes and F1 activates (Zounmevo 2014, §5.7.4)
    assert middle[2] in net.completed[2]
    assert live(net[2]) == [(2, FENCE, ACTIVE, False)]

    late = net[0].rma(1, "late")  # goes to the deferred F1: recorded, not issued
    assert op_tokens(net, 0, newest(net[0]), 1) == [late]
    net.settle()
    assert net.payloads(0) == ["0"]

    net.release(2, 0)
    net.release(2, 1)
    net.settle()
    for r in range(3):
        assert middle[r] in net.completed[r]
        assert live(net[r]) == [(2, FENCE, ACTIVE, False)]
    assert net.payloads(0) == ["0", "late"]
    for r in range(3):
        net[r].fence(MODE_NOSUCCEED)
    net.settle()
    assert_all_done(net)


def test_middle_fence_splits_into_close_then_open() -> None:
    net = EngineNet(2)
    for r in range(2):
        net[r].fence()
    net.settle()
    net[0].rma(1, "x")
    t = net[0].fence()
    assert net.steps(0)[-2:] == [("close", 1), ("open", 2)]
    assert [e.id for e in net[0].open_epochs()] == [2]
    assert newest(net[0]).open_token != t
    net.settle()
    assert t not in net.completed[0]  # rank 1 has not closed F0
    net[1].fence()
    net.settle()
    assert t in net.completed[0]
    assert live(net[0]) == [(2, FENCE, ACTIVE, False)]

    closing = net[0].fence(MODE_NOSUCCEED)  # close only
    assert net.steps(0)[-1] == ("close", 2)
    assert net[0].open_epochs() == []
    opening = net[0].fence(MODE_NOPRECEDE)  # open only
    assert net.steps(0)[-1] == ("open", 3)
    assert [e.id for e in net[0].open_epochs()] == [3]
    net[1].fence(MODE_NOSUCCEED)
    net[1].fence(MODE_NOPRECEDE)
    net.settle()
    assert {closing, opening} <= net.completed[0]
    assert live(net[0]) == [(3, FENCE, ACTIVE, False)]


# ---------------------------------- docs/semantics.md, *Epochs open together*: overlapping epochs


def test_post_and_start_open_together_activate_together() -> None:
    net = EngineNet(2)
    for r in range(2):
        net[r].post([1 - r])
        net[r].start([1 - r])
        assert live(net[r]) == [(1, POST, ACTIVE, False), (2, START, ACTIVE, False)]
        assert net.steps(r) == [("open", 1), ("activate", 1), ("open", 2), ("activate", 2)]
    for r in range(2):
        net[r].rma(1 - r, f"from {r}")
        net[r].complete()
        net[r].wait()
    net.settle()
    assert [net.payloads(r) for r in range(2)] == [["from 0"], ["from 1"]]
    assert_all_done(net)


def test_successive_post_then_start_do_not_activate_together() -> None:
    net = EngineNet(2)
    net[0].post([1])
    net[0].wait()
    net[0].start([1])
    net[0].rma(1, "x")
    net[0].complete()
    assert live(net[0]) == [(1, POST, ACTIVE, True), (2, START, DEFERRED, True)]
    net[1].start([0])
    net[1].rma(0, "y")
    net[1].complete()
    net[1].post([0])
    net[1].wait()
    net.settle()
    steps = net.steps(0)
    assert steps.index(("complete", 1)) < steps.index(("activate", 2))
    assert_all_done(net)


def test_two_locks_held_at_once_activate_together() -> None:
    net = EngineNet(3)
    t1 = net[0].lock(1)
    t2 = net[0].lock(2)
    assert live(net[0]) == [(1, LOCK, ACTIVE, False), (2, LOCK, ACTIVE, False)]
    net.settle()
    assert {t1, t2} <= net.completed[0]
    assert (lock_holders(net, 1), lock_holders(net, 2)) == ({0}, {0})
    assert [net[t].control[net.layout.lock_tail] for t in (1, 2)] == [1, 1]  # rank 0 + 1 queued
    net[0].rma(1, "a")
    net[0].rma(2, "b")
    net[0].unlock(1)
    net[0].unlock(2)
    net.settle()
    assert net.payloads(0) == ["a", "b"]
    assert (lock_holders(net, 1), lock_holders(net, 2)) == (set(), set())
    assert_all_done(net)


def test_successive_locks_default_defer_and_rule13a_with_access_after_access() -> None:
    net = EngineNet(3, Info(access_after_access_reorder=True))
    net.manual.add(0)
    net[0].lock(1)
    net[0].rma(1, "x")
    net[0].unlock(1)
    net.settle()
    net[0].lock(2)  # a different rank: may activate while lock(1) is active
    net[0].unlock(2)
    net[0].lock(1)  # rank 1 is a target of an active epoch: rule 13a defers it
    assert live(net[0]) == [(1, LOCK, ACTIVE, True), (2, LOCK, ACTIVE, True), (3, LOCK, DEFERRED, False)]
    net.manual.discard(0)
    net[0].flushed(1, 1)
    net[0].unlock(1)
    net.settle()
    assert_all_done(net)

    net = EngineNet(3)
    net[0].lock(1)
    net[0].unlock(1)
    net[0].lock(2)
    assert live(net[0]) == [(1, LOCK, ACTIVE, True), (2, LOCK, DEFERRED, False)]


# ----------------------------------------------------------------------------- GATS tokens


def test_start_token_completes_for_empty_access_epoch_closed_before_grant() -> None:
    net = EngineNet(2)
    s = net[0].start([1])
    c = net[0].complete()
    net.settle()
    assert c in net.completed[0]
    net[1].post([0])
    net[1].wait()
    net.settle()
    assert s in net.completed[0]  # rule 4: holding the start Request must not hang it
    assert_all_done(net)


# ------------------------------------------------------------------------------------ flush


def test_flush_local_is_answered_like_flush_by_remote_completion() -> None:
    """flush_local and flush both finish when the target's flushed watermark covers the ops
    called before them (the engine no longer tracks local completion per op); an op called
    after a flush is not covered by it."""
    net = EngineNet(2)
    net.manual.add(0)
    net[0].lock(1)
    net.settle()
    x = net[0].rma(1, "x")
    fl = net[0].flush(1)
    f = net[0].flush(1)
    net.settle()
    assert net.payloads(0) == ["x"]
    assert [a.token for a in net.issued[0]] == [x]
    assert net.flush_requests[0] == [FlushTarget(1, 1)]  # one flush request serves both
    assert net.completed[0] & {x, fl, f} == set()
    y = net[0].rma(1, "y")  # after the flushes: not covered by them
    net[0].flushed(1, 1)
    net.settle()
    assert net.completed[0] & {x, fl, f, y} == {fl, f}
    u = net[0].unlock(1)
    net.settle()
    assert u not in net.completed[0]
    assert net.flush_requests[0][-1] == FlushTarget(1, 2)
    net[0].flushed(1, 2)
    net.settle()
    assert u in net.completed[0]
    assert x not in net.completed[0] and y not in net.completed[0]  # op tokens: identities only
    assert_all_done(net)


def test_flush_before_grant_waits_for_replay() -> None:
    net = EngineNet(2)
    net[0].lock(1)
    net[0].rma(1, "x")
    f = net[0].flush(1)
    net.step()
    assert f not in net.completed[0]
    assert net.issued[0] == []
    net.settle()
    assert f in net.completed[0]
    assert net.payloads(0) == ["x"]


def test_flush_all_covers_every_locked_target() -> None:
    net = EngineNet(3)
    net.manual.add(0)
    net[0].lock(1)
    net[0].lock(2)
    net.settle()
    a = net[0].rma(1, "a")
    b = net[0].rma(2, "b")
    f = net[0].flush_all()
    net.settle()
    assert [(op.token, op.target) for op in net.issued[0]] == [(a, 1), (b, 2)]
    assert net.flush_requests[0] == [FlushTarget(1, 1), FlushTarget(2, 1)]
    assert f not in net.completed[0]
    net[0].flushed(1, 1)
    net.settle()
    assert f not in net.completed[0]
    net[0].flushed(2, 1)
    net.settle()
    assert f in net.completed[0]


# ------------------------------------------------------------------------------ free / test


def test_free_waits_for_closed_but_uncompleted_epochs() -> None:
    net = EngineNet(2)
    net[0].start([1])
    net[0].rma(1, "x")
    net[0].complete()
    f = net[0].free()
    net.settle()
    assert f not in net.completed[0]
    assert net[0].freeing is True
    assert live(net[0]) == [(1, START, ACTIVE, True)]
    refused(net[0], WindowFreedError, net[0].fence)
    refused(net[0], WindowFreedError, net[0].lock, 1)
    refused(net[0], WindowFreedError, net[0].free)
    net[1].post([0])
    net[1].wait()
    net.settle()
    assert f in net.completed[0]
    assert net.payloads(0) == ["x"]
    assert_all_done(net)


def test_free_refuses_while_epoch_with_rma_is_open() -> None:
    net = EngineNet(2)
    net[0].lock(1)
    net[0].rma(1, "x")
    net.settle()
    refused(net[0], EpochError, net[0].free)
    assert net[0].freeing is False
    net[0].unlock(1)
    f = net[0].free()
    net.settle()
    assert f in net.completed[0]
    assert_all_done(net)


def test_free_closes_trailing_empty_fence_epoch() -> None:
    net = EngineNet(2)
    frees = []
    for r in range(2):
        net[r].fence()
        frees.append(net[r].free())
        assert net.steps(r)[-1] == ("close", 1)
    net.settle()
    assert [frees[r] in net.completed[r] for r in range(2)] == [True, True]
    assert_all_done(net)


def test_test_returns_false_until_exposure_finished_then_true() -> None:
    net = EngineNet(2)
    net[1].post([0])
    net.settle()
    before = snapshot(net[1])
    assert net[1].test() is False
    assert snapshot(net[1]) == before
    net[0].start([1])
    net[0].rma(1, "x")
    net[0].complete()
    net.hold(0, 1)
    net.settle()
    assert net[1].test() is False
    assert snapshot(net[1]) == before
    net.release(0, 1)
    net.settle()
    assert net[1].test() is True
    assert live(net[1]) == []
    assert net.steps(1)[-2:] == [("close", 1), ("complete", 1)]
    refused(net[1], EpochError, net[1].test)
    net.settle()
    assert_all_done(net)


# ------------------------------------------------------ docs/semantics.md rule 7: counters only grow

COUNTED = (Word.GRANT, Word.DONE, Word.FENCE)


def _busy_net() -> tuple[EngineNet, int]:
    """Two fence epochs and two GATS rounds done; a third round with rank 0's "done" held."""
    net = EngineNet(2)
    for assertion in (0, 0, MODE_NOSUCCEED):
        for r in range(2):
            if net[r].open_epochs():
                net[r].rma(1 - r, "f")
            net[r].fence(assertion)
        net.settle()
    for last in (False, False, True):
        if last:
            net.hold(0, 1)
        net[1].post([0])
        net[0].start([1])
        net[0].rma(1, "g")
        net[0].complete()
        wait = net[1].wait()
        net.settle()
    assert live(net[1]) == [(5, POST, ACTIVE, True)]
    assert net.notices(0, 1) == [(Word.DONE, 3)]
    return net, wait


def _counters(net: EngineNet) -> list[tuple[int, ...]]:
    return [attrs.astuple(p) for e in net.engines for p in e.peers]


def test_busy_net_counters() -> None:
    net, _wait = _busy_net()
    assert attrs.astuple(net[0].peers[1])[:4] == (3, 3, 0, 0)
    assert attrs.astuple(net[1].peers[0])[:4] == (0, 0, 3, 2)
    assert [(p.fence_done_received, p.fence_opened) for p in (net[0].peers[1], net[1].peers[0])] == [
        (2, 2),
        (2, 2),
    ]
    fence = pack_fence(2, 2)
    assert [net[r].control[net.layout.index(Word.FENCE, 1 - r)] for r in range(2)] == [fence, fence]


def _poke(net: EngineNet, dst: int, word: Word, value: int, *, assign: bool) -> None:
    """Put ``value`` in ``dst``'s slot of ``word`` for its peer and tell the engine: as the
    transport would (a remote max) or, with ``assign``, overwriting the word (even lowering it,
    which no transport does: the engine must not depend on the words' own monotonicity)."""
    index = net.layout.index(word, 1 - dst)
    control = net[dst].control
    control[index] = value if assign else max(int(control[index]), value)
    net[dst].control_changed()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(COUNTED), st.integers(0, 1), st.integers(0, 6), st.integers(0, 6), st.booleans()
        ),
        max_size=25,
    )
)
def test_counters_never_decrease(writes: list[tuple[Word, int, int, int, bool]]) -> None:
    net, _wait = _busy_net()
    for word, dst, value, opened, assign in writes:
        before = _counters(net)
        _poke(net, dst, word, pack_fence(opened, value) if word is Word.FENCE else value, assign=assign)
        after = _counters(net)
        for old, new in zip(before, after, strict=True):
            assert all(a >= b for b, a in zip(old, new, strict=True)), (old, new)
        assert net[dst].failure is None


def _without_control(engine: WindowEngine) -> dict[str, Any]:
    picture = snapshot(engine)
    del picture["control"]
    return picture


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_replayed_stale_words_change_nothing(data: st.DataObject) -> None:
    """Stale or replayed values (each part <= what the receiver already has) in GRANT, DONE and
    FENCE words change nothing: written as a remote max they leave the words as they are; forced
    into the words (lowering them) the engine still acts on nothing."""
    net, wait = _busy_net()
    before = [snapshot(e) for e in net.engines]
    limits = {  # (receiver, word) -> what the receiver already has
        (0, Word.GRANT): net[0].peers[1].gats_granted_access_id,
        (1, Word.GRANT): net[1].peers[0].gats_granted_access_id,
        (0, Word.DONE): net[0].peers[1].gats_done_received,
        (1, Word.DONE): net[1].peers[0].gats_done_received,
        (0, Word.FENCE): 2,
        (1, Word.FENCE): 2,
    }
    assert limits[(0, Word.GRANT)] == 3 and limits[(1, Word.DONE)] == 2
    assign = data.draw(st.booleans(), label="assign")
    for _ in range(data.draw(st.integers(1, 20))):
        dst = data.draw(st.integers(0, 1))
        word = data.draw(st.sampled_from(COUNTED))
        top = limits[(dst, word)]
        value = data.draw(st.integers(0, top))
        if word is Word.FENCE:
            value = pack_fence(data.draw(st.integers(0, top)), value)
        _poke(net, dst, word, value, assign=assign)
    if assign:
        assert [_without_control(e) for e in net.engines] == [
            {k: v for k, v in b.items() if k != "control"} for b in before
        ]
    else:
        assert [snapshot(e) for e in net.engines] == before
    net.release(0, 1)
    net.settle()
    assert wait in net.completed[1]
    assert_all_done(net)


# ------------------------------------------------------------------------- h11-style failure


def test_fetch_result_never_asked_for_fails_the_engine() -> None:
    """A ``fetched`` for a token the engine never issued a ControlFetch for is an internal
    inconsistency: the window fails for good, every pending Request with it (h11-style)."""
    net = EngineNet(2)
    t = net[0].lock(1)
    assert net[0].failure is None
    net[0].fetched(10_000, 0)
    assert net[0].failure is not None
    net.step()
    assert net.errors[0].keys() == {t}
    refused(net[0], type(net[0].failure), net[0].fence)


def test_rule13a_lock_towards_a_target_of_an_active_start_stays_deferred() -> None:
    """Overlapping access groups with access_after_access: a lock towards a rank the still
    active start epoch targets must stay deferred (13a), one towards another rank activates
    beside it — and, the flag off, the lock stays deferred whatever its rank."""
    net = EngineNet(4, Info(access_after_access_reorder=True))
    net.manual.add(0)  # rank 0's flushes are left pending: its start epoch stays active
    net[1].post([0])
    net[2].post([0])
    net[0].start([1, 2])
    net[0].rma(2, "x")
    net[0].complete()
    net.settle()
    net[0].lock(3)  # not a target of the active start: activates beside it
    net[0].unlock(3)
    net[0].lock(2)  # a target of the active start: deferred
    assert live(net[0]) == [
        (1, EpochKind.START, ACTIVE, True),
        (2, LOCK, ACTIVE, True),
        (3, LOCK, DEFERRED, False),
    ]
    net.manual.discard(0)
    net[0].flushed(2, 1)
    net[0].unlock(2)
    net[1].wait()
    net[2].wait()
    net.settle()
    assert_all_done(net)

    net = EngineNet(4)  # no flag: the next access epoch waits for the start's completion
    net.manual.add(0)
    net[1].post([0])
    net[0].start([1])
    net[0].rma(1, "x")
    net[0].complete()
    net.settle()
    net[0].lock(3)
    assert live(net[0]) == [(1, EpochKind.START, ACTIVE, True), (2, LOCK, DEFERRED, False)]

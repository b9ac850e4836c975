"""RemoteCompletion on its own, without an engine or a transport: issue sequence numbers, flushes
asked at most once per number, flushes answered inside the call, flush Requests."""

from __future__ import annotations

from aiorma.engine.actions import ActionLog, FlushTarget
from aiorma.engine.completion import RemoteCompletion
from aiorma.engine.epochs import AccessTarget, Epoch, PeerTrait
from aiorma.engine.states import TargetPhase


class _AnsweringLog(ActionLog):
    """An I/O that completes every flush inside its call."""

    def flush(self, target: int, upto: int) -> bool:
        super().flush(target, upto)
        return True


def _issue(peers: list[PeerTrait], access: AccessTarget, count: int = 1) -> None:
    for _ in range(count):  # as WindowEngine._issue numbers them
        peers[access.rank].issued_seq += 1
        access.last_seq = peers[access.rank].issued_seq
        access.op_count += 1


def _granted(rank: int) -> AccessTarget:
    return AccessTarget(rank, phase=TargetPhase.GRANTED)


def test_a_flush_is_asked_once_per_sequence_number_and_its_report_completes() -> None:
    peers, io, finished = [PeerTrait(), PeerTrait()], ActionLog(), []
    completion = RemoteCompletion(peers, io, [], finished.append)
    access = _granted(1)
    _issue(peers, access, 3)
    assert not completion.complete(1, access.last_seq)
    assert not completion.complete(1, access.last_seq)  # in flight: not asked again
    assert io.drain() == [FlushTarget(1, 3)]
    peers[1].remote_complete_seq = 3  # what the engine's flushed(1, 3) does
    assert completion.complete(1, access.last_seq)
    assert io.drain() == []
    _issue(peers, access)
    assert not completion.complete(1, access.last_seq)
    assert io.drain() == [FlushTarget(1, 4)]  # a later op: a new flush


def test_a_flush_answered_inside_the_call_moves_the_watermark_and_is_reported_only_to_others() -> None:
    peers, io = [PeerTrait(), PeerTrait()], _AnsweringLog()
    active: list[Epoch] = []
    completion = RemoteCompletion(peers, io, active, lambda token: None)
    access = _granted(1)
    _issue(peers, access, 2)
    assert completion.complete(1, access.last_seq)
    assert peers[1].remote_complete_seq == 2
    assert not completion.answered_inline  # nobody else waits: nothing to report
    active.extend([object(), object()])  # type: ignore[list-item]  # (only counted)
    _issue(peers, access)
    assert completion.complete(1, access.last_seq)
    assert list(completion.answered_inline) == [(1, 3)]


def test_flush_requests_finish_in_call_order_once_their_targets_are_complete() -> None:
    peers, io, finished = [PeerTrait() for _ in range(3)], ActionLog(), []
    completion = RemoteCompletion(peers, io, [], finished.append)
    one, two, waiting = _granted(1), _granted(2), AccessTarget(2)
    _issue(peers, one)
    _issue(peers, two)
    waiting.op_count = 1  # a call recorded before its grant: no sequence number yet
    completion.wait_for(10, [one])
    completion.wait_for(11, [one, two])
    completion.wait_for(12, [waiting])
    assert not completion.flushed_in_call(one)  # a flush Request is waiting before it
    assert io.drain() == [FlushTarget(1, 1), FlushTarget(2, 1)]
    peers[1].remote_complete_seq = 1
    completion.service()
    assert finished == [10]
    peers[2].remote_complete_seq = 1
    completion.service()
    assert finished == [10, 11]
    waiting.phase = TargetPhase.GRANTED  # granted: its recorded call is issued now
    peers[2].issued_seq += 1
    waiting.last_seq = peers[2].issued_seq
    completion.granted(waiting)
    assert io.drain() == [FlushTarget(2, 2)]
    peers[2].remote_complete_seq = 2
    completion.service()
    assert finished == [10, 11, 12]
    assert completion.flushed_in_call(one)

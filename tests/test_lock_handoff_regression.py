"""Regression: a lock hand-off whose successor link repeats an earlier value must still be seen.

Found under mpiexec (examples/transactions.py, nonblocking mode, hung after a few hundred
transactions): the holder reset its ``LOCK_NEXT`` word to 0 after each hand-off, so when the same
successor linked again with the same value, neither the engine's nor the transport's record of
the word saw a change, and a holder waiting for that link waited forever.  ``LOCK_NEXT`` now only
grows (a sum of successor names).
"""

from __future__ import annotations

from aiorma.constants import LockType

from .engine_net import EngineNet

EXCL = LockType.EXCLUSIVE


def test_second_link_by_the_same_successor_is_noticed() -> None:
    net = EngineNet(3)
    target = 2
    for _round in range(3):
        first = net[0].lock(target, EXCL)
        net.settle()
        assert first in net.completed[0]
        net.hold(1, 0)  # rank 1's link into rank 0's LOCK_NEXT arrives late
        second = net[1].lock(target, EXCL)
        net.settle()
        assert second not in net.completed[1]
        released = net[0].unlock(target)
        net.settle()  # rank 0's compare-and-swap of the tail fails: it waits for the link
        assert released not in net.completed[0]
        net.release(1, 0)
        net.settle()
        assert released in net.completed[0], f"round {_round}: the link was not noticed"
        assert second in net.completed[1]
        done = net[1].unlock(target)
        net.settle()
        assert done in net.completed[1]
    control = net[target].control
    assert control[net.layout.lock_tail] == 0 and control[net.layout.lock_state] == 0

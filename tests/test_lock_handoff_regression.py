"""Regression: a lock hand-off whose successor link repeats an earlier value must still be seen;
and a hand-off is counted for the driver.

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


def test_a_release_that_hands_the_lock_on_counts_the_hand_off() -> None:
    # The driver reads and clears the count after a call (where ranks outnumber cores it hands
    # the core on, so that the successor can use the lock); a release with nobody queued hands
    # nothing on and counts nothing.
    net = EngineNet(3)
    target = 2
    net[0].lock(target, EXCL)
    net.settle()
    net[0].unlock(target)
    net.settle()
    assert net[0].handoffs_given == 0
    net[0].lock(target, EXCL)
    net.settle()
    queued = net[1].lock(target, EXCL)
    net.settle()
    assert queued not in net.completed[1]
    net[0].unlock(target)
    net.settle()
    assert queued in net.completed[1]
    assert (net[0].handoffs_given, net[1].handoffs_given) == (1, 0)
    net[1].unlock(target)
    net.settle()
    assert net[1].handoffs_given == 0

"""Object collectives (``comm.gather(obj, root)`` and the rest without a receive buffer): the
battery of tests/mpi_scripts/object_collectives_check.py in-process at 1-4 ranks and under the
mpich wheel's mpiexec at 2-4 ranks, plus the argument rules that choose the object or buffer form.
"""

from __future__ import annotations

import functools
import pickle
from pathlib import Path

import numpy as np
import pytest

import aiorma
from aiorma.collectives.objects import COMBINE, ObjectCollectives, fold, is_buffer
from aiorma.collectives.runner import ResultError

from .mpi_harness import run_mpi_json
from .mpi_scripts.object_collectives_check import CHECKS, run_checks

SCRIPT = Path(__file__).parent / "mpi_scripts" / "object_collectives_check.py"
NAMES = list(CHECKS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("size", [1, 2, 3, 4])
@pytest.mark.parametrize("name", NAMES)
def test_local(size: int, name: str) -> None:
    assert aiorma.run(functools.partial(run_checks, names=[name]), nprocs=size) == [[name]] * size


@pytest.mark.mpi
@pytest.mark.timeout(600)
@pytest.mark.parametrize("size", [2, 3, 4])
def test_mpi(size: int) -> None:
    pytest.importorskip("mpi4py")
    assert run_mpi_json(SCRIPT, size, timeout=500) == [NAMES] * size


def test_what_counts_as_a_buffer() -> None:
    """numpy arrays and mpi4py-style specs are buffers (the buffer form); everything else,
    including lists of arrays, is an object."""
    array = np.zeros(3)
    assert is_buffer(array) and is_buffer([array, "d"])
    for value in (None, 3, "abc", [1, 2], [array, array], (array,), {"a": array}, b"xy"):
        assert not is_buffer(value), value


def test_fold_is_left_to_right_in_rank_order() -> None:
    assert fold([[0], [1], [2]], aiorma.SUM) == [0, 1, 2]
    assert fold(["a", "b", "c"], aiorma.REPLACE) == "c"
    assert fold(["a", "b", "c"], aiorma.NO_OP) == "a"
    assert fold([5], aiorma.LAND) == 5  # one value: returned as it is
    assert set(COMBINE) == set(aiorma.Op)


def test_a_failed_combination_is_a_result_error() -> None:
    """Wrapped, so that the runner fails this Request only and later collectives still run."""
    with pytest.raises(ResultError) as caught:
        fold([None, 1], aiorma.SUM)
    assert isinstance(caught.value.cause, TypeError)


def test_result_error_fails_one_request_only() -> None:
    """A rank whose received bytes do not unpickle gets the error from that Request; the next
    collective still runs on every rank."""

    class Local:  # defined here: pickles by reference, so unpickling elsewhere needs it importable
        pass

    async def main(comm: aiorma.Comm) -> list[str]:
        outcome = []
        try:
            await comm.allgather(Local() if comm.rank == 0 else 1)
            outcome.append("ok")
        except aiorma.RmaTypeError:
            outcome.append("refused")  # rank 0: a local class does not pickle
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            outcome.append(type(exc).__name__)
        if comm.rank == 0:
            await comm.allgather(1)  # rank 0 joins the collective it refused, with a picklable value
        assert await comm.allgather(comm.rank) == list(range(comm.size))
        return outcome

    assert aiorma.run(main, nprocs=2) == [["refused"], ["ok"]]


def test_unpickling_failure_fails_one_request_only() -> None:
    """Bytes that pickle on the sender but do not unpickle on the receiver (an object whose
    ``__reduce__`` names a callable that raises) fail that Request with the unpickling error;
    later collectives run."""

    async def main(comm: aiorma.Comm) -> str:
        try:
            await comm.bcast(_Unloadable() if comm.rank == 0 else None, 0)
            outcome = "ok"
        except ValueError as exc:
            outcome = str(exc)
        assert await comm.allreduce(comm.rank + 1) == 3
        return outcome

    assert aiorma.run(main, nprocs=2) == ["cannot be loaded"] * 2


def _refuse_to_load() -> None:
    raise ValueError("cannot be loaded")


class _Unloadable:
    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (_refuse_to_load, ())


def test_objects_is_one_per_comm() -> None:
    async def main(comm: aiorma.Comm) -> bool:
        return isinstance(comm.objects, ObjectCollectives) and comm.objects is comm.objects

    assert aiorma.run(main, nprocs=1) == [True]


def test_unpicklable_pickle_error_is_rma_type_error() -> None:
    async def main(comm: aiorma.Comm) -> str:
        with pytest.raises(aiorma.RmaTypeError, match="cannot be pickled"):
            comm.gather(pickle)  # a module does not pickle
        return "refused"

    assert aiorma.run(main, nprocs=1) == ["refused"]

"""Object collectives: Python objects in, Python objects out, as mpi4py's lowercase methods.

Each call pickles what it sends **at the call** (a later change to the object changes nothing; an
object that does not pickle raises :class:`~aiorma.RmaTypeError` there, before anything is sent)
and queues one job on the Comm's runner, like the buffer collectives.  The job moves the sizes
first, as an int64 buffer collective, then the pickled bytes: a uint8 buffer broadcast for
``bcast``, and for the others landing messages of each rank's exact length (ranks may send
objects of very different sizes, so padding every block to the largest would multiply the bytes
moved).  Everything goes over the RMA layer (landing windows, puts, flags); no MPI collective and
no MPI send is used.

Every object handed back is unpickled, so it is a copy, also the one a rank contributed itself,
as with mpi4py.  If received bytes do not unpickle (a class unknown on this rank), or the op
cannot combine the values (``None + 1``), the Request raises that error; the ranks' message
counts still match, so later collectives run as usual.
"""

from __future__ import annotations

import operator
import pickle
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from .._buffer_spec import unwrap
from ..constants import Op
from ..errors import RmaTypeError, RmaUsageError
from ..request import Request
from . import validate as check
from .api import Collectives, JobFactory
from .bcast import await_all
from .runner import ResultError

#: How each op combines two Python values, ``x`` from the lower ranks and ``y`` from the higher
#: ones, as mpi4py's ops do on objects (``MPI.MAX(x, y)``): MAX and MIN keep ``x`` unless ``y``
#: compares strictly greater (less); the logical ops give bools.
COMBINE: dict[Op, Callable[[Any, Any], Any]] = {
    Op.SUM: operator.add,
    Op.PROD: operator.mul,
    Op.MAX: lambda x, y: y if y > x else x,
    Op.MIN: lambda x, y: y if y < x else x,
    Op.LAND: lambda x, y: bool(x) and bool(y),
    Op.LOR: lambda x, y: bool(x) or bool(y),
    Op.LXOR: lambda x, y: bool(x) != bool(y),
    Op.BAND: operator.and_,
    Op.BOR: operator.or_,
    Op.BXOR: operator.xor,
    Op.REPLACE: lambda x, y: y,
    Op.NO_OP: lambda x, y: x,
}


def dumps(obj: Any, what: str) -> np.ndarray:
    """``obj`` pickled, as a writeable uint8 array (the buffer collectives write into theirs)."""
    try:
        payload = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # pickling runs arbitrary __reduce__ code: any error means "cannot"
        raise RmaTypeError(f"{what} cannot be pickled: {exc!r}") from exc
    return np.frombuffer(bytearray(payload), np.uint8)


def loads(data: np.ndarray) -> Any:
    """The object pickled in ``data``.  A failure is this rank's alone (the bytes have all
    arrived), so it fails this collective's Request without breaking the stream."""
    try:
        return pickle.loads(data.data)
    except Exception as exc:
        raise ResultError(exc) from exc


def fold(values: Sequence[Any], op: Op) -> Any:
    """``v0 op v1 op … op v(P-1)``, left to right in rank order.  An op that cannot combine the
    values fails this collective's Request only (see :func:`loads`)."""
    combine = COMBINE[op]
    try:
        result = values[0]
        for value in values[1:]:
            result = combine(result, value)
    except Exception as exc:
        raise ResultError(exc) from exc
    return result


def python_op(value: Any) -> Op:
    try:
        return Op(value)
    except ValueError:
        raise RmaUsageError(f"{value!r} is not an aiorma op (SUM, MAX, LAND, ...)") from None


def is_buffer(value: Any) -> bool:
    """True for what the buffer collectives take: a numpy array, or an mpi4py buffer spec such as
    ``[array, MPI.DOUBLE]`` (also a malformed one, which the buffer form then refuses with a
    message saying what to pass)."""
    if isinstance(value, np.ndarray):
        return True
    try:
        return unwrap(value, "buffer") is not value
    except RmaTypeError:
        return True


def _sequence(seq: Any, size: int, what: str) -> list[Any]:
    """One item per rank: a sequence (not a string) of ``size`` items."""
    if isinstance(seq, str | bytes | bytearray) or not isinstance(seq, Sequence):
        raise RmaTypeError(f"{what} needs a sequence with one item per rank, not {type(seq).__name__}")
    if len(seq) != size:
        raise RmaTypeError(f"{what} needs {size} items, one per rank; got {len(seq)}")
    return list(seq)


def _offsets(sizes: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)


class ObjectCollectives:
    """The object form of a Comm's collectives (``comm.objects``): every argument is an object
    to pickle, whatever its type, so ``comm.objects.bcast(array, 0)`` broadcasts a numpy array
    as an object.  Each call checks its arguments, pickles and returns a Request whose result is
    the object(s), completing when this rank's part is done; the calls queue in order with the
    buffer collectives of the same Comm."""

    def __init__(self, collectives: Collectives) -> None:
        self._c = collectives
        self.rank = collectives.rank
        self.size = collectives.size

    @property
    def _landing(self) -> Any:
        return self._c.landing

    def bcast(self, obj: Any, root: int = 0) -> Request:
        """Root's ``obj`` on every rank (``obj`` is ignored elsewhere, as in mpi4py)."""
        root = check.root(root, self.size)
        mine = dumps(obj, "bcast object") if self.rank == root else None
        length = np.array([0 if mine is None else mine.size], np.int64)
        send_length = self._c.bcast_job(length, root)

        async def job() -> Any:
            await send_length()
            data = mine if mine is not None else np.empty(int(length[0]), np.uint8)
            await self._c.bcast_job(data, root)()
            return loads(data)

        return self._c.submit(job, "bcast object")

    def gather(self, obj: Any, root: int = 0) -> Request:
        """The list of every rank's ``obj`` (in rank order) at ``root``; None elsewhere."""
        root = check.root(root, self.size)
        return self._c.submit(self._gathered(dumps(obj, "gather object"), root, None), "gather object")

    def reduce(self, obj: Any, op: Op = Op.SUM, root: int = 0) -> Request:
        """Every rank's ``obj`` combined with ``op`` in rank order (``x0 op x1 op …``) at
        ``root``; None elsewhere.  The objects are gathered to ``root``, which combines them."""
        operation = python_op(op)
        root = check.root(root, self.size)
        mine = dumps(obj, "reduce object")
        return self._c.submit(
            self._gathered(mine, root, lambda values: fold(values, operation)), "reduce object"
        )

    def allgather(self, obj: Any) -> Request:
        """The list of every rank's ``obj`` (in rank order), on every rank."""
        return self._c.submit(self._allgathered(dumps(obj, "allgather object"), None), "allgather object")

    def allreduce(self, obj: Any, op: Op = Op.SUM) -> Request:
        """Every rank's ``obj`` combined with ``op`` in rank order, on every rank: the objects
        are allgathered and each rank combines them in the same order."""
        operation = python_op(op)
        mine = dumps(obj, "allreduce object")
        return self._c.submit(
            self._allgathered(mine, lambda values: fold(values, operation)), "allreduce object"
        )

    def scatter(self, seq: Any, root: int = 0) -> Request:
        """Item ``i`` of root's ``seq`` (``size`` items) on rank ``i``; ``seq`` is ignored
        elsewhere.  A root ``seq`` that is not a sequence of ``size`` items raises
        :class:`~aiorma.RmaTypeError` at the call."""
        root = check.root(root, self.size)
        lengths = np.zeros(self.size, np.int64)
        payload = np.empty(0, np.uint8)
        if self.rank == root:
            pieces = [
                dumps(item, f"scatter item {i}")
                for i, item in enumerate(_sequence(seq, self.size, "scatter"))
            ]
            lengths[:] = [p.size for p in pieces]
            payload = np.concatenate(pieces)
        length = np.zeros(1, np.int64)
        send_lengths = self._c.scatter_job(lengths, length, root)
        at = _offsets(lengths)
        ch = self._landing

        async def job() -> Any:
            await send_lengths()
            if self.rank == root:
                sends = [ch.send(r, payload[at[r] : at[r + 1]]) for r in range(self.size) if r != root]
                await await_all(sends)
                return loads(payload[at[root] : at[root + 1]])
            data = np.empty(int(length[0]), np.uint8)
            await ch.recv(root, data)
            return loads(data)

        return self._c.submit(job, "scatter object")

    def alltoall(self, seq: Any) -> Request:
        """Item ``j`` of rank ``i``'s ``seq`` becomes item ``i`` of the list rank ``j`` gets
        (every rank passes ``size`` items; anything else raises :class:`~aiorma.RmaTypeError`
        at the call)."""
        pieces = [
            dumps(item, f"alltoall item {i}") for i, item in enumerate(_sequence(seq, self.size, "alltoall"))
        ]
        lengths = np.array([p.size for p in pieces], np.int64)
        payload = np.concatenate(pieces)
        incoming = np.zeros(self.size, np.int64)
        send_lengths = self._c.alltoall_job(lengths, incoming)
        at = _offsets(lengths)
        me, size, ch = self.rank, self.size, self._landing

        async def job() -> list[Any]:
            await send_lengths()
            into = _offsets(incoming)
            data = np.empty(int(into[-1]), np.uint8)
            data[into[me] : into[me + 1]] = payload[at[me] : at[me + 1]]
            # staggered like the direct buffer alltoall: not everyone sends to the same rank first
            peers = [(me + s) % size for s in range(1, size)]
            sources = [(me - s) % size for s in range(1, size)]
            transfers: list[Awaitable[None]] = [ch.send(p, payload[at[p] : at[p + 1]]) for p in peers]
            transfers += [ch.recv(s, data[into[s] : into[s + 1]]) for s in sources]
            await await_all(transfers)
            return [loads(data[into[r] : into[r + 1]]) for r in range(size)]

        return self._c.submit(job, "alltoall object")

    # ------------------------------------------------------------------ shared steps

    def _gathered(self, mine: np.ndarray, root: int, finish: Callable[[list[Any]], Any] | None) -> JobFactory:
        """The job of gather (``finish`` None) and reduce: lengths gathered to ``root``, then
        every rank's bytes sent straight to it."""
        length = np.array([mine.size], np.int64)
        lengths = np.zeros(self.size, np.int64)
        send_length = self._c.gather_job(length, lengths if self.rank == root else None, root)
        ch = self._landing

        async def job() -> Any:
            await send_length()
            if self.rank != root:
                await ch.send(root, mine)
                return None
            at = _offsets(lengths)
            data = np.empty(int(at[-1]), np.uint8)
            data[at[root] : at[root + 1]] = mine
            await await_all([ch.recv(r, data[at[r] : at[r + 1]]) for r in range(self.size) if r != root])
            values = [loads(data[at[r] : at[r + 1]]) for r in range(self.size)]
            return values if finish is None else finish(values)

        return job

    def _allgathered(self, mine: np.ndarray, finish: Callable[[list[Any]], Any] | None) -> JobFactory:
        """The job of allgather (``finish`` None) and allreduce: lengths allgathered, then the
        bytes around a ring (``size - 1`` steps, each passing on the block received the step
        before), every block at its own length."""
        length = np.array([mine.size], np.int64)
        lengths = np.zeros(self.size, np.int64)
        share_lengths = self._c.allgather_job(length, lengths)
        me, size, ch = self.rank, self.size, self._landing

        async def job() -> Any:
            await share_lengths()
            at = _offsets(lengths)
            data = np.empty(int(at[-1]), np.uint8)
            data[at[me] : at[me + 1]] = mine
            right, left = (me + 1) % size, (me - 1) % size
            for step in range(size - 1):
                out_block, in_block = (me - step) % size, (me - step - 1) % size
                await await_all(
                    [
                        ch.send(right, data[at[out_block] : at[out_block + 1]]),
                        ch.recv(left, data[at[in_block] : at[in_block + 1]]),
                    ]
                )
            values = [loads(data[at[r] : at[r + 1]]) for r in range(size)]
            return values if finish is None else finish(values)

        return job

"""Collectives: a Comm's collective operations, each returning a :class:`~aiorma.Request`.

Every method checks its arguments at the call (raising, with nothing changed, on bad input),
then queues the operation on the Comm's :class:`~.runner.SerialRunner`, which starts it inside the
call when no earlier collective is still running.  The algorithm is chosen when the operation
starts (see :mod:`.select`), so that every rank chooses from the same state.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import socket
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

import numpy as np

from .._core.memcopy import byte_view
from .._core.world import World
from ..constants import Op
from ..errors import RmaTypeError, RmaUsageError
from ..request import Request
from . import select
from . import validate as check
from .barrier import nway_peers
from .bcast import knomial_links
from .calibration import PINGS, measure
from .exchange import Bound, BoundCache, Exchange
from .gather import (
    bruck_allgather,
)
from .landing import Landing, LandingConfig
from .model import DEFAULT_LOCAL, DEFAULT_MPI, LogGP
from .persistent import Persistent
from .programs import barrier_program, binomial_reduce_program, recursive_doubling_program, tree_program
from .reduce_ops import is_commutative
from .runner import SerialRunner
from .schedules import check_tree, node_groups, tree_parent_children
from .topology import build_bcast_tree

Groups = list[list[int]]
#: What :meth:`Collectives.submit` queues: a coroutine function, called when the job starts.
JobFactory = Callable[[], Coroutine[Any, Any, Any]]


#: A plain call keeps its bound program for the next call with the same arrays up to this size
#: (a loop of small collectives skips the binding; a large one would keep its scratch array).
_KEEP_BOUND_BYTES = 64 << 10


async def _nothing() -> None:
    """The job of a collective with nothing to exchange (one rank, or no bytes)."""


class Collectives:
    """The collective state of one rank of a Comm: landing windows, cost model, job queue, and
    the node map once discovered."""

    def __init__(self, world: World, landing: Landing) -> None:
        self.world = world
        self.rank = world.rank
        self.size = world.size
        self.landing = landing
        #: Every rank of the Comm, in order: the group of the calls without ``nodes=`` (read only).
        self.everyone: list[int] = list(range(self.size))
        #: Cost-model parameters used to choose algorithms (identical on every rank).
        self.model: LogGP = DEFAULT_MPI if landing.polling else DEFAULT_LOCAL
        self.runner = SerialRunner(asyncio.get_running_loop())
        driver = world.driver
        self._wait_inline = driver.inline_wait
        if landing.polling:
            # After the flag watcher (added with the landing windows): a flag that arrived during
            # an inline wait resumes the job in the same poll (SerialRunner.pump).
            driver.waiter.add_source(self.runner.resumer)
        #: Node groups found from host names (by the first hierarchical call without ``nodes=``).
        self.host_groups: Groups | None = None
        #: Names of the algorithms that ran, most recent last (for tests and benchmarks; bounded).
        self.trace: list[str] = []
        self._plans: dict[tuple[Any, ...], Any] = {}
        # The last plain small bcast's and allreduce's bound programs (see BoundCache).
        self._bcast_bound = BoundCache()
        self._allreduce_bound = BoundCache()
        self._reduce_bound = BoundCache()
        self._gathers_bound = {kind: BoundCache() for kind in ("allgather", "gather", "scatter", "alltoall")}
        self._plans_from: tuple[LogGP, Groups | None] | None = None

    @classmethod
    async def start(cls, world: World, config: LandingConfig | None = None) -> Collectives:
        """Collective: create the landing windows."""
        return cls(world, await Landing.open(world, config))

    async def close(self) -> None:
        """Collective: finish every queued collective, then free the landing windows."""
        await self.runner.drain()
        self.world.driver.waiter.remove_source(self.runner.resumer)
        await self.landing.close()

    def fail(self, make_error: Callable[[], BaseException]) -> list[asyncio.Future[Any]]:
        """Fail this rank's collectives for good (a peer failed): the queued ones and the running
        one's flag waits get ``make_error()``, later ones a failed Request at once.  Returns the
        futures it failed."""
        failed = self.runner.fail(make_error)
        failed.extend(self.landing.fail(make_error()))
        return failed

    def calibrate(self, pings: int = PINGS, big_bytes: int = 256 << 10, apply: bool = True) -> Request:
        """Collective: measure the cost model on this transport (``aiorma.collectives.calibration``); with
        ``apply`` the next collectives choose with it.  The Request's result is the LogGP."""

        async def job() -> LogGP:
            if self.size == 1:
                return self.model
            model = await measure(self.landing, pings, big_bytes)
            if apply:
                self.model = model
            return model

        return self.submit(job, "calibrate")

    def submit(self, job: Callable[[], Coroutine[Any, Any, Any]], description: str) -> Request:
        """Queue ``job`` (started now if nothing runs) and return its Request.  On a polled
        transport awaiting it polls inside the await first (as for RMA calls), stepping the job
        as its flags arrive, so a collective whose peers are on time finishes without a turn of
        the event loop."""
        future = self.runner.start(job)
        if future is None:  # done inside the call
            return Request.finished(None, None, description)
        return Request(future, self.landing.progress, description, self._wait_inline)

    def _persistent(self, job: JobFactory, description: str) -> Persistent:
        """A persistent collective whose every start submits ``job`` (checked already)."""
        return Persistent(functools.partial(self.submit, job, description), description)

    def _ran(self, name: str) -> None:
        self.trace.append(name)
        if len(self.trace) > 64:
            del self.trace[:32]

    def _case(
        self, nbytes: int, op: Op | None = None, groups: Groups | None = None, slot: int | None = None
    ) -> select.Case:
        """What choosing an algorithm depends on (the same on every rank)."""
        return select.Case(
            self.size,
            nbytes,
            self.landing.slot_bytes if slot is None else slot,
            op is None or is_commutative(op),
            select.useful_hierarchy(groups),
        )

    @staticmethod
    async def _run(algorithm: select.Algorithm, call: select.Call, *buffers: Any) -> None:
        assert algorithm.run is not None  # only the barrier's "fence" has none; it never gets here
        await algorithm.run(call, *buffers)

    async def _groups(self, labels: list[object] | None, required: bool) -> Groups | None:
        """Node groups: from ``nodes=``, else from host names (discovered once, collectively,
        when an algorithm needs them; every rank reaches this point in the same collective)."""
        if labels is not None:
            return node_groups(labels)
        if self.host_groups is None and required:
            self.host_groups = node_groups(await self._host_labels())
        return self.host_groups

    async def _host_labels(self) -> list[int]:
        digest = hashlib.blake2b(socket.gethostname().encode(), digest_size=8).digest()
        out = np.zeros(self.size, np.int64)
        out[self.rank] = np.frombuffer(digest, np.int64)[0]
        await bruck_allgather(self.landing, byte_view(out), 8, self.everyone)
        return [int(v) for v in out]

    # ------------------------------------------------------------------ barrier

    def barrier(self, *, algorithm: str | None = None, n: int | None = None) -> Request:
        """Completes once every rank has called barrier as many times.

        ``algorithm``: ``"nway"`` (n-way dissemination, Hoefler et al. (2006); ``n`` from the LogGP model
        unless given), ``"dissemination"`` (n = 1) or ``"fence"`` (a middle fence on an internal
        window: the engine's fence epochs have barrier semantics)."""
        if algorithm is None and n is None:  # the common call: nothing to check
            return self._start_default_barrier()
        return self._barrier_run(algorithm, n)()

    def barrier_init(self, *, algorithm: str | None = None, n: int | None = None) -> Persistent:
        """Persistent :meth:`barrier` (MPI-4's ``MPI_Barrier_init``): the options are checked
        once, here; each ``await req.start()`` is one barrier.  See :meth:`allreduce_init`."""
        return Persistent(self._barrier_run(algorithm, n), "barrier")

    def _barrier_run(self, algorithm: str | None, n: int | None) -> Callable[[], Request]:
        """:meth:`barrier`'s options checked now; what starts one barrier with them.  The fence
        barrier is not a job of the runner: it is the sync window's fence, as a plain call's."""
        algo = check.algorithm(algorithm, select.BARRIER, "barrier")
        ways = check.positive_int(n, 1, "n") if n is not None else None
        if ways is not None and algo not in (None, "nway"):
            raise RmaUsageError(f"n= applies to the n-way barrier, not to {algo!r}")
        if algo == "fence":
            sync = self.world.sync_window
            assert sync is not None  # started before the Collectives
            return sync.fence

        if algo is None and ways is None:  # the common call: the plan is cached per cost model
            return self._start_default_barrier

        async def job() -> None:
            best_n = select.choose("barrier", self.model, select.Case(self.size))[1]
            chosen = 1 if algo == "dissemination" else ways or best_n
            self._ran(f"barrier:nway{chosen}")
            await self._run(select.BARRIER["nway"], select.Call(self.landing, self.everyone, k=chosen))

        return functools.partial(self.submit, job, "barrier")

    def _start_default_barrier(self) -> Request:
        return self.submit(self._default_barrier, "barrier")

    def _default_barrier(self) -> Exchange:
        # A barrier has no buffers: the plan is the bound program itself.
        bound = self._plan(("barrier",))
        if bound is None:
            n = select.choose("barrier", self.model, select.Case(self.size))[1]
            program = barrier_program(nway_peers(self.everyone, self.rank, n), f"barrier:nway{n}")
            bound = self._remember(("barrier",), program.bind(self.landing))
        self._ran(bound.program.name)
        return Exchange(bound)

    # ------------------------------------------------------------------ bcast

    def bcast(
        self,
        buf: np.ndarray,
        root: int = 0,
        *,
        algorithm: str | None = None,
        k: int | None = None,
        tree: Any = None,
        topology: Any = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Copy ``buf`` of rank ``root`` into ``buf`` on every rank.

        ``algorithm``: ``"binomial"``, ``"knomial"`` (``k`` children per level, default 2),
        ``"scatter_allgather"``, ``"scatter_allgather_direct"`` (both phases one round each),
        ``"tree"`` (along ``tree={rank: [children]}``, or the tree
        ``aiorma.collectives.topology.build_bcast_tree`` makes from ``topology=``) or
        ``"hierarchical"`` (node leaders; ``nodes=`` one label per rank, else host names)."""
        job = self.bcast_job(buf, root, algorithm=algorithm, k=k, tree=tree, topology=topology, nodes=nodes)
        return self.submit(job, "bcast")

    def bcast_job(
        self,
        buf: np.ndarray,
        root: int = 0,
        *,
        algorithm: str | None = None,
        k: int | None = None,
        tree: Any = None,
        topology: Any = None,
        nodes: Sequence[object] | None = None,
        bind_once: bool = False,
    ) -> JobFactory:
        """:meth:`bcast`'s arguments checked now, its work as a job for :meth:`submit` or for
        another collective's job to await (``await job()``) as one of its steps.  The job reads
        ``buf`` when it runs, so it may run again (:meth:`bcast_init`; ``bind_once``: the
        common call's program is bound to ``buf`` once, for every run)."""
        cache = BoundCache() if bind_once else None
        if (
            algorithm is None
            and k is None
            and tree is None
            and topology is None
            and nodes is None
            and check.plain(buf, buf)
        ):  # the common call, checked by exact types first
            return functools.partial(self._default_bcast, buf, check.root(root, self.size), cache)
        data = check.recv_buffer(buf, "bcast buffer")
        root = check.root(root, self.size)
        algo = check.algorithm(algorithm, select.BCAST, "bcast")
        ways = check.positive_int(k, 2, "k") if k is not None else None
        labels = check.nodes(nodes, self.size)
        if tree is not None and topology is not None:
            raise RmaUsageError("give tree= or topology=, not both")
        if topology is not None:
            tree = _topology_tree(topology, root, self.size, data.nbytes)
        if tree is not None:
            if algo not in (None, "tree"):
                raise RmaUsageError(f"tree= and topology= go with algorithm='tree', not {algo!r}")
            algo = "tree"
            links: tuple[Any, ...] = tree_parent_children(check_tree(tree, root, self.size), root, self.rank)
        elif algo == "tree":
            raise RmaUsageError("algorithm='tree' needs tree= or topology=")
        else:
            links = ()
        view = byte_view(data)
        if algo is None and ways is None and labels is None:  # the common call
            return functools.partial(self._default_bcast, data, root, cache)

        async def job() -> None:
            if self.size == 1 or view.size == 0:
                return
            groups = await self._groups(labels, algo == "hierarchical")
            name, chosen_k = algo or "", 2
            if not algo:
                name, chosen_k = select.choose("bcast", self.model, self._case(view.size, groups=groups))
            self._ran(f"bcast:{name}")
            k = ways or chosen_k
            call = select.Call(self.landing, self.everyone, root, groups=groups, k=k, links=links)
            await self._run(select.BCAST[name], call, view)

        return job

    def bcast_init(
        self,
        buf: np.ndarray,
        root: int = 0,
        *,
        algorithm: str | None = None,
        k: int | None = None,
        tree: Any = None,
        topology: Any = None,
        nodes: Sequence[object] | None = None,
    ) -> Persistent:
        """Persistent :meth:`bcast` (MPI-4's ``MPI_Bcast_init``): the arguments are checked (and a
        ``tree=``/``topology=`` tree built) once, here; each ``await req.start()`` broadcasts
        root's ``buf`` as it is at that start.  See :meth:`allreduce_init`."""
        job = self.bcast_job(
            buf, root, algorithm=algorithm, k=k, tree=tree, topology=topology, nodes=nodes, bind_once=True
        )
        return self._persistent(job, "bcast")

    def _default_bcast(
        self, buf: np.ndarray, root: int, cache: BoundCache | None = None
    ) -> Coroutine[Any, Any, None]:
        """The common bcast of ``buf`` (checked) as it starts: a tree's program, else the chosen
        algorithm's schedule.  A tree's bound program is kept in ``cache`` (a persistent
        collective's) or in the Comm's (plain calls, small messages), for the next run with the
        same arguments."""
        kept = self._bcast_bound if cache is None else cache
        arguments = (buf, root, self.model, self.host_groups)
        bound = kept.find(arguments)
        if bound is not None:
            self._ran(bound.program.name)
            return Exchange(bound)
        view = byte_view(buf)
        if self.size == 1 or view.size == 0:
            return _nothing()
        key = ("bcast", view.size, root)
        plan = self._plan(key)
        if plan is None:
            groups = self.host_groups
            name, k = select.choose("bcast", self.model, self._case(view.size, groups=groups))
            program = None
            if name in ("binomial", "knomial"):
                links = knomial_links(self.everyone, self.rank, root, k if name == "knomial" else 2)
                program = tree_program(*links, name=f"bcast:{name}")
            plan = self._remember(key, (f"bcast:{name}", name, k, program))
        trace, name, k, program = plan
        self._ran(trace)
        if program is not None:
            return self._started(
                program.bind(self.landing, view), kept, arguments, cache is not None, view.size
            )
        call = select.Call(self.landing, self.everyone, root, groups=self.host_groups, k=k)
        return self._run(select.BCAST[name], call, view)

    @staticmethod
    def _started(
        bound: Bound, kept: BoundCache, arguments: tuple[object, ...], persistent: bool, nbytes: int
    ) -> Exchange:
        """A run of a freshly bound program, the binding kept in ``kept`` for the next call with
        the same ``arguments`` when the collective is persistent (bound once) or the message
        small (a loop of small plain calls skips the binding; a large one would keep its
        scratch array)."""
        if persistent or nbytes <= _KEEP_BOUND_BYTES:
            kept.keep(bound, arguments)
        return Exchange(bound)

    def _plan(self, key: tuple[Any, ...]) -> Any:
        """The remembered plan of a default call (algorithm chosen, peers found), or None.  Plans
        are looked up as the collective starts, like every choice (see :mod:`.select`), and
        forgotten when what they were chosen from changes: the cost model or the node map."""
        if self._plans_from != (self.model, self.host_groups) or len(self._plans) > 256:
            self._plans.clear()
            self._plans_from = (self.model, self.host_groups)
        return self._plans.get(key)

    def _remember(self, key: tuple[Any, ...], plan: Any) -> Any:
        self._plans[key] = plan
        return plan

    # ------------------------------------------------------------------ reduce / allreduce

    def _reduction_args(
        self, send: np.ndarray, op: Any, algo: str | None, what: str
    ) -> tuple[np.ndarray, Op]:
        source = check.send_buffer(send, f"{what} send buffer")
        operation = check.op(op, source.dtype)
        if algo is not None and select.TABLES[what][algo].commutative and not is_commutative(operation):
            raise RmaUsageError(f"{what} algorithm {algo!r} needs a commutative op, not {operation.name}")
        return source, operation

    def reduce(
        self,
        send: np.ndarray,
        recv: np.ndarray | None,
        op: Op = Op.SUM,
        root: int = 0,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Combine every rank's ``send`` with ``op`` in rank order into ``recv`` at ``root``
        (``recv`` is ignored elsewhere and may be None there).

        ``algorithm``: ``"binomial"`` (pipelined tree), ``"reduce_scatter_gather"`` or
        ``"hierarchical"`` (node leaders); the last two need a commutative op."""
        job = self.reduce_job(send, recv, op, root, algorithm=algorithm, nodes=nodes)
        return self.submit(job, "reduce")

    def reduce_job(
        self,
        send: np.ndarray,
        recv: np.ndarray | None,
        op: Op = Op.SUM,
        root: int = 0,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
        bind_once: bool = False,
    ) -> JobFactory:
        """:meth:`reduce`'s arguments checked now, its work as a job (see :meth:`bcast_job`).
        The job reads ``send`` when it runs, so it may run again (:meth:`reduce_init`)."""
        algo = check.algorithm(algorithm, select.REDUCE, "reduce")
        root = check.root(root, self.size)
        labels = check.nodes(nodes, self.size)
        target = None
        if algo is None and check.plain(send, recv if self.rank == root else send):
            source, operation = send, check.op(op, send.dtype)  # the common call
            target = recv if self.rank == root else None
        else:
            source, operation = self._reduction_args(send, op, algo, "reduce")
            if self.rank == root:
                target = check.recv_buffer(recv, "reduce receive buffer")
                check.same_dtype(source, target, "reduce")
        if target is not None:
            check.expect_size(target, source.size, "reduce receive buffer")

        async def run(name: str | None) -> None:
            # the root combines in its receive buffer; the others need a scratch copy
            acc = source.reshape(-1).copy() if target is None else target.reshape(-1)
            if target is not None and not np.may_share_memory(acc, source):
                acc[...] = source.reshape(-1)
            if self.size > 1 and acc.size:
                groups = await self._groups(labels, name == "hierarchical")
                if name is None:
                    name = select.choose("reduce", self.model, self._case(acc.nbytes, operation, groups))[0]
                self._ran(f"reduce:{name}")
                call = select.Call(self.landing, self.everyone, root, operation, groups)
                await self._run(select.REDUCE[name], call, acc)

        if algo is not None or labels is not None:
            return functools.partial(run, algo)
        cache = BoundCache() if bind_once else None
        return functools.partial(self._default_reduce, source, target, operation, root, cache, run)

    def _default_reduce(
        self,
        source: np.ndarray,
        target: np.ndarray | None,
        op: Op,
        root: int,
        cache: BoundCache | None,
        run: Callable[[str | None], Coroutine[Any, Any, None]],
    ) -> Coroutine[Any, Any, None]:
        """The common reduce as it starts: a binomial tree's program when the message is one
        landing slot (larger ones pipeline chunk by chunk: :func:`.reduce.binomial_reduce`),
        else the chosen algorithm.  The bound program is kept as a bcast's is."""
        kept = self._reduce_bound if cache is None else cache
        arguments = (source, target, op, root, source.dtype, self.model, self.host_groups)
        bound = kept.find(arguments)
        if bound is not None:
            self._ran(bound.program.name)
            return Exchange(bound)
        src = source.reshape(-1)
        if self.size == 1 or not src.size:
            return run(None)  # a copy at the root, nothing sent
        key = ("reduce", src.nbytes, root, op)
        plan = self._plan(key)
        if plan is None:
            name = select.choose("reduce", self.model, self._case(src.nbytes, op, self.host_groups))[0]
            program = None
            if name == "binomial" and src.nbytes <= self.landing.slot_bytes:
                program = binomial_reduce_program(self.everyone, self.rank, root, is_commutative(op))
            plan = self._remember(key, (name, program))
        name, program = plan
        if program is None:
            return run(name)
        self._ran(program.name)
        bound = program.bind(self.landing, src, None if target is None else target.reshape(-1), op)
        return self._started(bound, kept, arguments, cache is not None, src.nbytes)

    def reduce_init(
        self,
        send: np.ndarray,
        recv: np.ndarray | None,
        op: Op = Op.SUM,
        root: int = 0,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Persistent:
        """Persistent :meth:`reduce` (MPI-4's ``MPI_Reduce_init``): the arguments are checked once,
        here; each ``await req.start()`` reduces ``send``'s contents at that start into ``recv``
        at ``root``.  See :meth:`allreduce_init`."""
        job = self.reduce_job(send, recv, op, root, algorithm=algorithm, nodes=nodes, bind_once=True)
        return self._persistent(job, "reduce")

    def allreduce(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        op: Op = Op.SUM,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """Combine every rank's ``send`` with ``op`` in rank order into ``recv`` on every rank
        (``send is recv`` is allowed).

        ``algorithm``: ``"recursive_doubling"``, ``"ring"`` (reduce-scatter + allgather),
        ``"direct"`` (the same, one round each), ``"halving_doubling"`` (the same by recursive
        halving and doubling: Rabenseifner's) or ``"hierarchical"`` (node leaders); all but the
        first need a commutative op."""
        return self.submit(self.allreduce_job(send, recv, op, algorithm=algorithm, nodes=nodes), "allreduce")

    def allreduce_job(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        op: Op = Op.SUM,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
        bind_once: bool = False,
    ) -> JobFactory:
        """:meth:`allreduce`'s arguments checked now, its work as a job (see :meth:`bcast_job`).
        The job reads ``send`` when it runs, so it may run again (:meth:`allreduce_init`)."""
        cache = BoundCache() if bind_once else None
        if algorithm is None and nodes is None and check.plain(send, recv) and send.size == recv.size:
            # the common call, checked by exact types first
            return functools.partial(self._default_allreduce, send, recv, check.op(op, send.dtype), cache)
        algo = check.algorithm(algorithm, select.ALLREDUCE, "allreduce")
        source, operation = self._reduction_args(send, op, algo, "allreduce")
        target = check.recv_buffer(recv, "allreduce receive buffer")
        check.same_dtype(source, target, "allreduce")
        check.expect_size(target, source.size, "allreduce receive buffer")
        labels = check.nodes(nodes, self.size)
        if algo is None and labels is None:  # the common call
            return functools.partial(self._default_allreduce, source, target, operation, cache)

        async def job() -> None:
            src, out = source.reshape(-1), target.reshape(-1)
            if self.size == 1 or not src.size:
                out[...] = src
                return
            groups = await self._groups(labels, algo == "hierarchical")
            case = self._case(src.nbytes, operation, groups, slot=0)
            name = algo or select.choose("allreduce", self.model, case)[0]
            self._ran(f"allreduce:{name}")
            call = select.Call(self.landing, self.everyone, op=operation, groups=groups)
            await self._run(select.ALLREDUCE[name], call, src, out)

        return job

    def allreduce_init(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        op: Op = Op.SUM,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Persistent:
        """Persistent :meth:`allreduce` (MPI-4's ``MPI_Allreduce_init``): the arguments are
        checked once, here; each ``await req.start()`` is one allreduce of ``send``'s contents at
        that start into ``recv``.  Not collective itself (nothing is sent); every rank makes the
        same starts, in the same order among its other collectives."""
        job = self.allreduce_job(send, recv, op, algorithm=algorithm, nodes=nodes, bind_once=True)
        return self._persistent(job, "allreduce")

    def _default_allreduce(
        self, source: np.ndarray, target: np.ndarray, op: Op, cache: BoundCache | None = None
    ) -> Coroutine[Any, Any, None]:
        """The common allreduce as it starts: recursive doubling's program, else the chosen
        algorithm.  The bound program is kept as a bcast's is (:meth:`_default_bcast`)."""
        kept = self._allreduce_bound if cache is None else cache
        arguments = (source, target, op, source.dtype, self.model, self.host_groups)
        bound = kept.find(arguments)
        if bound is not None:
            self._ran(bound.program.name)
            return Exchange(bound)
        src, out = source.reshape(-1), target.reshape(-1)
        if self.size == 1 or not src.size:
            out[...] = src
            return _nothing()
        in_place = src is out or np.may_share_memory(src, out)
        key = ("allreduce", src.nbytes, op, in_place)
        plan = self._plan(key)
        if plan is None:
            case = self._case(src.nbytes, op, self.host_groups, slot=0)
            name = select.choose("allreduce", self.model, case)[0]
            program = None
            if name == "recursive_doubling":
                program = recursive_doubling_program(self.everyone, self.rank, in_place)
            plan = self._remember(key, (f"allreduce:{name}", name, program))
        trace, name, program = plan
        self._ran(trace)
        if program is not None:
            bound = program.bind(self.landing, src, out, op)
            return self._started(bound, kept, arguments, cache is not None, src.nbytes)
        call = select.Call(self.landing, self.everyone, op=op, groups=self.host_groups)
        return self._run(select.ALLREDUCE[name], call, src, out)

    # ------------------------------------------------------------------ gathers

    def _start_blocks(
        self,
        kind: str,
        algo: str | None,
        block: int,
        root: int,
        buffers: tuple[np.ndarray, np.ndarray],
        arguments: tuple[object, ...],
        cache: BoundCache | None,
        run: Callable[[str], Coroutine[Any, Any, None]] | None = None,
    ) -> Coroutine[Any, Any, None]:
        """A gather-family collective (``block`` bytes per rank, > 0, more than one rank) as it
        starts: the algorithm (``algo``, else the cost model's choice) as its program bound to
        ``buffers`` (SOURCE, OUT as bytes), kept as a bcast's is (:meth:`_default_bcast`;
        ``arguments`` identify the call), or ``run(name)`` for an algorithm that is no program
        (only allgather has one: the node leaders'; every gather, scatter and alltoall algorithm
        is a program)."""
        kept = self._gathers_bound[kind] if cache is None else cache
        arguments = (*arguments, algo, self.model, self.host_groups)
        bound: Bound | None = kept.find(arguments)
        if bound is not None:
            self._ran(bound.program.name)
            return Exchange(bound)
        key = (kind, algo, block, root)
        plan = self._plan(key)
        if plan is None:
            name = algo
            if name is None:
                groups = self.host_groups if kind == "allgather" else None
                case = self._case(block, groups=groups, slot=None if kind == "allgather" else 0)
                name = select.choose(kind, self.model, case)[0]
            build = select.TABLES[kind][name].program
            plan = self._remember(key, (name, build and build(self.everyone, self.rank, root)))
        name, program = plan
        if program is None:
            assert run is not None, f"{kind}:{name} is no exchange program"
            self._ran(f"{kind}:{name}")
            return run(name)
        self._ran(program.name)
        bound = program.bind(self.landing, buffers[0], buffers[1], block=block)
        return self._started(bound, kept, arguments, cache is not None, buffers[1].size)

    def allgather(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Request:
        """``recv`` (``size`` blocks of ``send.size`` elements) gets block ``i`` from rank ``i``.

        ``algorithm``: ``"ring"``, ``"direct"`` (one round), ``"recursive_doubling"``
        (power-of-two sizes), ``"bruck"`` or ``"hierarchical"`` (node leaders)."""
        return self.submit(self.allgather_job(send, recv, algorithm=algorithm, nodes=nodes), "allgather")

    def allgather_job(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
        bind_once: bool = False,
    ) -> JobFactory:
        """:meth:`allgather`'s arguments checked now, its work as a job (see :meth:`bcast_job`).
        The job reads ``send`` when it runs, so it may run again (:meth:`allgather_init`)."""
        algo = check.algorithm(algorithm, select.ALLGATHER, "allgather")
        source, target = check.pair(send, recv, "allgather")
        check.expect_size(target, source.size * self.size, "allgather receive buffer")
        if algo == "recursive_doubling" and self.size & (self.size - 1):
            raise RmaUsageError(f"recursive-doubling allgather needs a power-of-two size, not {self.size}")
        labels = check.nodes(nodes, self.size)
        mine = byte_view(source)  # read when the job runs (allgather_init runs it again)
        block = mine.size
        out = byte_view(target)

        async def run(name: str, groups: Groups | None = None) -> None:
            out[self.rank * block : (self.rank + 1) * block] = mine
            call = select.Call(self.landing, self.everyone, groups=groups or self.host_groups)
            await self._run(select.ALLGATHER[name], call, out, block)

        def start() -> Coroutine[Any, Any, None]:
            if self.size == 1 or block == 0:
                out[self.rank * block : (self.rank + 1) * block] = mine
                return _nothing()
            buffers, arguments = (mine, out), (source, target)
            return self._start_blocks("allgather", algo, block, 0, buffers, arguments, cache, run)

        async def with_groups() -> None:
            if self.size == 1 or block == 0:
                out[self.rank * block : (self.rank + 1) * block] = mine
                return
            groups = await self._groups(labels, algo == "hierarchical")
            name = algo or select.choose("allgather", self.model, self._case(block, groups=groups))[0]
            self._ran(f"allgather:{name}")
            await run(name, groups)

        cache = BoundCache() if bind_once else None
        # Node groups given, or needed (and maybe discovered, collectively) by the algorithm.
        return with_groups if labels is not None or algo == "hierarchical" else start

    def allgather_init(
        self,
        send: np.ndarray,
        recv: np.ndarray,
        *,
        algorithm: str | None = None,
        nodes: Sequence[object] | None = None,
    ) -> Persistent:
        """Persistent :meth:`allgather` (MPI-4's ``MPI_Allgather_init``): the arguments are
        checked once, here; each ``await req.start()`` gathers every rank's ``send`` as it is at
        that start into ``recv``.  See :meth:`allreduce_init`."""
        job = self.allgather_job(send, recv, algorithm=algorithm, nodes=nodes, bind_once=True)
        return self._persistent(job, "allgather")

    def gather(
        self, send: np.ndarray, recv: np.ndarray | None, root: int = 0, *, algorithm: str | None = None
    ) -> Request:
        """``recv`` at ``root`` (``size`` blocks of ``send.size`` elements) gets block ``i`` from
        rank ``i``; ``recv`` is ignored elsewhere.  ``algorithm``: ``"direct"`` or ``"binomial"``."""
        return self.submit(self.gather_job(send, recv, root, algorithm=algorithm), "gather")

    def gather_job(
        self,
        send: np.ndarray,
        recv: np.ndarray | None,
        root: int = 0,
        *,
        algorithm: str | None = None,
        bind_once: bool = False,
    ) -> JobFactory:
        """:meth:`gather`'s arguments checked now, its work as a job (see :meth:`bcast_job`).
        The job reads ``send`` when it runs, so it may run again (:meth:`gather_init`)."""
        algo = check.algorithm(algorithm, select.GATHER, "gather")
        root = check.root(root, self.size)
        out = None
        if self.rank == root:
            source, target = check.pair(send, recv, "gather")
            check.expect_size(target, source.size * self.size, "gather receive buffer")
            out = byte_view(target)
        else:
            source = send if check.plain(send, send) else check.send_buffer(send, "gather send buffer")
        mine = byte_view(source)
        cache = BoundCache() if bind_once else None

        def start() -> Coroutine[Any, Any, None]:
            if self.size == 1 or mine.size == 0:
                if out is not None:
                    out[...] = mine
                return _nothing()
            buffers = (mine, mine if out is None else out)  # off the root the program names no OUT
            return self._start_blocks("gather", algo, mine.size, root, buffers, (source, recv, root), cache)

        return start

    def gather_init(
        self, send: np.ndarray, recv: np.ndarray | None, root: int = 0, *, algorithm: str | None = None
    ) -> Persistent:
        """Persistent :meth:`gather` (MPI-4's ``MPI_Gather_init``): the arguments are checked
        once, here; each ``await req.start()`` gathers every rank's ``send`` as it is at that
        start into ``recv`` at ``root``.  See :meth:`allreduce_init`."""
        return self._persistent(
            self.gather_job(send, recv, root, algorithm=algorithm, bind_once=True), "gather"
        )

    def scatter(
        self, send: np.ndarray | None, recv: np.ndarray, root: int = 0, *, algorithm: str | None = None
    ) -> Request:
        """``recv`` on rank ``i`` gets block ``i`` of ``send`` at ``root`` (``size`` blocks of
        ``recv.size`` elements); ``send`` is ignored elsewhere.  ``algorithm``: ``"direct"`` or
        ``"binomial"``."""
        return self.submit(self.scatter_job(send, recv, root, algorithm=algorithm), "scatter")

    def scatter_job(
        self,
        send: np.ndarray | None,
        recv: np.ndarray,
        root: int = 0,
        *,
        algorithm: str | None = None,
        bind_once: bool = False,
    ) -> JobFactory:
        """:meth:`scatter`'s arguments checked now, its work as a job (see :meth:`bcast_job`).
        The job reads ``send`` when it runs, so it may run again (:meth:`scatter_init`)."""
        algo = check.algorithm(algorithm, select.SCATTER, "scatter")
        root = check.root(root, self.size)
        src = None
        if self.rank != root:
            target = recv if check.plain(recv, recv) else check.recv_buffer(recv, "scatter receive buffer")
        else:
            if check.plain(send, recv):
                source, target = send, recv
            else:
                target = check.recv_buffer(recv, "scatter receive buffer")
                source = check.send_buffer(send, "scatter send buffer")
                check.same_dtype(source, target, "scatter")
            check.expect_size(source, target.size * self.size, "scatter send buffer")
            src = byte_view(source)
        mine = byte_view(target)
        cache = BoundCache() if bind_once else None

        def start() -> Coroutine[Any, Any, None]:
            if self.size == 1 or mine.size == 0:
                if src is not None:
                    mine[...] = src[self.rank * mine.size : (self.rank + 1) * mine.size]
                return _nothing()
            buffers = (mine if src is None else src, mine)  # off the root the program names no SOURCE
            return self._start_blocks("scatter", algo, mine.size, root, buffers, (send, target, root), cache)

        return start

    def scatter_init(
        self, send: np.ndarray | None, recv: np.ndarray, root: int = 0, *, algorithm: str | None = None
    ) -> Persistent:
        """Persistent :meth:`scatter` (MPI-4's ``MPI_Scatter_init``): the arguments are checked
        once, here; each ``await req.start()`` scatters ``root``'s ``send`` as it is at that start
        into every rank's ``recv``.  See :meth:`allreduce_init`."""
        return self._persistent(
            self.scatter_job(send, recv, root, algorithm=algorithm, bind_once=True), "scatter"
        )

    def alltoall(self, send: np.ndarray, recv: np.ndarray, *, algorithm: str | None = None) -> Request:
        """Block ``j`` of ``send`` on rank ``i`` becomes block ``i`` of ``recv`` on rank ``j``
        (both hold ``size`` equal blocks).  ``algorithm``: ``"direct"`` (every block put at once;
        per-source arrival counters) or ``"pairwise"``."""
        return self.submit(self.alltoall_job(send, recv, algorithm=algorithm), "alltoall")

    def alltoall_job(
        self, send: np.ndarray, recv: np.ndarray, *, algorithm: str | None = None, bind_once: bool = False
    ) -> JobFactory:
        """:meth:`alltoall`'s arguments checked now, its work as a job (see :meth:`bcast_job`).
        The job reads ``send`` when it runs, so it may run again (:meth:`alltoall_init`)."""
        algo = check.algorithm(algorithm, select.ALLTOALL, "alltoall")
        source, target = check.pair(send, recv, "alltoall")
        check.expect_size(target, source.size, "alltoall receive buffer")
        if source.size % self.size:
            raise RmaTypeError(
                f"alltoall buffers hold {source.size} elements, not a multiple of {self.size} ranks"
            )
        src = byte_view(source)
        out = byte_view(target)
        block = src.size // self.size
        cache = BoundCache() if bind_once else None

        def start() -> Coroutine[Any, Any, None]:
            if self.size == 1 or block == 0:
                out[...] = src
                return _nothing()
            return self._start_blocks("alltoall", algo, block, 0, (src, out), (source, target), cache)

        return start

    def alltoall_init(
        self, send: np.ndarray, recv: np.ndarray, *, algorithm: str | None = None
    ) -> Persistent:
        """Persistent :meth:`alltoall` (MPI-4's ``MPI_Alltoall_init``): the arguments are checked
        once, here; each ``await req.start()`` exchanges ``send``'s blocks as they are at that
        start into ``recv``.  See :meth:`allreduce_init`."""
        return self._persistent(
            self.alltoall_job(send, recv, algorithm=algorithm, bind_once=True), "alltoall"
        )


def _topology_tree(topology: Any, root: int, size: int, nbytes: int) -> dict[int, list[int]]:
    """The topology-aware broadcast tree (Subramoni et al., 2011) from :mod:`aiorma.collectives.topology`."""
    try:
        return build_bcast_tree(topology, root, range(size), nbytes=nbytes)
    except (ValueError, TypeError, AttributeError, IndexError) as exc:
        raise RmaUsageError(f"cannot build a broadcast tree from this topology: {exc}") from None


class _HasCollectives(Protocol):
    @property
    def collectives(self) -> Collectives: ...


def calibrate(
    comm: _HasCollectives, *, pings: int = PINGS, big_bytes: int = 256 << 10, apply: bool = True
) -> Request:
    """Collective.  Measure the cost-model parameters on ``comm``'s transport (ping-pongs
    between ranks 0 and 1 over the landing windows, rank 0's numbers broadcast, see
    ``aiorma.collectives.calibration``).  With ``apply`` (default) the Comm uses them from its next collective
    on.  The Request's result is the :class:`LogGP`, identical on every rank."""
    return comm.collectives.calibrate(pings, big_bytes, apply)

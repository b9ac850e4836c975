"""Epoch timelines as Chrome trace-event JSON (open it in https://ui.perfetto.dev).

Switch it on before :func:`aiorma.run` with the environment variable ``AIORMA_TRACE=PATH`` or with
:func:`enable`.  Then, on every rank, each epoch's application-level lifetime (``open`` →
``close``), its internal lifetime (``activate`` → ``complete``) and each RMA call handed to the
transport (``issue``) are recorded from the engine's observer hook (``Comm.observer``), stamped
with ``time.perf_counter_ns()`` — ``CLOCK_MONOTONIC`` on Linux, shared by all processes of a host,
so the ranks' timelines line up.

Files: the ``local`` transport (every rank in one process) writes one file, ``PATH``, with one
trace process per rank.  Under ``mpiexec`` each rank writes its own file, ``PATH`` with
``.rank<r>`` before the suffix (``trace.json`` → ``trace.rank0.json``); merge them with
``python -m aiorma.trace merge trace.rank*.json --out trace.json``.  Files are written when the
rank's ``main`` returns or raises.  ``python -m aiorma.trace plot`` draws the two lifetimes.

Windows created by the runtime itself before ``main`` runs (the barrier's window) are not traced.
With tracing off no observer is installed, so the engine pays nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core.context import process
from .._core.settings import TRACE_ENV, Settings
from ..engine.actions import EpochEvent

if TYPE_CHECKING:
    from ..comm import Comm

ENV_VAR = TRACE_ENV  # AIORMA_TRACE, read with the other switches (aiorma._core.settings)
CATEGORY = "aiorma"  # instant events, one per engine step: the plot reads these
SPAN_CATEGORY = {"open": "epoch.app", "activate": "epoch.internal"}
SPAN_END = {"close": "open", "complete": "activate"}

# enable()/disable() are process-wide, as the variable they override: aiorma._core.context's
# ``process`` holds them (trace_path, trace_disabled).


def enable(path: str | os.PathLike[str]) -> None:
    """Trace every later :func:`aiorma.run` of this process into ``path`` (overrides the
    environment variable)."""
    process.trace_path, process.trace_disabled = os.fspath(path), False


def disable() -> None:
    """Stop tracing later runs, whatever ``AIORMA_TRACE`` says."""
    process.trace_path, process.trace_disabled = None, True


def reset() -> None:
    """Forget :func:`enable`/:func:`disable`: follow ``AIORMA_TRACE`` again."""
    process.trace_path, process.trace_disabled = None, False


def configured_path(settings: Settings | None = None) -> str | None:
    """Where traces go, or None when tracing is off: :func:`enable`'s path, nothing after
    :func:`disable`, else the ``AIORMA_TRACE`` of ``settings`` (a connection's switches; default:
    the environment's now)."""
    if process.trace_disabled:
        return None
    if process.trace_path is not None:
        return process.trace_path
    return (settings if settings is not None else Settings.from_environment()).trace


class Recorder:
    """The observer of one rank: keeps ``(t_ns, win_id, EpochEvent)`` in call order.

    Called synchronously inside engine calls, so it only appends; everything else happens when
    the trace is written.
    """

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.events: list[tuple[int, int, EpochEvent]] = []

    def __call__(self, win_id: int, event: EpochEvent) -> None:
        self.events.append((time.perf_counter_ns(), win_id, event))

    def trace_events(self) -> list[dict[str, Any]]:
        """This rank's events in Chrome trace-event form (``ts`` in µs)."""
        rank = self.rank
        out: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}},
            {"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}},
        ]
        windows: set[int] = set()
        kinds: dict[tuple[int, int], str] = {}
        for t_ns, win_id, event in self.events:
            ts = t_ns / 1000
            kind = event.kind.value
            kinds[(win_id, event.epoch_id)] = kind
            if win_id not in windows:
                windows.add(win_id)
                out.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": rank,
                        "tid": win_id,
                        "args": {"name": f"window {win_id}"},
                    }
                )
            args: dict[str, Any] = {"rank": rank, "win": win_id, "epoch": event.epoch_id, "kind": kind}
            if event.step == "issue":
                args["target"] = event.target
            name = f"{event.step} {kind} #{event.epoch_id}"
            out.append(
                {
                    "ph": "i",
                    "s": "t",
                    "name": name,
                    "cat": CATEGORY,
                    "ts": ts,
                    "pid": rank,
                    "tid": win_id,
                    "args": args,
                }
            )
            # The two lifetimes as async spans: epochs of one window overlap without nesting.
            if event.step in SPAN_CATEGORY:
                cat, ph, begin = SPAN_CATEGORY[event.step], "b", event.step
            elif event.step in SPAN_END:
                begin = SPAN_END[event.step]
                cat, ph = SPAN_CATEGORY[begin], "e"
            else:
                continue
            label = "application" if begin == "open" else "internal"
            out.append(
                {
                    "ph": ph,
                    "cat": cat,
                    "name": f"{kind} #{event.epoch_id} ({label})",
                    "id": f"r{rank}w{win_id}e{event.epoch_id}{label[0]}",
                    "ts": ts,
                    "pid": rank,
                    "tid": win_id,
                }
            )
        return out


def attach(comm: Comm) -> Recorder:
    """Install a :class:`Recorder` as ``comm.observer`` (affects windows created afterwards)."""
    recorder = Recorder(comm.rank)
    comm.observer = recorder
    return recorder


def attach_all(comms: Iterable[Comm], settings: Settings | None = None) -> list[Recorder]:
    """Attach recorders when tracing is configured (:func:`configured_path` of ``settings``);
    otherwise install nothing and return []."""
    if configured_path(settings) is None:
        return []
    return [attach(comm) for comm in comms]


def rank_path(path: str | os.PathLike[str], rank: int) -> Path:
    """``trace.json`` → ``trace.rank3.json`` (the per-rank file of an mpiexec job)."""
    p = Path(path)
    return p.with_name(f"{p.stem}.rank{rank}{p.suffix}")


def to_chrome(recorders: Sequence[Recorder]) -> dict[str, Any]:
    events = [e for recorder in recorders for e in recorder.trace_events()]
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {"producer": "aiorma.trace", "clock": "CLOCK_MONOTONIC (time.perf_counter_ns)"},
    }


def write(path: str | os.PathLike[str], recorders: Sequence[Recorder]) -> Path:
    target = Path(path)
    if target.parent != Path():
        target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w") as f:
        json.dump(to_chrome(recorders), f)
    return target


def flush(recorders: Sequence[Recorder], *, per_rank: bool, settings: Settings | None = None) -> list[Path]:
    """Write the recorders to the configured path (:func:`configured_path` of ``settings``): one
    file for all of them, or (``per_rank``, under mpiexec) one file per rank.  Does nothing when
    ``recorders`` is empty."""
    path = configured_path(settings)
    if not recorders or path is None:
        return []
    if per_rank:
        return [write(rank_path(path, r.rank), [r]) for r in recorders]
    return [write(path, recorders)]


def load(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Every trace event of the given files (merged or per-rank), in file order."""
    events: list[dict[str, Any]] = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        events.extend(data["traceEvents"] if isinstance(data, dict) else data)
    return events


def merge(paths: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str]) -> Path:
    """Merge per-rank files into one (the clock is shared, so no shifting is needed)."""
    events = load(paths)
    target = Path(out)
    with open(target, "w") as f:
        json.dump(
            {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"producer": "aiorma.trace"}}, f
        )
    return target


__all__ = [
    "ENV_VAR",
    "Recorder",
    "attach",
    "attach_all",
    "configured_path",
    "disable",
    "enable",
    "flush",
    "load",
    "merge",
    "rank_path",
    "reset",
    "to_chrome",
    "write",
]

"""The compiled engine: the engine's modules, and the layers every call runs through around them,
as C extensions built by mypyc, or run from source.

What every epoch costs in aiorma is mostly the interpreter running the engine's state machines
(the profiles in docs/benchmarks.md), so the same source files can also be compiled with mypyc,
which turns type-annotated Python into C extension modules that run it faster.  The build is an
optional, local step (``./dev/setup.sh`` makes it when mypyc and a C compiler are there:
``dev/build_native.py``); without it, or when it fails, aiorma runs the same modules from source.

Which one runs is decided once, when ``aiorma`` is imported and before any of :data:`MODULES` is:

* from source when ``AIORMA_PURE_PYTHON=1`` is in the environment (how the tests run the source
  once more, and how to rule the build out when looking for a bug);
* from source when the build's record (:data:`RECORD`) is missing or names other sources than the
  ones beside it — an edited module is never shadowed by a stale extension;
* compiled otherwise.

The same decision covers :data:`C_EXTENSIONS`, small modules written in C whose Python fallback
lives in the module that asks for them (:func:`compiled_extension`).

This module uses the standard library only and imports nothing of aiorma: the build loads it by
path, without importing the package whose extensions it is about to replace.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

#: The modules compiled: the engine's state machines, and the layers around them that every call
#: runs through.
MODULES: tuple[str, ...] = (
    "aiorma.engine.window_engine",
    "aiorma.engine.lock_protocol",
    "aiorma.engine.activation",
    "aiorma.engine.completion",
    "aiorma.engine.checks",
    "aiorma.engine.epochs",
    "aiorma.engine.rules",
    "aiorma.engine.states",
    "aiorma.engine.control",
    "aiorma.engine.engine_io",
    # The layers every call crosses above and below the engine: the user's call, its Request and
    # the await, the driver, the MPI endpoint (the interpreter running them is most of what a lock
    # epoch costs once the engine is compiled: docs/benchmarks.md).
    "aiorma.window",
    "aiorma.request",
    "aiorma._core.await_policy",
    "aiorma._core.driver",
    "aiorma.transport.mpi.endpoint",
    "aiorma.transport.mpi.windows",
    "aiorma.transport.presence",
    # The transport contract's value classes: an RmaOp is built per RMA call (interpreted,
    # attrs' generated __init__ was a tenth of a small accumulate's issue).
    "aiorma.transport.base",
    # A small collective's path: its exchange program and runner, the landing slots and LL words,
    # notified access (every message and flag is a signal), the rank's waiter, watchers, doorbell.
    # Compiled alone they bought nothing; beside a compiled Window, 0.75-0.95 x the time of an
    # 8-byte collective at 2 ranks (docs/benchmarks.md, *The collectives' path compiled*).
    "aiorma.collectives.exchange",
    "aiorma.collectives.landing",
    "aiorma.collectives.ll",
    "aiorma.collectives.runner",
    "aiorma.collectives.reduce_ops",
    "aiorma._core.notified",
    "aiorma._core.waiter",
    "aiorma._core.watch",
    "aiorma.transport.mpi.doorbell",
)

#: Extensions written in C, by module name: their sources, relative to the package.  Built with
#: the modules above, covered by the same record, and used on the same decision.
C_EXTENSIONS: dict[str, str] = {
    # The CPU's atomics on control words: ctypes' call costs more than the lock protocol's steps.
    "aiorma.transport.mpi._cpu_atomics": "transport/mpi/_cpu_atomics.c",
    # LL words encoded and decoded in one call: the Python codec makes a few numpy objects each.
    "aiorma.collectives._ll_codec": "collectives/_ll_codec.c",
    # A small message combined in one call: numpy's ufunc dispatch costs more than the sum.
    "aiorma.collectives._combine": "collectives/_combine.c",
}

#: mypyc's group name: the extensions share one library, ``aiorma/_engine__mypyc*.so``.
GROUP = "aiorma._engine"

#: The build's record, beside this module: the digest of the sources it compiled.
RECORD = "_native_build.json"

#: The variable that makes ``import aiorma`` run every module from source.
PURE_VARIABLE = "AIORMA_PURE_PYTHON"

_PACKAGE = Path(__file__).resolve().parent


class NativeStatus(NamedTuple):
    """How :data:`MODULES` run in this process."""

    compiled: bool
    reason: str  #: why they run as they do, for ``aiorma.info()`` and bug reports


def source_path(module: str, package: Path = _PACKAGE) -> Path:
    """The source file of ``module`` (one of :data:`MODULES`)."""
    return package.joinpath(*module.split(".")[1:]).with_suffix(".py")


def sources_digest(
    package: Path = _PACKAGE, modules: Sequence[str] = MODULES, extensions: Mapping[str, str] = C_EXTENSIONS
) -> str:
    """A digest of the sources of ``modules`` and ``extensions`` (names and bytes, in order)."""
    digest = hashlib.blake2b(digest_size=16)
    for module in modules:
        digest.update(module.encode() + b"\0")
        digest.update(source_path(module, package).read_bytes())
    for module, source in extensions.items():
        digest.update(module.encode() + b"\0")
        digest.update(package.joinpath(source).read_bytes())
    return digest.hexdigest()


def decide(environ: Mapping[str, str], package: Path = _PACKAGE) -> NativeStatus:
    """Whether :data:`MODULES` may run compiled (see the module docstring); changes nothing."""
    if environ.get(PURE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on"):
        return NativeStatus(False, f"{PURE_VARIABLE}={environ[PURE_VARIABLE]}")
    try:
        record = json.loads((package / RECORD).read_text())
    except (OSError, ValueError):
        return NativeStatus(False, "not built (./dev/setup.sh builds it where mypyc and a C compiler are)")
    if record.get("digest") != sources_digest(package):
        return NativeStatus(False, "the sources changed since the build (./dev/setup.sh rebuilds it)")
    return NativeStatus(True, f"built by mypyc {record.get('mypyc', '?')}")


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds :data:`MODULES` as their ``.py`` files, ahead of the extensions beside them."""

    def __init__(self, package: Path) -> None:
        self._package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname, self._package))


def choose(environ: Mapping[str, str] = os.environ) -> NativeStatus:
    """Decide for this process (once; ``import aiorma`` calls it first) and, when the modules are
    to run from source, make the import system find them so."""
    global status
    if status is None:
        status = decide(environ)
        if not status.compiled:
            sys.meta_path.insert(0, _FromSource(_PACKAGE))
    return status


#: This process's decision (set by :func:`choose`).
status: NativeStatus | None = None


def compiled_extension(name: str) -> ModuleType | None:
    """The C extension ``name`` (one of :data:`C_EXTENSIONS`) when this process runs compiled and
    the build left it, else None: the caller then uses its Python fallback."""
    if not choose().compiled:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def describe() -> str:
    """This process's decision in words, e.g. "compiled (built by mypyc 2.4.1)"; a C extension
    the build should have left and did not is named (its Python fallback runs instead)."""
    decided = choose()
    missing = [name for name in C_EXTENSIONS if decided.compiled and compiled_extension(name) is None]
    gone = f"; missing {', '.join(missing)}: their fallbacks run" if missing else ""
    return f"{'compiled' if decided.compiled else 'from source'} ({decided.reason}{gone})"


def running_compiled(module: ModuleType) -> bool:
    """True when ``module`` (imported) is an extension, not its source."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


if __name__ == "aiorma._native":  # imported by the package (not loaded by path by the build)
    choose()

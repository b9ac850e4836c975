#!/usr/bin/env bash
# The test command: set up .venv, lint, type-check, build the docs site, then every test (local transport and real mpiexec runs).
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
.venv/bin/ruff check aiorma tests examples
.venv/bin/mypy  # config in pyproject.toml: the whole package; the engine and the public API strictly
# The documentation site, warnings as errors (a broken reference or link fails); built outside the tree.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
exec .venv/bin/python -m pytest "$@"

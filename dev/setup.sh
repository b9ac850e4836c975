#!/usr/bin/env bash
# Create .venv (once) with aiorma, the mpich wheel, mpi4py and the test tools.  Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
if ! .venv/bin/python -c "import aiorma, mpi4py, pytest, ruff, sphinx, myst_parser, furo" 2>/dev/null \
   || [ pyproject.toml -nt .venv/.installed ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[mpich,trio,test,plot,dev,docs]"
  touch .venv/.installed
fi

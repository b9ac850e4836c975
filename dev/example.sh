#!/usr/bin/env bash
# The main job: set up .venv, then run an example on 4 ranks under the mpich wheel's mpiexec.
# Usage: ./dev/example.sh [example.py] [ranks] [args...]
# Default: examples/lu_solver.py on 4 ranks (n = 2048, blocking vs nonblocking fence epochs;
# prints the scaled residual and the wait/communication/total times of each variant).
set -euo pipefail
cd "$(dirname "$0")/.."
./dev/setup.sh
example=${1:-examples/lu_solver.py}
ranks=${2:-4}
shift $(( $# > 2 ? 2 : $# ))
exec .venv/bin/mpiexec -n "$ranks" .venv/bin/python "$example" "$@"

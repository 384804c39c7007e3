#!/usr/bin/env bash
# Configures and builds tilesearch into ./build (Release, Ninja; with MPI where it is installed).
# Extra arguments go to ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
# The MPI build (mpiexec -n N tilesearch tune|bench|tune-graph, and its tests) wherever MPI is
# installed (tools/setup.sh installs MPICH); a plain `cmake` configure leaves it off.
mpi=OFF
if command -v mpiexec >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1; then mpi=ON; fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILESEARCH_MPI="$mpi" >/dev/null
ninja -C build "$@"

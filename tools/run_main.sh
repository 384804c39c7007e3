#!/usr/bin/env bash
# README command (1): installs dependencies, builds, and runs the main job: prints the operator
# library, then the ComputeDAG and the naive loop nest of a real operator (a 3x3 conv2d).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh tilesearch
build/tools/tilesearch ops
echo
build/tools/tilesearch show --op conv2d_nchw --shape 1x64x56x56 --shape 64x64x3x3 \
  --attr stride=1 --attr padding=1

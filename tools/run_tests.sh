#!/usr/bin/env bash
# README command (2): installs dependencies, checks the C++ formatting, builds everything and runs
# the whole test suite. Exits non-zero when the formatting check or any build or test fails (the
# build and tests run even when the formatting check fails, so one run reports both).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
format_status=0
tools/check_format.sh || format_status=$?
tools/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
if [ "$format_status" -ne 0 ]; then
  echo "run_tests: the tests passed but tools/check_format.sh failed (see above)" >&2
fi
exit "$format_status"

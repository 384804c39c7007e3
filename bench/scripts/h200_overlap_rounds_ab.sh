#!/usr/bin/env bash
# Tuning throughput with and without overlapped rounds (`tune --overlap-rounds off|on`), one call:
#   run(command="bash bench/scripts/h200_overlap_rounds_ab.sh", carry=["dist"], kind="nvidia-h200")
# bench/scripts/h200_tune_option_ab.sh with that option; its environment (TRIALS, TUNE_S, CASES,
# SEED) applies. Output: $OUT/overlap-ab.tgz.
exec env OPTION=--overlap-rounds VALUES="off on" TAG=overlap-ab \
  bash "$(dirname "$0")/h200_tune_option_ab.sh"

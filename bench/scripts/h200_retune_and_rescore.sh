#!/usr/bin/env bash
# A few suite problems tuned further, then both suites re-scored, in one device call (device pack
# from tools/pack_device.sh):
#   run(command="bash bench/scripts/h200_retune_and_rescore.sh", carry=["dist"])
# 1. h200_retune_memory_bound.sh with SKIP_SCORE=1: PROBLEMS resumed from every committed
#    strict-mode log, BENCH_ARGS with --remeasure 4 (the logged best few timed again with this
#    build), BENCH_S seconds in all.
# 2. Their logs tarred, then h200_rescore_suites.sh with them as EXTRA_LOGS: every problem's best
#    record from the committed logs and these, replayed and scored by score.py beside eager and
#    eager without TF32.
# Environment: PROBLEMS (default below), BENCH_S (default 200), SCORE_S (default 240), TRIALS
# (default 400: BENCH_S decides). Output: $OUT/suites-memory-retune.tgz, $OUT/suites-rescored.tgz,
# $OUT/merged-logs-SOURCES.txt. Exit status: the re-score's.
set -uo pipefail
export PROBLEMS=${PROBLEMS:-transpose_2d,depthwise_conv2d_3x3,reduce_sum_dim1_keepdim_8gb}
root="$(bash dist/unpack.sh | tail -1)"
export TS_ROOT="$root"
SKIP_SCORE=1 BENCH_S=${BENCH_S:-200} TRIALS=${TRIALS:-400} \
  BENCH_ARGS='--warmup 1 --min-runs 3 --min-time-ms 10 --remeasure 4' \
  bash bench/scripts/h200_retune_memory_bound.sh
echo "retune exit $?"
rm -rf /tmp/retuned && mkdir -p /tmp/retuned
tar xzf "${OUT:-/tmp/out}/suites-memory-retune.tgz" -C /tmp/retuned || { echo "no retune output"; exit 2; }
tar -cJf /tmp/retuned-logs.tar.xz -C /tmp/retuned suites-memory-retune/logs
unset PROBLEMS
EXTRA_LOGS=/tmp/retuned-logs.tar.xz:logs TAG=rescored SCORE_S=${SCORE_S:-240} \
  exec bash bench/scripts/h200_rescore_suites.sh

#!/usr/bin/env bash
# The memory-bound suite problems furthest from the measured bandwidth, tuned further on the H200
# from every committed strict-mode log (joined per problem by merge_suite_logs.py
# --committed-strict) with the current code and search space, then scored against eager by
# h200_tune_suites.sh, in one device call. Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_retune_memory_bound.sh", carry=["dist"])
# Environment: PROBLEMS (default below), TRIALS (total per problem, resumed records counting;
# default 400, so the time limit decides), BENCH_S (default 330), SCORE_S (default 100), TS_ROOT.
# Output: $OUT/suites-memory-retune.tgz (logs with the resumed records, artifacts, score.md).
# Exit status: h200_tune_suites.sh's, 2 when the merge fails.
set -uo pipefail
merged=/tmp/merged-suite-logs
rm -rf "$merged"
python3 bench/scripts/merge_suite_logs.py --out "$merged" --committed-strict || exit 2
export LOGS_FROM=$merged SUITES="level1 level2"
export PROBLEMS=${PROBLEMS:-gemv_8192x65536,transpose_2d,scale_mask_softmax,avg_pool2d_2x2,residual_rmsnorm,reduce_sum_inner,bias_gelu}
export TRIALS=${TRIALS:-400} PER_ROUND=32 BENCH_S=${BENCH_S:-330} ROUND_S=0 BENCH_KILL_S=20
export SCORE_S=${SCORE_S:-100} BASELINES=eager TAG=memory-retune
exec bash bench/scripts/h200_tune_suites.sh

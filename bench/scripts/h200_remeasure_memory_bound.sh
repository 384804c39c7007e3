#!/usr/bin/env bash
# The memory-bound suite problems still under 90 % of the bandwidth (and gelu / softplus), their
# committed logs' 4 fastest schedules re-measured with this build (`bench --remeasure 4`), tuned
# further and scored against eager by h200_retune_memory_bound.sh, in one device call; first the
# measurement stack's GPU tests. Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_remeasure_memory_bound.sh", carry=["dist"])
# Environment: PROBLEMS (default below), BENCH_S (default 300), SCORE_S (default 110).
# Output: $OUT/gpu-tests.log and $OUT/suites-memory-retune.tgz. Exit status: the retune's.
set -uo pipefail
root=$(bash dist/unpack.sh | tail -1)
export TS_ROOT=$root
mkdir -p "$OUT"
timeout 120 "$root/run" cuda_runtime_test \
  --gtest_filter='CudaRunnerGpuTest.*:DeviceCompareGpuTest.*' >"$OUT/gpu-tests.log" 2>&1
echo "gpu tests: exit $?"
grep -E "^\[  (FAILED|PASSED) " "$OUT/gpu-tests.log"
PROBLEMS=${PROBLEMS:-scale_mask_softmax,avg_pool2d_2x2,softmax_rows,log_softmax_rows,gemv_8192x65536,residual_rmsnorm,reduce_sum_inner,gelu_16384,softplus_16384} \
  BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10 --remeasure 4" \
  BENCH_S=${BENCH_S:-300} SCORE_S=${SCORE_S:-110} bash bench/scripts/h200_retune_memory_bound.sh

#!/usr/bin/env bash
# Two new GPU sketches and re-measured logs on the H200, tuned and scored against eager by
# h200_tune_suites.sh: reductions split across blocks (the LayerNorm over (64, 256, 256) with
# batch 16, KernelBench L1-40: 16 rows of 4 M elements, from an empty log), shared-memory tiled
# transposes (transpose_2d, 16384², resuming its exhausted 25-state log with the new sketch), and
# bias_gelu, whose logged ranking predates the new erf (`bench --remeasure 8`: its 8 fastest logged
# schedules measured again before replay picks). First the GPU tests of the measurement stack (the
# check now runs three trials: uniform, uniform01 and score.py's normal). Device pack from
# tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_split_reduction_transpose.sh", carry=["dist"])
# Environment: TRIALS (default 64), BENCH_S (default 270), SCORE_S (default 120), PROBLEMS
# (default the three above), LOGS_FROM (default bench/logs/h200-2026-12-02-memory-bound-retune.tar.xz,
# which holds transpose_2d's and bias_gelu's logs and no LayerNorm log).
# Output: $OUT/split-transpose/gpu_tests.log and h200_tune_suites.sh's
# $OUT/suites-split-transpose.tgz. Exit status: h200_tune_suites.sh's.
set -uo pipefail
root=${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}
export TS_ROOT=$root
out="$OUT/split-transpose"
mkdir -p "$out"
timeout 120 "$root/run" cuda_runtime_test \
  --gtest_filter='CudaRunnerGpuTest.*:DeviceCompareGpuTest.*' >"$out/gpu_tests.log" 2>&1
echo "gpu tests: exit $?"
grep -E "^\[  (FAILED|PASSED) |OK \]" "$out/gpu_tests.log" | tail -n 16
PROBLEMS=${PROBLEMS:-layernorm_16x64x256x256,transpose_2d,bias_gelu} \
  LOGS_FROM=${LOGS_FROM:-bench/logs/h200-2026-12-02-memory-bound-retune.tar.xz} \
  BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10 --remeasure 8" \
  TRIALS=${TRIALS:-64} PER_ROUND=32 BENCH_S=${BENCH_S:-270} ROUND_S=40 BENCH_KILL_S=30 \
  SCORE_S=${SCORE_S:-120} BASELINES=eager TAG=split-transpose \
  bash bench/scripts/h200_tune_suites.sh

#!/usr/bin/env bash
# Check inputs generated on demand on the H200: the CUDA runner's GPU tests, then the level1
# problems with inputs too large to hold on the host as 8-byte values (the LayerNorm over
# (64, 256, 256) with batch 16, the keepdim sum over dim 1 of [128, 4096, 4095], a gemv with a
# 2^31-element matrix) tuned and scored against eager by h200_tune_suites.sh, with the host's
# used memory sampled every 2 s. Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_large_inputs.sh", carry=["dist"])
# Environment: TS_ROOT (an unpacked pack; default: unpack dist/), TRIALS (default 64), BENCH_S
# (default 270), SCORE_S (default 120), PROBLEMS (default the three above).
# Output: $OUT/large-inputs/{gpu_tests.log, host_memory.log} and h200_tune_suites.sh's
# $OUT/suites-large-inputs.tgz. Exit status: h200_tune_suites.sh's.
set -uo pipefail
root=${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}
export TS_ROOT=$root
out="$OUT/large-inputs"
mkdir -p "$out"
timeout 150 "$root/run" cuda_runtime_test --gtest_filter='CudaRunnerGpuTest.*' \
  >"$out/gpu_tests.log" 2>&1
echo "gpu tests: exit $?"
grep -E "^\[  (FAILED|PASSED) |OK \]" "$out/gpu_tests.log" | tail -n 12
# Host memory in use (MiB) while tuning and scoring: the inputs are 8.6 GB each in float32.
(while true; do echo "$(date +%T) $(free -m | awk '/^Mem:/ {print "used_mib=" $3 " available_mib=" $7}')"; sleep 2; done) \
  >"$out/host_memory.log" 2>&1 &
sampler=$!
PROBLEMS=${PROBLEMS:-layernorm_16x64x256x256,reduce_sum_dim1_keepdim_8gb,gemv_2pow31} \
  TRIALS=${TRIALS:-64} PER_ROUND=32 BENCH_S=${BENCH_S:-270} ROUND_S=40 BENCH_KILL_S=30 \
  SCORE_S=${SCORE_S:-120} BASELINES=eager,eager_no_tf32 TAG=large-inputs \
  bash bench/scripts/h200_tune_suites.sh
rc=$?
kill "$sampler" 2>/dev/null
sort -t= -k2 -n "$out/host_memory.log" | awk '{print}' | tail -n 1 | sed 's/^/peak used: /'
exit "$rc"

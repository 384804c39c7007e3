#!/usr/bin/env bash
# The GPU paths of the measurement layer on one H200, in one device call (device pack from
# tools/pack_device.sh):
#   run(command="bash bench/scripts/h200_check_gpu_paths.sh", carry=["dist"], kind="nvidia-h200")
# 1. cuda_runtime_test: driver, device objects, the cuda Runner (check, faults, the naive-kernel
#    reference, timing) and the device-side compare kernels.
# 2. A short cuda tune (matmul 1024^3, 64 trials, seed 0): sketch → Builder (parallel PTX) →
#    Runner → log, end to end.
# 3. Every problem of both suites replayed from the committed logs WITH the tuner's check
#    (`tilesearch bench`, TRIALS=1: nothing is tuned; h200_tune_suites.sh with SKIP_SCORE=1).
# Output: $OUT/cuda_runtime_test.txt, $OUT/tune_cuda.txt, $OUT/suites-replaycheck.tgz (bench.json
# says per problem whether its replayed kernel passed the check). Time: at most 120 + 90 + 270 + 45
# s plus unpacking.
set -uo pipefail
root="$(bash dist/unpack.sh | tail -1)"
[[ -n "$root" && -x "$root/run" ]] || { echo "no unpacked device pack (dist/unpack.sh failed?)"; exit 2; }
timeout 120 "$root/run" cuda_runtime_test >"$OUT/cuda_runtime_test.txt" 2>&1
echo "rc=$?" >>"$OUT/cuda_runtime_test.txt"
tail -5 "$OUT/cuda_runtime_test.txt"
timeout 90 "$root/run" tune --op matmul --shape 1024x1024 --shape 1024x1024 --target cuda \
  --trials 64 --seed 0 --log /tmp/matmul1024.jsonl >"$OUT/tune_cuda.txt" 2>&1
echo "rc=$?" >>"$OUT/tune_cuda.txt"
tail -4 "$OUT/tune_cuda.txt"
TS_ROOT="$root" SUITES="level1 level2" SKIP_SCORE=1 TRIALS=1 BENCH_S=270 ROUND_S=0 \
  LOGS_FROM=bench/logs/h200-2026-11-30-suites.tar.xz TAG=replaycheck \
  BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10" bash bench/scripts/h200_tune_suites.sh

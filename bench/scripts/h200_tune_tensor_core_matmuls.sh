#!/usr/bin/env bash
# Tensor-core matmuls on the H200, tuned from empty logs and scored against PyTorch in one device
# call (h200_tune_suites.sh does the work; this picks the problems and the budget):
#   run(command="SET=half_square bash bench/scripts/h200_tune_tensor_core_matmuls.sh",
#       carry=["dist"], kind="nvidia-h200")
# SET (default half_square):
#   half_square  bf16 and fp16 matmul 4096³ (level1_half)
#   half_llama   bf16 and fp16 4096×4096·4096×11008, a Llama-7B MLP projection (level1_half)
#   fp32_square  fp32 matmul 4096³ (level1): the default ieee precision (3xTF32 or SIMT), scored
#                against eager with and without TF32
#   half_llama_fp32  the last two sets in one call (fewer trials each within BENCH_S)
#   bf16_fp32_square  bf16 and fp32 matmul 4096³
# TRIALS (default 512) per problem, PER_ROUND 64; BENCH_S (default 400) seconds of tuning for the
# set, SCORE_S (default 120) for score.py with the eager baselines (no torch.compile: its caches
# take minutes to warm). Output: $OUT/suites-tc-$SET.tgz (see h200_tune_suites.sh).
# FIRST_LOOK=1: before tuning, the WarpMma GPU tests of cuda_runtime_test and `tilesearch measure`
# (check, then time) of the hand tensor-core schedules bench/schedules/*tensor_core*.json, into
# $OUT/first-look.log (about 40 s; BENCH_S shrinks by that much).
set -uo pipefail
SET=${SET:-half_square}
case "$SET" in
  half_square) PROBLEMS=matmul_square_4096_bf16,matmul_square_4096_f16 ;;
  half_llama) PROBLEMS=matmul_m4096_n11008_k4096_bf16,matmul_m4096_n11008_k4096_f16 ;;
  fp32_square) PROBLEMS=matmul_square_4096 ;;
  half_llama_fp32) PROBLEMS=matmul_m4096_n11008_k4096_bf16,matmul_m4096_n11008_k4096_f16,matmul_square_4096 ;;
  bf16_fp32_square) PROBLEMS=matmul_square_4096_bf16,matmul_square_4096 ;;
  *) echo "SET=$SET: want half_square, half_llama, fp32_square, half_llama_fp32 or bf16_fp32_square"; exit 2 ;;
esac
export PROBLEMS SUITES="level1 level1_half" TRIALS=${TRIALS:-512} PER_ROUND=64
export BENCH_S=${BENCH_S:-400} SCORE_S=${SCORE_S:-120} ROUND_S=${ROUND_S:-30} TAG="tc-$SET"
export BASELINES=${BASELINES:-eager,eager_no_tf32}
if [[ "${FIRST_LOOK:-0}" == 1 ]]; then
  root=$(bash dist/unpack.sh | tail -1)
  export TS_ROOT=$root
  mkdir -p "${OUT:-/tmp/out}"
  {
    echo "== $(date -u +%FT%TZ) WarpMma on the GPU"
    timeout 120 "$root/run" cuda_runtime_test --gtest_filter='*WarpMma*' 2>&1 | tail -5
    for f in bench/schedules/*tensor_core*.json; do
      echo "== $(date -u +%FT%TZ) measure $f"
      timeout 60 "$root/run" measure --schedule "$f" --target cuda 2>&1 | tail -6
    done
  } >"${OUT:-/tmp/out}/first-look.log" 2>&1
  BENCH_S=$((BENCH_S - 40))
fi
exec bash bench/scripts/h200_tune_suites.sh

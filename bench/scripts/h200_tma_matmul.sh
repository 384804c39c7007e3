#!/usr/bin/env bash
# TMA-fed wgmma (the tensor_core step's "tma") against the same tilings filled by per-thread
# cp.async and against PyTorch eager (cuBLAS), bf16 matmul 4096^3, in one device call:
#   run(command="bash bench/scripts/h200_tma_matmul.sh", carry=["dist"], kind="nvidia-h200")
# 1. Each hand schedule is checked and timed by `tilesearch measure` (flushed L2, >= 20 runs and
#    100 ms, median); eager by bench/harness/pytorch_baseline.py with the same method.
# 2. A short tune of level1_half's matmul_square_4096_bf16 from an empty log (TRIALS, default
#    64; the search draws TMA fills for half of its wgmma tilings), replayed and scored by
#    bench/harness/score.py against eager in the same call (bench/scripts/h200_tune_suites.sh).
# SCHEDULES (names under bench/schedules without .json) overrides the list; SKIP_TUNE=1 skips 2.
# Output: $OUT/tma-matmul/{run.log,<schedule>.json,<schedule>.txt,eager.json} and
# $OUT/suites-tma.tgz.
set -uo pipefail
out="${OUT:-/tmp/out}/tma-matmul"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
export TS_ROOT="$root"
ts="$root/run"
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(sed -n 2p "$root/MANIFEST")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
schedules=(${SCHEDULES:-
  matmul_bfloat16_cuda_4096_wgmma_128x256
  matmul_bfloat16_cuda_4096_wgmma_128x256_tma
  matmul_bfloat16_cuda_4096_wgmma_128x256_tma_ws
  matmul_bfloat16_cuda_4096_wgmma_128x128_tma_ws
  matmul_bfloat16_cuda_4096_wgmma_128x256_tma_s3})
for n in "${schedules[@]}"; do
  timeout 40 "$ts" measure --schedule "bench/schedules/$n.json" --target cuda \
    --min-runs 20 --min-time-ms 100 --json "$out/$n.json" >"$out/$n.txt" 2>&1
  rc=$?
  python3 bench/scripts/measure_json_line.py "$out/$n.json" "$n" "$rc" ieee
done
echo "== eager"
python3 bench/harness/pytorch_baseline.py --case matmul_bf16:4096x4096x4096 \
  --json "$out/eager.json" 2>&1 | tail -3
[[ "${SKIP_TUNE:-0}" == 1 ]] && exit 0
SUITES=level1_half PROBLEMS=matmul_square_4096_bf16 TRIALS="${TRIALS:-64}" BENCH_S=70 \
  SCORE_S=50 BASELINES=eager TAG=tma bash bench/scripts/h200_tune_suites.sh

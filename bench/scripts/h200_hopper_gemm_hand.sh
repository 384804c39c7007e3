#!/usr/bin/env bash
# Hand wgmma schedules on every GEMM of bench/suites/hopper.json (bf16 and fp16 at 4096^3, 8192^3
# and the Llama-3 projections) against PyTorch eager (cuBLAS), in one device call:
#   run(command="export TS_ROOT=$(bash dist/unpack.sh | tail -1); bash bench/scripts/h200_hopper_gemm_hand.sh",
#       carry=["dist"], kind="nvidia-h200")
# Each schedule file's tiling is applied to each shape (`tilesearch measure --shape --dtype`:
# checked on 3 input distributions against float64, L2 flushed, >= 20 runs and 100 ms, median);
# eager by bench/harness/pytorch_baseline.py with the same method, in the same call.
# Environment: SCHEDULES (names under bench/schedules without .json), SHAPES ("MxNxK ..."),
# DTYPES ("bfloat16 float16"), MEASURE_S (time limit per measure, default 60).
# Output: $OUT/hopper-gemm.tgz (one file: the device tool returns a limited number of files) of
# hopper-gemm/{run.log,<dtype>_<MxNxK>_<schedule>.{json,txt},eager_<dtype>.json}.
set -uo pipefail
# shellcheck source=bench/scripts/run_lib.sh
source "$(dirname "$0")/run_lib.sh"
begin_run hopper-gemm
schedules=(${SCHEDULES:-matmul_bfloat16_cuda_4096_wgmma_128x256_tma matmul_bfloat16_cuda_4096_wgmma_128x256_tma_ws})
shapes=(${SHAPES:-4096x4096x4096 8192x8192x8192 4096x14336x4096 4096x4096x14336 4096x8192x8192 4096x28672x8192 4096x8192x28672})
dtypes=(${DTYPES:-bfloat16 float16})
for dt in "${dtypes[@]}"; do
  cases=()
  for s in "${shapes[@]}"; do
    IFS=x read -r m n k <<<"$s"
    for sch in "${schedules[@]}"; do
      f="$out/${dt}_${s}_${sch}"
      timeout "${MEASURE_S:-60}" "$ts" measure --schedule "bench/schedules/$sch.json" --target cuda \
        --dtype "$dt" --shape "${m}x${k}" --shape "${k}x${n}" \
        --min-runs 20 --min-time-ms 100 --json "$f.json" >"$f.txt" 2>&1
      python3 bench/scripts/measure_json_line.py "$f.json" "${dt} ${s} ${sch}" "$?"
    done
    case $dt in bfloat16) c=matmul_bf16 ;; float16) c=matmul_f16 ;; *) c=matmul ;; esac
    cases+=(--case "$c:$s")
  done
  echo "== eager $dt"
  python3 bench/harness/pytorch_baseline.py "${cases[@]}" --json "$out/eager_$dt.json" 2>&1 | tail -"$(( ${#shapes[@]} + 2 ))"
done
echo "== done $(date -u +%FT%TZ)"
cd "$(dirname "$out")" && tar czf hopper-gemm.tgz hopper-gemm && rm -rf hopper-gemm

#!/usr/bin/env bash
# Implicit-GEMM convolutions with repacked operands (the tensor_core step's "repack": the NCHW
# input copied into a padded NHWC workspace, the weights into KRSC) on the H200, beside the
# element-gathering kernels and PyTorch eager with and without TF32, in one device call:
#   run(command="bash bench/scripts/h200_conv_repack.sh", carry=["dist"], kind="nvidia-h200")
# Each hand schedule is checked and timed by `tilesearch measure` (flushed L2, >= 20 runs and
# 100 ms, median); the one-pass tf32 ones under --precision tf32 (judged with TF32's unit
# roundoff). Eager by bench/harness/pytorch_baseline.py with the same method, in the same call.
# SCHEDULES (file names under bench/schedules, without .json) overrides the list.
# Output: $OUT/conv-repack/{run.log,<schedule>.json,<schedule>.txt,eager.json,eager_tf32.json}.
set -uo pipefail
# shellcheck source=bench/scripts/run_lib.sh
source "$(dirname "$0")/run_lib.sh"
begin_run conv-repack
schedules=(${SCHEDULES:-
  conv2d_float32_cuda_resnet3x3_tf32x3_wgmma_gather
  conv2d_float32_cuda_resnet3x3_tf32x3_wgmma_repack
  conv2d_float32_cuda_resnet3x3_tf32_wgmma_gather
  conv2d_float32_cuda_resnet3x3_tf32_wgmma_repack
  conv2d_float32_cuda_resnet3x3_tf32_wgmma_repack_256x128
  conv2d_float32_cuda_resnet1x1_tf32x3_wgmma_repack
  conv2d_float32_cuda_resnet1x1_tf32_wgmma_repack
  conv2d_float16_cuda_resnet3x3_tensor_core
  conv2d_float16_cuda_resnet3x3_wgmma_repack})
for n in "${schedules[@]}"; do
  f="bench/schedules/$n.json"
  precision=ieee
  [[ "$n" == *_tf32_* ]] && precision=tf32
  timeout 150 "$ts" measure --schedule "$f" --target cuda --precision "$precision" \
    --min-runs 20 --min-time-ms 100 --json "$out/$n.json" >"$out/$n.txt" 2>&1
  rc=$?
  python3 bench/scripts/measure_json_line.py "$out/$n.json" "$n" "$rc" "$precision"
done
cases=(--case conv2d:32x128x56x56x128x3x3x1x1 --case conv2d:128x256x28x28x512x1x1x1x0
  --case conv2d_f16:32x128x56x56x128x3x3x1x1 --case conv2d_f16:128x256x28x28x512x1x1x1x0)
echo "== eager, TF32 off"
python3 bench/harness/pytorch_baseline.py "${cases[@]}" --json "$out/eager.json" 2>&1 | tail -4
echo "== eager, TF32 on"
python3 bench/harness/pytorch_baseline.py "${cases[@]}" --tf32 --json "$out/eager_tf32.json" 2>&1 |
  tail -4

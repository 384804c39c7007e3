#!/usr/bin/env bash
# The TF32 1x1 convolution (ResNet 256 -> 512 at 28x28, batch 128) under Nsight Compute: our tuned
# pixel-tile kernel (A through registers) and cuDNN's TF32 kernel, in one device call (about two
# minutes):
#   run(command="bash bench/scripts/h200_conv1x1_tf32_profile.sh", carry=["dist"], kind="nvidia-h200")
# Why: ours runs at 0.89x of cuDNN; the counters say what holds it (tensor pipe, issue slots,
# stalls, DRAM). ncu runs with --clock-control none. Output:
# $OUT/conv1x1-profile/{run.log,ours.txt,cudnn.txt}.
set -uo pipefail
out="${OUT:-/tmp/out}/conv1x1-profile"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
ts="$root/run"
hand=bench/schedules/conv2d_float32_cuda_resnet1x1_tf32_wgmma_pixels_64x128.json
keep='Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Tensor|Warp Cycles Per|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Stall'
timeout 60 "$ts" measure --schedule "$hand" --target cuda --precision tf32 --min-runs 20 \
  --min-time-ms 100 --json "$out/measure.json" >/dev/null 2>&1
python3 bench/scripts/measure_json_line.py "$out/measure.json" ours $? tf32
echo "== $(date -u +%FT%TZ) ncu, ours"
timeout 150 ncu --clock-control none --kernel-name regex:'^Y' --launch-skip 2 --launch-count 1 \
  --set full --import-source no "$ts" measure --schedule "$hand" --target cuda --precision tf32 \
  --no-check --min-runs 5 --warmup 3 >"$out/ours.txt" 2>&1
echo "ncu rc $?"
grep -E "$keep" "$out/ours.txt" | head -40
echo "== $(date -u +%FT%TZ) ncu, cuDNN TF32"
timeout 150 ncu --clock-control none --kernel-name regex:'conv|gemm|xmma|implicit' \
  --launch-skip 3 --launch-count 1 --set full --import-source no python3 -c "
import torch, torch.nn.functional as F
torch.backends.cudnn.allow_tf32 = True
x = torch.randn(128, 256, 28, 28, device='cuda'); w = torch.randn(512, 256, 1, 1, device='cuda')
for _ in range(6): F.conv2d(x, w)
torch.cuda.synchronize()" >"$out/cudnn.txt" 2>&1
echo "ncu rc $?"
grep -E "^  [a-z_0-9]+.*\(|$keep" "$out/cudnn.txt" | head -40
echo "== done $(date -u +%FT%TZ)"

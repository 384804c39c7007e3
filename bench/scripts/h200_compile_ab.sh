#!/usr/bin/env bash
# Compile time and kernel time of schedules under two device packs in one call (an A/B of a code
# generation change): dist/old/ (the pack before) and dist/ (after), each unpacked to its own
# folder, `tilesearch measure` of every schedule in SCHEDULES (default: the SIMT padding-select
# convolutions and the TF32 gather convolution of bench/schedules), old then new per schedule.
#   run(command="bash bench/scripts/h200_compile_ab.sh", carry=["dist"])  (dist/old inside dist)
# Output: the compile, check and time lines of each run on stdout.
set -uo pipefail
SCHEDULES=${SCHEDULES:-"bench/schedules/conv2d_float32_cuda_resnet3x3_simt_unrolled_padding_select.json bench/schedules/conv2d_float32_cuda_resnet3x3_simt_padding_select.json bench/schedules/conv2d_float32_cuda_resnet3x3_tf32x3_wgmma_gather.json"}
old=$(bash dist/old/unpack.sh /tmp/ts_old | tail -1)
new=$(bash dist/unpack.sh /tmp/ts_new | tail -1)
for f in $SCHEDULES; do
  for side in old new; do
    root=$old
    [[ $side == new ]] && root=$new
    echo "== $side $(basename "$f")"
    timeout 60 "$root/run" measure --schedule "$f" --target cuda --min-runs 20 2>&1 |
      grep -E "^compile:|^check:|^time:|FAILED|registers"
  done
done

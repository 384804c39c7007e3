#!/usr/bin/env bash
# Why the multicast-cluster GEMM kernel (TensorCoreStep::multicast) runs slower than the same
# tiling without clusters, in one device call:
#   run(command="bash bench/scripts/h200_multicast_diagnostics.sh", carry=["dist"])
# 1. cudaOccupancyMaxActiveClusters for clusters of two 256-thread blocks with the kernels' shared
#    memory (bench/scripts/cluster_occupancy.cu): how many multiprocessors clusters can fill;
# 2. both hand schedules (and any given in EXTRA, space-separated files) measured on the 70B down
#    projection 4096×8192×28672 (checked against float64 first);
# 3. one launch of each profiled by ncu (launch and occupancy statistics, SM activity, warp
#    stall reasons). Everything lands in $OUT/multicast/ (run.log plus one tarball of the reports:
#    the device tool returns at most eight files).
set -uo pipefail
# shellcheck source=bench/scripts/run_lib.sh
source "$(dirname "$0")/run_lib.sh"
begin_run multicast
rc=0
work=$(mktemp -d)
if nvcc -arch=sm_90a -o "$work/co" bench/scripts/cluster_occupancy.cu; then
  "$work/co"
else
  note_rc 1 "nvcc cluster_occupancy.cu"
fi
shapes=(--shape 4096x28672 --shape 28672x8192)
files=(bench/schedules/matmul_bfloat16_cuda_4096_wgmma_128x256_tma.json
  bench/schedules/matmul_bfloat16_cuda_4096_wgmma_128x256_tma_multicast.json ${EXTRA:-})
for f in "${files[@]}"; do
  n=$(basename "$f" .json)
  timeout 120 "$ts" measure --schedule "$f" --target cuda "${shapes[@]}" --min-runs 20 \
    --min-time-ms 100 --json "$work/$n.json" >"$work/$n.txt" 2>&1
  note_rc $? "measure $n"
  python3 bench/scripts/measure_json_line.py "$work/$n.json" "$n" 0
done
for f in "${files[@]}"; do
  n=$(basename "$f" .json)
  timeout 150 ncu --target-processes all --launch-count 1 -k 'regex:^C$' \
    --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats \
    --metrics sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_elapsed.max,launch__cluster_dim_x,launch__occupancy_cluster_pct \
    "$ts" measure --schedule "$f" --target cuda "${shapes[@]}" --min-runs 1 --min-time-ms 1 \
    --no-check >"$work/ncu-$n.txt" 2>&1
  note_rc $? "ncu $n"
  grep -E "Duration|SM Active Cycles|Elapsed Cycles|cycles_active|cycles_elapsed|Cluster|Waves|Stall|Warp Cycles|Achieved|Theoretical|Issued|Eligible|Block Limit|Registers|Shared Memory" \
    "$work/ncu-$n.txt" | head -60
done
tar czf "$out/reports.tgz" -C "$work" .
exit "$rc"

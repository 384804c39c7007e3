#!/usr/bin/env bash
# Schedules under Nsight Compute, with their SASS, in one device call (about 1–2 minutes each):
#   run(command="SCHEDULES='a.json b.json' MEASURE='c.json' bash bench/scripts/h200_profile_schedules.sh",
#       carry=["dist"], kind="nvidia-h200")
# For each schedule file: `tilesearch measure` (checked, timed), then one launch of its first
# kernel under `ncu --set full` (clocks as they are), and the counters that say what holds a
# tensor-core kernel: duration, the tensor (gmma) pipe, shared-memory wavefronts and bank
# conflicts, L2 and DRAM throughput, and the warp stall reasons (PC sampling). The kernel's SASS
# (ptxas + cuobjdump on the device) goes to $OUT/profile/<name>.sass, its loop summary (counts of
# HGMMA, barriers, shared loads / stores) to the log. Output: $OUT/profile/{run.log,
# <name>.ncu.txt, <name>.sass}.
set -uo pipefail
out="${OUT:-/tmp/out}/profile"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
# MEASURE: schedule files only measured (checked and timed, no profile), before the profiles.
for f in ${MEASURE:-}; do
  echo "== $(date -u +%FT%TZ) measure $(basename "$f" .json)"
  timeout 90 "$ts" measure --schedule "$f" --target cuda --min-runs 50 2>&1 |
    grep -E "^(time|check|OK|FAIL)"
done
for f in ${SCHEDULES:-}; do
  name="$(basename "$f" .json)"
  echo "== $(date -u +%FT%TZ) $name"
  timeout 90 "$ts" measure --schedule "$f" --target cuda --min-runs 50 2>&1 |
    grep -E "^(time|check|OK|FAIL)"
  "$ts" show --schedule "$f" --emit ptx >"$out/$name.ptx" 2>/dev/null
  arch=$(grep -m1 -oE "sm_[0-9]+a?" "$out/$name.ptx")
  if command -v ptxas >/dev/null && command -v cuobjdump >/dev/null; then
    ptxas -arch="$arch" "$out/$name.ptx" -o "$out/$name.cubin" && \
      cuobjdump -sass "$out/$name.cubin" >"$out/$name.sass"
    for p in HGMMA WARPGROUP.ARRIVE WARPGROUP.DEPBAR BAR.SYNC LDGSTS "LDS\." "STS\." "LDS.128" "STS.128"; do
      printf '%s %s  ' "$p" "$(grep -c "$p" "$out/$name.sass")"
    done
    echo
    rm -f "$out/$name.cubin" "$out/$name.ptx"
  fi
  command -v ncu >/dev/null || continue
  timeout 200 ncu --clock-control none --launch-skip 2 --launch-count 1 --set full \
    --import-source no --export "$out/$name" \
    "$ts" measure --schedule "$f" --target cuda --no-check --min-runs 5 --warmup 3 \
    >"$out/$name.ncu_run.txt" 2>&1
  [[ -f "$out/$name.ncu-rep" ]] || { echo "ncu failed: $(tail -3 "$out/$name.ncu_run.txt")"; continue; }
  ncu --import "$out/$name.ncu-rep" --page details >"$out/$name.ncu.txt" 2>&1
  ncu --import "$out/$name.ncu-rep" --page raw >"$out/$name.raw.txt" 2>&1
  rm -f "$out/$name.ncu-rep" "$out/$name.ncu_run.txt"
  grep -E "^ +(Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput)" \
    "$out/$name.ncu.txt" | head -12
  grep -E "dram__bytes_read.sum |dram__bytes_write.sum |lts__t_sector_hit_rate.pct |l1tex__t_sector_hit_rate.pct |sm__warps_active.avg.pct_of_peak_sustained_active |pipe_tensor_op_gmma_cycles_active.avg.pct|l1tex__data_pipe_lsu_wavefronts_mem_shared.sum |l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum |smsp__pcsamp_warps_issue_stalled_[a-z_]+ " \
    "$out/$name.raw.txt" | head -48
  rm -f "$out/$name.raw.txt"
done
echo "== done $(date -u +%FT%TZ)"

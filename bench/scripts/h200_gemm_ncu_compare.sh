#!/usr/bin/env bash
# Profiles one launch of each given GEMM schedule file with ncu on one shape, for side-by-side
# reading: memory traffic (L2, DRAM, L2 -> SM), instructions, warp stall reasons (each as a
# share of active warp cycles) and the sampled stall locations in SASS (SourceCounters):
#   run(command="SHAPE=4096x8192x28672 bash bench/scripts/h200_gemm_ncu_compare.sh FILE...",
#       carry=["dist"])
# SHAPE: MxNxK (default 4096x8192x28672); DTYPE (default bfloat16). Prints the chosen metrics per
# file; the full reports go to $OUT/ncu/reports.tgz (the device tool returns at most eight files).
set -uo pipefail
# shellcheck source=bench/scripts/run_lib.sh
source "$(dirname "$0")/run_lib.sh"
begin_run ncu
rc=0
work=$(mktemp -d)
IFS=x read -r m n k <<<"${SHAPE:-4096x8192x28672}"
metrics=sm__cycles_elapsed.max,smsp__inst_executed.sum,lts__t_bytes.sum,dram__bytes_read.sum
metrics+=,l1tex__m_xbar2l1tex_read_bytes.sum,sm__ctas_launched.sum
metrics+=,regex:smsp__warp_issue_stalled_.*_per_warp_active.pct
for f in "$@"; do
  n0=$(basename "$f" .json)
  timeout 200 ncu --target-processes all --launch-count 1 -k 'regex:^C$' \
    --section SourceCounters --section MemoryWorkloadAnalysis --metrics "$metrics" \
    "$ts" measure --schedule "$f" --target cuda --dtype "${DTYPE:-bfloat16}" \
    --shape "${m}x${k}" --shape "${k}x${n}" --min-runs 1 --min-time-ms 1 --no-check \
    >"$work/ncu-$n0.txt" 2>&1
  note_rc $? "ncu $n0"
  echo "== $n0"
  grep -E "sm__cycles_elapsed|inst_executed|lts__t_bytes|dram__bytes|xbar2l1tex|ctas_launched" \
    "$work/ncu-$n0.txt"
  grep -E "warp_issue_stalled" "$work/ncu-$n0.txt" | awk '$NF+0 >= 2'
  sed -n '/Warp Stall Sampling/,/^ *$/p' "$work/ncu-$n0.txt" | head -30
done
tar czf "$out/reports.tgz" -C "$work" .
exit "$rc"

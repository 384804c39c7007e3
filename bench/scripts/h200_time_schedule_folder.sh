#!/usr/bin/env bash
# Times hand-written schedule files on the H200 with `tilesearch measure` (checked first), next to
# PyTorch eager on the same shapes, in one device call:
#   run(command="bash bench/scripts/h200_time_schedule_folder.sh DIR", carry=["dist"])
# Prints one line per schedule (median ms, registers) and writes $OUT/schedules[-$TAG]/*.json;
# BASELINE_CASES (pytorch_baseline.py --case arguments, e.g. with --tf32) or NO_BASELINE=1;
# MEASURE_ARGS: more `measure` options (e.g. "--precision tf32" for one-pass TF32 schedules, which
# the default ieee check rejects).
set -uo pipefail
dir="${1:?usage: h200_time_schedule_folder.sh DIR (a folder of schedule files)}"
# shellcheck source=bench/scripts/run_lib.sh
source "$(dirname "$0")/run_lib.sh"
begin_run "schedules${TAG:+-$TAG}"
for f in "$dir"/*.json; do
  n=$(basename "$f" .json)
  timeout 120 "$ts" measure --schedule "$f" --target cuda --min-runs 20 --min-time-ms 100 \
    ${MEASURE_ARGS:-} --json "$out/$n.json" >"$out/$n.txt" 2>&1
  rc=$?
  python3 bench/scripts/measure_json_line.py "$out/$n.json" "$n" "$rc"
done
[[ -n "${NO_BASELINE:-}" ]] || python3 bench/harness/pytorch_baseline.py ${BASELINE_CASES:---case matmul:4096x4096x4096 --case softmax:4096x4096} 2>&1 | tail -5

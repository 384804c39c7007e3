#!/usr/bin/env bash
# Hand schedules measured, then suite problems tuned from empty logs and scored beside eager
# (h200_tune_suites.sh), in one device call. The defaults are the GEMV runs of the cross-thread
# reduction sketch for GEMV-like stages:
#   run(command="bash bench/scripts/h200_measure_and_tune.sh", carry=["dist"])
# Environment (optional): SCHEDULES (a glob of schedule files; default
# bench/schedules/gemv_8192x65536_cuda_cross_thread_*.json), SUITES (level1), PROBLEMS (default
# gemv_8192x65536,small_gemv_1024), TRIALS (64), BENCH_S (120), SCORE_S (90), TAG (gemv),
# TS_ROOT (an unpacked pack).
# Output: $OUT/$TAG/run.log, and $OUT/suites-$TAG.tgz from h200_tune_suites.sh.
set -uo pipefail
top="${OUT:-/tmp/out}"
tag="${TAG:-gemv}"
out="$top/$tag"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
for sched in ${SCHEDULES:-bench/schedules/gemv_8192x65536_cuda_cross_thread_*.json}; do
  printf '%s: ' "$(basename "$sched")"
  timeout 120 "$root/run" measure --schedule "$sched" --target cuda --min-runs 50 2>&1 |
    grep -E "^(time|check|FAILED|error)" | tr '\n' ' '
  echo
done
TS_ROOT="$root" SUITES="${SUITES:-level1}" PROBLEMS="${PROBLEMS:-gemv_8192x65536,small_gemv_1024}" \
  TRIALS="${TRIALS:-64}" PER_ROUND=32 BENCH_S="${BENCH_S:-120}" ROUND_S=0 BENCH_KILL_S=20 \
  SCORE_S="${SCORE_S:-90}" BASELINES=eager,eager_no_tf32 TAG="$tag" \
  bash bench/scripts/h200_tune_suites.sh

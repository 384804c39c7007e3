#!/usr/bin/env bash
# Both suites re-scored on the H200 from every strict-mode (ieee) tuning log committed so far,
# joined per problem (bench/scripts/merge_suite_logs.py), nothing tuned: each problem's best
# record is replayed with the current code and bench/harness/score.py checks and times it against
# eager and eager without TF32 in the same call (h200_score_suites.sh, no torch.compile baseline:
# it needs minutes of inductor warm-up). Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_rescore_suites.sh", carry=["dist"])
# Environment: EXTRA_LOGS (more ARCHIVE[:SUBDIR] sources, after the committed ones), SCORE_S
# (default 240), TAG (default "rescored"), TS_ROOT.
# Problems without a committed log are left out (score them with the call that tunes them).
# Output: $OUT/suites-$TAG.tgz (score.{md,json,png}, bench.json, run.log) and
# $OUT/merged-logs-SOURCES.txt. Exit status: h200_score_suites.sh's, 2 when the merge fails.
set -uo pipefail
merged=/tmp/merged-suite-logs
rm -rf "$merged"
# Strict-mode logs only (TF32-mode and half-precision runs are other workloads).
python3 bench/scripts/merge_suite_logs.py --out "$merged" --committed-strict \
  ${EXTRA_LOGS:-} || exit 2
mkdir -p "$OUT"
cp "$merged/SOURCES.txt" "$OUT/merged-logs-SOURCES.txt"
# Only problems with a log (a problem without one would be tuned from nothing by TRIALS=1).
PROBLEMS=$(cd "$merged" && ls *.jsonl | sed 's/\.jsonl$//' | paste -sd, -)
export PROBLEMS LOGS_FROM=$merged WARM=0 BASELINES=eager,eager_no_tf32 SCORE_S=${SCORE_S:-240}
export TAG=${TAG:-rescored}
exec bash bench/scripts/h200_score_suites.sh

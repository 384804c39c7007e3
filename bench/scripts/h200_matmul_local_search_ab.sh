#!/usr/bin/env bash
# Local-search A/B of matmul 4096³ on an x2 machine, one call:
#   run(command="bash bench/scripts/h200_matmul_local_search_ab.sh", carry=["dist"],
#       kind="nvidia-h200-x2")
# matmul 4096³ tuned from scratch with XGBoost, seed 1, 1000 trials (or until LIMIT_S): GPU 0 with
# local search (--local-search-fraction 0.25, 4 states), GPU 1 without it (0), each with 16 cores
# (bench/scripts/h200_tune_ops.sh: inspect + replay of each). Then the local-search job's best is
# scored alone by bench/harness/score.py against eager and torch.compile on GPU 0 (problem
# matmul_square_4096). Run on 2026-11-30 when 0.25 was the default, with the jobs named
# matmul:xgboost and matmul:xgboost-nols (bench/logs/h200-2026-11-30-matmul4096-xgboost.tar.xz,
# bench/results/h200-2026-11-30-matmul4096-xgboost.md), LIMIT_S=400: the tuning took 268 s (local
# search) and 210 s, the whole call 305 s.
# Time: the worst case stays under 570 s (the device tool stops a call at 600): LIMIT_S 300 +
# KILL_S 45 (SIGKILL grace; a round takes about 15 s) + 2 replays × 30 (about 3 s each) +
# h200_score_matmul_log.sh (replay 45 + 15 + score.py 80 + 20) = 565 s, plus seconds of inspect
# and tar.
# Output: $OUT/tune.tgz, $OUT/suites-matmul.tgz. Exit status: 2 for a refused setting, else the
# first non-zero status of the tuning call (h200_tune_ops.sh) or the scoring, after the listing.
set -uo pipefail
LIMIT_S=${LIMIT_S:-300}
[[ "$LIMIT_S" =~ ^[0-9]+$ ]] && (( 10#$LIMIT_S > 0 )) || { echo "LIMIT_S=$LIMIT_S: want seconds > 0"; exit 2; }
(( $(nvidia-smi -L | wc -l) >= 2 )) || { echo "needs 2 GPUs (kind nvidia-h200-x2)"; exit 2; }
TS_ROOT="$(bash dist/unpack.sh | tail -1)"
[[ -n "$TS_ROOT" && -f "$TS_ROOT/run" && -x "$TS_ROOT/run" ]] || {
  echo "dist/unpack.sh did not unpack the device pack (got '$TS_ROOT')"; exit 2; }
export TS_ROOT
out="${OUT:-/tmp/out}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
# shellcheck source=bench/scripts/run_lib.sh
source bench/scripts/run_lib.sh
JOBS="matmul:xgboost-ls matmul:xgboost-nols" NO_BASELINE=1 LIMIT_S=$LIMIT_S KILL_S=45 REPLAY_S=30 \
  bash bench/scripts/h200_tune_ops.sh >"$tmp/tune.out" 2>&1
note_rc $? "tuning (h200_tune_ops.sh)"
grep -E "^tune: trials|^record|re-check|^== |: rc " "$tmp/tune.out" | tail -30
score_tuned_matmul matmul_xgboost-ls.jsonl "$tmp" 80
ls -la "$out"
exit "$rc"

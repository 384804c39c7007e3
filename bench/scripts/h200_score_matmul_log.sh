#!/usr/bin/env bash
# Scores the best record of one matmul 4096³ tuning log as level1's matmul_square_4096: replay
# (bench/scripts/h200_tune_suites.sh with TRIALS=1: nothing is tuned) then bench/harness/score.py against eager,
# eager without TF32 and torch.compile, on one GPU, in the calling device call:
#   bash bench/scripts/h200_score_matmul_log.sh LOG TAG [GPU]
# LOG: a tilesearch log of that workload (e.g. $OUT/tune/matmul_xgboost.jsonl); TAG names the
# output $OUT/suites-TAG.tgz; GPU (default 0) is the device index. Needs TS_ROOT or dist/.
# Time limits (seconds): SCORE_REPLAY_S for the replay (default 120; SIGINT, then SIGKILL
# SCORE_KILL_S later, default 45) and SCORE_S for score.py (default 150; SIGKILL 20 s later):
# at most SCORE_REPLAY_S + SCORE_KILL_S + SCORE_S + 20 s, plus seconds of unpacking and tar.
# Exit status: h200_tune_suites.sh's (non-zero when score.py failed, the replay crashed or a
# setting was refused).
set -uo pipefail
log=${1:?usage: h200_score_matmul_log.sh LOG TAG [GPU]}
tag=${2:?usage: h200_score_matmul_log.sh LOG TAG [GPU]}
gpu=${3:-0}
SCORE_REPLAY_S=${SCORE_REPLAY_S:-120}
SCORE_KILL_S=${SCORE_KILL_S:-45}
SCORE_S=${SCORE_S:-150}
[[ -f "$log" ]] || { echo "h200_score_matmul_log.sh: no log '$log'"; exit 2; }
[[ "$gpu" =~ ^[0-9]+$ ]] || { echo "h200_score_matmul_log.sh: GPU '$gpu': want a device index"; exit 2; }
mm=$(mktemp -d)
trap 'rm -rf "$mm"' EXIT
cp "$log" "$mm/matmul_square_4096.jsonl"
CUDA_VISIBLE_DEVICES=$gpu TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu$gpu.lock LOGS_FROM="$mm" \
  PROBLEMS=matmul_square_4096 SUITES=level1 TRIALS=1 BENCH_S="$SCORE_REPLAY_S" \
  BENCH_KILL_S="$SCORE_KILL_S" ROUND_S=0 SCORE_S="$SCORE_S" TAG="$tag" \
  BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10" bash bench/scripts/h200_tune_suites.sh 2>&1 |
  grep -v -i warn | tail -8
rc=${PIPESTATUS[0]}
(( rc == 0 )) || echo "h200_score_matmul_log.sh: h200_tune_suites.sh: rc $rc"
exit "$rc"

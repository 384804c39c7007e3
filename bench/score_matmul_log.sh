#!/usr/bin/env bash
# Scores the best record of one matmul 4096³ tuning log as level1's matmul_square_4096: replay
# (bench/run_h200_issue6.sh with TRIALS=1: nothing is tuned) then bench/score.py against eager,
# eager without TF32 and torch.compile, on one GPU, in the calling device call:
#   bash bench/score_matmul_log.sh LOG TAG [GPU]
# LOG: a tilesearch log of that workload (e.g. $OUT/issue5/matmul_xgboost.jsonl); TAG names the
# output $OUT/issue6-TAG.tgz; GPU (default 0) is the device index. Needs TS_ROOT or dist/.
set -uo pipefail
log=${1:?usage: score_matmul_log.sh LOG TAG [GPU]}
tag=${2:?usage: score_matmul_log.sh LOG TAG [GPU]}
gpu=${3:-0}
[[ -f "$log" ]] || { echo "score_matmul_log.sh: no log '$log'"; exit 2; }
mm=$(mktemp -d)
cp "$log" "$mm/matmul_square_4096.jsonl"
CUDA_VISIBLE_DEVICES=$gpu TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu$gpu.lock LOGS_FROM="$mm" \
  PROBLEMS=matmul_square_4096 SUITES=level1 TRIALS=1 BENCH_S=120 ROUND_S=0 SCORE_S=150 TAG="$tag" \
  BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10" bash bench/run_h200_issue6.sh 2>&1 |
  grep -v -i warn | tail -8
rm -rf "$mm"

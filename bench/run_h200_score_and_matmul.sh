#!/usr/bin/env bash
# One call on an x2 machine for issues 6 and 5 side by side, each on its own GPU:
#   run(command="bash bench/run_h200_score_and_matmul.sh", carry=["dist"], kind="nvidia-h200-x2")
# - GPU 1, issue 6's acceptance run: both suites scored from the committed logs
#   (bench/logs/h200-issue6.tar.xz; TRIALS=1, so nothing is tuned: every problem's best record is
#   replayed into an artifact, then bench/score.py checks and times each artifact against PyTorch).
#   The replay skips its own re-check (--no-check): score.py checks every artifact under its
#   hardened checks anyway, and the re-check's inputs are most of the replay time of the large
#   memory-bound problems (13-17 s each, 330 s for 38 problems on 2026-11-30).
# - GPU 0, issue 5: matmul 4096³ with XGBoost resumed from RESUME_TAR's matmul_xgboost.jsonl to
#   MATMUL_TRIALS trials (bench/run_h200_issue5.sh, no baseline there), then its best record
#   replayed and scored alone by score.py against eager and torch.compile on the same GPU
#   (problem matmul_square_4096 of level1).
# The two GPUs share the host (32 cores): the tuner's compilation may slow score.py's host side,
# not the kernels it times (CUDA events on a GPU of its own).
# Output: $OUT/issue6-final.tgz, $OUT/issue5.tgz, $OUT/issue6-matmul.tgz.
set -uo pipefail
MATMUL_TRIALS=${MATMUL_TRIALS:-1000}
MATMUL_LIMIT_S=${MATMUL_LIMIT_S:-300}
RESUME_TAR=${RESUME_TAR:-bench/logs/h200-issue5-s6.tar.xz}
(( $(nvidia-smi -L | wc -l) >= 2 )) || { echo "needs 2 GPUs (kind nvidia-h200-x2)"; exit 2; }
[[ "$MATMUL_LIMIT_S" =~ ^[0-9]+$ ]] && (( MATMUL_LIMIT_S > 0 )) || { echo "MATMUL_LIMIT_S: want seconds > 0"; exit 2; }
TS_ROOT="$(bash dist/unpack.sh | tail -1)"
[[ -x "$TS_ROOT/run" ]] || { echo "dist/unpack.sh did not unpack the device pack"; exit 2; }
export TS_ROOT
out="${OUT:-/tmp/out}"

CUDA_VISIBLE_DEVICES=1 TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu1.lock \
  LOGS_FROM=bench/logs/h200-issue6.tar.xz CHUNK=0/1 TRIALS=1 BENCH_S=330 ROUND_S=0 SCORE_S=220 \
  WARM=12 TAG=final BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10 --no-check" \
  bash bench/run_h200_issue6.sh >/tmp/score-final.out 2>&1 &
score_pid=$!

resume=$(mktemp -d)
tar xJf "$RESUME_TAR" -C "$resume" || { echo "cannot unpack $RESUME_TAR"; exit 2; }
rdir=$(dirname "$(find "$resume" -name matmul_xgboost.jsonl | head -1)")
CUDA_VISIBLE_DEVICES=0 RESUME_DIR="$rdir" JOBS="matmul:xgboost:$MATMUL_TRIALS" NO_BASELINE=1 \
  LIMIT_S=$MATMUL_LIMIT_S bash bench/run_h200_issue5.sh >/tmp/issue5.out 2>&1
tail -25 /tmp/issue5.out
mm=$(mktemp -d)
tar xzf "$out/issue5.tgz" -C "$mm" && bash bench/score_matmul_log.sh "$mm/issue5/matmul_xgboost.jsonl" matmul 0
wait "$score_pid"
grep -v -i warn /tmp/score-final.out | tail -75
ls -la "$out"

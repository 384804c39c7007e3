#!/usr/bin/env bash
# Local-search A/B for issue 5 on an x2 machine, one call:
#   run(command="bash bench/run_h200_issue5_ls_ab.sh", carry=["dist"], kind="nvidia-h200-x2")
# matmul 4096³ tuned from scratch with XGBoost, seed 1, 1000 trials (or until LIMIT_S): GPU 0 with
# local search (--local-search-fraction 0.25, 4 states), GPU 1 without it (0), each
# with 16 cores (bench/run_h200_issue5.sh: inspect + replay of each). Then the local-search job's
# best is scored alone by bench/score.py against eager and torch.compile on GPU 0
# (problem matmul_square_4096). Run on 2026-11-30 (session 7) when 0.25 was the default, with the
# jobs named matmul:xgboost and matmul:xgboost-nols (bench/logs/h200-issue5-s7). Output: $OUT/issue5.tgz, $OUT/issue6-matmul.tgz.
set -uo pipefail
LIMIT_S=${LIMIT_S:-420}
(( $(nvidia-smi -L | wc -l) >= 2 )) || { echo "needs 2 GPUs (kind nvidia-h200-x2)"; exit 2; }
TS_ROOT="$(bash dist/unpack.sh | tail -1)"
[[ -x "$TS_ROOT/run" ]] || { echo "dist/unpack.sh did not unpack the device pack"; exit 2; }
export TS_ROOT
out="${OUT:-/tmp/out}"
JOBS="matmul:xgboost-ls matmul:xgboost-nols" NO_BASELINE=1 LIMIT_S=$LIMIT_S \
  bash bench/run_h200_issue5.sh >/tmp/issue5.out 2>&1
grep -E "^tune: trials|^record|re-check|^== " /tmp/issue5.out | tail -30
mm=$(mktemp -d)
tar xzf "$out/issue5.tgz" -C "$mm" && bash bench/score_matmul_log.sh "$mm/issue5/matmul_xgboost-ls.jsonl" matmul 0
ls -la "$out"

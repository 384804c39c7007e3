#!/usr/bin/env bash
# Matmul 4096³ in bf16 and fp32 (ieee) tuned from empty logs with the shipped pretrained model
# (`tilesearch tune`, its default --model-init), then the best of each scored against PyTorch by
# bench/harness/score.py (eager and eager without TF32); then a bf16 dispatch table over M
# (`tilesearch export-dispatch`, N = K = 4096, M in DISPATCH_M) from the bf16 log, each bucket's
# kernel checked and timed by `tilesearch measure` beside eager (bench/harness/pytorch_baseline.py,
# same method); all in one device call (about 8 minutes). SCORE=0 skips the scoring,
# DISPATCH_M="" the dispatch table.
#   run(command="bash bench/scripts/h200_tune_matmuls_from_model.sh", carry=["dist"], kind="nvidia-h200")
# TRIALS (default 256) per problem; TUNE_S (default 110) wall seconds per tune (SIGINT, then the
# round in flight is logged). CASES="problem|dtype|MxK|KxN ..." replaces the two problems (the
# problem names of bench/suites, which the scoring replays). Output: $OUT/from-model/{run.log, <problem>.jsonl, inspect.txt} and
# $OUT/suites-from-model.tgz (h200_tune_suites.sh: replay + score.py).
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/from-model"
mkdir -p "$out/logs"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
export TS_ROOT=$root
ts="$root/run"
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
trials=${TRIALS:-256}
# problem|dtype|A shape|B shape
if [[ -n "${CASES:-}" ]]; then
  read -r -a cases <<<"$CASES"
else
  cases=("matmul_square_4096_bf16|bfloat16|4096x4096|4096x4096"
    "matmul_square_4096|float32|4096x4096|4096x4096")
fi
problems=""
for c in "${cases[@]}"; do
  IFS='|' read -r problem dtype a_shape b_shape <<<"$c"
  problems="${problems:+$problems,}$problem"
  echo "== $(date -u +%FT%TZ) tune $problem ($trials trials)"
  timeout -s INT -k 30 "${TUNE_S:-110}" "$ts" tune --op matmul --shape "$a_shape" --shape "$b_shape" \
    --dtype "$dtype" --target cuda --trials "$trials" --log "$out/logs/$problem.jsonl" 2>&1 | tail -3
  "$ts" inspect --log "$out/logs/$problem.jsonl" 2>&1 | tee -a "$out/inspect.txt" | tail -5
done
if [[ "${SCORE:-1}" == 1 ]]; then
  echo "== $(date -u +%FT%TZ) replay and score"
  LOGS_FROM="$out/logs" PROBLEMS="$problems" \
    SUITES="level1 level1_half" TRIALS=1 BENCH_S=120 ROUND_S=0 SCORE_S=150 TAG=from-model \
    BASELINES=eager,eager_no_tf32 BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10" \
    bash bench/scripts/h200_tune_suites.sh 2>&1 | grep -v -i warn | tail -25
fi

ms=${DISPATCH_M-1,8,64,512,4096,16384}
if [[ -n "$ms" ]]; then
  echo "== $(date -u +%FT%TZ) export-dispatch bf16 over M in $ms"
  timeout 240 "$ts" export-dispatch --op matmul --shape 4096x4096 --shape 4096x4096 --dtype bfloat16 \
    --target cuda --log "$out/logs/matmul_square_4096_bf16.jsonl" --values "$ms" \
    --out "$out/dispatch" --name mm_bf16 2>&1 | grep -v "^wrote" | tail -8
  cases=()
  for m in ${ms//,/ }; do cases+=(--case "matmul_bf16:${m}x4096x4096"); done
  python3 bench/harness/pytorch_baseline.py "${cases[@]}" --json "$out/dispatch_eager.json"
  for m in ${ms//,/ }; do
    f="$out/dispatch/mm_bf16_$m.schedule.json"
    [[ -f "$f" ]] || { echo "bucket $m: no schedule file"; continue; }
    echo "== $(date -u +%FT%TZ) bucket M=$m"
    timeout 90 "$ts" measure --schedule "$f" --target cuda --min-runs 100 \
      --json "$out/dispatch/measure_$m.json" 2>&1 | grep -E "^(check|time|OK|FAIL)" | head -3
  done
fi
tar czf "$top/from-model.tgz" -C "$top" from-model
echo "== done $(date -u +%FT%TZ)"

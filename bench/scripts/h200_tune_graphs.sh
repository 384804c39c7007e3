#!/usr/bin/env bash
# Graph tuning on the H200 in one device call, after the scoring harness's self-test:
#   run(command="bash bench/scripts/h200_tune_graphs.sh", carry=["dist"], kind="nvidia-h200")
# Steps 1-2 are skipped with SKIP_SCORE=1 (e.g. a second call: MODELS="bert_layer::320:32").
# 1. bench/harness/score.py --self-test: the planted-cheat suite (bench/harness/cheats) under the
#    hardened checks.
# 2. matmul_square_4096 of bench/suites/level1.json scored from the committed matmul log (replay
#    -> artifact -> score.py with eager / eager without TF32 baselines).
# 3. Per model of $MODELS (name[:batch]:trials:per_round): tune-graph on cuda into a fresh log
#    (gradient task scheduler, Ansor §6), run-graph (output check + end-to-end latency + per-task
#    breakdown); for $RR_MODEL also a round-robin run at the same budget for the allocation
#    comparison.
# 4. bench/harness/graph_baseline.py: PyTorch eager and torch.compile on the same graphs.
# Each step has its own time limit (timeout --foreground: the tuner logs its round in flight and
# stops on SIGINT). Everything lands in $OUT/graphs/ and is tarred to $OUT/graphs.tgz.
set -uo pipefail
out="${OUT:-/tmp/out}/graphs${TAG:+-$TAG}"
mkdir -p "$out/logs"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
# The pack's scoring harness carries its device kernels' PTX and the cheats' PTX.
score_py="$root/bench/harness/score.py"
[[ -f "$score_py" ]] || score_py=bench/harness/score.py
MODELS=${MODELS:-"swiglu_mlp::256:32 resnet_block:1:192:32"}
RR_MODEL=${RR_MODEL:-swiglu_mlp}
TUNE_LIMIT_S=${TUNE_LIMIT_S:-90}
TUNE_ARGS=${TUNE_ARGS:-"--warmup 1 --min-runs 3 --min-time-ms 10 --quiet"}
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader

if [[ -z "${SKIP_SCORE:-}" ]]; then
echo "== score.py --self-test"
timeout --foreground 150 python3 "$score_py" --self-test --out "$out/selftest" 2>&1 | tail -25

echo "== score matmul_square_4096 from the committed matmul log"
tar -xJf bench/logs/h200-2026-11-30-ops-tuned-1000-trials.tar.xz -C "$out" h200-2026-11-30-ops-tuned-1000-trials/matmul_xgboost.jsonl
"$ts" replay --log "$out/h200-2026-11-30-ops-tuned-1000-trials/matmul_xgboost.jsonl" --op matmul --shape 4096x4096 \
  --shape 4096x4096 --target cuda --name matmul_square_4096 --out "$out/artifacts" 2>&1 | tail -3
timeout --foreground 120 python3 "$score_py" --suite bench/suites/level1.json \
  --artifacts "$out/artifacts" --problems matmul_square_4096 --baselines eager,eager_no_tf32 \
  --out "$out/score_level1_matmul" 2>&1 | tail -12
rm -rf "$out/h200-2026-11-30-ops-tuned-1000-trials"
fi

baseline_models=()
for spec in $MODELS; do
  IFS=: read -r model batch trials per_round <<<"$spec"
  tag="$model${batch:+_b$batch}"
  bflag=${batch:+--batch $batch}
  baseline_models+=("--model" "$model${batch:+:$batch}")
  runs=(gradient)
  [[ "$model" == "$RR_MODEL" ]] && runs+=(round_robin)
  for mode in "${runs[@]}"; do
    rr=""; [[ $mode == round_robin ]] && rr="--round-robin"
    echo "== tune-graph $tag $mode: $trials trials, $per_round per round"
    start=$(date +%s)
    timeout --foreground -s INT "$TUNE_LIMIT_S" "$ts" tune-graph --model "$model" $bflag \
      --target cuda --trials "$trials" --per-round "$per_round" $rr $TUNE_ARGS \
      --log "$out/logs/${tag}_$mode.jsonl" --json "$out/${tag}_${mode}_tune.json" 2>&1 | tail -30
    echo "tune-graph $tag $mode: rc ${PIPESTATUS[0]}, $(($(date +%s) - start)) s"
  done
  echo "== run-graph $tag"
  timeout --foreground 90 "$ts" run-graph --model "$model" $bflag --target cuda \
    --log "$out/logs/${tag}_gradient.jsonl" --allow-untuned --check unscheduled \
    --json "$out/${tag}_run.json" 2>&1 | tail -30
done

echo "== PyTorch baselines"
timeout --foreground 240 python3 bench/harness/graph_baseline.py "${baseline_models[@]}" \
  --json "$out/pytorch_graphs.json" 2>&1 | grep -v Warning | tail -8
echo "== done $(date -u +%FT%TZ)"
cd "$(dirname "$out")" && tar czf "$(basename "$out").tgz" "$(basename "$out")" && rm -rf "$out"

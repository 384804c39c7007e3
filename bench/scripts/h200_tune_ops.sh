#!/usr/bin/env bash
# Tuning jobs of single operators side by side on the GPUs of one H200 host, in one device call
# (README.md at the repo root, the paragraph "On the H200 (no LLVM there)", says how the device
# pack is built and carried):
#   run(command="bash bench/scripts/h200_tune_ops.sh", carry=["dist"], kind="nvidia-h200-x8")
# Tunes each job of $JOBS (default: matmul 4096^3, softmax 4096x4096 and a ResNet-50 conv2d
# layer, each with the XGBoost model and with RandomModel) for $TRIALS trials, the jobs side by
# side: job i on GPU i mod #GPUs, each pinned to its own share of the cores (taskset; tilesearch's
# worker pools follow the affinity mask). PyTorch eager runs the same shapes on the last GPU
# (same method: bench/harness/pytorch_baseline.py) in the same call. A job still running at $LIMIT_S
# seconds gets SIGINT: the tuner finishes and logs its round and stops (the log says how far it
# got); KILL_S (default 120) seconds later SIGKILL. --foreground: without it timeout signals the job's process group as well as the job, so
# the tuner saw two interrupts and dropped the round in flight. Then per job: `tilesearch inspect` (curve, 90%-of-best trial, model quality per round) and
# `tilesearch replay` (best record rebuilt, re-checked on the GPU, artifacts written; at most
# REPLAY_S seconds each, default 120). Worst case: LIMIT_S + KILL_S + #jobs × REPLAY_S, plus
# seconds of inspect and tar.
# Exit status: 2 for a refused setting; else the first failing tuning job's status (124, stopped
# at LIMIT_S, is not a failure) or replay's, after the tar.
# Everything lands in $OUT/tune/ and is tarred to $OUT/tune.tgz (the device tool brings back
# at most 8 files).
set -uo pipefail
out="${OUT:-/tmp/out}/tune"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"  # TS_ROOT: already unpacked
[[ -n "$root" && -f "$root/run" && -x "$root/run" ]] || {
  echo "no unpacked device pack at '$root' (dist/unpack.sh failed?)"; exit 2; }
ts="$root/run"  # sets the library path for the packed libxgboost
TRIALS=${TRIALS:-1000}
LIMIT_S=${LIMIT_S:-450}
KILL_S=${KILL_S:-120}
REPLAY_S=${REPLAY_S:-120}
for v in LIMIT_S KILL_S REPLAY_S; do  # `timeout 0` would mean no limit at all
  [[ "${!v}" =~ ^[0-9]+$ ]] && (( 10#${!v} > 0 )) || { echo "$v=${!v}: want seconds > 0"; exit 2; }
done
LIMIT_S=$((10#$LIMIT_S)) KILL_S=$((10#$KILL_S)) REPLAY_S=$((10#$REPLAY_S))
# Tuning-time measurement: 1 warm-up, >= 3 timed runs and >= 10 ms (each after an L2 flush), a
# candidate over 5 s is a run_timeout; the best records are re-timed by replay's check.
TUNE_ARGS=${TUNE_ARGS:-"--warmup 1 --min-runs 3 --min-time-ms 10 --run-timeout-ms 5000"}
# Jobs in GPU blocks (job i on GPU i*#GPUs/#jobs): each matmul job (the slow one to measure) shares
# its GPU with cheap ones; conv2d:xgboost-nox (crossover off) is the crossover A/B against
# conv2d:xgboost.
JOBS=${JOBS:-"matmul:xgboost softmax:xgboost conv2d:random conv2d:xgboost-nox matmul:random softmax:random conv2d:xgboost"}
# A job may carry its own budget: op:model:trials (default $TRIALS).
# A log under $RESUME_DIR/<job>.jsonl (e.g. from an earlier call, in the working tree) is resumed.
RESUME_DIR=${RESUME_DIR:-}
# Jobs already tuned (op:model; logs in $RESUME_DIR): not tuned again, only inspected and replayed.
DONE_JOBS=${DONE_JOBS:-}
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" 2>/dev/null | tr '\n' ' ')"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv | tee "$out/gpu.csv"
ngpu=$(nvidia-smi -L | wc -l)
ncpu=$(nproc)
read -r -a jobs <<<"$JOBS"
njobs=${#jobs[@]}
echo "gpus $ngpu, cores $ncpu, jobs $njobs: ${jobs[*]}; trials $TRIALS, limit ${LIMIT_S}s, $TUNE_ARGS"

shape_args() {  # OP -> tilesearch workload arguments
  case "$1" in
    matmul) echo "--op matmul --shape 4096x4096 --shape 4096x4096" ;;
    softmax) echo "--op softmax --shape 4096x4096" ;;
    # ResNet-50 conv4_x bottleneck 3x3 convolution, batch 1: 256 -> 256 channels, 14x14, pad 1.
    conv2d) echo "--op conv2d_nchw --shape 1x256x14x14 --shape 256x256x3x3 --attr padding=1 --attr stride=1" ;;
  esac
}

# A job's model: xgboost, random, xgboost-nox (XGBoost with crossover off: the crossover A/B) or
# xgboost-nols / xgboost-ls (XGBoost with local search off / at 0.25: the local-search A/B;
# the default is off).
model_args() {
  case "$1" in
    xgboost-nox) echo "--model xgboost --crossover-probability 0" ;;
    xgboost-nols) echo "--model xgboost --local-search-fraction 0" ;;
    xgboost-ls) echo "--model xgboost --local-search-fraction 0.25" ;;
    *) echo "--model $1" ;;
  esac
}

# PyTorch eager on the last GPU while the tuning jobs run on the others (if there are more GPUs
# than jobs; else before them, while the GPUs are idle).
baseline() {
  TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu$((ngpu - 1)).lock CUDA_VISIBLE_DEVICES=$((ngpu - 1)) PYTHONUNBUFFERED=1 timeout 240 python3 bench/harness/pytorch_baseline.py \
    --case matmul:4096x4096x4096 --case softmax:4096x4096 --case conv2d:1x256x14x14x256x3x3x1x1 \
    --json "$out/pytorch.json" >"$out/pytorch.txt" 2>&1
}
if [[ -n "${NO_BASELINE:-}" ]]; then :  # an earlier call of the same pack measured it
elif (( ngpu > njobs )); then baseline & bpid=$!; else baseline; fi

per=$(( ncpu / njobs ))
pids=()
for i in "${!jobs[@]}"; do
  IFS=: read -r op model job_trials <<<"${jobs[$i]}"; job_trials=${job_trials:-$TRIALS}
  gpu=$(( i * ngpu / njobs )); lo=$(( i * per )); hi=$(( lo + per - 1 ))
  name="${op}_${model}"
  if [[ -n "$RESUME_DIR" && -f "$RESUME_DIR/$name.jsonl" ]]; then cp "$RESUME_DIR/$name.jsonl" "$out/"; fi
  echo "== $name on GPU $gpu, cores $lo-$hi"
  # shellcheck disable=SC2046
  TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu$gpu.lock CUDA_VISIBLE_DEVICES=$gpu timeout --foreground -s INT -k "$KILL_S" "$LIMIT_S" taskset -c "$lo-$hi" \
    "$ts" tune $(shape_args "$op") --target cuda --trials "$job_trials" $(model_args "$model") --seed 1 \
    $TUNE_ARGS --log "$out/$name.jsonl" >"$out/$name.out" 2>"$out/$name.err" &
  pids+=($!)
done
sleep 2; bash bench/scripts/monitor_jobs.sh 15 $((LIMIT_S + 200)) >"$out/monitor.txt" 2>&1 &
monitor_pid=$!
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"; job_rc=$?
  if (( job_rc != 0 && job_rc != 124 )); then
    echo "tuning job ${jobs[$i]}: rc $job_rc"
    (( rc == 0 )) && rc=$job_rc
  fi
done
kill "$monitor_pid" 2>/dev/null  # it stops by itself once no tuner runs, within 15 s
[[ -n "${bpid:-}" ]] && wait "$bpid"
echo "== tuning done $(date -u +%FT%TZ)"
cat "$out/pytorch.txt" 2>/dev/null

read -r -a done_jobs <<<"$DONE_JOBS"
for j in "${done_jobs[@]}"; do
  IFS=: read -r op model _ <<<"$j"
  cp "$RESUME_DIR/${op}_${model}.jsonl" "$out/"
done
for j in "${jobs[@]}" "${done_jobs[@]}"; do
  IFS=: read -r op model _ <<<"$j"; name="${op}_${model}"
  echo "== $name"; tail -3 "$out/$name.err"; cat "$out/$name.out"
  "$ts" inspect --log "$out/$name.jsonl" --json "$out/inspect_$name.json" 2>&1 | head -60
  [[ -n "${SKIP_REPLAY:-}" ]] && continue  # an intermediate call: the logs are what matters
  # shellcheck disable=SC2046
  CUDA_VISIBLE_DEVICES=0 timeout "$REPLAY_S" "$ts" replay --log "$out/$name.jsonl" $(shape_args "$op") \
    --target cuda --out "$out/replay_$name" 2>&1 | tail -12
  replay_rc=${PIPESTATUS[0]}
  if (( replay_rc != 0 )); then
    echo "replay $name: rc $replay_rc"
    (( rc == 0 )) && rc=$replay_rc
  fi
done
for op in matmul softmax conv2d; do
  [[ -f "$out/${op}_xgboost.jsonl" && -f "$out/${op}_random.jsonl" ]] || continue
  logs=(--log "$out/${op}_xgboost.jsonl" --log "$out/${op}_random.jsonl")
  [[ -f "$out/${op}_xgboost-nox.jsonl" ]] && logs+=(--log "$out/${op}_xgboost-nox.jsonl")
  "$ts" inspect "${logs[@]}" --plot "$out/curve_$op.svg" >/dev/null 2>&1
done
echo "== done $(date -u +%FT%TZ)"
tar czf "${OUT:-/tmp/out}/tune.tgz" -C "$(dirname "$out")" tune || { (( rc == 0 )) && rc=1; }
exit "$rc"

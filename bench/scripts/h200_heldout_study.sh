#!/usr/bin/env bash
# How the shipped cost model transfers to workloads it never saw: the held-out workloads of
# bench/heldout_workloads.txt (no committed log holds them; train_default_model.sh drops them),
# each tuned and predicted on the H200 in one device call (pack: tools/pack_device.sh):
#   run(command='CASES="matmul_odd_fp32 dense_bias_gelu_fp32 conv2d_3x3_fp32 reduce_sum_rows_fp32" bash bench/scripts/h200_heldout_study.sh', carry=["dist"], kind="nvidia-h200")
# Per workload, in this order, every command under `timeout`, a failure noted and the rest run:
#   predict     `tilesearch predict` (no measurement) from the committed H200 logs of the same
#               operator, held-out records left out (heldout_workloads.py pool), ranked by the
#               default model: the zero-shot schedule, written as predicted.json;
#   long        `tune` LONG_TRIALS trials from an empty log, default options (the shipped model
#               is the default --model-init on cuda): the reference best;
#   pretrained  `tune` SHORT_TRIALS trials from an empty log, default options;
#   online      `tune` SHORT_TRIALS trials from an empty log, --model-init none (online only);
#   measure     the long run's best record (logged_best_schedule.py) and predicted.json, each
#               by `tilesearch measure` (check, then time), one after the other, so
#               predicted / tuned is a like-for-like ratio.
# Then bench/scripts/heldout_study_report.py writes the table (trials to 90 % of the long run's
# best, best after SHORT_TRIALS over it, the zero-shot ratio, trials/s of every run).
# Environment: CASES (names from the workloads file, default all; split them over calls: about
# 100-130 s each), LONG_TRIALS (1000), SHORT_TRIALS (64), SEED (0), TARGET (cuda), CALL_S (the
# call's budget in seconds, default 560: a case is not started with fewer than CASE_MIN_S, default
# 150, left, and its long tune is cut (SIGINT: the round in flight is logged) to leave the rest of
# the case 50 s after its KILL_S; the table notes a long run cut short),
# LONG_S / SHORT_S / PREDICT_S / MEASURE_S (per-command limits: 200 / 90 / 120 / 120; SIGINT,
# then SIGKILL KILL_S, default 20, later),
# PARTS (which of predict, long, pretrained, online, measure to run; default all: a later call can
# run the short tunes again, e.g. with another SEED, and the report reads the long runs of an
# earlier call copied into the same folders),
# MODEL_INIT (a model file for the long and pretrained tunes and for predict; default: the shipped
# model of the target; required on cpu), PREDICT_LOGS (archives predict transfers from, set and
# empty: none; default bench/logs/h200-*.tar.xz), LONG_FROM (a folder of an earlier call's
# workload folders: without the long part, each workload's long.jsonl is copied from
# LONG_FROM/<name>/ first, so measure and the report compare against that call's long run;
# e.g. bench/logs/h200-2026-12-03-heldout-study.tar.xz extracted), WORKLOADS (default
# bench/heldout_workloads.txt), TILESEARCH (a
# tilesearch binary instead of the unpacked device pack), WORK (where the scratch folder
# heldout-study-work is made, emptied first; default /tmp).
# A test of the plumbing on the host CPU (small workloads, minutes):
#   TARGET=cpu TILESEARCH=build/tools/tilesearch WORKLOADS=small.txt LONG_TRIALS=24 \
#     SHORT_TRIALS=8 PREDICT_LOGS='bench/logs/cpu-*.tar.xz' MODEL_INIT=m.model OUT=/tmp/o \
#     bash bench/scripts/h200_heldout_study.sh
# Output: $OUT/heldout-study/{run.log,table.md} and $OUT/heldout-study.tgz (the per-workload
# folders: logs, tune / predict / measure outputs, times.tsv), written again after every
# workload so a cut call still returns what it finished.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top="${OUT:-/tmp/out}"
out="$top/heldout-study"
# Only a folder of this script's own name inside WORK is ever removed.
work_root="${WORK:-/tmp}/heldout-study-work"
work="$work_root/heldout-study"
mkdir -p "$out"
rm -rf "$work_root"
mkdir -p "$work"
exec > >(tee -a "$out/run.log") 2>&1
call_start=$(date +%s)
CALL_S=${CALL_S:-560}
CASE_MIN_S=${CASE_MIN_S:-150}
LONG_TRIALS=${LONG_TRIALS:-1000}
SHORT_TRIALS=${SHORT_TRIALS:-64}
SEED=${SEED:-0}
TARGET=${TARGET:-cuda}
LONG_S=${LONG_S:-200}
SHORT_S=${SHORT_S:-90}
PREDICT_S=${PREDICT_S:-120}
MEASURE_S=${MEASURE_S:-120}
KILL_S=${KILL_S:-20}
WORKLOADS=${WORKLOADS:-bench/heldout_workloads.txt}
PREDICT_LOGS=${PREDICT_LOGS-bench/logs/h200-*.tar.xz}  # set and empty: no archives
[[ "$SEED" =~ ^[0-9]+$ ]] || { echo "SEED=$SEED: want an integer >= 0"; exit 2; }
for v in CALL_S CASE_MIN_S LONG_TRIALS SHORT_TRIALS LONG_S SHORT_S PREDICT_S MEASURE_S KILL_S; do
  if ! [[ "${!v}" =~ ^[0-9]+$ ]] || (( 10#${!v} == 0 )); then
    echo "$v=${!v}: want an integer > 0"; exit 2
  fi
  printf -v "$v" '%d' "$((10#${!v}))"
done
PARTS=${PARTS:-predict long pretrained online measure}
for p in $PARTS; do
  case "$p" in predict|long|pretrained|online|measure) ;;
    *) echo "PARTS=$PARTS: unknown part '$p' (want some of predict long pretrained online measure)"
       exit 2 ;;
  esac
done
read -r -a parts_list <<<"$PARTS"
(( ${#parts_list[@]} )) || { echo "PARTS is blank: nothing to run"; exit 2; }
PARTS="${parts_list[*]}"
part() { [[ " $PARTS " == *" $1 "* ]]; }
if [[ -n "${MODEL_INIT:-}" && "$MODEL_INIT" != none && ! -f "$MODEL_INIT" ]]; then
  echo "MODEL_INIT=$MODEL_INIT: no such model file"; exit 2
fi
if [[ "$TARGET" != cuda* && -z "${MODEL_INIT:-}" ]] && { part long || part pretrained || part predict; }; then
  echo "TARGET=$TARGET has no shipped model: set MODEL_INIT to a model of it (train-model), or" \
    "the long and pretrained tunes would be online only"; exit 2
fi
stamp() { date -u +%FT%TZ; }
left() { echo $(( CALL_S - ($(date +%s) - call_start) )); }
# cap LIMIT RESERVE: LIMIT, or less so that RESERVE seconds of the call stay after the command's
# limit and its KILL_S of grace; 0 when under 5 s.
cap() {
  local l; l=$(( $(left) - $2 - KILL_S )); (( l > $1 )) && l=$1; (( l < 5 )) && l=0; echo "$l"
}

if [[ -n "${TILESEARCH:-}" ]]; then
  ts="$TILESEARCH"
  echo "== $(stamp) $(uname -n), $(nproc) cores; binary $ts"
else
  root="$(bash dist/unpack.sh | tail -1)"
  ts="$root/run"
  echo "== $(stamp) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
fi
[[ -x "$ts" ]] || { echo "no tilesearch at '$ts'"; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm \
  --format=csv,noheader
echo "target $TARGET, long $LONG_TRIALS trials, short $SHORT_TRIALS, seed $SEED, call budget" \
  "${CALL_S} s; git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
mapfile -t cases < <(python3 bench/scripts/heldout_workloads.py --file "$WORKLOADS" list \
  --cases "${CASES:-}") || true
(( ${#cases[@]} )) || { echo "no workloads selected (CASES='${CASES:-}')"; exit 2; }
init_args=(); predict_model=()
if [[ -n "${MODEL_INIT:-}" ]]; then
  init_args=(--model-init "$MODEL_INIT"); predict_model=(--model "$MODEL_INIT")
fi

# The logs predict transfers from: the archives' records, one file per operator, held-out
# workloads left out.
echo "== $(stamp) predict pool from $PREDICT_LOGS"
mkdir -p "$work_root/archives"
for a in $PREDICT_LOGS; do
  [[ -f "$a" ]] || { echo "no archive $a"; continue; }
  mkdir -p "$work_root/archives/$(basename "$a" .tar.xz)"
  tar -xJf "$a" -C "$work_root/archives/$(basename "$a" .tar.xz)" || echo "tar $a: rc $?"
done
pool="$work_root/pool"
python3 bench/scripts/heldout_workloads.py --file "$WORKLOADS" pool --out-dir "$pool" \
  "$work_root/archives" | tee "$work/predict_pool.txt"
rm -rf "$work_root/archives"

# timed NAME LIMIT DIR CMD...: runs CMD under `timeout` (SIGINT at LIMIT: a tune logs the round
# in flight and stops; SIGKILL KILL_S later; --foreground: the signal reaches the command only),
# its output in DIR/NAME.out, and appends "NAME wall_s rc limit_s" to DIR/times.tsv. LIMIT 0:
# not run (the call's budget is spent).
timed() {
  local name=$1 limit=$2 dir=$3 t0 t1 rc; shift 3
  if (( limit == 0 )); then
    echo "-- $(stamp) $name: not run, $(left) s left of the call"
    printf "%s\t0\tnot_run\t0\n" "$name" >>"$dir/times.tsv"; return 0
  fi
  echo "-- $(stamp) $name (limit $limit s): ${*:2}"
  t0=$EPOCHREALTIME
  timeout --foreground -s INT -k "$KILL_S" "$limit" "$@" >"$dir/$name.out" 2>&1
  rc=$?
  t1=$EPOCHREALTIME
  printf "%s\t%s\t%s\t%s\n" "$name" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" \
    "$rc" "$limit" >>"$dir/times.tsv"
  grep -E "^(prediction|candidates|best|trials|untuned|time|check|errors):|^tilesearch: error" \
    "$dir/$name.out" | tail -6
  echo "   $name: rc $rc, $(tail -1 "$dir/times.tsv" | cut -f2) s"
}

finish() {
  python3 bench/scripts/heldout_study_report.py --workloads "$WORKLOADS" --out "$out/table.md" \
    "$work" >"$work/report.out" 2>&1 || echo "report: rc $? (see report.out)"
  cp "$out/table.md" "$work/" 2>/dev/null
  cp "$out/run.log" "$work/run.log"
  tar czf "$top/heldout-study.tgz" -C "$work_root" heldout-study
}

for c in "${cases[@]}"; do
  IFS='|' read -r name key args <<<"$c"
  d="$work/$name"
  mkdir -p "$d"
  read -r -a argv <<<"$args"
  op="${argv[1]}"
  if (( $(left) < CASE_MIN_S )); then
    echo "== $(stamp) $name: not started, $(left) s left of the call"; continue
  fi
  echo "== $(stamp) $name ($key): $args"
  got=$("$ts" show "${argv[@]}" 2>&1 | sed -n 's/^workload key: //p')
  [[ "$got" == "$key" ]] || echo "WARNING: $name: tilesearch show gives key '$got', the file $key"
  printf "name\t%s\nkey\t%s\nshow_key\t%s\nargs\t%s\ntarget\t%s\nlong_trials\t%s\n" \
    "$name" "$key" "$got" "$args" "$TARGET" "$LONG_TRIALS" >"$d/case.tsv"
  printf "short_trials\t%s\nseed\t%s\nmodel_init\t%s\n" "$SHORT_TRIALS" "$SEED" \
    "${MODEL_INIT:-default}" >>"$d/case.tsv"
  : >"$d/times.tsv"
  if ! part long && [[ -n "${LONG_FROM:-}" ]]; then
    if [[ -s "$LONG_FROM/$name/long.jsonl" ]]; then
      cp "$LONG_FROM/$name/long.jsonl" "$d/long.jsonl"
      printf "long_from\t%s\n" "$LONG_FROM/$name/long.jsonl" >>"$d/case.tsv"
    else
      echo "   $name: LONG_FROM=$LONG_FROM has no $name/long.jsonl"
    fi
  fi
  logs=(); [[ -s "$pool/$op.jsonl" ]] && logs=(--log "$pool/$op.jsonl")
  part predict && timed predict "$(cap "$PREDICT_S" 120)" "$d" "$ts" predict "${argv[@]}" --target "$TARGET" \
    "${predict_model[@]}" "${logs[@]}" --no-check --schedule-out "$d/predicted.json"
  part long && timed long "$(cap "$LONG_S" 50)" "$d" "$ts" tune "${argv[@]}" --target "$TARGET" \
    --trials "$LONG_TRIALS" --seed "$SEED" --log "$d/long.jsonl" "${init_args[@]}"
  part pretrained && timed pretrained "$(cap "$SHORT_S" 25)" "$d" "$ts" tune "${argv[@]}" --target "$TARGET" \
    --trials "$SHORT_TRIALS" --seed "$SEED" --log "$d/pretrained.jsonl" "${init_args[@]}"
  part online && timed online "$(cap "$SHORT_S" 12)" "$d" "$ts" tune "${argv[@]}" --target "$TARGET" \
    --trials "$SHORT_TRIALS" --seed "$SEED" --log "$d/online.jsonl" --model-init none
  if ! part measure; then
    :
  elif [[ -s "$d/long.jsonl" ]] && python3 bench/scripts/logged_best_schedule.py "$d/long.jsonl" \
      "$d/tuned.json"; then
    timed measure_tuned "$(cap "$MEASURE_S" 5)" "$d" "$ts" measure --schedule "$d/tuned.json" \
      --target "$TARGET" --json "$d/measure_tuned.json"
  else
    echo "   $name: no valid record in long.jsonl, nothing to measure"
  fi
  if part measure && [[ -s "$d/predicted.json" ]]; then
    timed measure_predicted "$(cap "$MEASURE_S" 0)" "$d" "$ts" measure --schedule \
      "$d/predicted.json" --target "$TARGET" --json "$d/measure_predicted.json"
  fi
  finish
done
echo "== $(stamp) done, $(( $(date +%s) - call_start )) s"
finish
cat "$out/table.md" 2>/dev/null

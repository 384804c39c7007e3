#!/usr/bin/env bash
# Tuning throughput with and without overlapped rounds (`tune --overlap-rounds on|off`), one call:
#   run(command="bash bench/scripts/h200_overlap_rounds_ab.sh", carry=["dist"], kind="nvidia-h200")
# Each case is tuned from an empty log twice with the same seed and budget, first with
# --overlap-rounds off, then on (defaults otherwise: the shipped model, local search 0.25 on
# cuda). Prints per tune: wall seconds, trials per second (trials / wall), the best median and the
# sums of the round lines' phases (bench/scripts/round_phase_sums.py); `tilesearch inspect` of
# each log. Then the two best records of each case (written as schedule files by
# round_phase_sums.py) are timed again by `tilesearch measure`, one after the other, so the bests
# are compared by one method in one place rather than across the tunes' own timings.
# Environment: TRIALS per tune (default 256); TUNE_S wall seconds per tune (default 100; SIGINT,
# the round in flight is logged); CASES "name|dtype|A shape|B shape ..." (default fp32 and bf16
# matmul 4096³); SEED (default 3).
# Output: $OUT/overlap-ab/{run.log, logs/<name>-<off|on>.jsonl, inspect.txt}, tarred into
# $OUT/overlap-ab.tgz.
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/overlap-ab"
mkdir -p "$out/logs"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
trials=${TRIALS:-256}
seed=${SEED:-3}
if [[ -n "${CASES:-}" ]]; then
  read -r -a cases <<<"$CASES"
else
  cases=("matmul4096_fp32|float32|4096x4096|4096x4096" "matmul4096_bf16|bfloat16|4096x4096|4096x4096")
fi
for c in "${cases[@]}"; do
  IFS='|' read -r name dtype a_shape b_shape <<<"$c"
  for mode in off on; do
    log="$out/logs/$name-$mode.jsonl"
    echo "== $(date -u +%FT%TZ) tune $name overlap $mode ($trials trials, seed $seed)"
    t0=$(date +%s.%N)
    timeout -s INT -k 30 "${TUNE_S:-100}" "$ts" tune --op matmul --shape "$a_shape" \
      --shape "$b_shape" --dtype "$dtype" --target cuda --trials "$trials" --seed "$seed" \
      --overlap-rounds "$mode" --log "$log" 2>&1 | tail -2
    t1=$(date +%s.%N)
    python3 bench/scripts/round_phase_sums.py "$log" --wall "$(python3 -c "print($t1 - $t0)")" \
      --label "$name overlap $mode" --best-schedule "$out/logs/$name-$mode.best.schedule.json"
    "$ts" inspect --log "$log" >>"$out/inspect.txt" 2>&1
  done
  echo "== $(date -u +%FT%TZ) $name: the two bests timed again, back to back"
  for mode in off on; do
    sched="$out/logs/$name-$mode.best.schedule.json"
    [[ -f "$sched" ]] || { echo "$name $mode: no best schedule"; continue; }
    printf '%s %s: ' "$name" "$mode"
    timeout 60 "$ts" measure --schedule "$sched" --target cuda --min-runs 50 2>&1 |
      grep -E "^(time|check|FAILED)" | tr '\n' ' '
    echo
  done
done
tar czf "$top/overlap-ab.tgz" -C "$top" overlap-ab
rm -rf "$out"
echo "== done $(date -u +%FT%TZ)"

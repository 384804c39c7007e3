#!/usr/bin/env bash
# A/B of one `tilesearch tune` option in one device call:
#   run(command="OPTION=--family-dominance VALUES='2 0' bash bench/scripts/h200_tune_option_ab.sh",
#       carry=["dist"], kind="nvidia-h200")
# Each case is tuned from an empty log once per value of OPTION, with the same seed and budget
# (defaults otherwise: the shipped model, local search 0.25 on cuda). Prints per tune: wall
# seconds, trials per second (trials / wall), the best median, the sums of the round lines'
# phases and the trials per sketch family (bench/scripts/round_phase_sums.py); `tilesearch
# inspect` of each log. Then the best record of each tune (written as a schedule file by
# round_phase_sums.py) is timed again by `tilesearch measure`, one after the other, so the bests
# are compared by one method in one place rather than across the tunes' own timings.
# Environment: OPTION (required, e.g. --overlap-rounds) and VALUES (required, e.g. "off on");
# TRIALS per tune (default 256); TUNE_S wall seconds per tune (default 100; SIGINT, the round in
# flight is logged); CASES "name|dtype|A shape|B shape ..." (default fp32 and bf16 matmul 4096³);
# SEED (default 3); TAG output folder name (default: the option without dashes).
# Output: $OUT/<TAG>/{run.log, logs/<name>-<value>.jsonl, inspect.txt}, tarred into
# $OUT/<TAG>.tgz.
set -uo pipefail
[[ -n "${OPTION:-}" && -n "${VALUES:-}" ]] || { echo "OPTION and VALUES are required"; exit 2; }
read -r -a values <<<"$VALUES"
tag=${TAG:-${OPTION#--}-ab}
top="${OUT:-/tmp/out}"
out="$top/$tag"
mkdir -p "$out/logs"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
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
  for v in "${values[@]}"; do
    log="$out/logs/$name-$v.jsonl"
    echo "== $(date -u +%FT%TZ) tune $name $OPTION $v ($trials trials, seed $seed)"
    t0=$(date +%s.%N)
    timeout -s INT -k 30 "${TUNE_S:-100}" "$ts" tune --op matmul --shape "$a_shape" \
      --shape "$b_shape" --dtype "$dtype" --target cuda --trials "$trials" --seed "$seed" \
      "$OPTION" "$v" --log "$log" 2>&1 | tail -2
    t1=$(date +%s.%N)
    python3 bench/scripts/round_phase_sums.py "$log" --wall "$(python3 -c "print($t1 - $t0)")" \
      --label "$name $OPTION $v" --best-schedule "$out/logs/$name-$v.best.schedule.json"
    "$ts" inspect --log "$log" >>"$out/inspect.txt" 2>&1
  done
  echo "== $(date -u +%FT%TZ) $name: the bests timed again, back to back"
  for v in "${values[@]}"; do
    sched="$out/logs/$name-$v.best.schedule.json"
    [[ -f "$sched" ]] || { echo "$name $v: no best schedule"; continue; }
    printf '%s %s %s: ' "$name" "$OPTION" "$v"
    timeout 60 "$ts" measure --schedule "$sched" --target cuda --min-runs 50 2>&1 |
      grep -E "^(time|check|FAILED)" | tr '\n' ' '
    echo
  done
done
tar czf "$top/$tag.tgz" -C "$top" "$tag"
rm -rf "$out"
echo "== done $(date -u +%FT%TZ)"

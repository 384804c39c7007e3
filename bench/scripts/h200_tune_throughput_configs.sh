#!/usr/bin/env bash
# Tuning throughput of one case under several search settings, one device call (pack:
# tools/pack_device.sh):
#   run(command="bash bench/scripts/h200_tune_throughput_configs.sh", carry=["dist"], kind="nvidia-h200")
# Each config tunes the same case from an empty log with the same seed; printed per config: wall,
# checked trials/s, the round lines' phase sums (bench/scripts/round_phase_sums.py), the best and
# the trial that found it (`tilesearch inspect`).
# Environment: TRIALS (default 512), SEED (default 3), TUNE_S wall seconds per config (default
# 150; SIGINT, the round in flight is logged), CASE "name|dtype|A shape|B shape" (default fp32
# matmul 4096³), CONFIGS: ';'-separated "label:extra tune arguments" (default: the population of
# 2048 against 512, and 512 with 128 trials per round).
# Output: $OUT/throughput/{run.log, <label>.jsonl, <label>.inspect.txt} tarred into
# $OUT/throughput.tgz.
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/throughput"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
trials=${TRIALS:-512}
seed=${SEED:-3}
IFS='|' read -r name dtype a_shape b_shape <<<"${CASE:-matmul4096_fp32|float32|4096x4096|4096x4096}"
configs="${CONFIGS:-pop2048:--population 2048;pop512:--population 512;pop512_round128:--population 512 --per-round 128}"
IFS=';' read -r -a list <<<"$configs"
for c in "${list[@]}"; do
  label="${c%%:*}"
  extra="${c#*:}"
  log="$out/$name-$label.jsonl"
  echo "== $(date -u +%FT%TZ) tune $name, $label ($trials trials, seed $seed): $extra"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout -s INT -k 30 "${TUNE_S:-150}" "$root/run" tune --op matmul --shape "$a_shape" \
    --shape "$b_shape" --dtype "$dtype" --target cuda --trials "$trials" --seed "$seed" \
    --log "$log" $extra 2>&1 | tail -3
  t1=$(date +%s.%N)
  python3 bench/scripts/round_phase_sums.py "$log" --wall "$(python3 -c "print($t1 - $t0)")" \
    --label "$name-$label"
  "$root/run" inspect --log "$log" >"$out/$name-$label.inspect.txt" 2>&1
  grep -E "trials [0-9]+, valid|time over|measure split" "$out/$name-$label.inspect.txt"
done
tar czf "$top/throughput.tgz" -C "$top" throughput
echo "== done $(date -u +%FT%TZ)"

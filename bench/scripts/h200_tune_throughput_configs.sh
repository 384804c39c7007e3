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
# Each tune's host CPU use is sampled from /proc/stat every second (<label>.cpu.txt: seconds since
# the start, busy cores of the machine's) and summarized (mean busy cores, share of seconds with
# fewer than half the cores busy): whether the host is the limit or waits.
# Output: $OUT/throughput/{run.log, <label>.jsonl, <label>.inspect.txt, <label>.cpu.txt} tarred into
# $OUT/throughput.tgz.
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/throughput"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|CPU max MHz)" || true

# cpu_sampler FILE: appends "seconds busy_cores" once a second until killed.
cpu_sampler() {
  exec python3 - "$1" <<'PY'
import os, sys, time
def read():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]  # total jiffies, idle + iowait
n, t0 = os.cpu_count(), time.time()
tot, idle = read()
with open(sys.argv[1], "w", buffering=1) as out:
    while True:
        time.sleep(1)
        t2, i2 = read()
        busy = n * (1 - (i2 - idle) / max(1, t2 - tot))
        out.write(f"{time.time() - t0:.1f} {busy:.2f}\n")
        tot, idle = t2, i2
PY
}
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
  cpu_sampler "$out/$name-$label.cpu.txt" &
  sampler=$!
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout -s INT -k 30 "${TUNE_S:-150}" "$root/run" tune --op matmul --shape "$a_shape" \
    --shape "$b_shape" --dtype "$dtype" --target cuda --trials "$trials" --seed "$seed" \
    --log "$log" $extra 2>&1 | tail -3
  t1=$(date +%s.%N)
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  python3 - "$out/$name-$label.cpu.txt" "$(nproc)" <<'PY'
import sys
busy = [float(l.split()[1]) for l in open(sys.argv[1]) if len(l.split()) == 2]
n = int(sys.argv[2])
if busy:
    print(f"host cpu: mean {sum(busy) / len(busy):.1f} of {n} cores busy over {len(busy)} s; "
          f"{sum(b < n / 2 for b in busy) / len(busy):.0%} of seconds under half busy")
PY
  python3 bench/scripts/round_phase_sums.py "$log" --wall "$(python3 -c "print($t1 - $t0)")" \
    --label "$name-$label"
  "$root/run" inspect --log "$log" >"$out/$name-$label.inspect.txt" 2>&1
  grep -E "trials [0-9]+, valid|time over|measure split" "$out/$name-$label.inspect.txt"
done
tar czf "$top/throughput.tgz" -C "$top" throughput
echo "== done $(date -u +%FT%TZ)"

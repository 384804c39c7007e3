#!/usr/bin/env bash
# Tuning through MPI on the H200 beside the single-process run of the same seed and budget, one
# device call (the pack from `MPICH_WHEEL=... tools/pack_device.sh --mpi`):
#   run(command="bash bench/scripts/h200_mpi_tune.sh", carry=["dist"], kind="nvidia-h200")
# On a one-GPU machine every rank uses device 0 and the ranks take turns through the device lock;
# each builds its share of a round on its own host cores. Prints per tune: wall seconds, trials
# per second, the best (bench/scripts/round_phase_sums.py) and, for the MPI run, each rank's trials
# and build / measure / idle seconds summed over the round lines; then the distinct records of each
# log, both bests measured again back to back by `tilesearch measure`, and the MPI log's best
# replayed (with its check) by `tilesearch replay`.
# Environment: RANKS, one MPI run per count (default "2"), TRIALS (default 256), SEED (default 3), TUNE_S wall seconds per
# tune (default 150; SIGINT, the round in flight is logged), CASE "name|dtype|A shape|B shape"
# (default fp32 matmul 4096³).
# Output: $OUT/mpi-tune/{run.log, logs/<name>-{single,mpiN}.jsonl, inspect.txt, replay/} tarred into
# $OUT/mpi-tune.tgz.
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/mpi-tune"
mkdir -p "$out/logs"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
[[ -x "$root/mpiexec" ]] || { echo "the pack has no mpiexec: build it with tools/pack_device.sh --mpi"; exit 2; }
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
rank_counts=(${RANKS:-2})
trials=${TRIALS:-256}
seed=${SEED:-3}
IFS='|' read -r name dtype a_shape b_shape <<<"${CASE:-matmul4096_fp32|float32|4096x4096|4096x4096}"
args=(tune --op matmul --shape "$a_shape" --shape "$b_shape" --dtype "$dtype" --target cuda
  --trials "$trials" --seed "$seed")
modes=(single)
for n in "${rank_counts[@]}"; do modes+=("mpi$n"); done
for mode in "${modes[@]}"; do
  log="$out/logs/$name-$mode.jsonl"
  echo "== $(date -u +%FT%TZ) tune $name, $mode ($trials trials, seed $seed)"
  t0=$(date +%s.%N)
  if [[ $mode == single ]]; then
    timeout -s INT -k 30 "${TUNE_S:-150}" "$root/run" "${args[@]}" --log "$log" 2>&1 | tail -3
  else
    timeout -s INT -k 30 "${TUNE_S:-150}" "$root/mpiexec" -n "${mode#mpi}" tilesearch "${args[@]}" \
      --log "$log" 2>&1 | tail -3
  fi
  t1=$(date +%s.%N)
  python3 bench/scripts/round_phase_sums.py "$log" --wall "$(python3 -c "print($t1 - $t0)")" \
    --label "$name $mode" --best-schedule "$out/logs/$name-$mode.best.schedule.json"
  "$root/run" inspect --log "$log" >>"$out/inspect.txt" 2>&1
done
python3 - "$out"/logs/"$name"-*.jsonl <<'PY'
import collections, json, sys
for path in sys.argv[1:]:
    records, per_rank = [], collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for line in open(path):
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            continue
        if j.get("kind") == "round":
            for r in j.get("ranks", []):
                t = per_rank[r["rank"]]
                t[0] += r["trials"]; t[1] += r["build_s"]; t[2] += r["measure_s"]; t[3] += r["idle_s"]
        elif "steps" in j:
            records.append(json.dumps(j["steps"], sort_keys=True))
    print(f"{path.split('/')[-1]}: {len(records)} records, {len(set(records))} distinct schedules")
    for rank, (n, b, m, i) in sorted(per_rank.items()):
        print(f"  rank {rank}: {n} trials, build {b:.1f} s, measure {m:.1f} s, idle {i:.1f} s")
PY
echo "== $(date -u +%FT%TZ) the bests timed again, back to back"
for mode in "${modes[@]}"; do
  sched="$out/logs/$name-$mode.best.schedule.json"
  [[ -f "$sched" ]] || { echo "$mode: no best schedule"; continue; }
  printf '%s %s: ' "$name" "$mode"
  timeout 60 "$root/run" measure --schedule "$sched" --target cuda --min-runs 50 2>&1 |
    grep -E "^(time|check|FAILED)" | tr '\n' ' '
  echo
done
echo "== replay of the ${modes[1]} log's best"
timeout 120 "$root/run" replay --log "$out/logs/$name-${modes[1]}.jsonl" --op matmul --shape "$a_shape" \
  --shape "$b_shape" --dtype "$dtype" --out "$out/replay" 2>&1 | tail -3
tar czf "$top/mpi-tune.tgz" -C "$top" mpi-tune
rm -rf "$out"
echo "== done $(date -u +%FT%TZ)"

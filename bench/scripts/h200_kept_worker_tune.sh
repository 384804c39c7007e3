#!/usr/bin/env bash
# The measuring worker kept across rounds on the H200, one device call (pack: tools/pack_device.sh):
#   run(command="bash bench/scripts/h200_kept_worker_tune.sh", carry=["dist"], kind="nvidia-h200")
# First the CUDA runner's GPU tests (cuda_runtime_test: the kept worker's among them), then a tune
# of fp32 matmul 4096³ (the throughput case: 7.4 checked trials/s with a worker set up per round,
# bench/results/h200-2026-12-03-mpi-tune.md) with its trials per second, the round lines' phase
# sums (bench/scripts/round_phase_sums.py), each round's measure split (task data, worker setups,
# candidates) and `tilesearch inspect`.
# Environment: TRIALS (default 256), SEED (default 3), TUNE_S wall seconds of the tune (default
# 150; SIGINT, the round in flight is logged), CASE "name|dtype|A shape|B shape" (default fp32
# matmul 4096³), EXTRA extra tune arguments (e.g. "--overlap-rounds off").
# Output: $OUT/kept-worker/{run.log, tests.txt, <name>.jsonl, inspect.txt} tarred into
# $OUT/kept-worker.tgz.
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/kept-worker"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
echo "== $(date -u +%FT%TZ) $(uname -n), $(nproc) cores; pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
echo "== $(date -u +%FT%TZ) GPU tests of the runner"
timeout 900 "$root/run" cuda_runtime_test --gtest_filter='CudaRunner*:DeviceCompare*' \
  >"$out/tests.txt" 2>&1
echo "cuda_runtime_test exit $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran" "$out/tests.txt"
trials=${TRIALS:-256}
seed=${SEED:-3}
IFS='|' read -r name dtype a_shape b_shape <<<"${CASE:-matmul4096_fp32|float32|4096x4096|4096x4096}"
log="$out/$name.jsonl"
echo "== $(date -u +%FT%TZ) tune $name ($trials trials, seed $seed) ${EXTRA:-}"
t0=$(date +%s.%N)
# shellcheck disable=SC2086
timeout -s INT -k 30 "${TUNE_S:-150}" "$root/run" tune --op matmul --shape "$a_shape" \
  --shape "$b_shape" --dtype "$dtype" --target cuda --trials "$trials" --seed "$seed" \
  --log "$log" ${EXTRA:-} 2>&1 | tail -4
t1=$(date +%s.%N)
python3 bench/scripts/round_phase_sums.py "$log" --wall "$(python3 -c "print($t1 - $t0)")" \
  --label "$name"
python3 - "$log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except json.JSONDecodeError:
        continue
    if j.get("kind") != "round":
        continue
    s = j.get("measure_split", {})
    print(f"round {j['round']}: {j['trials']} trials, measure {j['measure_s']:.2f} s = "
          f"task data {s.get('prepare_s', 0):.2f} s + worker setups {s.get('worker_setups', 0)} "
          f"({s.get('setup_s', 0):.2f} s) + candidates {s.get('items_s', 0):.2f} s"
          f"{' (overlapped)' if j.get('overlapped') else ''}")
PY
"$root/run" inspect --log "$log" >"$out/inspect.txt" 2>&1
cat "$out/inspect.txt"
tar czf "$top/kept-worker.tgz" -C "$top" kept-worker
echo "== done $(date -u +%FT%TZ)"

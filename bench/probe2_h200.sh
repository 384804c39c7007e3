#!/usr/bin/env bash
# Second probe of the 2026-11-30 third session, one device call:
#   run(command="bash bench/probe2_h200.sh", carry=["dist"], kind="nvidia-h200")
# 1. the GPU tests of the device-resident check (cuda_runtime_test);
# 2. the 16 matmul probe schedules with and without software pipelining (A/B in one call);
# 3. softmax hand schedules (three-pass t256 vs the one-pass row kernel);
# 4. trials per second of short tuning jobs with the new measurer.
set -uo pipefail
export OUT="${OUT:-/tmp/out}"
log="$OUT/probe2.log"
exec > >(tee -a "$log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
echo "== cuda_runtime_test"
timeout 300 "$root/bin/cuda_runtime_test" 2>&1 | tail -40
echo "== matmul probes, pipelined"
TAG=pipe NO_BASELINE=1 bash bench/probe_schedules_h200.sh bench/schedules/probe | grep -v "^=="
echo "== matmul probes, TILESEARCH_NO_SOFTWARE_PIPELINE=1"
TILESEARCH_NO_SOFTWARE_PIPELINE=1 TAG=nopipe NO_BASELINE=1 bash bench/probe_schedules_h200.sh bench/schedules/probe | grep -v "^=="
echo "== softmax probes"
TAG=softmax bash bench/probe_schedules_h200.sh bench/schedules/probe_softmax | grep -v "^=="
echo "== short tuning jobs (trials/s with the device-resident check)"
ts="$root/run"
for job in "matmul --shape 4096x4096 --shape 4096x4096" "softmax --shape 4096x4096"; do
  name=${job%% *}
  start=$(date +%s.%N)
  timeout 150 "$ts" tune --op $job --target cuda --trials 128 --seed 1 --warmup 1 --min-runs 3 \
    --min-time-ms 10 --run-timeout-ms 5000 --log "$OUT/tune_$name.jsonl" >"$OUT/tune_$name.out" 2>"$OUT/tune_$name.err"
  end=$(date +%s.%N)
  echo "$name: rc $? wall $(python3 -c "print(round($end-$start,1))") s"; tail -4 "$OUT/tune_$name.err"
  "$ts" inspect --log "$OUT/tune_$name.jsonl" 2>&1 | head -8
done
cd "$OUT" && tar czf probe2.tgz probe-* tune_* && rm -rf probe-* tune_*

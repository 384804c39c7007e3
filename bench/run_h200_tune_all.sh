#!/usr/bin/env bash
# One tuning call on one H200 for issues 5 and 6 side by side (device time is scarce: 30 minutes a
# session, a machine start each call):
#   run(command="bash bench/run_h200_tune_all.sh", carry=["dist"], kind="nvidia-h200")
# (or kind="nvidia-h200-x2": suite part i runs on GPU i mod #GPUs with that GPU's lock).
# - issue 5: matmul 4096³ with XGBoost for MATMUL_TRIALS trials (bench/run_h200_issue5.sh, no
#   PyTorch baseline here: the scoring call times the replayed best against eager);
# - issue 6: every problem of both suites for SUITE_TRIALS trials, one round each
#   (bench/run_h200_issue6.sh with SKIP_SCORE=1), with a smaller search (population 512, 2
#   generations) so that 50 problems fit the call.
# Both share the GPU; their measurements take turns through one device lock
# (TILESEARCH_DEVICE_LOCK), so a kernel is never timed while the other job's kernel runs; the
# search and compilation share the cores. Measured on one H200 (2026-11-30): two suite processes
# and the matmul job through one lock tuned 11 problems in 500 s, and two suite processes alone 11
# more: a problem's measurement holds the lock for its whole batch (check inputs included), so
# processes on one GPU mostly wait for each other; more GPUs are what adds throughput.
# PROBLEMS: only these problems, dealt round-robin to the parts (default: all, in halves).
# LOGS_FROM (see run_h200_issue6.sh) resumes the suites from earlier logs: problems with
# SUITE_TRIALS records are only replayed. Output: $OUT/issue5.tgz and $OUT/issue6-tune<i>.tgz.
set -uo pipefail
MATMUL_TRIALS=${MATMUL_TRIALS:-1000}
# The matmul job may run MATMUL_LIMIT_S + 120 (SIGKILL grace) + 120 (replay) seconds: 360 keeps
# the call under the device tool's 600 s.
MATMUL_LIMIT_S=${MATMUL_LIMIT_S:-360}
SUITE_TRIALS=${SUITE_TRIALS:-32}
SUITE_S=${SUITE_S:-500}
SUITE_PARTS=${SUITE_PARTS:-2}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
(( ngpu > 0 )) || ngpu=1
TS_ROOT="$(bash dist/unpack.sh | tail -1)"
[[ -x "$TS_ROOT/run" ]] || { echo "dist/unpack.sh did not unpack the device pack"; exit 2; }
export TS_ROOT
for v in MATMUL_LIMIT_S SUITE_S; do  # `timeout 0` would mean no limit at all
  [[ "${!v}" =~ ^[0-9]+$ ]] && (( ${!v} > 0 )) || { echo "$v=${!v}: want seconds > 0"; exit 2; }
done
(( SUITE_PARTS >= 1 && SUITE_PARTS <= 6 )) || { echo "SUITE_PARTS: 1..6 (8 files come back)"; exit 2; }
matmul_pid=
if (( MATMUL_TRIALS > 0 )); then  # MATMUL_TRIALS=0: the suites only
  JOBS="matmul:xgboost:$MATMUL_TRIALS" NO_BASELINE=1 LIMIT_S=$MATMUL_LIMIT_S \
    bash bench/run_h200_issue5.sh >/dev/null 2>&1 &
  matmul_pid=$!
fi
# The suites in SUITE_PARTS processes (halves of the problem list): one's search and compilation
# overlap the other's measurements.
# PROBLEMS (comma-separated) replaces the halves: its problems are dealt round-robin to the
# parts (list the slow ones first so that they spread over the GPUs).
part_problems=()
if [[ -n "${PROBLEMS:-}" ]]; then
  IFS=, read -ra plist <<<"$PROBLEMS"
  (( ${#plist[@]} >= SUITE_PARTS )) || { echo "PROBLEMS: fewer problems than SUITE_PARTS"; exit 2; }
  for ((k = 0; k < ${#plist[@]}; ++k)); do
    j=$(( k % SUITE_PARTS ))
    part_problems[$j]="${part_problems[$j]:+${part_problems[$j]},}${plist[$k]}"
  done
fi
pids=()
for ((i = 0; i < SUITE_PARTS; ++i)); do
  gpu=$(( i % ngpu ))
  CUDA_VISIBLE_DEVICES=$gpu TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu$gpu.lock \
    CHUNK=$i/$SUITE_PARTS PROBLEMS="${part_problems[$i]:-}" TRIALS=$SUITE_TRIALS PER_ROUND=$SUITE_TRIALS BENCH_S=$SUITE_S ROUND_S=0 \
    SKIP_SCORE=1 TAG=tune$i \
    BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10 --population 512 --generations 2" \
    bash bench/run_h200_issue6.sh >/dev/null 2>&1 &
  pids+=($!)
  sleep 1
done
for p in "${pids[@]}"; do wait "$p"; done
[[ -n "$matmul_pid" ]] && wait "$matmul_pid"
for ((i = 0; i < SUITE_PARTS; ++i)); do
  tar xzf "${OUT:-/tmp/out}/issue6-tune$i.tgz" -C /tmp && tail -15 "/tmp/issue6-tune$i/run.log"
done
tail -40 "${OUT:-/tmp/out}/issue5/run.log" 2>/dev/null
rm -rf "${OUT:-/tmp/out}/issue5"  # in issue5.tgz; the device tool returns at most 8 files
ls -la "${OUT:-/tmp/out}"

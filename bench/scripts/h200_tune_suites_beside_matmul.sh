#!/usr/bin/env bash
# One tuning call on one H200: the suites and matmul 4096³ side by side (device time is scarce: a
# machine start each call):
#   run(command="bash bench/scripts/h200_tune_suites_beside_matmul.sh", carry=["dist"],
#       kind="nvidia-h200")
# (or kind="nvidia-h200-x2": suite part i runs on GPU i mod #GPUs with that GPU's lock).
# - matmul 4096³ with XGBoost for MATMUL_TRIALS trials (bench/scripts/h200_tune_ops.sh, no PyTorch
#   baseline here: the scoring call times the replayed best against eager);
# - every problem of both suites for SUITE_TRIALS trials, one round each
#   (bench/scripts/h200_tune_suites.sh with SKIP_SCORE=1), with a smaller search (population 512,
#   2 generations) so that 50 problems fit the call.
# Both share the GPU; their measurements take turns through one device lock
# (TILESEARCH_DEVICE_LOCK), so a kernel is never timed while the other job's kernel runs; the
# search and compilation share the cores. Measured on one H200 (2026-11-30): two suite processes
# and the matmul job through one lock tuned 11 problems in 500 s, and two suite processes alone 11
# more: a problem's measurement holds the lock for its whole batch (check inputs included), so
# processes on one GPU mostly wait for each other; more GPUs are what adds throughput.
# PROBLEMS: only these problems (comma-separated; empty entries are dropped), dealt round-robin
# to the parts (default, PROBLEMS unset: all, in SUITE_PARTS slices). Refused (exit 2) when it is
# set but names no problem, or fewer problems than SUITE_PARTS.
# LOGS_FROM (see h200_tune_suites.sh) resumes the suites from earlier logs: problems with
# SUITE_TRIALS records are only replayed. Output: $OUT/tune.tgz and $OUT/suites-tune<i>.tgz.
# Everything is validated before any job starts (exit 2). Exit status: 0, or the first non-zero
# status of the matmul job, a suite part or the unpacking of a part's output (after the listing).
set -uo pipefail
MATMUL_TRIALS=${MATMUL_TRIALS:-1000}
# The call must stay under the device tool's 600 s. The matmul job (h200_tune_ops.sh) may take
# MATMUL_LIMIT_S + 120 (SIGKILL grace) + 120 (replay) = 540 s at 300, plus seconds of inspect and
# tar; a suite part SUITE_S + 45 (its SIGKILL grace) = 545 s at 500.
MATMUL_LIMIT_S=${MATMUL_LIMIT_S:-300}
SUITE_TRIALS=${SUITE_TRIALS:-32}
SUITE_S=${SUITE_S:-500}
SUITE_PARTS=${SUITE_PARTS:-2}
out="${OUT:-/tmp/out}"

# ---- Validate everything before anything starts.
for v in MATMUL_TRIALS SUITE_TRIALS SUITE_PARTS MATMUL_LIMIT_S SUITE_S; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "$v='${!v}': want a number"; exit 2; }
done
for v in MATMUL_LIMIT_S SUITE_S SUITE_TRIALS; do  # `timeout 0` would mean no limit at all
  (( 10#${!v} > 0 )) || { echo "$v=${!v}: want a number > 0"; exit 2; }
done
(( 10#$SUITE_PARTS >= 1 && 10#$SUITE_PARTS <= 6 )) || { echo "SUITE_PARTS=$SUITE_PARTS: 1..6 (8 files come back)"; exit 2; }
SUITE_PARTS=$((10#$SUITE_PARTS)); MATMUL_TRIALS=$((10#$MATMUL_TRIALS))
# PROBLEMS (comma-separated) replaces the slices: its problems are dealt round-robin to the
# parts (list the slow ones first so that they spread over the GPUs).
plist=()
if [[ -n "${PROBLEMS+set}" ]]; then
  IFS=, read -ra raw <<<"$PROBLEMS"
  for p in "${raw[@]}"; do
    p="${p//[[:space:]]/}"
    [[ -n "$p" ]] && plist+=("$p")
  done
  (( ${#plist[@]} > 0 )) || { echo "PROBLEMS='$PROBLEMS' names no problem (unset it for all)"; exit 2; }
  (( ${#plist[@]} >= SUITE_PARTS )) || {
    echo "PROBLEMS: ${#plist[@]} problems, fewer than SUITE_PARTS=$SUITE_PARTS"; exit 2; }
fi
part_problems=()
for ((k = 0; k < ${#plist[@]}; ++k)); do
  j=$(( k % SUITE_PARTS ))
  part_problems[j]="${part_problems[j]:+${part_problems[j]},}${plist[k]}"
done
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
(( ngpu > 0 )) || ngpu=1
TS_ROOT="$(bash dist/unpack.sh | tail -1)"
[[ -n "$TS_ROOT" && -f "$TS_ROOT/run" && -x "$TS_ROOT/run" ]] || {
  echo "dist/unpack.sh did not unpack the device pack (got '$TS_ROOT')"; exit 2; }
export TS_ROOT

# ---- The jobs. A job still running when this script exits early is killed with its children
# (by pid: they stay in this script's process group, which the device tool may signal).
started=()
# shellcheck source=bench/scripts/run_lib.sh
source bench/scripts/run_lib.sh
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() { kill_started; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rc=0
matmul_pid=
if (( MATMUL_TRIALS > 0 )); then  # MATMUL_TRIALS=0: the suites only
  JOBS="matmul:xgboost:$MATMUL_TRIALS" NO_BASELINE=1 LIMIT_S=$MATMUL_LIMIT_S \
    bash bench/scripts/h200_tune_ops.sh >/dev/null 2>&1 &
  matmul_pid=$!
  started+=("$matmul_pid")
fi
# The suites in SUITE_PARTS processes: one's search and compilation overlap the other's
# measurements.
pids=()
for ((i = 0; i < SUITE_PARTS; ++i)); do
  gpu=$(( i % ngpu ))
  part_env=(CHUNK="$i/$SUITE_PARTS")
  (( ${#plist[@]} > 0 )) && part_env+=(PROBLEMS="${part_problems[i]}")
  env "${part_env[@]}" CUDA_VISIBLE_DEVICES=$gpu TILESEARCH_DEVICE_LOCK=/tmp/tilesearch-gpu$gpu.lock \
    TRIALS="$SUITE_TRIALS" PER_ROUND="$SUITE_TRIALS" BENCH_S="$SUITE_S" ROUND_S=0 \
    SKIP_SCORE=1 TAG=tune$i \
    BENCH_ARGS="--warmup 1 --min-runs 3 --min-time-ms 10 --population 512 --generations 2" \
    bash bench/scripts/h200_tune_suites.sh >/dev/null 2>&1 &
  pids+=($!)
  started+=($!)
  sleep 1
done
for ((i = 0; i < SUITE_PARTS; ++i)); do wait "${pids[i]}"; note_rc $? "suite part $i"; done
if [[ -n "$matmul_pid" ]]; then wait "$matmul_pid"; note_rc $? "matmul job"; fi
started=()
parts=$(mktemp -d)
trap 'cleanup; rm -rf "$parts"' EXIT
for ((i = 0; i < SUITE_PARTS; ++i)); do
  tar xzf "$out/suites-tune$i.tgz" -C "$parts"; note_rc $? "unpack suites-tune$i.tgz"
  tail -15 "$parts/suites-tune$i/run.log"
done
tail -40 "$out/tune/run.log" 2>/dev/null
rm -rf "$out/tune"  # in tune.tgz; the device tool returns at most 8 files
ls -la "$out"
exit "$rc"

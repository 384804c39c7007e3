#!/usr/bin/env bash
# A lost rank under `mpiexec -n 2 tilesearch tune` (cpu target), and errors that must end every
# rank cleanly:
# - rank 1 killed (SIGKILL) in the middle of its share of the second round (the test hook
#   TILESEARCH_MPI_TEST_FAULT=1:2): the job stops with a non-zero status, the log keeps the first
#   round and the second round's results that arrived in order; the same command again resumes
#   from them: the first run's lines are the final log's first lines, and the log ends with the
#   full budget of distinct schedules, each measured once (a record line the launcher cut short
#   when it killed rank 0 mid-write is skipped, as the tuner's reader skips it, and measured again);
# - rank 1 hanging instead (TILESEARCH_MPI_TEST_FAULT=1:2:hang, rank 0 waiting 5 s:
#   TILESEARCH_MPI_SILENCE_S): rank 0 names the silent rank and aborts the job, no hang, the log
#   as above;
# - ranks launched with different arguments (mpiexec's "A : B" form): one error line on rank 0
#   naming the disagreement, exit 2, no log written;
# - a command that does not spread over ranks (inspect): one error line, exit 2;
# - Slurm's environment of 2 tasks around a process MPI starts alone: one error line, no log.
# Run by ctest (MPI build only) with TILESEARCH and MPIEXEC set.
set -u
source "$(dirname "$0")/cli_lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
job=(tune --op matmul --shape 64x64 --shape 64x64 --target cpu --population 32 --generations 1
     --min-runs 2 --min-time-ms 0 --warmup 0 --trials 32 --per-round 8)

# records LOG: its record lines that parse (a line the killed rank 0 was writing may not).
records() {
  python3 - "$1" <<'PY'
import json, sys
n = 0
for l in open(sys.argv[1]):
    try:
        n += json.loads(l).get("kind", "record") == "record"
    except json.JSONDecodeError:
        pass
print(n)
PY
}

# resume_check NAME LOG: a run killed in round 2 left round 1 and part of round 2; a second run
# completes the budget without losing or repeating a record.
resume_check() {
  local name="$1" log="$2" kept
  [[ "$(cat "$tmp/$name.rc")" != 0 ]] || fail "$name: the job with a lost rank exited 0"
  kept="$(records "$log")"
  ((kept >= 8 && kept < 16)) ||
    fail "$name: the log kept $kept records, expected round 1 (8) and part of round 2"
  # The complete lines (a last line cut short by the kill has no newline yet).
  head -n "$(wc -l <"$log")" "$log" >"$tmp/$name.before"
  mpirun "$name.resume" 2 "${job[@]}" --log "$log"
  expect_rc "$name.resume" 0
  expect_out "$name.resume" "^trials: 32 \\($((32 - kept)) measured now\\)$"
  [[ "$(head -n "$(wc -l <"$tmp/$name.before")" "$log")" == "$(cat "$tmp/$name.before")" ]] ||
    fail "$name: the resumed run changed the lines the first run logged"
  check_log "$log" 32 2 1
}

TILESEARCH_MPI_TEST_FAULT=1:2 mpirun killed 2 "${job[@]}" --log "$tmp/k.jsonl"
resume_check killed "$tmp/k.jsonl"

TILESEARCH_MPI_TEST_FAULT=1:2:hang TILESEARCH_MPI_SILENCE_S=5 \
  mpirun hung 2 "${job[@]}" --log "$tmp/h.jsonl"
grep -q 'rank 1 sent nothing for 5 s' "$tmp/hung.err" ||
  fail "hung: rank 0 did not name the silent rank (exit $(cat "$tmp/hung.rc")): stderr: $(tail -n 3 "$tmp/hung.err") stdout: $(tail -n 5 "$tmp/hung.out")"
resume_check hung "$tmp/h.jsonl"

timeout 120 "$mpiexec_bin" -n 1 "$bin" "${job[@]}" --log "$tmp/d.jsonl" \
  : -n 1 "$bin" "${job[@]}" --log "$tmp/d.jsonl" --seed 7 >"$tmp/disagree.out" 2>"$tmp/disagree.err"
echo $? >"$tmp/disagree.rc"
expect_error disagree "ranks disagree on the command line: rank 1"
[[ ! -s "$tmp/d.jsonl" ]] || fail "disagree: a log was written"

mpirun inspect 2 inspect --log "$tmp/k.jsonl"
expect_error inspect "'tilesearch inspect' runs as one process"

# A launcher whose ranks MPI cannot see (Slurm's environment, no PMI MPICH understands): each
# process would tune alone into one log; it refuses instead.
SLURM_PROCID=0 SLURM_NTASKS=2 run singleton "${job[@]}" --log "$tmp/s.jsonl"
expect_error singleton "the launcher started 2 ranks, but MPI sees a job of 1"
[[ ! -e "$tmp/s.jsonl" ]] || fail "singleton: a log was written"
finish "MPI fault"

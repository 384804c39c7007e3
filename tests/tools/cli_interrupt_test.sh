#!/usr/bin/env bash
# Ctrl-C during `tilesearch tune` on the cpu target (SIGINT sent to the tune process alone):
# - one SIGINT after the first round is logged: the round in flight is finished and logged, the
#   summary says "interrupted", the exit status is 130, and the log holds only whole rounds (every
#   line JSON, the records exactly those the round lines announce);
# - two SIGINTs during a long first round: the process stops at once (status 130) without
#   finishing the round, so the log holds no record and no partial line.
# A SIGINT is re-sent until tune acknowledges it on stderr ("tune: interrupt:"), so a signal that
# arrives before the handler is installed is not counted. Run by ctest with TILESEARCH set.
set -u
source "$(dirname "$0")/cli_lib.sh"
base=(--op matmul --shape 32x32 --shape 32x32 --target cpu --population 16 --generations 1
      --warmup 0 --min-runs 2 --model random)

# start NAME ARGS...: tune in the background; its pid in $pid.
start() {
  local name="$1"
  shift
  "$bin" tune "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pid=$!
}

# wait_for COUNT FILE: until FILE has COUNT lines (at most ~120 s; a safety net, not a check).
wait_for() {
  for _ in $(seq 1 1200); do
    [[ -f "$2" && "$(wc -l <"$2")" -ge "$1" ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# interrupt NAME: SIGINT until tune says it got one (at most 40 tries).
interrupt() {
  for _ in $(seq 1 40); do
    kill -INT "$pid" 2>/dev/null || return 1
    sleep 0.5
    grep -q "tune: interrupt:" "$tmp/$1.err" && return 0
  done
  return 1
}

# check_whole_rounds LOG: every line is JSON and the records are exactly the rounds' records.
check_whole_rounds() {
  python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
assert text == "" or text.endswith("\n"), "the log ends in a partial line"
lines = [json.loads(l) for l in text.splitlines()]
records = [l for l in lines if l.get("kind", "record") == "record"]
rounds = [l for l in lines if l.get("kind") == "round"]
assert sum(r["trials"] for r in rounds) == len(records), (len(records), [r["trials"] for r in rounds])
assert lines == [] or lines[-1].get("kind") == "round", "the log does not end with a round line"
PY
}

# One SIGINT: the round in flight is finished and logged.
start once "${base[@]}" --min-time-ms 0 --per-round 2 --trials 1000 --log "$tmp/once.jsonl"
wait_for 3 "$tmp/once.jsonl" || fail "once: the first round was never logged"
interrupt once || fail "once: tune never acknowledged SIGINT: $(cat "$tmp/once.err")"
wait "$pid"
echo $? >"$tmp/once.rc"
expect_rc once 130
expect_out once '^trials: [0-9]+ \([0-9]+ measured now\), interrupted$'
grep -q "interrupted after [0-9]* trials (all logged to" "$tmp/once.err" ||
  fail "once: no 'interrupted after' line: $(cat "$tmp/once.err")"
check_whole_rounds "$tmp/once.jsonl" || fail "once: the log is not whole rounds"

# Two SIGINTs: stop at once. A round of 16 candidates timed for >= 1 s each lasts >= 16 s.
start twice "${base[@]}" --min-time-ms 1000 --per-round 16 --trials 16 --log "$tmp/twice.jsonl"
interrupt twice || fail "twice: tune never acknowledged SIGINT: $(cat "$tmp/twice.err")"
kill -INT "$pid" 2>/dev/null
wait "$pid"
echo $? >"$tmp/twice.rc"
expect_rc twice 130
grep -q "stopped at once" "$tmp/twice.err" || fail "twice: no 'stopped at once' line: $(cat "$tmp/twice.err")"
check_whole_rounds "$tmp/twice.jsonl" || fail "twice: the log is not whole rounds"
[[ ! -s "$tmp/twice.jsonl" ]] || fail "twice: the round in flight was finished and logged"

finish "interrupt"

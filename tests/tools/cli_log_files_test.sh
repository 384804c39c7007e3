#!/usr/bin/env bash
# Logs a user can get wrong, through the CLI (a tiny cpu tuning log made once):
# - `tune --quiet --log notes.txt` on an existing text file that is not a log is a one-line error
#   naming the file and its first bad line, and leaves the file unchanged; an empty file is a fresh
#   log; a real log with a truncated last line still resumes (the line reported and skipped);
# - a fifo, a directory and /dev/urandom as --log are refused by tune, inspect and replay with
#   "not a regular file" instead of hanging (each run under `timeout`);
# - a record whose workload key does not match its workload (op/shapes) is reported with its line
#   number and skipped by inspect and replay; replay then rebuilds the best consistent record;
# - inspect's tuning curve names trials 0-based as the records' "trial" field does, and says so;
# - `inspect --target cpu` on a log that also holds cuda records prints no warning about them (the
#   "log:" line counts them).
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
loud=(--op matmul --shape 32x32 --shape 32x32 --target cpu --population 16 --generations 1
      --min-runs 2 --min-time-ms 0 --warmup 0 --per-round 2)
base=("${loud[@]}" --quiet)

# run_t NAME SECONDS ARGS...: `run` under a time limit (exit code 124 when it did not end).
run_t() {
  local name="$1" seconds="$2"
  shift 2
  timeout -s KILL "$seconds" "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  ((rc == 137)) && rc=124
  echo "$rc" >"$tmp/$name.rc"
}

run tune tune "${base[@]}" --trials 4 --log "$tmp/t.jsonl"
expect_rc tune 0

# 1. A text file is not a log; an empty file is; a damaged trailing line is skipped.
printf 'remember the milk\n\nand the eggs\n' >"$tmp/notes.txt"
cp "$tmp/notes.txt" "$tmp/notes.orig"
run notes tune "${base[@]}" --trials 2 --log "$tmp/notes.txt"
expect_error notes "'$tmp/notes.txt' is not a tilesearch tuning log: line 1 is not a record or round line"
grep -qF '"remember the milk"' "$tmp/notes.err" || fail "notes: the first bad line is not quoted: $(cat "$tmp/notes.err")"
cmp -s "$tmp/notes.txt" "$tmp/notes.orig" || fail "notes: tune changed the text file"
run notes_inspect inspect --log "$tmp/notes.txt"
expect_error notes_inspect "is not a tilesearch tuning log"

: >"$tmp/empty.jsonl"
run empty tune "${base[@]}" --trials 2 --log "$tmp/empty.jsonl"
expect_rc empty 0
expect_out empty '^trials: 2 \(2 measured now\)$'

cp "$tmp/t.jsonl" "$tmp/damaged.jsonl"
head -c 100 "$tmp/t.jsonl" >>"$tmp/damaged.jsonl"  # a record cut short, no newline
run damaged tune "${loud[@]}" --trials 4 --log "$tmp/damaged.jsonl"
expect_rc damaged 0
expect_out damaged '^trials: 4 \(0 measured now\)$'
grep -q "damaged.jsonl:7: skipped: not valid JSON" "$tmp/damaged.err" ||
  fail "damaged: no warning for line 7: $(cat "$tmp/damaged.err")"

# 6. Special files.
mkfifo "$tmp/fifo"
mkdir "$tmp/dir.jsonl"
for special in "$tmp/fifo" "$tmp/dir.jsonl" /dev/urandom; do
  name="$(basename "$special")"
  run_t "inspect_$name" 10 inspect --log "$special"
  expect_error "inspect_$name" "log '$special' is not a regular file"
  run_t "replay_$name" 10 replay --log "$special" --op matmul --shape 32x32 --shape 32x32 \
    --target cpu --out "$tmp/out_$name" --no-check
  expect_error "replay_$name" "log '$special' is not a regular file"
done
for special in "$tmp/fifo" "$tmp/dir.jsonl"; do  # tune would append to /dev/urandom: not tried
  name="$(basename "$special")"
  run_t "tune_$name" 10 tune "${base[@]}" --trials 2 --log "$special"
  expect_error "tune_$name" "log '$special' is not a regular file"
done
grep -qF "(it is a fifo)" "$tmp/inspect_fifo.err" || fail "inspect_fifo: kind not named"
grep -qF "(it is a directory)" "$tmp/inspect_dir.jsonl.err" || fail "inspect_dir: kind not named"

# 3. A record that lies about its workload: line 2 claims the 32³ key but is a 16³ matmul, with
# the smallest median of the log (it would be the best).
python3 - "$tmp/t.jsonl" "$tmp/liar.jsonl" <<'PY' || fail "making liar.jsonl"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
lines[1]["workload"]["shapes"] = [[16, 16], [16, 16]]
lines[1]["result"]["timing"]["median_ms"] = 1e-6
lines[1]["result"]["error"] = "none"
with open(sys.argv[2], "w") as out:
    for l in lines:
        out.write(json.dumps(l, separators=(",", ":")) + "\n")
PY
run liar_inspect inspect --log "$tmp/liar.jsonl"
expect_rc liar_inspect 0
grep -q "liar.jsonl:2: skipped: workload key [0-9a-f]* does not match the record's workload matmul 16x16 16x16" \
  "$tmp/liar_inspect.err" || fail "liar_inspect: no warning for line 2: $(cat "$tmp/liar_inspect.err")"
expect_no_out liar_inspect '^matmul 16x16'
expect_out liar_inspect '^  trials 3, '
expect_out liar_inspect '1 records skipped \(workload key does not match the workload\)'
run liar_replay replay --log "$tmp/liar.jsonl" --op matmul --shape 32x32 --shape 32x32 \
  --out "$tmp/liar_out" --name liar --no-check
expect_rc liar_replay 0
grep -q "liar.jsonl:2: skipped: workload key" "$tmp/liar_replay.err" ||
  fail "liar_replay: no warning for line 2: $(cat "$tmp/liar_replay.err")"
python3 - "$tmp/liar.jsonl" "$tmp/liar_replay.out" <<'PY' || fail "liar_replay picked the wrong record"
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
records = [l for i, l in enumerate(lines) if l.get("kind", "record") == "record" and i != 1]
valid = [r for r in records if r["result"]["error"] == "none"]
best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"])
m = re.search(r"^record: trial (\d+),", open(sys.argv[2]).read(), re.M)
assert m and int(m.group(1)) == best["trial"], (m and m.group(0), best["trial"])
PY

# 7. The curve's trial names are the records' (0-based) trial numbers.
run curve inspect --log "$tmp/t.jsonl" --curve-points 4
expect_rc curve 0
expect_out curve 'tuning curve .*trials numbered from 0'
python3 - "$tmp/t.jsonl" "$tmp/curve.out" <<'PY' || fail "curve: trial names differ from the records'"
import json, re, sys
records = [json.loads(l) for l in open(sys.argv[1])]
trials = [r["trial"] for r in records if r.get("kind", "record") == "record"]
shown = [int(t) for t in re.findall(r"^  trial (\d+): ", open(sys.argv[2]).read(), re.M)]
assert shown == trials, (shown, trials)
PY

# 8. --target: no warning about the records of other targets.
python3 - "$tmp/t.jsonl" "$tmp/mixed.jsonl" <<'PY' || fail "making mixed.jsonl"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
gpu = json.loads(json.dumps(lines[0]))
# A cpu record has no GPU limits: a cuda one needs them all.
gpu["target"].update(kind="cuda", arch="sm_80", max_threads_per_block=1024, max_shared_memory_per_block=49152, max_shared_memory_optin=232448, max_registers_per_block=65536, warp_size=32, max_vthread_extent=8, max_vector_bytes=16, sm_count=132, l2_bytes=62914560)
with open(sys.argv[2], "w") as out:
    for l in lines + [gpu]:
        out.write(json.dumps(l, separators=(",", ":")) + "\n")
PY
run target inspect --log "$tmp/mixed.jsonl" --target cpu
expect_rc target 0
[[ ! -s "$tmp/target.err" ]] || fail "target: warned on stderr: $(cat "$tmp/target.err")"
expect_out target '^log: .*1 records of other targets filtered out\)$'
expect_out target '^  trials 4, '

finish "log files"

#!/usr/bin/env bash
# `tilesearch tune-graph` and `run-graph` on the cpu target with the tiny SwiGLU MLP, unfused (four
# single-operator tasks: the gate/up dense of weight 2, swish, mul, the down dense) and fused
# (dense_swish, dense_mul, dense): the task list
# with weights, the scheduler's allocation (every task warmed up, trials summing to the budget,
# as many records in the log), round-robin; run-graph checks against the interpreter, prints the
# end-to-end latency and one breakdown line per task naming the log's best trial; a missing log, a
# task without records (the fused partition of the same model) and an unknown model are one-line
# errors, and --allow-untuned runs such tasks unscheduled; both commands' --json agree with the
# printed numbers and refuse the log as their file.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
graph=(--model swiglu_mlp --small --no-fuse --target cpu)
search=(--cost-model random --population 16 --generations 1 --min-runs 2 --min-time-ms 0
        --warmup 0 --quiet --per-round 2)
timing=(--min-runs 2 --min-time-ms 0 --warmup 0 --no-flush)

run tune tune-graph "${graph[@]}" "${search[@]}" --trials 8 --log "$tmp/g.jsonl"
expect_rc tune 0
expect_out tune '^model: swiglu_mlp \(small\), 5 operator nodes, 5 subgraphs, 4 tasks \(unfused\)'
expect_out tune '^0 +dense +2 '
expect_out tune '^1 +swish +1 '
expect_out tune '^strategy: gradient, 4 rounds, 8 trials$'
expect_out tune '^rounds: 0w 1w 2w 3w$'
python3 - "$tmp/g.jsonl" "$tmp/tune.out" <<'PY' || fail "tune-graph allocation"
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
records = [r for r in lines if r.get("kind", "record") == "record"]
assert len(records) == 8, len(records)
rows = re.findall(r"^ +(\d) +(\S+) +(\d+) +(\d+) +(\d+) ", open(sys.argv[2]).read(), re.M)
assert [(r[0], r[1], r[2]) for r in rows] == [("0", "dense", "2"), ("1", "swish", "1"),
                                             ("2", "mul", "1"), ("3", "dense", "1")], rows
trials = [int(r[3]) for r in rows]
assert sum(trials) == 8 and all(t >= 1 for t in trials), trials
# Per task, as many records of its workload in the log as the table says.
keys = {}
for r in records:
    keys[r["workload_key"]] = keys.get(r["workload_key"], 0) + 1
assert sorted(keys.values()) == sorted(trials), (keys, trials)
PY

run rr tune-graph "${graph[@]}" "${search[@]}" --trials 4 --round-robin --log "$tmp/rr.jsonl" \
  --json "$tmp/rr.json"
expect_rc rr 0
expect_out rr '^strategy: round-robin, 4 rounds, 4 trials$'
python3 - "$tmp/rr.json" <<'PY' || fail "tune-graph --json"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "swiglu_mlp" and j["strategy"] == "round-robin" and j["trials"] == 4, j
assert [t["name"] for t in j["tasks"]] == ["dense", "swish", "mul", "dense"], j["tasks"]
assert [t["weight"] for t in j["tasks"]] == [2, 1, 1, 1]
assert [r["task"] for r in j["rounds"]] == [0, 1, 2, 3] and all(r["warmup"] for r in j["rounds"])
assert j["rounds"][-1]["total_trials"] == 4
# The objective is the weighted sum of the tasks' best times.
obj = sum(t["weight"] * t["best_ms"] for t in j["tasks"])
assert abs(obj - j["objective_ms"]) <= 1e-9 * obj, (obj, j["objective_ms"])
PY
run jsonlog tune-graph "${graph[@]}" "${search[@]}" --trials 4 --log "$tmp/rr.jsonl" \
  --json "$tmp/rr.jsonl"
expect_error jsonlog "is the tuning log"

run exec run-graph "${graph[@]}" "${timing[@]}" --log "$tmp/g.jsonl" --json "$tmp/exec.json"
expect_rc exec 0
python3 - "$tmp/exec.json" "$tmp/exec.out" <<'PY' || fail "run-graph --json"
import json, re, sys
j = json.load(open(sys.argv[1]))
assert j["check"]["reference"] == "interpreter" and j["check"]["passed"], j["check"]
assert j["check"]["elements"] == 32
assert [t["name"] for t in j["tasks"]] == ["dense", "swish", "mul", "dense"]
assert all(t["tuned"] for t in j["tasks"])
assert abs(sum(t["share"] for t in j["tasks"]) - 1) < 1e-9
assert abs(sum(t["ms_per_execution"] for t in j["tasks"]) - j["sum_of_tasks_ms"]) < 1e-9
printed = re.search(r"^end-to-end latency: ([0-9.]+) ms", open(sys.argv[2]).read(), re.M)
assert printed and abs(float(printed.group(1)) - j["end_to_end"]["median_ms"]) < 1e-4
PY
expect_out exec '^check against the interpreter: OK \(32 output elements'
expect_out exec '^end-to-end latency: [0-9.]+ ms median'
expect_out exec '^0 +dense +2 trial [0-9]+ '
expect_out exec '^3 +dense +1 trial [0-9]+ '
[[ "$(grep -cE '^[0-9]+ +[a-z_]+ +[0-9]+ trial ' "$tmp/exec.out")" == 4 ]] ||
  fail "exec: expected 4 task lines: $(cat "$tmp/exec.out")"

run nolog run-graph "${graph[@]}" --log "$tmp/none.jsonl"
expect_error nolog "does not exist"
# The fused partition's tasks (dense_swish, dense_mul) have no records in the unfused log.
run fused run-graph --model swiglu_mlp --small --target cpu --log "$tmp/g.jsonl"
expect_error fused "task 0 ('dense_swish')"
expect_error fused "no record for workload"
run untuned run-graph --model swiglu_mlp --small --target cpu --allow-untuned "${timing[@]}" \
  --log "$tmp/g.jsonl"
expect_rc untuned 0
expect_out untuned '^0 +dense_swish +1 untuned '
expect_out untuned '^2 +dense +1 trial [0-9]+ '
expect_out untuned '^check against the interpreter: OK'
# The fused partition (dense_swish, dense_mul, dense) tuned into its own log and run from it.
fused=(--model swiglu_mlp --small --target cpu)
run ftune tune-graph "${fused[@]}" "${search[@]}" --trials 6 --log "$tmp/f.jsonl"
expect_rc ftune 0
expect_out ftune '^model: swiglu_mlp \(small\), 5 operator nodes, 3 subgraphs, 3 tasks \(fused\)'
expect_out ftune '^0 +dense_swish +1 '
expect_out ftune '^1 +dense_mul +1 '
expect_out ftune '^strategy: gradient, 3 rounds, 6 trials$'
run fexec run-graph "${fused[@]}" "${timing[@]}" --log "$tmp/f.jsonl"
expect_rc fexec 0
expect_out fexec '^check against the interpreter: OK \(32 output elements'
expect_out fexec '^0 +dense_swish +1 trial [0-9]+ '
expect_out fexec '^1 +dense_mul +1 trial [0-9]+ '

run badmodel run-graph --model gpt --log "$tmp/g.jsonl"
expect_rc badmodel 2

# Resume: a second tune-graph on the fused log restores every task's 2 trials (the table's "new+2")
# and appends only the new ones; run-graph reads the grown log.
run fresume tune-graph "${fused[@]}" "${search[@]}" --trials 6 --log "$tmp/f.jsonl"
expect_rc fresume 0
expect_out fresume '^ +0 +dense_swish +1 +[0-9]+\+2 '
expect_out fresume '^ +1 +dense_mul +1 +[0-9]+\+2 '
expect_out fresume '^ +2 +dense +1 +[0-9]+\+2 '
expect_out fresume '^strategy: gradient, [0-9]+ rounds, 6 trials$'
python3 - "$tmp/f.jsonl" <<'PY' || fail "resume: the log should hold 6 + 6 records"
import json, sys
records = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind", "record") == "record"]
assert len(records) == 12, len(records)
PY
run fexec2 run-graph "${fused[@]}" "${timing[@]}" --log "$tmp/f.jsonl"
expect_rc fexec2 0

# A log cut mid-line (a crash while appending): a warning, the rest is used, and
# tune-graph appends after the cut without gluing a record onto it.
cp "$tmp/f.jsonl" "$tmp/cut.jsonl"
cut_line=$(($(wc -l <"$tmp/f.jsonl") + 1))
printf '{"version":1,"workload_key":"0123' >>"$tmp/cut.jsonl"
run cutexec run-graph "${fused[@]}" "${timing[@]}" --log "$tmp/cut.jsonl"
expect_rc cutexec 0
grep -q "cut.jsonl:$cut_line: skipped: not valid JSON" "$tmp/cutexec.err" ||
  fail "cutexec: no warning for the cut line: $(cat "$tmp/cutexec.err")"
run cuttune tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp/cut.jsonl"
expect_rc cuttune 0
python3 - "$tmp/cut.jsonl" "$cut_line" <<'PY' || fail "cuttune: records after the cut line"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "the log must end with a newline"
bad = []
for i, l in enumerate(lines[:-1]):
    try:
        json.loads(l)
    except ValueError:
        bad.append(i + 1)
assert bad == [int(sys.argv[2])], bad  # only the cut line itself
PY

# --json must never overwrite the log, also when the log does not exist yet (spelled the same or
# another way), and a --json or --log in a missing directory is refused before any tuning.
run jsonnew tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp/new.jsonl" \
  --json "$tmp/new.jsonl"
expect_error jsonnew "is the tuning log"
[[ ! -e "$tmp/new.jsonl" ]] || fail "jsonnew: the log was written"
run jsonalias tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp/new.jsonl" \
  --json "$tmp/./sub/../new.jsonl"
expect_error jsonalias "is the tuning log"
run jsondir tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp/new.jsonl" \
  --json "$tmp/missing/x.json"
expect_error jsondir "does not exist"
[[ ! -e "$tmp/new.jsonl" ]] || fail "jsondir: tuned before refusing --json"
run logdir tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp/missing/x.jsonl"
expect_error logdir "does not exist"
run logisdir tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp"
expect_error logisdir "is a directory"
run rjsondir run-graph "${fused[@]}" "${timing[@]}" --log "$tmp/f.jsonl" --json "$tmp/missing/x.json"
expect_error rjsondir "does not exist"

# A budget smaller than the number of tasks says why the run is incomplete.
run tiny tune-graph "${fused[@]}" "${search[@]}" --trials 1 --log "$tmp/tiny.jsonl"
expect_rc tiny 1
expect_out tiny '^2 of 3 tasks got no trials'

# Ctrl-C during tune-graph: the round in flight finishes and is logged, the run ends with 130 and
# says so, every line of the log is whole, and the next run resumes from it.
"$bin" tune-graph "${fused[@]}" "${search[@]}" --trials 400 --log "$tmp/int.jsonl" \
  >"$tmp/int.out" 2>"$tmp/int.err" &
pid=$!
for _ in $(seq 1 600); do  # until two rounds are in the log (at most 60 s)
  [[ "$(grep -c '"kind":"round"' "$tmp/int.jsonl" 2>/dev/null)" -ge 2 ]] && break
  sleep 0.1
done
kill -INT "$pid"
wait "$pid"
echo $? >"$tmp/int.rc"
expect_rc int 130
expect_out int 'interrupted'
python3 - "$tmp/int.jsonl" <<'PY' || fail "int: the log after Ctrl-C"
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n"), "the log must end with a whole line"
records = [r for r in map(json.loads, text.splitlines()) if r.get("kind", "record") == "record"]
assert len(records) >= 2 and len(records) < 400, len(records)
PY
run intresume tune-graph "${fused[@]}" "${search[@]}" --trials 3 --log "$tmp/int.jsonl"
expect_rc intresume 0
expect_out intresume '\+[0-9]+ +[0-9]+ +[0-9.]+'

finish "tune-graph / run-graph"

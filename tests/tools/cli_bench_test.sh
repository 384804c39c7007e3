#!/usr/bin/env bash
# `tilesearch bench` on the cpu target over tests/tools/data/bench_tiny_suite.json (a matmul, a
# softmax tagged small, a fused dense+bias+relu and a matmul whose shapes do not match):
# - first run: every good problem gets its log DIR/<problem>.jsonl with 8 records and its
#   artifacts <problem>.o/.h/.json; the broken one is reported FAILED with the build error and
#   the others still run (exit 1); the per-problem lines, the table and the --json summary agree
#   with the logs read independently here (trials, best median = the smallest valid median of the
#   log, GFLOP/s or GB/s from the shapes);
# - the same command again measures nothing new (resumed from the logs) and replays again;
# - --problems / --skip-small / a larger --trials: only the difference is measured;
# - a problem whose logged trials all failed is reported "all 8 trials failed: 8 compile_error";
# - --time-limit-s: one round per problem when the limit is tiny, the next run resumes;
# - --time-budget-s: the problems share it (a used-up share still runs one round; time the
#   first leaves goes to the second);
# - a torn record line blocks the replay unless --allow-unreadable-lines (a corrupt round line
#   does not);
# - --target cuda without a driver: the problem fails, reported, exit 1;
# - Ctrl-C during the first problem: its round is logged whole, status 130, the second problem
#   is not run;
# - user errors (exit 2, one line, nothing run): missing suite, unknown name in --problems, a
#   --log-dir under a regular file or that is a file, an --out under a file, an unwritable --json,
#   --model-init with --model random, a --model-init file that does not exist.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
suite="$(cd "$(dirname "$0")" && pwd)/data/bench_tiny_suite.json"
base=(--target cpu --population 16 --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0
      --model random)
common=("${base[@]}" --per-round 4 --quiet)

# check_problem NAME TRIALS: the log holds TRIALS records; the summary and the artifact JSON
# agree with the log (best median, throughput from the shapes computed here).
check_problem() {
  python3 - "$tmp" "$1" "$2" <<'PY' || fail "$1: the log, the summary and the artifact disagree (see above)"
import json, math, sys
tmp, name, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [json.loads(l) for l in open(f"{tmp}/logs/{name}.jsonl")]
records = [l for l in lines if l.get("kind", "record") == "record"]
assert len(records) == trials, f"{name}: {len(records)} records, expected {trials}"
valid = [r["result"]["timing"]["median_ms"] for r in records if r["result"]["error"] == "none"]
best = min(valid)
summary = {p["name"]: p for p in json.load(open(f"{tmp}/s.json"))["problems"]}[name]
assert summary["status"] == "ok", summary
assert summary["trials"] == trials, summary
assert math.isclose(summary["best_ms"], best, rel_tol=1e-9), (summary["best_ms"], best)
# FLOPs and bytes of the problems, by hand.
flops, elems = {
    "matmul_tiny": (2 * 32 * 64 * 32, 32 * 64 + 64 * 32 + 32 * 32),
    "softmax_tiny": (None, 8 * 32 * 2),  # FLOPs of exp etc. are the DAG's convention: not checked
    "dense_bias_relu_tiny": (None, 8 * 16 + 4 * 16 + 4 + 8 * 4),
}[name]
assert math.isclose(summary["gbps"], elems * 4 / (best * 1e6), rel_tol=1e-9), summary
if flops is not None:
    assert math.isclose(summary["gflops"], flops / (best * 1e6), rel_tol=1e-9), summary
art = json.load(open(f"{tmp}/art/{name}.json"))
assert art["name"] == name, art["name"]
assert summary["artifact"] == f"{tmp}/art/{name}.json", summary["artifact"]
assert math.isclose(art["median_ms"], best, rel_tol=1e-9), (art["median_ms"], best)
assert art["check"]["passed"] is True, art["check"]
PY
}

# ---- First run: three problems tuned and replayed, one broken.
run first bench --suite "$suite" "${common[@]}" --trials 8 --log-dir "$tmp/logs" --out "$tmp/art" \
  --json "$tmp/s.json"
expect_rc first 1
for p in matmul_tiny softmax_tiny dense_bias_relu_tiny; do
  for ext in o h json; do
    [[ -f "$tmp/art/$p.$ext" ]] || fail "first: no artifact $p.$ext"
  done
  expect_out first "^\[[1-4]/4\] $p: 8 trials \(8 new\), best [0-9.]+ ms, [0-9.]+ (GFLOP|GB)/s, wrote $tmp/art/$p.json"
  check_problem "$p" 8
done
expect_out first "softmax_tiny: .* GB/s"
expect_out first "matmul_tiny: .* GFLOP/s"
expect_out first "^\[4/4\] broken_matmul: FAILED: problem 'broken_matmul': "
expect_out first "^problems: 4, artifacts: 3, failed: 1$"
expect_out first "^broken_matmul +0 +0 +- +- +FAILED: "
[[ ! -e "$tmp/art/broken_matmul.json" && ! -e "$tmp/logs/broken_matmul.jsonl" ]] ||
  fail "first: broken_matmul left an artifact or a log"
python3 - "$tmp/s.json" <<'PY' || fail "first: summary of broken_matmul"
import json, sys
s = {p["name"]: p for p in json.load(open(sys.argv[1]))["problems"]}
b = s["broken_matmul"]
assert b["status"] == "failed" and b["artifact"] is None and "broken_matmul" in b["reason"], b
assert [p["new_trials"] for p in s.values()] == [8, 8, 8, 0], s
PY

# ---- Second run, same budget: resumed, nothing measured, artifacts replayed again.
cp "$tmp/logs/matmul_tiny.jsonl" "$tmp/matmul_before.jsonl"
run again bench --suite "$suite" "${common[@]}" --trials 8 --log-dir "$tmp/logs" --out "$tmp/art" \
  --json "$tmp/s.json"
expect_rc again 1
for p in matmul_tiny softmax_tiny dense_bias_relu_tiny; do
  expect_out again "^\[[1-4]/4\] $p: 8 trials \(0 new\), "
  check_problem "$p" 8
done
cmp -s "$tmp/logs/matmul_tiny.jsonl" "$tmp/matmul_before.jsonl" || fail "again: the log changed"

# ---- A subset, a larger budget, small problems skipped: only 4 new matmul trials.
run more bench --suite "$suite" "${common[@]}" --trials 12 --problems "matmul_tiny, softmax_tiny" \
  --skip-small --log-dir "$tmp/logs" --out "$tmp/art" --json "$tmp/s.json"
expect_rc more 0
expect_out more "^bench: 1 problem \(skipped by --skip-small: 1\) on cpu"
expect_out more "^\[1/1\] matmul_tiny: 12 trials \(4 new\), "
expect_no_out more "softmax_tiny"
check_problem matmul_tiny 12

# ---- Every logged trial failed: reported with the error counts, no artifact.
mkdir -p "$tmp/failed_logs"
python3 - "$tmp/logs/softmax_tiny.jsonl" "$tmp/failed_logs/softmax_tiny.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        j = json.loads(line)
        if j.get("kind", "record") == "record":
            j["result"]["error"] = "compile_error"
            j["result"]["message"] = "planted by cli_bench_test"
        out.write(json.dumps(j) + "\n")
PY
run all_failed bench --suite "$suite" "${common[@]}" --trials 8 --problems softmax_tiny \
  --log-dir "$tmp/failed_logs" --out "$tmp/art2"
expect_rc all_failed 1
expect_out all_failed "^\[1/1\] softmax_tiny: 8 trials \(0 new\), FAILED: .*all 8 trials failed: 8 compile_error"
[[ ! -e "$tmp/art2/softmax_tiny.json" ]] || fail "all_failed: an artifact was written"

# ---- --time-limit-s: no new round once a problem has run that long; a second run resumes.
for pass in 1 2; do
  run "limit$pass" bench --suite "$suite" "${common[@]}" --trials 16 --time-limit-s 0.001 \
    --problems matmul_tiny,softmax_tiny --log-dir "$tmp/limit_logs" --out "$tmp/limit_art"
  expect_rc "limit$pass" 0
  for p in matmul_tiny softmax_tiny; do
    expect_out "limit$pass" "^\[[12]/2\] $p: $((4 * pass)) trials \(4 new, time limit\), "
    n="$(grep -c '"kind":"round"' "$tmp/limit_logs/$p.jsonl")"
    [[ "$n" == "$pass" ]] || fail "limit$pass: $p's log has $n rounds, expected $pass"
  done
done

# ---- A torn record line in a log: bench refuses to replay (the best may be on it) and names the
# option; --allow-unreadable-lines replays from the readable lines. A corrupt round line cannot
# hold a record and does not block the replay.
mkdir -p "$tmp/torn_logs"
python3 - "$tmp/limit_logs/matmul_tiny.jsonl" "$tmp/torn_logs/matmul_tiny.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
rec = next(l for l in lines if '"kind":"round"' not in l)
rnd = json.loads(next(l for l in lines if '"kind":"round"' in l))
rnd["overlapped"] = "yes"
with open(sys.argv[2], "w") as out:
    out.write("\n".join(lines) + "\n" + json.dumps(rnd) + "\n" + rec[: len(rec) // 2] + "\n")
PY
run torn bench --suite "$suite" "${common[@]}" --trials 8 --problems matmul_tiny \
  --log-dir "$tmp/torn_logs" --out "$tmp/torn_art"
expect_rc torn 1
expect_out torn "1 line that may hold a record .*could not be read.*bench --allow-unreadable-lines"
run torn_allowed bench --suite "$suite" "${common[@]}" --trials 8 --problems matmul_tiny \
  --allow-unreadable-lines --log-dir "$tmp/torn_logs" --out "$tmp/torn_art"
expect_rc torn_allowed 0
[[ -f "$tmp/torn_art/matmul_tiny.json" ]] || fail "torn_allowed: no artifact"

# ---- --time-budget-s: the problems share it. A share the reserve takes whole still runs one
# round per problem; with a generous budget the first problem's limit is half of it and the
# second's what the first left, more than half.
run budget bench --suite "$suite" "${common[@]}" --trials 16 --time-budget-s 10 \
  --round-reserve-s 100 --problems matmul_tiny,softmax_tiny --log-dir "$tmp/budget_logs" \
  --out "$tmp/budget_art"
expect_rc budget 0
expect_out budget "sharing 10 s"
for p in matmul_tiny softmax_tiny; do
  expect_out budget "^\[[12]/2\] $p: 4 trials \(4 new, time limit\), "
done
run reserve_alone bench --suite "$suite" "${common[@]}" --trials 8 --round-reserve-s 5 \
  --problems matmul_tiny --log-dir "$tmp/budget_logs" --out "$tmp/budget_art"
expect_error reserve_alone "--round-reserve-s requires --time-budget-s"
run budget2 bench --suite "$suite" "${common[@]}" --trials 8 --time-budget-s 1000 \
  --problems matmul_tiny,softmax_tiny --log-dir "$tmp/budget2_logs" --out "$tmp/budget2_art" \
  --json "$tmp/budget2.json"
expect_rc budget2 0
python3 - "$tmp/budget2.json" <<'PY' || fail "budget2: the problems' time limits"
import json, sys
p = json.load(open(sys.argv[1]))["problems"]
assert abs(p[0]["time_limit_s"] - 500) < 1e-3, p[0]
assert 500 < p[1]["time_limit_s"] <= 1000 - p[0]["seconds"] + 1e-6, (p[0], p[1])
assert not p[0]["time_limited"] and not p[1]["time_limited"], p
PY

# ---- --final-candidates (off on cpu by default): no new trial; the fastest schedules are timed
# again (logged as remeasured records) before the best is replayed, and the summary counts them.
mkdir -p "$tmp/final_logs"
cp "$tmp/logs/matmul_tiny.jsonl" "$tmp/final_logs/"
run final bench --suite "$suite" "${common[@]}" --trials 12 --problems matmul_tiny \
  --final-candidates 2 --log-dir "$tmp/final_logs" --out "$tmp/final_art" --json "$tmp/final.json"
expect_rc final 0
expect_out final "^\[1/1\] matmul_tiny: 12 trials \(0 new, [2-4] timed again to pick\), "
python3 - "$tmp/final_logs/matmul_tiny.jsonl" "$tmp/final.json" <<'PY' || fail "final: log or summary"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
marked = [l for l in lines if l.get("kind", "record") == "record" and l.get("remeasured")]
p = json.load(open(sys.argv[2]))["problems"][0]
assert 2 <= p["final_timed"] <= 4 and len(marked) == p["final_timed"], (p, len(marked))
PY

# ---- --final-min-time-ms / --final-budget-s: out of range is refused by name (usage error, 2);
# with no budget for it no schedule is timed again.
run final_range bench --suite "$suite" "${common[@]}" --trials 12 --problems matmul_tiny \
  --final-candidates 2 --final-min-time-ms 70000 --log-dir "$tmp/final_logs" --out "$tmp/final_art"
expect_error final_range "--final-min-time-ms: Value 70000 not in range"
run final_soak_range bench --suite "$suite" "${common[@]}" --trials 12 --problems matmul_tiny \
  --final-soak-ms 70000 --log-dir "$tmp/final_logs" --out "$tmp/final_art"
expect_error final_soak_range "--final-soak-ms: Value 70000 not in range"
run final_no_budget bench --suite "$suite" "${common[@]}" --trials 12 --problems matmul_tiny \
  --final-candidates 4 --final-min-time-ms 1000 --final-budget-s 0 --log-dir "$tmp/final_logs" \
  --out "$tmp/final_art"
expect_rc final_no_budget 0
expect_out final_no_budget "^\[1/1\] matmul_tiny: 12 trials \(0 new\), "

# ---- A cuda problem on a machine without a driver fails by itself (skipped where one exists).
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  echo "note: libcuda.so.1 present; the no-driver case is skipped"
else
  run no_driver bench --suite "$suite" --target cuda --trials 4 --per-round 4 --quiet \
    --problems matmul_tiny --log-dir "$tmp/cuda_logs" --out "$tmp/cuda_art"
  expect_rc no_driver 1
  expect_out no_driver "^\[1/1\] matmul_tiny: FAILED: tune: no CUDA driver found"
fi

# ---- Ctrl-C: the round in flight is logged, the run stops (130), later problems are not run.
"$bin" bench --suite "$suite" "${base[@]}" --trials 100000 --per-round 2 \
  --problems matmul_tiny,dense_bias_relu_tiny --log-dir "$tmp/int_logs" --out "$tmp/int_art" \
  --json "$tmp/int.json" >"$tmp/int.out" 2>"$tmp/int.err" &
pid=$!
for _ in $(seq 1 600); do  # until the first round is logged (a safety net, not a check)
  [[ -f "$tmp/int_logs/matmul_tiny.jsonl" && "$(wc -l <"$tmp/int_logs/matmul_tiny.jsonl")" -ge 3 ]] &&
    break
  sleep 0.1
done
for _ in $(seq 1 40); do  # SIGINT until tune acknowledges one
  kill -INT "$pid" 2>/dev/null || break
  sleep 0.5
  grep -q "tune: interrupt:" "$tmp/int.err" && break
done
wait "$pid"
echo $? >"$tmp/int.rc"
expect_rc int 130
expect_out int "^\[1/2\] matmul_tiny: [0-9]+ trials \([0-9]+ new\), .*interrupted"
expect_out int "^dense_bias_relu_tiny +0 +0 +- +- +not run$"
[[ ! -e "$tmp/int_logs/dense_bias_relu_tiny.jsonl" ]] || fail "int: the second problem was tuned"
python3 - "$tmp/int_logs/matmul_tiny.jsonl" "$tmp/int.json" <<'PY' || fail "int: log or summary"
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n"), "the log ends in a partial line"
lines = [json.loads(l) for l in text.splitlines()]
records = [l for l in lines if l.get("kind", "record") == "record"]
rounds = [l for l in lines if l.get("kind") == "round"]
assert sum(r["trials"] for r in rounds) == len(records) > 0, (len(records), len(rounds))
s = json.load(open(sys.argv[2]))
assert s["interrupted"] is True, s
assert [p["status"] for p in s["problems"]] == ["interrupted", "not_run"], s["problems"]
assert s["problems"][0]["trials"] == len(records), (s["problems"][0], len(records))
PY

# ---- User errors: nothing is tuned.
run no_suite bench --suite "$tmp/nope.json" "${common[@]}" --trials 8 --log-dir "$tmp/l" --out "$tmp/a"
expect_error no_suite "cannot read suite file '$tmp/nope.json'"
run unknown bench --suite "$suite" "${common[@]}" --trials 8 --problems matmul_tiny,nope \
  --log-dir "$tmp/l" --out "$tmp/a"
expect_error unknown "--problems: no problem 'nope' in $suite"
: >"$tmp/plain"
run log_under_file bench --suite "$suite" "${common[@]}" --trials 8 --log-dir "$tmp/plain/logs" \
  --out "$tmp/a"
expect_error log_under_file "cannot create log directory '$tmp/plain/logs'"
run log_is_file bench --suite "$suite" "${common[@]}" --trials 8 --log-dir "$tmp/plain" --out "$tmp/a"
expect_error log_is_file "log directory '$tmp/plain' is not a directory"
run out_under_file bench --suite "$suite" "${common[@]}" --trials 8 --log-dir "$tmp/l" \
  --out "$tmp/plain/art"
expect_error out_under_file "cannot create output directory '$tmp/plain/art'"
run init_random bench --suite "$suite" "${common[@]}" --trials 8 --model-init "$tmp/m.model" \
  --log-dir "$tmp/l" --out "$tmp/a"
expect_error init_random "--model-init needs --model xgboost"
xg=("${base[@]/random/xgboost}")
run init_missing bench --suite "$suite" "${xg[@]}" --per-round 4 --quiet --trials 8 \
  --model-init "$tmp/nope.model" --log-dir "$tmp/l" --out "$tmp/a"
expect_error init_missing "$tmp/nope.model"
[[ ! -e "$tmp/l" && ! -e "$tmp/a" ]] || fail "errors: a log or output directory was created"
run bad_json bench --suite "$suite" "${common[@]}" --trials 8 --log-dir "$tmp/l2" --out "$tmp/a2" \
  --json "$tmp/plain/s.json"
expect_error bad_json "cannot write summary '$tmp/plain/s.json'"
[[ ! -e "$tmp/l2/matmul_tiny.jsonl" ]] || fail "bad_json: a problem was tuned"

finish "bench"

#!/usr/bin/env bash
# `tilesearch tune` on the cpu target, tiny: 4 trials write 4 log lines whose steps are distinct, a
# resume to 6 measures only 2 more (the first 4 lines unchanged), the best record printed is one of
# the logged ones; a missing --log and an unknown --model are one-line errors (exit 2).
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
fast=(--op matmul --shape 32x32 --shape 32x32 --target cpu --per-round 2 --population 16
      --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0 --quiet --log "$tmp/t.jsonl")

run first tune "${fast[@]}" --trials 4
expect_rc first 0
expect_out first '^trials: 4 \(4 measured now\)$'
[[ "$(wc -l <"$tmp/t.jsonl")" == 4 ]] || fail "first: log has $(wc -l <"$tmp/t.jsonl") lines, expected 4"
cp "$tmp/t.jsonl" "$tmp/first.jsonl"

run resume tune "${fast[@]}" --trials 6
expect_rc resume 0
expect_out resume '^trials: 6 \(2 measured now\)$'
[[ "$(wc -l <"$tmp/t.jsonl")" == 6 ]] || fail "resume: log has $(wc -l <"$tmp/t.jsonl") lines, expected 6"
[[ "$(head -n 4 "$tmp/t.jsonl")" == "$(cat "$tmp/first.jsonl")" ]] || fail "resume changed the first 4 records"

python3 - "$tmp/t.jsonl" "$tmp/resume.out" <<'PY' || fail "log content"
import json, re, sys
records = [json.loads(l) for l in open(sys.argv[1])]
steps = [json.dumps(r["steps"], sort_keys=True) for r in records]
assert len(set(steps)) == len(steps), "a schedule was measured twice"
assert sorted(r["trial"] for r in records) == list(range(6)), [r["trial"] for r in records]
valid = [r for r in records if r["result"]["error"] == "none"]
assert valid, "no valid record"
best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"])
m = re.search(r"^best: trial (\d+), median ([0-9.]+) ms", open(sys.argv[2]).read(), re.M)
assert m and int(m.group(1)) == best["trial"], (m and m.group(0), best["trial"])
assert abs(float(m.group(2)) - best["result"]["timing"]["median_ms"]) < 1e-3, m.group(0)
PY

run no_log tune --op matmul --shape 32x32 --shape 32x32 --target cpu --trials 4
expect_error no_log "--log"
run bad_model tune "${fast[@]}" --trials 4 --model forest
expect_error bad_model "--model"

finish "tune"

#!/usr/bin/env bash
# `tilesearch inspect` on logs of a tiny cpu tuning job: trials, valid and best (checked against
# the log itself with Python), the round lines' model quality, the 90% trial, --json consistent
# with the log, --plot writes well-formed SVG with one polyline per curve (two logs: one each,
# legend = file names), corrupt lines are warnings on stderr with their line number, and user
# errors (missing log, filter matching nothing) exit 2 with one line.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
fast=(--op matmul --shape 32x32 --shape 32x32 --target cpu --per-round 3 --population 16
      --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0 --quiet --trials 6)

run tune_xgb tune "${fast[@]}" --log "$tmp/xgb.jsonl"
expect_rc tune_xgb 0
run tune_random tune "${fast[@]}" --model random --log "$tmp/random.jsonl"
expect_rc tune_random 0

run one inspect --log "$tmp/xgb.jsonl" --json "$tmp/one.json" --curve-points 3
expect_rc one 0
expect_out one '^matmul 32x32 32x32 float32  \[key [0-9a-f]{16}, cpu\]$'
expect_out one '^  trials 6, valid [0-9]+, best [0-9.e+-]+ ms \([0-9.e+-]+ G(FLOP|B)/s\) at trial [0-5], untuned [0-9.e+-]+ ms at trial [0-5]$'
expect_out one '^  round 1 \(trials 0-2, [0-3] valid; xgboost untrained \(0 samples\)\): pairwise accuracy'
expect_out one '^  round 2 \(trials 3-5, [0-3] valid; xgboost '
expect_out one '^  trial 5: best '  # the last record's "trial" (0-based)
expect_out one '^  90% of the best reached at trial [0-5] \(after [1-6] trials\)$'
[[ ! -s "$tmp/one.err" ]] || fail "one: unexpected stderr: $(cat "$tmp/one.err")"

python3 - "$tmp/xgb.jsonl" "$tmp/one.out" "$tmp/one.json" <<'PY' || fail "inspect output vs log"
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
records = [l for l in lines if l.get("kind", "record") == "record"]
rounds = [l for l in lines if l.get("kind") == "round"]
assert len(records) == 6 and len(rounds) == 2, (len(records), len(rounds))
valid = [r for r in records if r["result"]["error"] == "none"]
best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"])
out = open(sys.argv[2]).read()
m = re.search(r"trials 6, valid (\d+), best ([0-9.e+-]+) ms .*? at trial (\d+)", out)  # the best's trial, not the untuned one's
assert m, out
assert int(m.group(1)) == len(valid), (m.group(0), len(valid))
assert int(m.group(3)) == best["trial"], (m.group(0), best["trial"])
assert abs(float(m.group(2)) - best["result"]["timing"]["median_ms"]) <= 1e-3 * best["result"]["timing"]["median_ms"]
summary = json.load(open(sys.argv[3]))["logs"][0]["workloads"][0]
assert summary["trials"] == 6 and summary["best_trial"] == best["trial"], summary
assert summary["best_median_ms"] == best["result"]["timing"]["median_ms"]
# 90% trial by hand from the log: first count whose best-so-far median <= best / 0.9.
b, t90 = float("inf"), None
for i, r in enumerate(records, 1):
    if r["result"]["error"] == "none":
        b = min(b, r["result"]["timing"]["median_ms"])
    if t90 is None and b <= best["result"]["timing"]["median_ms"] / 0.9:
        t90 = i
assert summary["trials_to_90_percent"] == t90, (summary["trials_to_90_percent"], t90)
assert [r["round"] for r in summary["rounds"]] == [1, 2]
for r in summary["rounds"]:
    acc = r["pairwise_accuracy"]
    assert acc is None or 0 <= acc <= 1, acc
PY

run plot inspect --log "$tmp/xgb.jsonl" --plot "$tmp/one.svg"
expect_rc plot 0
expect_out plot '^plot: .*one.svg \(1 curves\)$'
run plot2 inspect --log "$tmp/xgb.jsonl" --log "$tmp/random.jsonl" --plot "$tmp/two.svg"
expect_rc plot2 0
python3 - "$tmp/one.svg" "$tmp/two.svg" <<'PY' || fail "svg content"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
one = ET.parse(sys.argv[1]).getroot()
assert one.tag == ns + "svg", one.tag
assert len(one.findall(ns + "polyline")) == 1
two = ET.parse(sys.argv[2]).getroot()
assert len(two.findall(ns + "polyline")) == 2
legend = [t.text for t in two.findall(ns + "text") if t.get("class") == "legend"]
assert legend == ["xgb.jsonl", "random.jsonl"], legend
PY

# Filters: by workload (matching and not), by target; corrupt lines are warnings.
run by_op inspect --log "$tmp/xgb.jsonl" --op matmul --shape 32x32 --shape 32x32 --target cpu
expect_rc by_op 0
expect_out by_op '^  trials 6, '
run other_op inspect --log "$tmp/xgb.jsonl" --op matmul --shape 16x16 --shape 16x16
expect_error other_op "no record of workload matmul 16x16 16x16"
# ... and says which workloads the log holds.
grep -qE 'the log holds records of 1 other workload: matmul 32x32 32x32 float32 \(key [0-9a-f]{16}, cpu, 6 records\)$' \
  "$tmp/other_op.err" || fail "other_op: the log's workloads not listed: $(cat "$tmp/other_op.err")"
run other_target inspect --log "$tmp/xgb.jsonl" --target cuda
expect_error other_target "no record on cuda"
cp "$tmp/xgb.jsonl" "$tmp/corrupt.jsonl"
echo '{"kind": "round", "version": 1}' >>"$tmp/corrupt.jsonl"
echo 'garbage' >>"$tmp/corrupt.jsonl"
run corrupt inspect --log "$tmp/corrupt.jsonl"
expect_rc corrupt 0
expect_out corrupt '^  trials 6, '
expect_out corrupt '2 lines could not be used'
grep -q "corrupt.jsonl:9: skipped: unknown field\|corrupt.jsonl:9: skipped: field" "$tmp/corrupt.err" ||
  fail "corrupt: no warning for line 9: $(cat "$tmp/corrupt.err")"
grep -q "corrupt.jsonl:10: skipped: not valid JSON" "$tmp/corrupt.err" ||
  fail "corrupt: no warning for line 10: $(cat "$tmp/corrupt.err")"

run missing inspect --log "$tmp/absent.jsonl"
expect_error missing "absent.jsonl' does not exist"
run no_log inspect
expect_error no_log "--log"

finish "inspect"

#!/usr/bin/env bash
# --precision in a tuning log on the cpu target: `tune --precision tf32` writes records tagged
# "precision": "tf32" under the workload key with "-tf32" appended; a default (ieee) tune of the
# same workload into the same log does not resume from them (it measures its own trials, under the
# DAG's own key); `replay --precision tf32` picks a tf32 record, plain `replay` an ieee one, and a
# log holding only tf32 records has no record for a plain replay; `check --precision tf32` accepts a
# one-pass TF32 schedule that the default rule rejects; --precision takes ieee or tf32.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
base=(--op matmul --shape 16x16 --shape 16x16 --target cpu --population 8 --generations 1
      --per-round 2 --min-runs 1 --min-time-ms 0 --warmup 0 --quiet --model random)
mm=(--op matmul --shape 16x16 --shape 16x16 --target cpu)

run tf32 tune "${base[@]}" --log "$tmp/t.jsonl" --trials 2 --precision tf32
expect_rc tf32 0
expect_out tf32 '^trials: 2 \(2 measured now\)$'
expect_out tf32 '^workload: .*\(key [0-9a-f]+-tf32\)$'
run only_tf32 replay --log "$tmp/t.jsonl" "${mm[@]}" --out "$tmp/none" --no-check
expect_rc only_tf32 2
grep -q "no record for workload" "$tmp/only_tf32.err" || fail "only_tf32: $(cat "$tmp/only_tf32.err")"

run ieee tune "${base[@]}" --log "$tmp/t.jsonl" --trials 2
expect_rc ieee 0
expect_out ieee '^trials: 2 \(2 measured now\)$'  # the tf32 records are another task's

python3 - "$tmp/t.jsonl" <<'PY' || fail "log content"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l).get("kind", "record") == "record"]
assert [r["precision"] for r in records] == ["tf32", "tf32", "ieee", "ieee"], records
keys = {r["precision"]: r["workload_key"] for r in records}
assert keys["tf32"] == keys["ieee"] + "-tf32", keys
PY

run replay_tf32 replay --log "$tmp/t.jsonl" "${mm[@]}" --precision tf32 --out "$tmp/o1" --no-check
expect_rc replay_tf32 0
expect_out replay_tf32 '^workload: .*\(key [0-9a-f]+-tf32\)$'
run replay_ieee replay --log "$tmp/t.jsonl" "${mm[@]}" --out "$tmp/o2" --no-check
expect_rc replay_ieee 0
expect_out replay_ieee '^workload: .*\(key [0-9a-f]+\)$'

# `check --precision tf32` judges a one-pass TF32 tensor-core schedule with TF32's unit roundoff;
# the default (ieee) rule rejects it.
cat >"$tmp/tf32.json" <<'JSON'
{"version": 1, "workload": {"op": "conv2d_nchw", "shapes": [[2, 16, 8, 8], [128, 16, 3, 3]],
 "dtype": "float32", "attrs": {"padding": "1"}}, "target": "cuda -arch=sm_90",
 "steps": [["TC", 2, "tf32", [64, 128, 16], [64, 128], 3, 0, 1, 0, 1, "wgmma", "repack"]]}
JSON
run check_ieee check --schedule "$tmp/tf32.json"
expect_rc check_ieee 1
expect_out check_ieee '^MISMATCH$'
expect_out check_ieee 'judge it with --precision tf32'
run check_tf32 check --schedule "$tmp/tf32.json" --precision tf32
expect_rc check_tf32 0
expect_out check_tf32 '^OK$'

run bad tune "${base[@]}" --log "$tmp/t.jsonl" --trials 2 --precision fp32
expect_error bad "--precision: fp32 not in {ieee,tf32}"
finish "cli precision"

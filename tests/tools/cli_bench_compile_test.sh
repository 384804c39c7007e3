#!/usr/bin/env bash
# `tilesearch bench-compile`: a handful of distinct matmul tilings compile (every candidate counted,
# the JSON agrees with the printed numbers: candidates / wall = throughput), and bad options exit 2.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"

"$bin" bench-compile --size 256 --candidates 6 --workers 2 --json "$tmp/b.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 0 ]] || fail "bench-compile exit $rc: $(cat "$tmp/err")"
grep -Eq '^bench-compile: 6 candidates of matmul 256x256x256' "$tmp/out" || fail "header: $(head -1 "$tmp/out")"
grep -Eq '^MLIR->PTX ms \(per candidate\) +median +[0-9.]+ .*\(n=6\)$' "$tmp/out" || fail "no compile distribution: $(cat "$tmp/out")"
python3 - "$tmp/b.json" <<'PY' || fail "json inconsistent"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["candidates"] == 6 and j["failed"] == 0, j
assert abs(j["throughput_per_s"] - 1000.0 * j["candidates"] / j["wall_ms"]) < 1e-6 * j["throughput_per_s"], j
c = j["compile_ms"]
assert c["count"] == 6 and 0 < c["p10"] <= c["median"] <= c["p90"] <= c["max"], c
# The phases add up to no more than the whole (each candidate's phases are parts of its total).
assert sum(p["median"] for p in j["phases_ms"].values()) <= c["max"] * 1.01, j["phases_ms"]
PY

"$bin" bench-compile --size 16 >"$tmp/o2" 2>"$tmp/e2"
[[ $? == 2 ]] && grep -q 'size must be at least 32' "$tmp/e2" || fail "--size 16 not refused: $(cat "$tmp/e2")"
"$bin" bench-compile --candidates 0 >"$tmp/o3" 2>"$tmp/e3"
[[ $? == 2 ]] && grep -q 'candidates must be at least 1' "$tmp/e3" || fail "--candidates 0 not refused"

# Errors that can be known early are reported before compiling (nothing on stdout).
"$bin" bench-compile --candidates 3 --arch sm_1 >"$tmp/o4" 2>"$tmp/e4"
[[ $? == 2 && ! -s "$tmp/o4" ]] && grep -q "sm_1" "$tmp/e4" && [[ "$(wc -l <"$tmp/e4")" == 1 ]] ||
  fail "--arch sm_1: $(cat "$tmp/e4")"
"$bin" bench-compile --candidates 3 --json /nonexistent-dir/x.json >"$tmp/o5" 2>"$tmp/e5"
[[ $? == 2 && ! -s "$tmp/o5" ]] && grep -q "cannot write --json" "$tmp/e5" || fail "--json: $(cat "$tmp/e5")"

# --log: a log's records are the candidates, read and replayed as the tuner resumes a log (an
# unreadable line is skipped, a repeated record counted once); two runs give the same PTX hashes,
# the tiling without its unroll pragma another. The records are a committed cpu record with the CUDA
# example's workload, key (as `show` prints it), an H200 target and its steps.
example="$(dirname "$0")/../../examples/schedules/matmul_cuda_sssrrsrs.json"
key="$("$bin" show --schedule "$example" | sed -n 's/^workload key: //p')"
python3 - "$example" "$key" "$(dirname "$0")/../data/cpu-three-workloads.jsonl" \
  "$tmp/log.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
template = json.loads(open(sys.argv[3]).readline())
target = dict(template["target"], kind="cuda", arch="sm_90")
rec = dict(template, workload=s["workload"], workload_key=sys.argv[2], target=target,
           steps=s["steps"])
other = dict(rec, steps=[st for st in s["steps"] if st[0] != "PR"], trial=rec["trial"] + 1)
with open(sys.argv[4], "w") as f:
    for line in (rec, other, rec):
        f.write(json.dumps(line) + "\n")
    f.write("{not json\n")
PY
for n in 1 2; do
  "$bin" bench-compile --log "$tmp/log.jsonl" --candidates 10 --workers 2 --json "$tmp/l$n.json" \
    >"$tmp/o6" 2>"$tmp/e6"
  [[ $? == 0 ]] || fail "--log exit: $(cat "$tmp/e6")"
done
grep -q "skipped" "$tmp/e6" || fail "--log: the unreadable line was not reported: $(cat "$tmp/e6")"
python3 - "$tmp/l1.json" "$tmp/l2.json" <<'PY' || fail "--log json"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["candidates"] == 2 and a["failed"] == 0, a
h = [p["ptx_hash"] for p in a["ptx"]]
assert len(h) == 2 and all(h) and h[0] != h[1], h
assert h == [p["ptx_hash"] for p in b["ptx"]], (h, b["ptx"])
PY
"$bin" bench-compile --log "$tmp/missing.jsonl" >"$tmp/o7" 2>"$tmp/e7"
[[ $? == 2 && ! -s "$tmp/o7" ]] && grep -q "does not exist" "$tmp/e7" || fail "--log missing: $(cat "$tmp/e7")"
: >"$tmp/empty.jsonl"
"$bin" bench-compile --log "$tmp/empty.jsonl" >"$tmp/o8" 2>"$tmp/e8"
[[ $? == 2 ]] && grep -q "has no record that replays" "$tmp/e8" || fail "--log without records: $(cat "$tmp/e8")"

finish "bench-compile"

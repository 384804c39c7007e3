#!/usr/bin/env bash
# Fused workloads (a graph task: op "fused", schedule/fused_workload.h) through the CLI: a schedule
# file of relu(dense(x, w) + b) tuned on the cpu, its log inspected (one workload, by key and by
# the file), its best record replayed by --workload-key into an object + header + JSON whose
# arguments are p0, p1, p2 and the output; where `cc` exists a C driver linked against the object
# computes relu(x·wᵀ + b) of its own naive loops. `--op fused` without nodes is a one-line error.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"

cat >"$tmp/fused.json" <<'JSON'
{"version": 1,
 "workload": {"op": "fused", "shapes": [[8, 16], [12, 16], [12]], "dtype": "float32", "attrs": {},
              "nodes": [{"op": "dense", "inputs": ["p0", "p1"], "attrs": {}},
                        {"op": "add", "inputs": ["n0", "p2"], "attrs": {}},
                        {"op": "relu", "inputs": ["n1"], "attrs": {}}]},
 "target": "cpu", "steps": []}
JSON

run show show --schedule "$tmp/fused.json"
expect_rc show 0

run tune tune --schedule "$tmp/fused.json" --trials 4 --per-round 4 --population 16 \
  --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0 --model random --quiet \
  --log "$tmp/f.jsonl"
expect_rc tune 0
expect_out tune '^workload: fused\[dense\(p0,p1\) add\(n0,p2\) relu\(n1\)\] 8x16 12x16 12 float32 \(key [0-9a-f]{16}\)$'
key="$(sed -nE 's/^workload: .* \(key ([0-9a-f]{16})\)$/\1/p' "$tmp/tune.out")"
[[ -n "$key" ]] || fail "tune: no workload key printed"

run inspect inspect --log "$tmp/f.jsonl"
expect_rc inspect 0
expect_out inspect "^fused\[dense\(p0,p1\) add\(n0,p2\) relu\(n1\)\] 8x16 12x16 12 float32  \[key $key, cpu\]$"
expect_out inspect '^  trials 4, valid 4,'
run inspect_key inspect --log "$tmp/f.jsonl" --workload-key "$key"
expect_rc inspect_key 0
expect_out inspect_key '^  trials 4, valid 4,'
run inspect_file inspect --log "$tmp/f.jsonl" --schedule "$tmp/fused.json"
expect_rc inspect_file 0
expect_out inspect_file '^  trials 4, valid 4,'

run replay replay --log "$tmp/f.jsonl" --workload-key "$key" --out "$tmp/out" --name fdense
expect_rc replay 0
expect_out replay '^re-check: passed'
for f in fdense.o fdense.h fdense.json; do
  [[ -s "$tmp/out/$f" ]] || fail "replay: $f missing or empty"
done
python3 - "$tmp/out/fdense.json" "$key" <<'PY' || fail "replay JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["workload_key"] == sys.argv[2]
assert j["workload"]["op"] == "fused" and len(j["workload"]["nodes"]) == 3, j["workload"]
params = [(a["name"], a["kind"], a["shape"]) for a in j["arguments"] if a["kind"] != "scratch"]
assert params == [("p0", "input", [8, 16]), ("p1", "input", [12, 16]), ("p2", "input", [12]),
                  ("relu_2", "output", [8, 12])], params
PY

if command -v cc >/dev/null 2>&1; then
  cat >"$tmp/driver.c" <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "fdense.h"
enum { M = 8, K = 16, N = 12 };
int main(void) {
  static float x[M * K], w[N * K], b[N], y[M * N];
  srand(5);
  for (int i = 0; i < M * K; ++i) x[i] = (float)rand() / RAND_MAX * 2 - 1;
  for (int i = 0; i < N * K; ++i) w[i] = (float)rand() / RAND_MAX * 2 - 1;
  for (int i = 0; i < N; ++i) b[i] = (float)rand() / RAND_MAX * 2 - 1;
  for (int i = 0; i < M * N; ++i) y[i] = NAN;
  if (fdense(x, w, b, y) != 0) return 3;
  double max_error = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = b[j];
      for (int k = 0; k < K; ++k) acc += (double)x[i * K + k] * w[j * K + k];
      double e = fabs(y[i * N + j] - (acc > 0 ? acc : 0));
      if (!(e <= max_error)) max_error = e; /* NaN propagates */
    }
  printf("max abs error %g\n", max_error);
  return max_error < 1e-4 ? 0 : 1;
}
C
  if cc -std=c99 -Wall -Werror -I"$tmp/out" -o "$tmp/driver" "$tmp/driver.c" "$tmp/out/fdense.o" \
    -lm 2>"$tmp/cc.err"; then
    "$tmp/driver" >"$tmp/driver.out" || fail "C driver: $(cat "$tmp/driver.out")"
  else
    fail "C driver does not link: $(head -c 500 "$tmp/cc.err")"
  fi
fi

run replay_op replay --log "$tmp/f.jsonl" --op fused --out "$tmp/out2"
expect_error replay_op "is selected by --workload-key KEY, not --op fused"
run inspect_op inspect --log "$tmp/f.jsonl" --op fused
expect_error inspect_op "--op fused needs its nodes"

finish "fused workload CLI"

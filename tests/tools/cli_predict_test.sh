#!/usr/bin/env bash
# `tilesearch predict` and `export-dispatch` on the cpu target: a tiny tuning job of one matmul
# shape; a prediction for another shape transfers its record, passes the re-check, and its schedule
# file passes the interpreter's `check`; a dispatch over M writes one checked kernel per bucket and
# a header whose bucket function, linked into a C driver with the bucket's object where `cc`
# exists, computes the matmul of the driver's own naive loop on a padded input. User errors are
# one-line errors (exit 2).
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
export TILESEARCH_CUDA_DRIVER=/nonexistent/libcuda.so.1

run tune tune --op matmul --shape 24x24 --shape 24x24 --target cpu --trials 4 --per-round 4 \
  --population 16 --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0 --model random --quiet \
  --log "$tmp/t.jsonl"
expect_rc tune 0

# --- predict: another shape from the tuned one. ---
run predict predict --op matmul --shape 20x24 --shape 24x28 --target cpu --log "$tmp/t.jsonl" \
  --schedule-out "$tmp/p.json"
expect_rc predict 0
expect_out predict '^candidates: [1-9][0-9]* transferred, 0 sampled, no model'
expect_out predict '^prediction: transferred from trial [0-9]+ of matmul 24x24 24x24 float32 \('
expect_out predict '^check: passed \('
expect_out predict "^wrote: $tmp/p.json\$"
run check check --schedule "$tmp/p.json"
expect_rc check 0
python3 - "$tmp/p.json" "$tmp/t.jsonl" "$tmp/predict.out" <<'PY' || fail "predicted schedule file"
import json, re, sys
j = json.load(open(sys.argv[1]))
assert j["workload"]["op"] == "matmul" and j["workload"]["shapes"] == [[20, 24], [24, 28]], j
assert j["target"] == "cpu", j
# The fastest valid record of the tuned shape, the one the output names (no split here needs
# cutting: every tile of 24 fits 20 and 28 or is cut to them, so compare the step kinds).
records = [r for r in map(json.loads, open(sys.argv[2])) if "result" in r]
valid = [r for r in records if r["result"]["error"] == "none"]
best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"])
trial = int(re.search(r"^prediction: transferred from trial (\d+)", open(sys.argv[3]).read(),
                      re.M).group(1))
assert trial == best["trial"], (trial, best["trial"])
assert [s[0] for s in j["steps"]] == [s[0] for s in best["steps"]], (j["steps"], best["steps"])
PY

run no_source predict --op matmul --shape 20x24 --shape 24x28 --target cpu
expect_error no_source "give --log FILE"
run other_op predict --op relu --shape 64 --target cpu --log "$tmp/t.jsonl"
expect_error other_op "no tuned workload of relu float32 on cpu to transfer from"

# --- export-dispatch over M. ---
run dispatch export-dispatch --op matmul --shape 24x24 --shape 24x24 --target cpu \
  --log "$tmp/t.jsonl" --values 8,1,24,40 --out "$tmp/d" --name mmd
expect_rc dispatch 0
expect_out dispatch '^bucket 1: matmul 1x24 24x24 float32, predicted: transferred from trial'
expect_out dispatch '^bucket 24: matmul 24x24 24x24 float32, record: trial [0-9]+'
expect_out dispatch '^bucket 40: .*check: passed$'
for f in mmd.h mmd.json mmd_1.o mmd_8.o mmd_24.o mmd_40.o mmd_8.h; do
  [[ -s "$tmp/d/$f" ]] || fail "dispatch: $f missing or empty"
done
# A destination that cannot be written (a directory where a bucket's schedule file goes): exit 2,
# and nothing of the dispatch is left in the output folder (no other bucket, no staging folder).
mkdir -p "$tmp/dbad/mmd_24.schedule.json"
run dispatch_bad export-dispatch --op matmul --shape 24x24 --shape 24x24 --target cpu \
  --log "$tmp/t.jsonl" --values 8,24 --out "$tmp/dbad" --name mmd
expect_rc dispatch_bad 2
grep -q "cannot write '$tmp/dbad/mmd_24.schedule.json': it is a directory; nothing was written" \
  "$tmp/dispatch_bad.err" || fail "dispatch_bad: $(cat "$tmp/dispatch_bad.err")"
[[ "$(ls -A "$tmp/dbad")" == "mmd_24.schedule.json" ]] ||
  fail "dispatch_bad: left behind: $(ls -A "$tmp/dbad" | tr '\n' ' ')"
# Each bucket's schedule file passes the interpreter's check.
run check_bucket check --schedule "$tmp/d/mmd_1.schedule.json"
expect_rc check_bucket 0
python3 - "$tmp/d/mmd.json" <<'PY' || fail "dispatch manifest"
import json, sys
j = json.load(open(sys.argv[1]))
assert [b["extent"] for b in j["buckets"]] == [1, 8, 24, 40], j
assert all(b["checked"] and b["passed"] for b in j["buckets"]), j
assert j["buckets"][2]["source"].startswith("record:"), j
PY
if command -v cc >/dev/null 2>&1; then
  cat >"$tmp/driver.c" <<'C'
#include <math.h>
#include <stdio.h>
#include "mmd.h"
enum { M = 5, P = 8, K = 24, N = 24 };  /* M rows, padded to the bucket's P */
int main(void) {
  static float a[P * K], b[K * N], c[P * N];
  if (mmd_bucket(M) != 1 || mmd_extents[1] != P || mmd_bucket(41) != -1) return 2;
  for (int i = 0; i < P * K; ++i) a[i] = i / K < M ? (float)((i * 7) % 13) / 13 - 0.5f : 0;
  for (int i = 0; i < K * N; ++i) b[i] = (float)((i * 5) % 11) / 11 - 0.5f;
  if (mmd_8(a, b, c) != 0) return 3;
  double max_error = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += (double)a[i * K + k] * b[k * N + j];
      double e = fabs(c[i * N + j] - sum);
      if (!(e <= max_error)) max_error = e;
    }
  printf("max abs error %g\n", max_error);
  return max_error < 1e-5 ? 0 : 1;
}
C
  if cc -std=c99 -Wall -Werror -I"$tmp/d" -o "$tmp/driver" "$tmp/driver.c" "$tmp/d/mmd_8.o" -lm \
    2>"$tmp/cc.err"; then
    "$tmp/driver" >"$tmp/driver.out" 2>&1 || fail "C driver: rc $? $(cat "$tmp/driver.out")"
  else
    fail "C driver does not build against mmd.h / mmd_8.o: $(head -c 600 "$tmp/cc.err")"
  fi
else
  echo "note: no cc; the dispatch header was not compiled"
fi
run bad_dim export-dispatch --op matmul --shape 24x24 --shape 24x24 --target cpu \
  --log "$tmp/t.jsonl" --values 8 --dim 2 --out "$tmp/d2" --name mmd
expect_error bad_dim "--dim 2: input 0 has rank 2"
[[ ! -e "$tmp/d2" ]] || fail "bad_dim: wrote $tmp/d2"

# A reduced dimension cannot be padded: softmax over its rows' length is refused.
run sm_tune tune --op softmax --shape 8x64 --target cpu --trials 2 --per-round 2 --population 16 \
  --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0 --model random --quiet \
  --log "$tmp/sm.jsonl"
expect_rc sm_tune 0
run reduced export-dispatch --op softmax --shape 8x64 --target cpu --log "$tmp/sm.jsonl" \
  --input 0 --dim 1 --values 16,64 --out "$tmp/d3" --name sm
expect_error reduced "reduces over it"
[[ ! -e "$tmp/d3" ]] || fail "reduced: wrote $tmp/d3"

# Records of the tf32 precision never answer an ieee prediction.
run tf32_tune tune --op matmul --shape 24x24 --shape 24x24 --target cpu --precision tf32 \
  --trials 2 --per-round 2 --population 16 --generations 1 --min-runs 2 --min-time-ms 0 \
  --warmup 0 --model random --quiet --log "$tmp/tf32.jsonl"
expect_rc tf32_tune 0
run tf32_for_ieee predict --op matmul --shape 20x24 --shape 24x28 --target cpu \
  --log "$tmp/tf32.jsonl"
expect_error tf32_for_ieee "no tuned workload of matmul float32 on cpu"
run tf32_for_tf32 predict --op matmul --shape 20x24 --shape 24x28 --target cpu --precision tf32 \
  --log "$tmp/tf32.jsonl"
expect_rc tf32_for_tf32 0
expect_out tf32_for_tf32 '^check: passed'

finish "predict"

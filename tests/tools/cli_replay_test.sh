#!/usr/bin/env bash
# `tilesearch replay`: a tiny cpu tuning job replayed into an object file, a C header and a JSON
# whose record is the log's fastest valid one (found here from the log's JSON); where `cc` exists a
# C driver linked against the object computes the matmul of its own naive loop. The target
# defaults to the log's, --workload-key names the same workload, --no-check skips the re-check. A
# GPU record (the example SSSRRSRS schedule written as a log line) gives PTX (a cubin when ptxas is
# at hand), launches in the JSON and a header that compiles against cuda.h; without a driver it
# is "not re-checked". A missing log, a workload with no record, an unknown target and a missing
# workload are one-line errors (exit 2).
# Run by ctest with TILESEARCH set to the binary and EXAMPLES to examples/schedules.
set -u
source "$(dirname "$0")/cli_lib.sh"
examples="${EXAMPLES:?set EXAMPLES to examples/schedules}"
# No driver, even on a GPU machine: the cuda record must report "not re-checked".
export TILESEARCH_CUDA_DRIVER=/nonexistent/libcuda.so.1
mm=(--op matmul --shape 24x24 --shape 24x24)

run tune tune "${mm[@]}" --target cpu --trials 2 --per-round 2 --population 16 --generations 1 \
  --min-runs 2 --min-time-ms 0 --warmup 0 --model random --quiet --log "$tmp/t.jsonl"
expect_rc tune 0

# --- cpu: object, header, JSON of the best record. ---
run replay replay --log "$tmp/t.jsonl" "${mm[@]}" --target cpu --out "$tmp/out" --name mm
expect_rc replay 0
expect_out replay '^workload: matmul 24x24 24x24 float32 \(key [0-9a-f]+\)$'
expect_out replay '^target: cpu'
expect_out replay '^record: trial [0-9]+, median [0-9.]+ ms, [0-9.]+ GFLOP/s, [0-9]+ steps$'
expect_out replay '^entry: mm \('
expect_out replay '^re-check: passed \([0-9]+ trials on fresh inputs'
for f in mm.o mm.h mm.json; do
  expect_out replay "^wrote: $tmp/out/$f\$"
  [[ -s "$tmp/out/$f" ]] || fail "replay: $f missing or empty"
done

python3 - "$tmp/t.jsonl" "$tmp/out/mm.json" "$tmp/replay.out" <<'PY' || fail "replay JSON"
import json, re, sys
records = [r for r in map(json.loads, open(sys.argv[1])) if "result" in r]  # not round lines
valid = [r for r in records if r["result"]["error"] == "none"]
best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"])
j = json.load(open(sys.argv[2]))
assert j["trial"] == best["trial"], (j["trial"], best["trial"])
assert j["median_ms"] == best["result"]["timing"]["median_ms"], j["median_ms"]
assert j["workload_key"] == best["workload_key"]
assert j["workload"]["op"] == "matmul" and j["workload"]["shapes"] == [[24, 24], [24, 24]]
assert j["target"] == "cpu" and j["entries"] == ["mm"] and j["launches"] == []
assert j["steps"] == best["steps"]
assert [(a["name"], a["kind"], a["dtype"], a["shape"]) for a in j["arguments"]] == [
    ("A", "input", "float32", [24, 24]), ("B", "input", "float32", [24, 24]),
    ("C", "output", "float32", [24, 24])], j["arguments"]
assert abs(j["gflops"] - 2 * 24**3 / (j["median_ms"] * 1e-3) / 1e9) < 1e-9 * j["gflops"] + 1e-12
assert j["check"]["checked"] and j["check"]["passed"], j["check"]
m = re.search(r"^record: trial (\d+)", open(sys.argv[3]).read(), re.M)
assert int(m.group(1)) == best["trial"]
PY

if command -v cc >/dev/null 2>&1; then
  cat >"$tmp/driver.c" <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "mm.h"
enum { N = 24 };
int main(void) {
  static float a[N * N], b[N * N], c[N * N];
  srand(7);
  for (int i = 0; i < N * N; ++i) {
    a[i] = (float)rand() / RAND_MAX * 2 - 1;
    b[i] = (float)rand() / RAND_MAX * 2 - 1;
    c[i] = NAN;
  }
  if (mm(a, b, c) != 0) return 3;
  double max_error = 0;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int k = 0; k < N; ++k) sum += (double)a[i * N + k] * b[k * N + j];
      double e = fabs(c[i * N + j] - sum);
      if (!(e <= max_error)) max_error = e;  /* NaN propagates */
    }
  printf("max abs error %g\n", max_error);
  return max_error < 1e-5 ? 0 : 1;
}
C
  if cc -std=c99 -Wall -Werror -I"$tmp/out" -o "$tmp/driver" "$tmp/driver.c" "$tmp/out/mm.o" -lm \
    2>"$tmp/cc.err"; then
    "$tmp/driver" >"$tmp/driver.out" 2>&1 || fail "C driver: $(cat "$tmp/driver.out")"
  else
    fail "C driver does not build against mm.o / mm.h: $(head -c 600 "$tmp/cc.err")"
  fi
else
  echo "note: no cc; the object was not linked into a C program"
fi

# --- The target defaults to the log's; --workload-key names the same workload; --no-check. ---
run default replay --log "$tmp/t.jsonl" "${mm[@]}" --out "$tmp/out2" --no-check
expect_rc default 0
expect_out default '^target: cpu'
key="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workload_key"])' "$tmp/out/mm.json")"
run by_key replay --log "$tmp/t.jsonl" --workload-key "$key" --out "$tmp/out3" --no-check
expect_rc by_key 0
expect_out by_key '^re-check: skipped \(--no-check\)$'
[[ "$(sed -n 's/^record: //p' "$tmp/by_key.out")" == "$(sed -n 's/^record: //p' "$tmp/replay.out")" ]] ||
  fail "--workload-key picked another record"

# --- cuda: a GPU record written as a log line from the example schedule. ---
gkey="$("$bin" show --op matmul --shape 128x128 --shape 128x128 | sed -n 's/^.*workload key: //p')"
[[ -n "$gkey" ]] || fail "show printed no workload key"
python3 - "$examples/matmul_cuda_sssrrsrs.json" "$tmp/t.jsonl" "$gkey" >"$tmp/g.jsonl" <<'PY' ||
import json, sys
schedule = json.load(open(sys.argv[1]))
record = json.loads(open(sys.argv[2]).readline())
record["workload"] = schedule["workload"]
record["workload_key"] = sys.argv[3]
# A cpu record has no GPU limits: a cuda one needs them all.
record["target"].update(kind="cuda", arch="sm_90", device_name="NVIDIA H200", max_threads_per_block=1024, max_shared_memory_per_block=49152, max_shared_memory_optin=232448, max_registers_per_block=65536, warp_size=32, max_vthread_extent=8, max_vector_bytes=16, sm_count=132, l2_bytes=62914560)
record["steps"] = schedule["steps"]
record["result"]["error"], record["result"]["message"] = "none", ""
record["result"]["costs_s"], record["result"]["timing"]["median_ms"] = [2e-5], 0.02
record["result"]["timing"]["runs"], record["result"]["timing"]["samples_ms"] = 1, [0.02]
record["trial"] = 9
print(json.dumps(record))
PY
  fail "cannot write the cuda log"
run gpu replay --log "$tmp/g.jsonl" --op matmul --shape 128x128 --shape 128x128 \
  --target "cuda -arch=sm_90" --out "$tmp/gout" --name gmm
expect_rc gpu 0
expect_out gpu '^record: trial 9, median 0.0200 ms, 209.72 GFLOP/s, 24 steps$'
expect_out gpu '^kernel: [A-Za-z0-9_]+ grid \(4, 1, 1\) block \(128, 1, 1\) dynamic shared 0 B$'
expect_out gpu '^re-check: not re-checked: no CUDA driver found'
for f in gmm.ptx gmm.h gmm.json; do
  [[ -s "$tmp/gout/$f" ]] || fail "gpu: $f missing or empty"
done
ptxas_bin="${TILESEARCH_PTXAS:-$(command -v ptxas || true)}"
[[ -z "$ptxas_bin" && -x /usr/local/cuda/bin/ptxas ]] && ptxas_bin=/usr/local/cuda/bin/ptxas
if [[ -n "$ptxas_bin" ]]; then
  [[ -s "$tmp/gout/gmm.cubin" ]] || fail "gpu: ptxas at $ptxas_bin but no gmm.cubin"
else
  expect_out gpu '^note: no cubin: ptxas not found'
fi
python3 - "$tmp/gout/gmm.json" <<'PY' || fail "gpu JSON"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["target"] == "cuda -arch=sm_90" and j["trial"] == 9, (j["target"], j["trial"])
assert [(l["grid"], l["block"], l["dynamic_shared_bytes"]) for l in j["launches"]] == [
    ([4, 1, 1], [128, 1, 1], 0)], j["launches"]
assert j["entries"] == [l["entry"] for l in j["launches"]]
assert [a["name"] for a in j["arguments"]] == ["A", "B", "C"], j["arguments"]
assert j["check"]["checked"] is False and "no CUDA driver" in j["check"]["note"], j["check"]
PY
grep -q "^\.visible \.entry $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["entries"][0])' "$tmp/gout/gmm.json")" \
  "$tmp/gout/gmm.ptx" || fail "gpu: the JSON's entry is not in the PTX"
if command -v cc >/dev/null 2>&1 && [[ -f /usr/local/cuda/include/cuda.h ]]; then
  printf '#include "gmm.h"\nCUresult go(CUmodule m, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {\n  CUfunction f[GMM_NUM_KERNELS];\n  CUresult r = gmm_get_functions(m, f);\n  return r != CUDA_SUCCESS ? r : gmm_launch(f, a, b, c, 0);\n}\n' \
    >"$tmp/gdriver.c"
  cc -std=c99 -Wall -Werror -fsyntax-only -I/usr/local/cuda/include -I"$tmp/gout" "$tmp/gdriver.c" \
    2>"$tmp/gcc.err" || fail "gmm.h does not compile: $(head -c 600 "$tmp/gcc.err")"
fi

# --- User errors: one line, exit 2. ---
run no_log replay --log "$tmp/absent.jsonl" "${mm[@]}" --target cpu --out "$tmp/e1"
expect_error no_log "does not exist"
run no_record replay --log "$tmp/t.jsonl" --op matmul --shape 8x8 --shape 8x8 --target cpu \
  --out "$tmp/e2"
expect_error no_record "no record for workload"
grep -qE 'the log holds records of 1 other workload: matmul 24x24 24x24 float32 \(key [0-9a-f]{16}, cpu, [0-9]+ records?\)$' \
  "$tmp/no_record.err" || fail "no_record: the log's workloads not listed: $(cat "$tmp/no_record.err")"
# A line of the workload cut short (a torn write) may have held its best record: refused unless
# --allow-unreadable-lines.
{ cat "$tmp/t.jsonl"; head -n 1 "$tmp/t.jsonl" | cut -c 1-200; } >"$tmp/torn.jsonl"
run torn replay --log "$tmp/torn.jsonl" "${mm[@]}" --target cpu --out "$tmp/e4" --no-check
expect_error torn "could not be read (line $(($(wc -l <"$tmp/t.jsonl") + 1));"
grep -qF -- "--allow-unreadable-lines" "$tmp/torn.err" || fail "torn: the flag is not named"
run torn_allowed replay --log "$tmp/torn.jsonl" "${mm[@]}" --target cpu --out "$tmp/torn_out" \
  --no-check --allow-unreadable-lines
expect_rc torn_allowed 0
grep -q "lines could not be used" "$tmp/torn_allowed.err" ||
  fail "torn_allowed: the unusable lines are not counted: $(cat "$tmp/torn_allowed.err")"
run other_target replay --log "$tmp/t.jsonl" "${mm[@]}" --target cuda --out "$tmp/e3"
expect_error other_target "on other targets: 2 on cpu"
run bad_target replay --log "$tmp/t.jsonl" "${mm[@]}" --target tpu --out "$tmp/e4"
expect_error bad_target "unknown target 'tpu'"
run no_workload replay --log "$tmp/t.jsonl" --target cpu --out "$tmp/e5"
expect_error no_workload "--workload-key"
[[ ! -e "$tmp/e1" && ! -e "$tmp/e2" && ! -e "$tmp/e4" ]] || fail "an error left an output directory"

finish "replay"

#!/usr/bin/env bash
# `tilesearch measure`: the CPU tiled matmul example is checked and timed (exit 0, a median, a
# throughput that agrees with 2·M·N·K / median, a small max error, a --json file), --no-check
# skips the check, bad options exit 2, and --target cuda on a machine without a CUDA driver exits
# 2 with "no CUDA driver found" (skipped where libcuda.so.1 exists); an rfactor matmul outside
# tight plain tolerances passes by the precision rule's cancellation allowance (--json: no
# mismatch, no arbitration).
# Run by ctest with TILESEARCH set to the binary and EXAMPLES to examples/schedules.
set -u
source "$(dirname "$0")/cli_lib.sh"
examples="${EXAMPLES:?set EXAMPLES to the examples/schedules directory}"

cpu="$examples/matmul_cpu_tiled.json"

# --- The CPU tiled matmul (128^3 float32): checked, timed, throughput. ---
# Uniform inputs only: the default third trial, normal(2, 32), makes products of ~10^3 whose
# errors the bounds below do not describe.
run cpu measure --schedule "$cpu" --min-runs 5 --min-time-ms 5 --inputs uniform uniform01 \
  --json "$tmp/cpu.json"
expect_rc cpu 0
expect_out cpu '^workload: matmul 128x128 128x128 float32'
expect_out cpu '^target: cpu$'
expect_out cpu '^compile: [0-9.]+ ms'
expect_out cpu '^check: [0-9]+ trials, [0-9]+ elements, max abs error [0-9.e+-]+, max rel error [0-9.e+-]+$'
expect_out cpu '^time: [0-9.e+-]+ ms median \(p10 [0-9.e+-]+, p90 [0-9.e+-]+, [0-9]+ runs\)$'
expect_out cpu '^throughput: [0-9.]+ GFLOP/s, [0-9.]+ GB/s$'
expect_out cpu '^OK$'
# At least the requested runs.
runs="$(sed -n 's/^time: .*, \([0-9]*\) runs)$/\1/p' "$tmp/cpu.out")"
[[ -n "$runs" ]] && ((runs >= 5)) || fail "cpu: $runs timed runs, expected at least 5"
# The max errors are those of a float32 128-term dot product of uniform values (fma-contracted vs
# separately rounded): under the 1e-4 tolerance absolute; relative, under 1e-2 (outputs near 0).
awk '/^check:/ {
  for (i = 1; i <= NF; ++i) { if ($i == "abs") abs = $(i + 2); if ($i == "rel") rel = $(i + 2) }
  gsub(",", "", abs); gsub(",", "", rel)
  exit !(abs + 0 >= 0 && abs + 0 < 1e-4 && rel + 0 >= 0 && rel + 0 < 1e-2) }' "$tmp/cpu.out" ||
  fail "cpu: max errors too large: $(grep '^check:' "$tmp/cpu.out")"
# GFLOP/s = 2·128^3 / median, GB/s = 3·128²·4 bytes / median (independent of the program's count),
# within the rounding of the printed median and throughput.
awk '/^time:/ { text = $2; median = $2 + 0 } /^throughput:/ { gflops = $2; gbps = $4 }
  END {
    if (index(text, "e") || index(text, "E")) rel = 1e-2
    else { dot = index(text, "."); dec = dot ? length(text) - dot : 0; rel = 0.5 * 10 ^ -dec / median }
    rel += 1e-3
    want_f = 2 * 128 ^ 3 / (median * 1e6); want_b = 3 * 128 * 128 * 4 / (median * 1e6)
    df = gflops - want_f; db = gbps - want_b; if (df < 0) df = -df; if (db < 0) db = -db
    exit !(median > 0 && df <= 0.006 + rel * want_f && db <= 0.006 + rel * want_b) }' \
  "$tmp/cpu.out" ||
  fail "cpu: throughput does not match 2*128^3 / median: $(grep -E '^(time|throughput):' "$tmp/cpu.out")"
# --json: the measure result with the workload and target.
if command -v python3 >/dev/null; then
  python3 - "$tmp/cpu.json" <<'EOF' || fail "cpu: --json file is wrong"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["target"] == "cpu", j["target"]
assert j["workload"]["op"] == "matmul", j["workload"]
assert j["flops"] == 2 * 128 ** 3, j["flops"]
assert j["gflops_per_s"] > 0, j["gflops_per_s"]
r = j["result"]
assert r["error"] == "none", r["error"]
assert r["check"]["trials"] >= 2 and r["check"]["mismatches"] == 0, r["check"]
median = r["timing"]["median_ms"]
assert median > 0 and r["timing"]["runs"] >= 5, r["timing"]
# Throughput from the full-precision median: 2·128^3 FLOP, 3·128²·4 bytes.
assert abs(j["gflops_per_s"] - 2 * 128 ** 3 / (median * 1e6)) <= 1e-9 * j["gflops_per_s"], j
assert abs(j["gbytes_per_s"] - 3 * 128 * 128 * 4 / (median * 1e6)) <= 1e-9 * j["gbytes_per_s"], j
EOF
else
  [[ -s "$tmp/cpu.json" ]] || fail "cpu: --json file is empty"
fi

# --- --no-check: timed only. ---
run nocheck measure --schedule "$cpu" --no-check --min-runs 2 --min-time-ms 0 --warmup 0
expect_rc nocheck 0
expect_out nocheck '^check: skipped \(--no-check\)$'
expect_out nocheck '^time: '

# --- An override: the unscheduled workload on the cpu target. ---
run plain measure --op relu --shape 256x256 --min-runs 2 --min-time-ms 0
expect_rc plain 0
expect_out plain '^workload: relu 256x256 float32'
expect_out plain '^check: [0-9]+ trials, [0-9]+ elements, max abs error 0, max rel error 0$'
expect_out plain '^OK$'

# --- User errors: exit 2, one line. ---
run no_workload measure
expect_error no_workload "give --op NAME or --schedule FILE"
run bad_runs measure --schedule "$cpu" --min-runs 0
expect_error bad_runs "--min-runs"
run huge measure --op relu --shape 100000x100000
expect_error huge "GiB of host memory"
run nan_time measure --schedule "$cpu" --min-time-ms nan
expect_error nan_time "--min-time-ms: 'nan' is not a number"
run many_runs measure --schedule "$cpu" --min-runs 2147483647
expect_error many_runs "--min-runs: '2147483647' is outside 1..100000"
run bad_inputs measure --schedule "$cpu" --inputs gauss
expect_error bad_inputs "--inputs"
# Three named distributions give three checked trials. normal(2, 8) inputs make 128-deep float32
# sums of magnitude ~10^3 whose correct roundings differ by ~1e-3 (the host kernel contracts into
# fma, the interpreter reference rounds every operation): the documented wider tolerance.
run three_inputs measure --schedule "$cpu" --inputs uniform --inputs uniform01 --inputs normal \
  --atol 1e-2 --rtol 1e-3 --min-runs 2 --min-time-ms 0
expect_rc three_inputs 0
expect_out three_inputs '^check: 3 trials, '
run one_input measure --schedule "$cpu" --inputs normal --atol 1e-2 --rtol 1e-3 --min-runs 2 \
  --min-time-ms 0
expect_rc one_input 0
expect_out one_input '^check: 1 trials, '
run bad_target measure --schedule "$cpu" --target rocm
expect_error bad_target "unknown target 'rocm'"
run cannot_lower measure --schedule "$examples/matmul_cuda_sssrrsrs.json" --target cpu
expect_error cannot_lower "cannot lower for cpu"
# --- The cancellation allowance: an rfactor matmul (k split 64 wide, summed in another order than
# the reference) on normal inputs with tight tolerances differs from the reference by more than
# atol + rtol·|ref|; the check's screen applies the precision rule's 16·u·M (M = Σ|a||b|, from the
# magnitude program, about 2·10^5 here: 0.19), so no element is left for float64 arbitration and
# the sampled float64 error says the candidate is far inside the rule. (Arbitration of elements
# outside the screen: tests/measure/arbitration_test.cc.) ---
cat >"$tmp/rfactor.json" <<'EOF'
{"version": 1, "workload": {"op": "matmul", "shapes": [[32, 4096], [4096, 32]], "dtype": "float32",
 "attrs": {}}, "target": "cpu", "steps": [["SP", 2, 2, 4096, [64], 1], ["RF", 2, 3, 0]]}
EOF
for tol in 1e-6 1e-7; do
  run "allowance$tol" measure --schedule "$tmp/rfactor.json" --inputs normal --atol "$tol" \
    --rtol "$tol" --min-runs 1 --min-time-ms 0 --warmup 0 --json "$tmp/allowance$tol.json"
  expect_rc "allowance$tol" 0
  expect_out "allowance$tol" '^float64 error on 258 sampled points \(ieee\): max [0-9.e-]+, 0\.[0-9]+ of the allowed; the float32 reference.s [0-9.e-]+$'
  if command -v python3 >/dev/null; then
    python3 - "$tmp/allowance$tol.json" "$tol" <<'EOF' || fail "allowance$tol: --json check is wrong"
import json, sys
c = json.load(open(sys.argv[1]))["result"]["check"]
tol = float(sys.argv[2])
# Outside the plain tolerance somewhere (both bounds exceeded), yet no mismatch and no arbitration.
assert c["mismatches"] == 0 and c["arbitrated"] == 0, c
assert c["max_abs_error"] > tol and c["max_rel_error"] > tol, c
EOF
  fi
done
run tf32 measure --schedule "$tmp/rfactor.json" --precision tf32 --min-runs 1 --min-time-ms 0 \
  --warmup 0
expect_rc tf32 0
expect_out tf32 '^float64 error on 258 sampled points \(tf32\): '
run bad_precision measure --schedule "$tmp/rfactor.json" --precision tf32x3
expect_error bad_precision "--precision: tf32x3 not in {ieee,tf32}"

run missing measure --schedule "$tmp/none.json"
expect_error missing "cannot read schedule file"
run bad_json measure --schedule "$cpu" --json "$tmp/no/such/dir/result.json"
expect_error bad_json "cannot write --json file '$tmp/no/such/dir/result.json'"

# --- No CUDA driver here: a clear error, nothing compiled or printed. ---
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  echo "note: libcuda.so.1 present; the no-driver test is skipped"
else
  run no_driver measure --schedule "$examples/matmul_cuda_sssrrsrs.json" --target cuda
  expect_error no_driver "no CUDA driver found"
fi

finish "measure"

#!/usr/bin/env bash
# What the CPU-side changes to the tensor-core path do on the H200, and where the bf16 kernel's
# time goes, in one device call (about 7 minutes):
#   run(command="bash bench/scripts/h200_tensor_core_diagnostics.sh", carry=["dist"], kind="nvidia-h200")
# 1. cuda_runtime_test (all of it: WarpMma kernels, cubins from the Builder, the compensated GPU
#    reference).
# 2. `tilesearch measure` (check, then time) of every hand tensor-core schedule
#    (bench/schedules/*tensor_core*.json): split-K at k = 65536 against the compensated reference,
#    load_ms of cubins.
# 3. The hand bf16 128x128 kernel: its SASS (cuobjdump) and, where ncu reads counters, one profiled
#    launch (--set full, source counters per SASS line) as text.
# 4. TUNE_TRIALS (default 64) trials of matmul 4096^3 float32 and bfloat16 from the shipped model:
#    trials/s, the per-phase split (inspect) and where a trial's time goes.
# 5. Zero-shot schedules (bench/scripts/h200_predict_zero_shot.sh; ZERO_SHOT=0 skips them).
# MEASURE_SCHEDULES: the schedule files of step 2 (default every hand tensor-core schedule).
# Output: $OUT/tc-diagnostics.tgz (run.log, measure_*.json, sass.txt, ncu_*.txt) and
# $OUT/predict-zero-shot.tgz.
set -uo pipefail
top="${OUT:-/tmp/out}"
out="$top/tc-diagnostics"
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" 2>/dev/null | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv

echo "== $(date -u +%FT%TZ) cuda_runtime_test"
timeout 240 "$ts" cuda_runtime_test 2>&1 | grep -E "^\[  (FAILED|PASSED) |^\[==========\]|FAILED" | tail -20

for f in ${MEASURE_SCHEDULES:-bench/schedules/*tensor_core*.json}; do
  name=$(basename "$f" .json)
  echo "== $(date -u +%FT%TZ) measure $name"
  timeout 90 "$ts" measure --schedule "$f" --target cuda --json "$out/measure_$name.json" 2>&1 | tail -8
done

hand=bench/schedules/matmul_bfloat16_cuda_4096_tensor_core.json
echo "== $(date -u +%FT%TZ) SASS and ncu of $hand"
# dist/diag/*.cubin: kernels assembled on the CPU machine (replay writes them), for their SASS.
for c in dist/diag/*.cubin; do
  [[ -f "$c" ]] && command -v cuobjdump >/dev/null || continue
  cuobjdump --dump-sass "$c" >"$out/sass_$(basename "$c" .cubin).txt" 2>&1
done
if command -v ncu >/dev/null; then
  timeout 150 ncu --clock-control none --kernel-name C --launch-skip 2 --launch-count 1 --set full \
    --import-source no --export "$out/hand_bf16" \
    "$root/run" measure --schedule "$hand" --target cuda --no-check --min-runs 5 \
    --warmup 3 >"$out/ncu_run.txt" 2>&1
  echo "ncu rc $?"
  tail -5 "$out/ncu_run.txt"
  if [[ -f "$out/hand_bf16.ncu-rep" ]]; then
    ncu --import "$out/hand_bf16.ncu-rep" --page details >"$out/ncu_details.txt" 2>&1
    ncu --import "$out/hand_bf16.ncu-rep" --page source --print-source sass \
      --csv >"$out/ncu_source_sass.csv" 2>&1
    grep -E "Duration|Registers|Achieved Occupancy|Issue Slots Busy|Tensor|Stall|Warp Cycles" \
      "$out/ncu_details.txt" | head -40
  fi
fi
tar czf "$top/tc-diagnostics.tgz" -C "$top" tc-diagnostics
trials=${TUNE_TRIALS:-64}
for dt in float32 bfloat16; do
  echo "== $(date -u +%FT%TZ) tune matmul 4096^3 $dt, $trials trials from the shipped model"
  timeout 240 "$ts" tune --op matmul --shape 4096x4096 --shape 4096x4096 --dtype "$dt" \
    --target cuda --trials "$trials" --log "$out/tune_$dt.jsonl" 2>&1 | tail -4
  "$ts" inspect --log "$out/tune_$dt.jsonl" 2>&1 | tail -6
  # Where a trial's time goes (sums over the records, seconds).
  python3 - "$out/tune_$dt.jsonl" <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
rs = [r["result"] for r in rs if "result" in r]
s = lambda k: sum(r.get(k, 0) for r in rs) / 1000
print(f"{len(rs)} records: run_wall {s('run_wall_ms'):.1f} s, check {s('check_ms'):.1f} s, "
      f"load {s('load_ms'):.1f} s, compile {s('compile_ms'):.1f} s (parallel), "
      f"screened {sum(1 for r in rs if r.get('screened'))}, "
      f"arbitrated {sum(1 for r in rs if r.get('check', {}).get('arbitrated', 0) > 0)}")
PY
done
tar czf "$top/tc-diagnostics.tgz" -C "$top" tc-diagnostics
if [[ "${ZERO_SHOT:-1}" == 1 ]]; then
  echo "== $(date -u +%FT%TZ) zero-shot"
  timeout 300 bash bench/scripts/h200_predict_zero_shot.sh 2>&1 | tail -25
fi
echo "== done $(date -u +%FT%TZ)"

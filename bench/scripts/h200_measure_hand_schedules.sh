#!/usr/bin/env bash
# Hand-written schedules against PyTorch eager on the H200, in one device call (README.md at the
# repo root, the paragraph "On the H200 (no LLVM there)", says how the device pack is built and
# carried):
#   run(command="bash bench/scripts/h200_measure_hand_schedules.sh", carry=["dist"])
# Unpacks the device pack, runs the GPU runtime tests, measures the example schedules (matmul
# 4096^3 fp32, softmax 4096x4096, transpose 16384x16384) with `tilesearch measure` and PyTorch
# eager on the same shapes with the same method (bench/harness/pytorch_baseline.py), and the
# compile-time benchmark with driver JIT times. Everything lands in $OUT/hand-schedules/ and is
# tarred to $OUT/hand-schedules.tgz (the device tool brings back at most 8 files);
# bench/scripts/hand_schedules_table.py turns it into the markdown tables of bench/results/.
set -uo pipefail
out="${OUT:-/tmp/out}/hand-schedules"
mkdir -p "$out"
log="$out/run.log"
exec > >(tee -a "$log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/bin/tilesearch"
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" 2>/dev/null | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv | tee "$out/gpu.csv"
nproc

if [[ -x "$root/bin/cuda_runtime_test" ]]; then
  echo "== cuda_runtime_test"
  timeout 300 "$root/bin/cuda_runtime_test" --gtest_brief=0 2>&1 | tail -40
fi

runs=${MIN_RUNS:-100}
measure() {  # NAME SCHEDULE
  echo "== measure $1 ($2)"
  timeout 240 "$ts" measure --schedule "$2" --target cuda --min-runs "$runs" --json "$out/measure_$1.json"
  echo "exit $?"
}
measure matmul_4096 "$root/examples/schedules/h200/matmul_cuda_4096.json"
measure matmul_4096_vthread "$root/bench/schedules/matmul_cuda_4096_vthread.json"
measure matmul_2048_smem64k "$root/bench/schedules/matmul_cuda_2048_smem64k.json"  # dynamic shared memory, opt-in
measure softmax_4096 "$root/examples/schedules/h200/softmax_cuda_4096.json"
for t in 128 512 1024; do
  measure "softmax_4096_t$t" "$root/bench/schedules/softmax_cuda_4096_t$t.json"
done
# A sampled state of the shared-memory tiled transpose (bench/NOTES.md, seventh session).
measure transpose_16384 "$root/examples/schedules/h200/transpose_cuda_16384.json"

echo "== pytorch eager (fp32, TF32 off)"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/harness/pytorch_baseline.py --case matmul:4096x4096x4096 --case matmul:2048x2048x2048 \
  --case softmax:4096x4096 --case transpose:16384x16384 --min-runs "$runs" --json "$out/pytorch.json"

echo "== compile-time benchmark"
timeout 300 "$ts" bench-compile --size 1024 --candidates "${CANDIDATES:-400}" --workers "$(nproc)" \
  --jit --json "$out/compile.json"
echo "== done $(date -u +%FT%TZ)"
tar czf "${OUT:-/tmp/out}/hand-schedules.tgz" -C "$(dirname "$out")" hand-schedules

#!/usr/bin/env bash
# The device compare with the precision rule's cancellation allowance (M from the magnitude
# kernel) on the H200, before any tuning relies on it: the GPU tests of the compare kernels and the
# CUDA runner, then the one-pass TF32 hand schedules of bench/schedules (*_tf32_wgmma*.json)
# measured under `--precision tf32` (expected: correct) and `--precision ieee` (expected: wrong
# answer). Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_precision_rule_check.sh", carry=["dist"])
# Environment: TS_ROOT, an unpacked pack to use (default: unpack dist/).
# Output: $OUT/precision-rule/{gpu_tests.log, hand_tf32.log}. Exit status: the GPU tests'.
set -uo pipefail
root=${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}
out="$OUT/precision-rule"
mkdir -p "$out"
timeout 300 "$root/run" cuda_runtime_test \
  --gtest_filter='DeviceCompareGpuTest.*:CudaRunnerGpuTest.*' >"$out/gpu_tests.log" 2>&1
tests_rc=$?
echo "gpu tests: exit $tests_rc"
tail -n 3 "$out/gpu_tests.log"
for f in bench/schedules/*_tf32_wgmma*.json; do
  for precision in tf32 ieee; do
    echo "== $f --precision $precision"
    timeout 120 "$root/run" measure --schedule "$f" --target cuda --precision "$precision" \
      --min-runs 20 2>&1
    echo "exit $?"
  done
done >"$out/hand_tf32.log" 2>&1
grep -E "^==|wrong|correct|median|exit" "$out/hand_tf32.log" | head -n 40
exit "$tests_rc"

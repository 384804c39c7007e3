#!/usr/bin/env bash
# The GPU target's erf / exp / log1p expansions (codegen/fast_math.h) on the H200, in under 3
# minutes: tunes gelu_16384 and softplus_16384 of level1 for a few rounds and scores them against
# PyTorch eager (h200_tune_suites.sh), then sweeps the replayed kernels over 2 x 2^28 float32
# inputs (every 16th bit pattern of all 2^32, two offsets) against float64, beside eager's float32
# on the same inputs (fast_math_sweep.py). Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_fast_math_check.sh", carry=["dist"])
# Environment: TS_ROOT, an unpacked pack to use (default: unpack dist/); TRIALS (default 32).
# Output: $OUT/fast-math/{sweep.log} and $OUT/suites-fast-math.tgz (logs, artifacts, score.md).
# Exit status: the tune-and-score script's, else the sweep's.
set -uo pipefail
root=${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}
out="$OUT/fast-math"
mkdir -p "$out"
TS_ROOT="$root" SUITES=level1 PROBLEMS=gelu_16384,softplus_16384 TRIALS=${TRIALS:-32} \
  PER_ROUND=16 BENCH_S=70 ROUND_S=0 BENCH_KILL_S=10 SCORE_S=45 BASELINES=eager TAG=fast-math \
  bash "$root/bench/scripts/h200_tune_suites.sh"
tune_rc=$?
echo "tune and score: exit $tune_rc"
# The tune script tars its folder; the artifacts are read from the tarball's copy.
tmp=$(mktemp -d)
tar -xzf "$OUT/suites-fast-math.tgz" -C "$tmp" 2>/dev/null
art=$(find "$tmp" -type d -name artifacts | head -n 1)
grep -E "gelu|softplus" "$(find "$tmp" -name score.md | head -n 1)" 2>/dev/null | head -n 6
timeout 60 python3 "$root/bench/scripts/fast_math_sweep.py" --artifacts "${art:-$tmp}" \
  --suite "$root/bench/suites/level1.json" 2>&1 | tee "$out/sweep.log"
sweep_rc=${PIPESTATUS[0]}
rm -rf "$tmp"
[[ $tune_rc -ne 0 ]] && exit "$tune_rc"
exit "$sweep_rc"

#!/usr/bin/env bash
# Tensor-core tilings of matmul 4096³ beside PyTorch eager, in one device call (about 3 minutes):
#   run(command="bash bench/scripts/h200_tensor_core_tile_sweep.sh", carry=["dist"], kind="nvidia-h200")
# Why: ncu on the 128x128x32 bf16 kernel (bench/NOTES.md) shows L2 throughput at 84 % and most
# warp stalls waiting on the cp.async ring, so deeper rings, deeper k tiles and larger block tiles
# (less L2 traffic per FLOP) are the questions. Each variant is a TC step written here, checked and
# timed by `tilesearch measure` (flushed L2, warm-up 3, >= 100 runs and 50 ms); PyTorch eager by
# bench/harness/pytorch_baseline.py with the same method (fp32 with TF32 off, then on).
# Output: $OUT/tile-sweep/{run.log,table.tsv,eager*.json,<variant>.json} and $OUT/tile-sweep.tgz.
set -uo pipefail
out="${OUT:-/tmp/out}/tile-sweep"
mkdir -p "$out/schedules"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" 2>/dev/null | tr '\n' ' ')"

echo "== $(date -u +%FT%TZ) PyTorch eager"
python3 bench/harness/pytorch_baseline.py --case matmul_bf16:4096x4096x4096 \
  --case matmul_f16:4096x4096x4096 --case matmul:4096x4096x4096 --json "$out/eager.json"
python3 bench/harness/pytorch_baseline.py --tf32 --case matmul:4096x4096x4096 \
  --json "$out/eager_tf32.json"

# name|dtype|kind|[bm, bn, bk]|[wm, wn]|pipeline|pad|raster
variants=(
  "bf16_128x128x32_w64x64_s3|bfloat16|bf16|[128, 128, 32]|[64, 64]|3|8|8"
  "bf16_128x128x32_w64x64_s4|bfloat16|bf16|[128, 128, 32]|[64, 64]|4|8|8"
  "bf16_128x128x32_w64x64_s5|bfloat16|bf16|[128, 128, 32]|[64, 64]|5|8|8"
  "bf16_128x128x32_w64x64_s6|bfloat16|bf16|[128, 128, 32]|[64, 64]|6|8|8"
  "bf16_128x128x64_w64x64_s3|bfloat16|bf16|[128, 128, 64]|[64, 64]|3|8|8"
  "bf16_128x128x64_w64x64_s4|bfloat16|bf16|[128, 128, 64]|[64, 64]|4|8|8"
  "bf16_128x128x32_w32x64_s4|bfloat16|bf16|[128, 128, 32]|[32, 64]|4|8|8"
  "bf16_128x128x32_w64x32_s4|bfloat16|bf16|[128, 128, 32]|[64, 32]|4|8|8"
  "bf16_128x256x32_w64x64_s4|bfloat16|bf16|[128, 256, 32]|[64, 64]|4|8|8"
  "bf16_128x256x32_w64x64_s5|bfloat16|bf16|[128, 256, 32]|[64, 64]|5|8|8"
  "bf16_128x256x64_w64x64_s3|bfloat16|bf16|[128, 256, 64]|[64, 64]|3|8|8"
  "bf16_256x128x64_w64x64_s3|bfloat16|bf16|[256, 128, 64]|[64, 64]|3|8|8"
  "bf16_256x128x32_w64x64_s5|bfloat16|bf16|[256, 128, 32]|[64, 64]|5|8|8"
  "bf16_128x128x32_w64x64_s4_r4|bfloat16|bf16|[128, 128, 32]|[64, 64]|4|8|4"
  "bf16_128x128x32_w64x64_s4_r16|bfloat16|bf16|[128, 128, 32]|[64, 64]|4|8|16"
  "f16_128x128x32_w64x64_s4|float16|f16|[128, 128, 32]|[64, 64]|4|8|8"
  "f16_128x128x64_w64x64_s4|float16|f16|[128, 128, 64]|[64, 64]|4|8|8"
  "fp32_3xtf32_128x128x32_w64x32_s3|float32|tf32x3|[128, 128, 32]|[64, 32]|3|4|8"
  "fp32_3xtf32_128x128x32_w64x32_s4|float32|tf32x3|[128, 128, 32]|[64, 32]|4|4|8"
  "fp32_3xtf32_128x128x32_w64x32_s4_r4|float32|tf32x3|[128, 128, 32]|[64, 32]|4|4|4"
  "fp32_3xtf32_128x128x16_w64x32_s5|float32|tf32x3|[128, 128, 16]|[64, 32]|5|4|8"
)
printf "variant\tmedian_ms\tregisters\tshared_bytes\tcheck\n" >"$out/table.tsv"
for v in "${variants[@]}"; do
  IFS='|' read -r name dtype kind block warp pipe pad raster <<<"$v"
  f="$out/schedules/$name.json"
  epilogue=1  # the output cast of a half-precision matmul; float32 has none
  [[ "$dtype" == float32 ]] && epilogue=0
  printf '{"version": 1, "workload": {"op": "matmul", "shapes": [[4096, 4096], [4096, 4096]], "dtype": "%s", "attrs": {}}, "target": "cuda -arch=sm_90", "steps": [["TC", 2, "%s", %s, %s, %s, %s, %s, %s]]}\n' \
    "$dtype" "$kind" "$block" "$warp" "$pipe" "$pad" "$raster" "$epilogue" >"$f"
  echo "== $(date -u +%FT%TZ) $name"
  timeout 60 "$ts" measure --schedule "$f" --target cuda --min-runs 100 --json "$out/$name.json" \
    >"$out/$name.out" 2>&1
  tail -3 "$out/$name.out"
  python3 - "$out/$name.json" "$name" >>"$out/table.tsv" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:  # no JSON: the measure failed before writing it
    print(f"{sys.argv[2]}\tfailed\t\t\t{type(e).__name__}")
    sys.exit(0)
r = j.get("result", j)
k = (r.get("kernels") or [{}])[0]
ok = r.get("error") == "none"
t = r.get("timing", {}).get("median_ms") if ok else None
print(f"{sys.argv[2]}\t{t if t is not None else r.get('error')}\t{k.get('registers_per_thread', '')}\t"
      f"{k.get('dynamic_shared_bytes', 0) + k.get('static_shared_bytes', 0)}\t"
      f"{'pass' if ok else r.get('message', '')[:80]}")
PY
done
cat "$out/table.tsv"
# Why building candidates parallelizes only ~4x on this machine's cores in tune: the compile
# benchmark with 1 worker and with every core.
echo "== $(date -u +%FT%TZ) bench-compile ($(nproc) cores)"
for w in 1 0; do
  timeout 120 "$ts" bench-compile --size 4096 --candidates 64 --workers "$w" \
    --json "$out/bench_compile_w$w.json" 2>&1 | tail -4
done
echo "== done $(date -u +%FT%TZ)"
tar czf "${OUT:-/tmp/out}/tile-sweep.tgz" -C "$(dirname "$out")" tile-sweep

#!/usr/bin/env bash
# Hopper wgmma tilings (TC steps with "wgmma") of the bf16/fp16 matmuls of the tensor-core issue,
# beside the best mma.sync tiling and PyTorch eager, in one device call (about 4 minutes):
#   run(command="bash bench/scripts/h200_wgmma_tile_sweep.sh", carry=["dist"], kind="nvidia-h200")
# Why: the mma.sync kernels stop at 0.53x of cuBLAS with L2 throughput at 84 % (bench/NOTES.md);
# wgmma reads both operands from shared memory (no ldmatrix, no fragment registers), so a block
# can hold a 128x256 tile at one block per SM and move fewer bytes from L2 per FLOP. Each variant
# is checked and timed by `tilesearch measure` (flushed L2, warm-up 3, >= 100 runs and 50 ms);
# PyTorch eager by bench/harness/pytorch_baseline.py with the same method.
# VARIANTS="name|dtype|kind|[bm,bn,bk]|[wm,wn]|pipeline|raster|instruction|m|n|k|transpose_b ..."
# overrides the list; dtype float32 with kind tf32x3 (or tf32) sweeps the float32 kernels, beside
# eager float32 without TF32 (the variants of bench/results/h200-2026-12-02-tf32x3-wgmma-fp32-
# matmul.md). Output: $OUT/wgmma-sweep/{run.log,table.tsv,eager.json,<variant>.json}.
set -uo pipefail
out="${OUT:-/tmp/out}/wgmma-sweep"
mkdir -p "$out/schedules"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" 2>/dev/null | tr '\n' ' ')"

if [[ -n "${VARIANTS:-}" ]]; then
  read -r -a variants <<<"$VARIANTS"
else
  variants=(
    "wg_bf16_128x256x64_w64x256_s3|bfloat16|bf16|[128,256,64]|[64,256]|3|8|wgmma|4096|4096|4096|false"
    "wg_bf16_128x256x64_w64x256_s4|bfloat16|bf16|[128,256,64]|[64,256]|4|8|wgmma|4096|4096|4096|false"
    "wg_bf16_128x256x32_w64x256_s6|bfloat16|bf16|[128,256,32]|[64,256]|6|8|wgmma|4096|4096|4096|false"
    "wg_bf16_128x128x64_w64x128_s4|bfloat16|bf16|[128,128,64]|[64,128]|4|8|wgmma|4096|4096|4096|false"
    "wg_bf16_256x128x64_w128x128_s3|bfloat16|bf16|[256,128,64]|[128,128]|3|8|wgmma|4096|4096|4096|false"
    "wg_bf16_128x256x64_w128x128_s4|bfloat16|bf16|[128,256,64]|[128,128]|4|8|wgmma|4096|4096|4096|false"
    "wg_bf16_64x256x64_w64x256_s4|bfloat16|bf16|[64,256,64]|[64,256]|4|8|wgmma|4096|4096|4096|false"
    "wg_bf16_128x256x64_w64x256_s4_r16|bfloat16|bf16|[128,256,64]|[64,256]|4|16|wgmma|4096|4096|4096|false"
    "wg_bf16_nt_128x256x64_w64x256_s4|bfloat16|bf16|[128,256,64]|[64,256]|4|8|wgmma|4096|4096|4096|true"
    "wg_f16_128x256x64_w64x256_s4|float16|f16|[128,256,64]|[64,256]|4|8|wgmma|4096|4096|4096|false"
    "wg_bf16_11008_128x256x64_w64x256_s4|bfloat16|bf16|[128,256,64]|[64,256]|4|8|wgmma|4096|11008|4096|false"
    "wg_f16_11008_128x256x64_w64x256_s4|float16|f16|[128,256,64]|[64,256]|4|8|wgmma|4096|11008|4096|false"
    "mma_bf16_128x128x32_w64x64_s4_r16|bfloat16|bf16|[128,128,32]|[64,64]|4|16|mma.sync|4096|4096|4096|false"
  )
fi
# Eager for every (dtype, M, N, K) of the variants, in this call.
eager_cases=()
for v in "${variants[@]}"; do
  IFS='|' read -r _ dtype _ _ _ _ _ _ m n k _ <<<"$v"
  c="matmul_${dtype/bfloat16/bf16}:${m}x${n}x${k}"
  c="${c/float16/f16}"
  c="${c/matmul_float32/matmul}"  # pytorch_baseline.py: fp32 matmul, TF32 off
  [[ " ${eager_cases[*]} " == *" --case $c "* ]] || eager_cases+=(--case "$c")
done
echo "== $(date -u +%FT%TZ) PyTorch eager"
python3 bench/harness/pytorch_baseline.py "${eager_cases[@]}" --json "$out/eager.json"

printf "variant\tmedian_ms\ttflops\tregisters\tshared_bytes\tcheck\n" >"$out/table.tsv"
for v in "${variants[@]}"; do
  IFS='|' read -r name dtype kind block warp pipe raster instr m n k tb <<<"$v"
  f="$out/schedules/$name.json"
  pad=0
  epilogue=1  # the cast to the half output type
  if [[ "$dtype" == float32 ]]; then epilogue=0; fi
  if [[ "$instr" == mma.sync ]]; then pad=8; [[ "$dtype" == float32 ]] && pad=4; fi
  b_shape="[$k, $n]"
  [[ "$tb" == true ]] && b_shape="[$n, $k]"
  printf '{"version": 1, "workload": {"op": "matmul", "shapes": [[%s, %s], %s], "dtype": "%s", "attrs": {"transpose_b": "%s"}}, "target": "cuda -arch=sm_90", "steps": [["TC", 2, "%s", %s, %s, %s, %s, %s, %s, 1, "%s"]]}\n' \
    "$m" "$k" "$b_shape" "$dtype" "$tb" "$kind" "$block" "$warp" "$pipe" "$pad" "$raster" \
    "$epilogue" "$instr" >"$f"
  echo "== $(date -u +%FT%TZ) $name"
  timeout 90 "$ts" measure --schedule "$f" --target cuda --min-runs 100 --json "$out/$name.json" \
    >"$out/$name.out" 2>&1
  tail -3 "$out/$name.out"
  python3 - "$out/$name.json" "$name" "$m" "$n" "$k" >>"$out/table.tsv" <<'PY'
import json, sys
name, m, n, k = sys.argv[2], *map(int, sys.argv[3:6])
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:  # no JSON: the measure failed before writing it
    print(f"{name}\tfailed\t\t\t\t{type(e).__name__}")
    sys.exit(0)
r = j.get("result", j)
kern = (r.get("kernels") or [{}])[0]
ok = r.get("error") == "none"
t = r.get("timing", {}).get("median_ms") if ok else None
tf = f"{2 * m * n * k / (t * 1e-3) / 1e12:.0f}" if t else ""
print(f"{name}\t{t if t is not None else r.get('error')}\t{tf}\t"
      f"{kern.get('registers_per_thread', '')}\t"
      f"{kern.get('dynamic_shared_bytes', 0) + kern.get('static_shared_bytes', 0)}\t"
      f"{'pass' if ok else r.get('message', '')[:160]}")
PY
done
cat "$out/table.tsv"
echo "== done $(date -u +%FT%TZ)"

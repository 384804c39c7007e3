#!/usr/bin/env bash
# Kernel times of the build-cost change's pack (linear scf → cf, no MLIR canonicalizer, the
# emitter's unroll budget: bench/NOTES.md, 2026-12-02 "the build phase"), in one device call:
#   run(command="bash bench/scripts/h200_build_cost_check.sh", carry=["dist"], kind="nvidia-h200")
# 1. `tilesearch measure` of the convolution and matmul hand schedules of bench/schedules. Old
#    numbers: the SIMT convolutions and the 3xTF32 wgmma gather in bench/NOTES.md ("compile
#    timeouts of SIMT convolutions", old column: 3.317 / 1.284 / 0.678 ms); the matmul hand
#    schedules in bench/results/h200-2026-11-30-matmul4096-hand-schedules.md,
#    h200-2026-12-01-tensor-core-hand-schedules-more.md and h200-2026-12-02-tf32x3-wgmma-fp32-matmul.md.
# 2. The best record of each log below (bench/logs/h200-2026-12-02-suites-strict-tensor-core),
#    written as a schedule file and measured the same way; the old time is the record's own
#    median, printed next to it ("logged"); bench/results/h200-2026-12-02-suites-strict-tensor-core.md
#    has the same problems' scores.
# 3. The unroll budget (off by default) in the same pack: the SIMT convolution schedules, two
#    compile-timeout records of the 3x3 convolution log and the two fastest SIMT records of the
#    matmul sample in bench/NOTES.md (trials 25 and 101) without and with --unroll-budget 16384.
# Output: one block per schedule (compile, check, time lines) on stdout and in $OUT/check.txt.
# Time: about 3 minutes (each measure under `timeout 25`; none started after 215 s).
set -uo pipefail
deadline=$((SECONDS + 215))
root="$(bash dist/unpack.sh | tail -1)"
[[ -n "$root" && -x "$root/run" ]] || { echo "no unpacked device pack (dist/unpack.sh failed?)"; exit 2; }
out="${OUT:-/tmp}/check.txt"
work=$(mktemp -d)
tar -xJf bench/logs/h200-2026-12-02-suites-strict-tensor-core.tar.xz -C "$work"
logs="$work/h200-2026-12-02-suites-strict-tensor-core"

measure() {  # measure FILE LABEL [extra measure flags]
  local f=$1 label=$2
  shift 2
  if ((SECONDS > deadline)); then echo "== $label: skipped (time)"; return; fi
  echo "== $label"
  timeout 25 "$root/run" measure --schedule "$f" --target cuda --min-runs 20 "$@" 2>&1 |
    grep -E "^compile:|^check:|^time:|FAILED|error|registers" | head -6
}

# Schedule files of the best (or selected) records of a log: "<file> <precision> <logged ms>".
python3 - "$logs" "$work" >"$work/records.txt" <<'EOF'
import json, sys
logs, work = sys.argv[1], sys.argv[2]
picks = [("chunk-a/matmul_square_4096.jsonl", "best"), ("chunk-c/conv2d_3x3_resnet.jsonl", "best"),
         ("chunk-c/conv2d_7x7_stride2_stem.jsonl", "best"), ("chunk-c/conv2d_bias_relu.jsonl", "best"),
         ("tf32-conv/conv2d_3x3_resnet.jsonl", "best"),
         ("chunk-c/conv2d_3x3_resnet.jsonl", "trial:17"), ("chunk-c/conv2d_3x3_resnet.jsonl", "trial:21"),
         ("chunk-a/matmul_square_4096.jsonl", "trial:25"), ("chunk-a/matmul_square_4096.jsonl", "trial:101")]
for path, how in picks:
    recs = []
    for line in open(f"{logs}/{path}"):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "steps" in r and "result" in r:
            recs.append(r)
    if how == "best":
        ok = [r for r in recs if r["result"].get("error") == "none"]
        r = min(ok, key=lambda r: r["result"]["timing"]["median_ms"])
        logged = f'{r["result"]["timing"]["median_ms"]:.4f}'
    else:
        trial = int(how.split(":")[1])
        r = next(r for r in recs if r["trial"] == trial)
        res = r["result"]
        logged = res.get("error") if res.get("error") != "none" else f'{res["timing"]["median_ms"]:.4f}'
    name = path.replace("/", "_").replace(".jsonl", f'_t{r["trial"]}')
    f = f"{work}/{name}.json"
    json.dump({"version": 1, "comment": f"{path} trial {r['trial']}", "workload": r["workload"],
               "target": "cuda -arch=sm_90", "steps": r["steps"]}, open(f, "w"))
    print(f, r.get("precision", "ieee"), logged, "budget" if how != "best" else "")
EOF

{
  for f in bench/schedules/conv2d_*.json bench/schedules/matmul_cuda_4096_128x128.json \
    bench/schedules/matmul_cuda_4096_tensor_core_3xtf32.json \
    bench/schedules/matmul_float32_cuda_4096_tf32x3_wgmma_128x128_wg64x128.json \
    bench/schedules/matmul_bfloat16_cuda_4096_wgmma_128x256.json; do
    measure "$f" "$(basename "$f")"
  done
  while read -r f precision logged budget; do
    measure "$f" "$(basename "$f") (logged: $logged)" --precision "$precision"
    if [[ -n "$budget" ]]; then
      measure "$f" "$(basename "$f") --unroll-budget 16384" --precision "$precision" \
        --unroll-budget 16384
    fi
  done <"$work/records.txt"
  for f in bench/schedules/conv2d_float32_cuda_resnet3x3_simt_*.json; do
    measure "$f" "$(basename "$f") --unroll-budget 16384" --unroll-budget 16384
  done
} 2>&1 | tee "$out"
rm -rf "$work"

#!/usr/bin/env bash
# Times GEMM schedule files on several shapes, each checked against float64 first, at two
# lengths of timing: `measure`'s usual 100 ms of runs (boost clocks) and 1.5 s held (the card at
# its power limit, as score.py's long GEMMs run), next to PyTorch eager timed both ways:
#   run(command="SHAPES='4096x8192x28672 4096x28672x8192' bash bench/scripts/h200_gemm_variants.sh
#                FILE...", carry=["dist"])
# SHAPES: MxNxK, space-separated (default the Llama-3-70B MLP projections at 4096 tokens); DTYPE
# (default bfloat16) picks the eager case. Prints one line per (shape, file, timing); the measure
# outputs go to $OUT/variants/reports.tgz (the device tool returns at most eight files).
set -uo pipefail
# shellcheck source=bench/scripts/run_lib.sh
source "$(dirname "$0")/run_lib.sh"
begin_run variants
rc=0
work=$(mktemp -d)
read -r -a shapes <<<"${SHAPES:-4096x8192x28672 4096x28672x8192}"
dtype="${DTYPE:-bfloat16}"
cases=()
for shape in "${shapes[@]}"; do
  IFS=x read -r m n k <<<"$shape"
  cases+=(--case "matmul_${dtype/bfloat16/bf16}:${m}x${n}x${k}")
  for f in "$@"; do
    n0=$(basename "$f" .json)
    for held in 0 1; do
      tag="$shape-$n0$([[ $held == 1 ]] && echo -held)"
      if [[ $held == 1 ]]; then
        timing=(--no-check --min-runs 100 --min-time-ms 1500)
      else
        timing=(--min-runs 20 --min-time-ms 100)
      fi
      timeout 150 "$ts" measure --schedule "$f" --target cuda --dtype "$dtype" \
        --shape "${m}x${k}" --shape "${k}x${n}" "${timing[@]}" --json "$work/$tag.json" \
        >"$work/$tag.txt" 2>&1
      note_rc $? "measure $tag"
      python3 bench/scripts/measure_json_line.py "$work/$tag.json" "$tag" 0
    done
  done
done
python3 bench/harness/pytorch_baseline.py "${cases[@]/matmul_float16/matmul_f16}" \
  --min-time-ms 100 2>&1 | tail -4
echo "eager held 1.5 s:"
python3 bench/harness/pytorch_baseline.py "${cases[@]/matmul_float16/matmul_f16}" \
  --min-runs 100 --min-time-ms 1500 --max-runs 5000 2>&1 | tail -4
tar czf "$out/reports.tgz" -C "$work" .
exit "$rc"

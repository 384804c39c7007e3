#!/usr/bin/env bash
# Zero-shot schedules on the H200: each tensor-core matmul of the committed tuning logs predicted
# from the OTHER shapes' logs only (`tilesearch predict`, no measurement; ranked by the shipped cost
# model, and once more with --model none: the nearest shape's fastest record), then the predicted
# schedules and each shape's own tuned best measured in this same call by the same method
# (`tilesearch measure`: check, then time), so predicted / tuned is a like-for-like ratio:
#   run(command="bash bench/scripts/h200_predict_zero_shot.sh", carry=["dist"], kind="nvidia-h200")
# The tuned best is itself written by `predict --model none` from the shape's own log (distance 0:
# its fastest record, unchanged). Output: $OUT/predict-zero-shot/{run.log,table.tsv} and
# $OUT/predict-zero-shot.tgz. About 3 minutes.
set -uo pipefail
out="${OUT:-/tmp/out}/predict-zero-shot"
mkdir -p "$out/schedules"
exec > >(tee -a "$out/run.log") 2>&1
root="$(bash dist/unpack.sh | tail -1)"
ts="$root/run"
logs="$out/logs"
mkdir -p "$logs"
for t in bench/logs/h200-2026-12-01-tensor-core-first-tune.tar.xz \
         bench/logs/h200-2026-12-01-tensor-core-second-tune.tar.xz; do
  tar xJf "$t" -C "$logs"
done
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" 2>/dev/null | tr '\n' ' ')"

# name|op shapes|dtype|own log
cases=(
  "square_f16|--shape 4096x4096 --shape 4096x4096|float16|matmul_square_4096_f16"
  "llama_f16|--shape 4096x4096 --shape 4096x11008|float16|matmul_m4096_n11008_k4096_f16"
  "square_bf16|--shape 4096x4096 --shape 4096x4096|bfloat16|matmul_square_4096_bf16"
  "llama_bf16|--shape 4096x4096 --shape 4096x11008|bfloat16|matmul_m4096_n11008_k4096_bf16"
)
all_logs=$(find "$logs" -name '*.jsonl' | sort)
printf "case\tvariant\tmedian_ms\n" >"$out/table.tsv"
for c in "${cases[@]}"; do
  IFS='|' read -r name shapes dtype own <<<"$c"
  own_logs=$(echo "$all_logs" | grep "/$own.jsonl$")
  other_logs=$(echo "$all_logs" | grep -v "/$own.jsonl$")
  other_args=(); for l in $other_logs; do other_args+=(--log "$l"); done
  own_args=(); for l in $own_logs; do own_args+=(--log "$l"); done
  # shellcheck disable=SC2086
  timeout 120 "$ts" predict --op matmul $shapes --dtype "$dtype" --target cuda --model none \
    "${own_args[@]}" --no-check --schedule-out "$out/schedules/${name}_tuned.json"
  # shellcheck disable=SC2086
  timeout 300 "$ts" predict --op matmul $shapes --dtype "$dtype" --target cuda \
    "${other_args[@]}" --no-check --schedule-out "$out/schedules/${name}_predicted_model.json"
  # shellcheck disable=SC2086
  timeout 120 "$ts" predict --op matmul $shapes --dtype "$dtype" --target cuda --model none \
    "${other_args[@]}" --no-check --schedule-out "$out/schedules/${name}_predicted_nearest.json"
  for variant in tuned predicted_model predicted_nearest; do
    f="$out/schedules/${name}_${variant}.json"
    [[ -s "$f" ]] || { printf "%s\t%s\tmissing\n" "$name" "$variant" >>"$out/table.tsv"; continue; }
    echo "== $(date -u +%FT%TZ) measure $name $variant"
    timeout 120 "$ts" measure --schedule "$f" --target cuda --json "$out/${name}_${variant}.json" |
      tee "$out/${name}_${variant}.out" | tail -4
    ms=$(sed -n 's/^time: \([0-9.]*\) ms median.*/\1/p' "$out/${name}_${variant}.out")
    printf "%s\t%s\t%s\n" "$name" "$variant" "${ms:-failed}" >>"$out/table.tsv"
  done
done
cat "$out/table.tsv"
echo "== done $(date -u +%FT%TZ)"
rm -rf "$logs"
tar czf "${OUT:-/tmp/out}/predict-zero-shot.tgz" -C "$(dirname "$out")" predict-zero-shot

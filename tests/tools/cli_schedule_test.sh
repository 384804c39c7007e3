#!/usr/bin/env bash
# Schedule files through the CLI: every example schedule passes `tilesearch check`, `show` prints
# its steps, loop nest and launches, overrides work, and bad files or arguments exit 2 with one line.
# Run by ctest with TILESEARCH set to the binary and EXAMPLES to examples/schedules.
set -u
source "$(dirname "$0")/cli_lib.sh"
examples="${EXAMPLES:?set EXAMPLES to the examples/schedules directory}"

# write NAME JSON: a schedule file $tmp/NAME.json
write() {
  printf '%s\n' "$2" >"$tmp/$1.json"
}

# --- The examples: the required ones exist, and every one passes check. ---
for required in matmul_cuda_sssrrsrs softmax_cuda matmul_cpu_tiled; do
  [[ -f "$examples/$required.json" ]] || fail "examples/schedules/$required.json is missing"
done
count=0
for file in "$examples"/*.json; do
  name="check_$(basename "$file" .json)"
  run "$name" check --schedule "$file"
  expect_rc "$name" 0
  expect_out "$name" '^OK$'
  expect_out "$name" '^output .*: max abs error [0-9.e+-]+ against float64, [0-9.e+-]+ of the allowed error'
  count=$((count + 1))
done
((count >= 3)) || fail "only $count example schedules"

# --- show: workload, steps one per line, loop nest, launches. ---
run show_matmul show --schedule "$examples/matmul_cuda_sssrrsrs.json"
expect_rc show_matmul 0
expect_out show_matmul '^workload: matmul 128x128 128x128 float32'
expect_out show_matmul '^target: cuda -arch=sm_90$'
expect_out show_matmul '^  0: cache_write\(2, local\)$'
expect_out show_matmul 'blockIdx\.x'
expect_out show_matmul 'vthread'
expect_out show_matmul 'threadIdx\.x'
expect_out show_matmul 'allocate A\.shared: float32\[[0-9, ]+\] shared'
expect_out show_matmul 'allocate C\.local: .* local'
expect_out show_matmul '^ *barrier$'
expect_out show_matmul '^launches \(1\):$'
# 64x64 output tiles of a 128x128 matmul: 4 blocks; 8x16 threads; A and B tiles of 64x8 floats.
expect_out show_matmul '^  kernel 0: grid \(4, 1, 1\) block \(128, 1, 1\) shared 4096 B$'

run show_softmax show --schedule "$examples/softmax_cuda.json"
expect_rc show_softmax 0
expect_out show_softmax '^  kernel 0: grid \(32, 1, 1\) block \(128, 1, 1\) shared [0-9]+ B$'
# 128 threads (4 warps): the cross-thread reductions go through warp shuffles (an exchange buffer
# and one partial per warp).
expect_out show_softmax 'allocate softmax_max\.warp_partials: float32\[4\] shared'

run show_cpu show --schedule "$examples/matmul_cpu_tiled.json"
expect_rc show_cpu 0
expect_out show_cpu '^target: cpu$'
expect_out show_cpu ' parallel \{$'
expect_out show_cpu ' vectorize \{$'
expect_out show_cpu ' unroll \{$'
expect_out show_cpu '^launches: none \(cpu target\)$'
expect_no_out show_cpu 'blockIdx'

# --- Overrides. ---
# Splits record the extent they were made for: another M or N no longer replays.
run check_shape check --schedule "$examples/matmul_cpu_tiled.json" --shape 96x40 --shape 40x80
expect_error check_shape "extent"
# Only K changes: the k split belongs to C.local, computed inside C's tile, so it replays.
run check_k check --schedule "$examples/matmul_cpu_tiled.json" --shape 128x64 --shape 64x128
expect_rc check_k 0
expect_out check_k '^workload: matmul 128x64 64x128 float32$'
expect_out check_k '^OK$'

# --op: the softmax schedule applied to log_softmax (same stages and loops).
run check_op check --schedule "$examples/softmax_cuda.json" --op log_softmax
expect_rc check_op 0
expect_out check_op '^workload: log_softmax 32x512 float32$'
expect_out check_op '^output log_softmax '
expect_out check_op '^OK$'

# --target: the cuda matmul schedule cannot run on the cpu target (thread bindings).
run check_target check --schedule "$examples/matmul_cuda_sssrrsrs.json" --target cpu
expect_error check_target "cannot lower for cpu"

# --seed changes the inputs, the result still matches.
run check_seed check --schedule "$examples/softmax_cuda.json" --seed 12345
expect_rc check_seed 0
expect_out check_seed 'seed 12345'

# Without a file: the unscheduled workload, on the cpu by default or the given target.
run check_plain check --op matmul --shape 8x4 --shape 4x6
expect_rc check_plain 0
expect_out check_plain '^target: cpu$'
expect_out check_plain ': exact \(as the naive program\)$'
run show_plain_gpu show --op softmax --shape 4x16 --target cuda
expect_rc show_plain_gpu 0
expect_out show_plain_gpu '^launches \(3\):$'

# --- A wrong schedule is reported, not run. ---
# The split's extent 64 does not match i's extent 128.
write bad_split '{"version": 1, "workload": {"op": "matmul", "shapes": [[128, 128], [128, 128]]},
  "target": "cpu", "steps": [["SP", 2, 0, 64, [8], 1]]}'
run bad_split check --schedule "$tmp/bad_split.json"
expect_error bad_split "$tmp/bad_split.json: step 0: "
# A step that names stage 99.
write bad_stage '{"version": 1, "workload": {"op": "matmul", "shapes": [[16, 16], [16, 16]]},
  "target": "cpu", "steps": [["SP", 2, 0, 16, [4], 1], ["AN", 99, 0, 3]]}'
run bad_stage check --schedule "$tmp/bad_stage.json"
expect_error bad_stage "step 1: "
expect_error bad_stage "99"
run bad_stage_show show --schedule "$tmp/bad_stage.json"
expect_error bad_stage_show "step 1: "
# A malformed field names the file and the field.
write bad_shapes '{"version": 1, "workload": {"op": "matmul", "shapes": "16x16"}, "target": "cpu",
  "steps": []}'
run bad_shapes check --schedule "$tmp/bad_shapes.json"
expect_error bad_shapes "$tmp/bad_shapes.json: field 'workload.shapes' must be a list of shapes"
write newer '{"version": 2, "workload": {"op": "matmul", "shapes": [[4, 4], [4, 4]]},
  "target": "cpu", "steps": []}'
run newer show --schedule "$tmp/newer.json"
expect_error newer "version 2 is newer than this build reads (1)"
write unknown_field '{"version": 1, "workload": {"op": "matmul", "shapes": [[4, 4], [4, 4]]},
  "target": "cpu", "steps": [], "tile": 8}'
run unknown_field check --schedule "$tmp/unknown_field.json"
expect_error unknown_field "unknown field 'tile'"
write not_json '{"version": 1,'
run not_json check --schedule "$tmp/not_json.json"
expect_error not_json "not valid JSON"
run missing_file check --schedule "$tmp/no_such.json"
expect_error missing_file "cannot read schedule file '$tmp/no_such.json'"
# A GPU limit: 2048 threads per block.
write too_many_threads '{"version": 1, "workload": {"op": "relu", "shapes": [[4, 2048]]},
  "target": "cuda", "steps": [["AN", 1, 0, 5], ["AN", 1, 1, 6]]}'
run too_many_threads check --schedule "$tmp/too_many_threads.json"
expect_error too_many_threads "invalid_schedule: 2048 threads per block exceed the limit 1024"

# --- Bad arguments. ---
run no_workload check
expect_error no_workload "give --op NAME or --schedule FILE"
run bad_target check --schedule "$examples/softmax_cuda.json" --target rocm
expect_error bad_target "unknown target 'rocm'"
run bad_seed check --schedule "$examples/softmax_cuda.json" --seed minus
expect_error bad_seed "--seed"
run bad_override check --schedule "$examples/softmax_cuda.json" --attr axis
expect_error bad_override "not of the form name=value"
# Too large for the interpreter without --force.
run too_big check --op matmul --shape 1024x1024 --shape 1024x1024
expect_error too_big "more than the limit 268435456"
expect_error too_big "--force"

# --- The precision rule of the tuner's check: against float64, with the cancellation allowance. ---
# A GEMV whose rows are split across 256 threads (a tree sum) differs from the naive program's
# sequential float32 sum by more than 1e-5 relative on these inputs, and is the more accurate of
# the two: it passes, as it does in the tuner's check and in score.py.
write gemv_tree '{"version": 1, "workload": {"op": "gemv", "shapes": [[64, 4096], [4096]]},
  "target": "cuda", "steps": [["SP", 2, 1, 4096, [256], 1], ["AN", 2, 0, 5], ["AN", 2, 2, 6]]}'
run gemv_tree check --schedule "$tmp/gemv_tree.json"
expect_rc gemv_tree 0
expect_out gemv_tree '^output y \[64\] float32: .*: within tolerance$'
expect_out gemv_tree '^OK$'
# --rtol 0 is an exact comparison with float64: float32 rounding is then a mismatch.
run mismatch check --schedule "$examples/softmax_cuda.json" --rtol 0
expect_rc mismatch 1
expect_out mismatch '^output softmax .*elements differ, first at \[.*\(float64\)$'
expect_out mismatch '^MISMATCH$'
expect_no_out mismatch '^OK$'
run exact check --schedule "$examples/matmul_cuda_sssrrsrs.json"
expect_rc exact 0
expect_out exact ': exact \(as the naive program\)$'

# A cache_write computed at the block loop instead of the thread's: a 128x128 float32 tile per
# thread (64 KiB of local buffers). Refused before codegen, whose unrolled loops took minutes.
sed 's/\["CA", 2, 3, 1\]/["CA", 2, 3, 0]/' "$examples/../../bench/schedules/matmul_cuda_256_smem64k.json" \
  >"$tmp/local_tile.json"
grep -q '\["CA", 2, 3, 0\]' "$tmp/local_tile.json" || fail "local_tile: the edit did not apply"
run local_tile show --schedule "$tmp/local_tile.json"
expect_error local_tile "local buffer 'C.local' brings a thread's local buffers to 65536 bytes"

finish "CLI schedule"

#!/usr/bin/env bash
# `tilesearch show --emit mlir|llvm|ptx`: only the generated code on stdout (GPU MLIR with a
# gpu.func per kernel, LLVM IR, PTX with one .entry per launch that ptxas -arch=sm_90 accepts
# where ptxas exists; host MLIR / LLVM IR for the cpu target), and clear errors for `ptx` on the
# cpu target and for unknown --emit values.
# Run by ctest with TILESEARCH set to the binary and EXAMPLES to examples/schedules.
set -u
source "$(dirname "$0")/cli_lib.sh"
examples="${EXAMPLES:?set EXAMPLES to the examples/schedules directory}"

expect_clean_stderr() {  # NAME
  [[ ! -s "$tmp/$1.err" ]] || fail "$1: wrote to stderr: $(head -c 300 "$tmp/$1.err")"
}

count() {  # NAME REGEX: the number of stdout lines matching
  grep -Ec -- "$2" "$tmp/$1.out"
}

ptxas_bin="$(command -v ptxas || true)"
[[ -z "$ptxas_bin" && -x /usr/local/cuda/bin/ptxas ]] && ptxas_bin=/usr/local/cuda/bin/ptxas

matmul="$examples/matmul_cuda_sssrrsrs.json"
softmax="$examples/softmax_cuda.json"
cpu="$examples/matmul_cpu_tiled.json"

# --- GPU MLIR: a gpu.module with one kernel gpu.func, shared memory as workgroup memory. ---
run mlir show --schedule "$matmul" --emit mlir
expect_rc mlir 0
expect_clean_stderr mlir
expect_out mlir 'gpu\.module'
expect_out mlir 'gpu\.func .* kernel'
expect_out mlir 'gpu\.barrier'
expect_out mlir 'gpu\.thread_id'
expect_no_out mlir '^(schedule|workload|target|steps|loop nest):'
[[ "$(count mlir 'gpu\.func ')" == 1 ]] || fail "mlir: $(count mlir 'gpu\.func ') gpu.func, expected 1"

# --- LLVM IR after optimization: NVPTX triple, a defined kernel. ---
run llvm show --schedule "$matmul" --emit llvm
expect_rc llvm 0
expect_clean_stderr llvm
expect_out llvm '^target triple = "nvptx64-nvidia-cuda"'
expect_out llvm '^define '
expect_no_out llvm 'gpu\.func'

# --- PTX: only PTX text on stdout, one .entry per launch `show` lists, accepted by ptxas. ---
run ptx show --schedule "$matmul" --emit ptx
expect_rc ptx 0
expect_clean_stderr ptx
expect_out ptx '^\.target sm_90'
expect_out ptx '^\.visible \.entry '
expect_no_out ptx '^(schedule|workload|target|launches)'
# Every non-blank line is PTX: a comment, a directive, an instruction, a label or a brace.
grep -Ev '^\s*$' "$tmp/ptx.out" | grep -Evq '^\s*(//|\.|[a-z@{}()]|\$|%|[A-Za-z_$][A-Za-z0-9_$]*:)' &&
  fail "ptx: stdout holds a line that is not PTX: $(grep -Ev '^\s*$' "$tmp/ptx.out" | grep -Ev '^\s*(//|\.|[a-z@{}()]|\$|%|[A-Za-z_$][A-Za-z0-9_$]*:)' | head -n 1)"

# softmax: as many .entry as `show` lists launches (max, exp-sum, normalize or fewer).
run softmax_show show --schedule "$softmax"
launches="$(sed -n 's/^launches (\([0-9]*\)):$/\1/p' "$tmp/softmax_show.out")"
run softmax_ptx show --schedule "$softmax" --emit ptx
expect_rc softmax_ptx 0
[[ -n "$launches" && "$(count softmax_ptx '^\.visible \.entry ')" == "$launches" ]] ||
  fail "softmax_ptx: $(count softmax_ptx '^\.visible \.entry ') .entry, show lists '$launches' launches"

# --target overrides the architecture.
run ptx_sm80 show --schedule "$matmul" --target "cuda -arch=sm_80" --emit ptx
expect_rc ptx_sm80 0
expect_out ptx_sm80 '^\.target sm_80'

# Without a schedule file: the unscheduled workload for the target.
run plain_ptx show --op relu --shape 64x64 --target cuda --emit ptx
expect_rc plain_ptx 0
expect_out plain_ptx '^\.visible \.entry '

# An elementwise stage vectorized by 4 under its thread split (the search draws widths 1, 2, 4):
# 16-byte global loads and stores.
cat >"$tmp/swish_vec.json" <<'JSON'
{"version": 1, "workload": {"op": "swish", "shapes": [[64, 64]], "dtype": "float32", "attrs": {}},
 "target": "cuda -arch=sm_90",
 "steps": [["FU", 1, [0, 1]], ["SP", 1, 0, 4096, [4], 1], ["AN", 1, 1, 2],
           ["SP", 1, 0, 1024, [256], 1], ["AN", 1, 1, 6], ["AN", 1, 0, 5]]}
JSON
run vec_ptx show --schedule "$tmp/swish_vec.json" --emit ptx
expect_rc vec_ptx 0
expect_out vec_ptx 'ld\.global(\.nc)?\.v4\.'
expect_out vec_ptx 'st\.global\.v4\.'

if [[ -n "$ptxas_bin" ]]; then
  for name in ptx softmax_ptx ptx_sm80 plain_ptx vec_ptx; do
    arch=sm_90
    [[ "$name" == ptx_sm80 ]] && arch=sm_80
    "$ptxas_bin" -arch=$arch "$tmp/$name.out" -o "$tmp/$name.cubin" 2>"$tmp/$name.ptxas" ||
      fail "$name: ptxas -arch=$arch rejected the PTX: $(head -c 500 "$tmp/$name.ptxas")"
  done
else
  echo "note: ptxas not found; PTX not assembled"
fi

# --- cpu target: host MLIR (a module of host functions, no gpu dialect) and LLVM IR; no PTX. ---
run cpu_mlir show --schedule "$cpu" --emit mlir
expect_rc cpu_mlir 0
expect_clean_stderr cpu_mlir
expect_out cpu_mlir '^module'
expect_out cpu_mlir '(llvm\.func|func\.func) @'
expect_no_out cpu_mlir 'gpu\.'
run cpu_llvm show --schedule "$cpu" --emit llvm
expect_rc cpu_llvm 0
expect_out cpu_llvm '^define '
expect_no_out cpu_llvm 'nvptx'
run cpu_ptx show --schedule "$cpu" --emit ptx
expect_error cpu_ptx "--emit ptx needs a cuda target, but the target is cpu"
# The GPU schedule on the cpu target cannot even be lowered.
run gpu_on_cpu show --schedule "$matmul" --target cpu --emit mlir
expect_error gpu_on_cpu "cannot lower for cpu"

# --- Bad --emit values name the choices. ---
run bad_emit show --schedule "$matmul" --emit asm
expect_error bad_emit "--emit"
expect_error bad_emit "mlir"
expect_error bad_emit "llvm"
expect_error bad_emit "ptx"
run no_emit_value show --schedule "$matmul" --emit
expect_error no_emit_value "--emit"

finish "--emit"

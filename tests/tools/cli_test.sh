#!/usr/bin/env bash
# The tilesearch CLI as a user runs it: what it prints and its exit codes.
# Run by ctest with TILESEARCH set to the binary.
set -u
bin="${TILESEARCH:?set TILESEARCH to the tilesearch binary}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME ARGS...: runs the binary, leaving stdout, stderr and the exit code in $tmp/NAME.*
run() {
  local name="$1"
  shift
  "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  echo $? >"$tmp/$name.rc"
}

expect_rc() {  # NAME CODE
  local rc
  rc="$(cat "$tmp/$1.rc")"
  [[ "$rc" == "$2" ]] || fail "$1: exit code $rc, expected $2 (stderr: $(head -c 300 "$tmp/$1.err"))"
}

expect_out() {  # NAME REGEX: some stdout line matches
  grep -Eq -- "$2" "$tmp/$1.out" || fail "$1: stdout has no line matching '$2'"
}

# One line "tilesearch: error: ..." containing TEXT on stderr, nothing on stdout, exit code 2.
expect_error() {  # NAME TEXT
  expect_rc "$1" 2
  local lines
  lines="$(wc -l <"$tmp/$1.err")"
  [[ "$lines" == 1 ]] || fail "$1: stderr has $lines lines, expected 1: $(cat "$tmp/$1.err")"
  grep -q '^tilesearch: error: ' "$tmp/$1.err" || fail "$1: stderr lacks 'tilesearch: error: '"
  grep -qF -- "$2" "$tmp/$1.err" || fail "$1: stderr lacks '$2': $(cat "$tmp/$1.err")"
  [[ ! -s "$tmp/$1.out" ]] || fail "$1: printed to stdout on error"
}

run help --help
expect_rc help 0
expect_out help 'ops'
expect_out help 'show'

run ops ops
expect_rc ops 0
expect_out ops '^conv2d_nchw +'
expect_out ops '^softmax +'
expect_out ops 'attrs: +axis=-1'

run ops_one ops layernorm
expect_rc ops_one 0
expect_out ops_one 'eps=1e-05'

run show show --op conv2d_nchw --shape 1x3x8x8 --shape 4x3x3x3 --attr padding=1
expect_rc show 0
expect_out show 'workload key: [0-9a-f]{16}'
expect_out show '^ *for '

run show_dtype show --op softmax --shape 4,16 --dtype float16
expect_rc show_dtype 0
expect_out show_dtype 'float16'

run bad_shape show --op softmax --shape 4xq
expect_error bad_shape "shape '4xq'"

run zero_extent show --op relu --shape 4x0
expect_error zero_extent "extent 0 is not positive"

run unknown_op show --op softmaxx --shape 4x4
expect_error unknown_op "unknown operator 'softmaxx'"

run unknown_op_list ops nosuchop
expect_error unknown_op_list "unknown operator 'nosuchop'"

run shape_count show --op conv2d_nchw --shape 1x3x8x8
expect_error shape_count "expected 2 input shapes, got 1"

run bad_attr show --op softmax --shape 4x4 --attr dim=1
expect_error bad_attr "unknown attribute 'dim'"

run bad_attr_value show --op softmax --shape 4x4 --attr axis=last
expect_error bad_attr_value "'last' is not an integer"

run attr_form show --op softmax --shape 4x4 --attr axis
expect_error attr_form "not of the form name=value"

run bad_dtype show --op softmax --shape 4x4 --dtype float33
expect_error bad_dtype "unknown dtype 'float33'"

run op_error show --op softmax --shape 4x4 --attr axis=3
expect_error op_error "softmax: axis 3 out of range for rank 2"

run no_op show --shape 4x4
expect_error no_op "--op"

run no_command
expect_error no_command "subcommand"

run unknown_command frobnicate
expect_error unknown_command "frobnicate"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all CLI checks passed"

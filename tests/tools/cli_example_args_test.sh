#!/usr/bin/env bash
# examples/tune_and_launch: N and TRIALS that are not whole numbers in range ("abc", "12x", "0",
# "-5", "") are refused with a message naming the argument and exit code 2, before any tuning (no
# log is created). Run by ctest with EXAMPLE set to the tune_and_launch binary.
set -u
example="${EXAMPLE:?set EXAMPLE to the tune_and_launch binary}"
TILESEARCH="$example"  # cli_lib.sh's binary: this test runs the example itself, not `run`
source "$(dirname "$0")/cli_lib.sh"

# refused NAME WHAT BAD ARGS...: exit code 2, stderr names WHAT and quotes BAD.
refused() {
  local name="$1" what="$2" bad="$3"
  shift 3
  timeout -s KILL 60 "$example" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [[ "$rc" == 2 ]] || fail "$name: exit code $rc, expected 2: $(head -c 300 "$tmp/$name.err")"
  grep -qF -- "$what must be an integer from" "$tmp/$name.err" ||
    fail "$name: stderr lacks '$what must be an integer from': $(head -c 300 "$tmp/$name.err")"
  grep -qF -- "got '$bad'" "$tmp/$name.err" || fail "$name: stderr does not quote '$bad'"
  [[ ! -e "$tmp/log.jsonl" ]] || fail "$name: a log was created"
  rm -f "$tmp/log.jsonl"
}

refused n_word "N (the matrix size)" abc abc 4 "$tmp/log.jsonl" cpu
refused n_suffix "N (the matrix size)" 12x 12x 4 "$tmp/log.jsonl" cpu
refused n_zero "N (the matrix size)" 0 0 4 "$tmp/log.jsonl" cpu
refused n_negative "N (the matrix size)" -5 -5 4 "$tmp/log.jsonl" cpu
refused n_empty "N (the matrix size)" "" "" 4 "$tmp/log.jsonl" cpu
refused trials_word "TRIALS" many 32 many "$tmp/log.jsonl" cpu

finish "example argument"

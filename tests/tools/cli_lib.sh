# Shared helpers of the CLI tests (tests/tools/cli_*.sh), sourced after `set -u`:
#   TILESEARCH   the binary (required)
# Each test runs the binary with `run NAME ARGS...` and checks the files it leaves in $tmp with the
# expect_* functions; `finish WHAT` prints the verdict and exits 1 if any check failed.
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
  [[ "$rc" == "$2" ]] ||
    fail "$1: exit code $rc, expected $2 (stdout: $(tail -c 300 "$tmp/$1.out") stderr: $(head -c 300 "$tmp/$1.err"))"
}

expect_out() {  # NAME REGEX: some stdout line matches
  grep -Eq -- "$2" "$tmp/$1.out" || fail "$1: stdout has no line matching '$2'"
}

expect_no_out() {  # NAME REGEX: no stdout line matches
  ! grep -Eq -- "$2" "$tmp/$1.out" || fail "$1: stdout has a line matching '$2'"
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

finish() {  # WHAT: "all WHAT checks passed", or the failure count and exit 1
  if ((failures > 0)); then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all $1 checks passed"
}

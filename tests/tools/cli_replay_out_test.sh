#!/usr/bin/env bash
# `tilesearch replay --out DIR --name NAME` on a tiny cpu log:
# - NAME that is a C keyword ("int"), a C++ keyword ("class") or a reserved identifier ("_k",
#   "a__b") is a one-line error before anything is built or written;
# - DIR that cannot be a directory (under a regular file) is a one-line error before anything is
#   printed (validated first, not after the rebuild and re-check);
# - when one artifact cannot be put in place (DIR/k.json is a directory) none is: DIR holds no
#   k.o, no k.h and no temporary file;
# - a good DIR gets exactly k.o, k.h and k.json.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
run tune tune --op matmul --shape 32x32 --shape 32x32 --target cpu --population 16 \
  --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0 --quiet --per-round 2 --trials 2 \
  --log "$tmp/t.jsonl"
expect_rc tune 0
replay=(replay --log "$tmp/t.jsonl" --op matmul --shape 32x32 --shape 32x32 --no-check)

run keyword "${replay[@]}" --out "$tmp/o1" --name int
expect_error keyword "artifact name 'int' is a C keyword"
run cpp_keyword "${replay[@]}" --out "$tmp/o1" --name class
expect_error cpp_keyword "artifact name 'class' is a C++ keyword"
run empty_name "${replay[@]}" --out "$tmp/o1" --name ""
expect_error empty_name "--name"
run underscore "${replay[@]}" --out "$tmp/o1" --name _k
expect_error underscore "artifact name '_k' is reserved"
run double_underscore "${replay[@]}" --out "$tmp/o1" --name a__b
expect_error double_underscore "artifact name 'a__b' is reserved"
[[ ! -e "$tmp/o1/int.o" && ! -e "$tmp/o1/class.o" ]] || fail "keyword: artifacts were written"

: >"$tmp/plain"
run under_file "${replay[@]}" --out "$tmp/plain/sub" --name k
expect_error under_file "cannot create output directory '$tmp/plain/sub'"

mkdir -p "$tmp/o2/k.json"
run partial "${replay[@]}" --out "$tmp/o2" --name k
expect_rc partial 2
grep -qF "$tmp/o2/k.json" "$tmp/partial.err" || fail "partial: error does not name k.json: $(cat "$tmp/partial.err")"
[[ "$(ls -A "$tmp/o2")" == "k.json" ]] || fail "partial: o2 holds $(ls -A "$tmp/o2" | tr '\n' ' ')"

run good "${replay[@]}" --out "$tmp/o3/new" --name k
expect_rc good 0
[[ "$(ls -A "$tmp/o3/new" | sort | tr '\n' ' ')" == "k.h k.json k.o " ]] ||
  fail "good: o3/new holds $(ls -A "$tmp/o3/new" | tr '\n' ' ')"
expect_out good "^wrote: $tmp/o3/new/k.o$"

finish "replay --out/--name"

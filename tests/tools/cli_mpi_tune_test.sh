#!/usr/bin/env bash
# `mpiexec -n 2 tilesearch tune` on the cpu target: matmul 256³ for 128 trials spread over two
# ranks writes one log of 128 records of distinct schedules, each measured once, trials numbered
# in order, every round line naming both ranks' shares (which add up to the round) and the
# progress lines their build / measure / idle times; `replay` rebuilds its best record, and the
# same command again measures nothing.
# Run by ctest (MPI build only) with TILESEARCH and MPIEXEC set.
set -u
source "$(dirname "$0")/cli_lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
args=(tune --op matmul --shape 256x256 --shape 256x256 --target cpu --trials 128
      --log "$tmp/mm.jsonl")

mpirun tune 2 "${args[@]}"
expect_rc tune 0
expect_out tune '^trials: 128 \(128 measured now\)$'
grep -Eq 'ranks: r0 [0-9]+ trials build [0-9.]+s measure [0-9.]+s idle [0-9.]+s \| r1 ' \
  "$tmp/tune.err" || fail "tune: no per-rank timing in the progress lines: $(tail -n 2 "$tmp/tune.err")"
check_log "$tmp/mm.jsonl" 128 2

run replay replay --log "$tmp/mm.jsonl" --op matmul --shape 256x256 --shape 256x256 \
  --target cpu --out "$tmp/kernel"
expect_rc replay 0
[[ -s "$tmp/kernel/kernel.o" || -n "$(ls "$tmp/kernel"/*.o 2>/dev/null)" ]] ||
  fail "replay: no object file in $tmp/kernel"

mpirun again 2 "${args[@]}"
expect_rc again 0
expect_out again '^trials: 128 \(0 measured now\)$'
finish "MPI tune"

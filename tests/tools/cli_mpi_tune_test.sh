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

# inspect sums each rank's share over the round lines.
run inspect inspect --log "$tmp/mm.jsonl"
expect_rc inspect 0
for r in 0 1; do
  expect_out inspect "^  rank $r: [0-9]+ trials, build [0-9.]+ s, measure [0-9.]+ s, idle [0-9.]+ s$"
done
python3 - "$tmp/mm.jsonl" "$tmp/inspect.out" <<'PY' || fail "inspect: rank trials do not add up"
import json, re, sys
total = {0: 0, 1: 0}
for line in open(sys.argv[1]):
    j = json.loads(line)
    for t in j.get("ranks", []) if j.get("kind") == "round" else []:
        total[t["rank"]] += t["trials"]
shown = {int(m[0]): int(m[1]) for m in re.findall(r"^  rank (\d+): (\d+) trials", open(sys.argv[2]).read(), re.M)}
assert shown == total and sum(total.values()) == 128, (shown, total)
PY

run replay replay --log "$tmp/mm.jsonl" --op matmul --shape 256x256 --shape 256x256 \
  --target cpu --out "$tmp/kernel"
expect_rc replay 0
[[ -s "$tmp/kernel/kernel.o" || -n "$(ls "$tmp/kernel"/*.o 2>/dev/null)" ]] ||
  fail "replay: no object file in $tmp/kernel"

mpirun again 2 "${args[@]}"
expect_rc again 0
expect_out again '^trials: 128 \(0 measured now\)$'
# --help under mpiexec: printed once (by rank 0), exit 0.
mpirun help 2 tune --help
expect_rc help 0
[[ "$(grep -c '^Usage' "$tmp/help.out")" == 1 ]] || fail "help: $(grep -c '^Usage' "$tmp/help.out") usage lines, expected 1"
# More ranks than cores (the launcher bound to one core): rank 0 warns once, the tune still runs.
if command -v taskset >/dev/null; then
  timeout 600 taskset -c 0 "$mpiexec_bin" -n 2 "$bin" tune --op matmul --shape 32x32 \
    --shape 32x32 --target cpu --trials 4 --log "$tmp/one_core.jsonl" \
    >"$tmp/one_core.out" 2>"$tmp/one_core.err"
  echo $? >"$tmp/one_core.rc"
  expect_rc one_core 0
  [[ "$(grep -c 'warning: 2 ranks on host .* share 1 core;' "$tmp/one_core.err")" == 1 ]] ||
    fail "one_core: no single warning: $(cat "$tmp/one_core.err")"
fi
finish "MPI tune"

#!/usr/bin/env bash
# `mpiexec -n 2 tilesearch bench` over a 3-problem suite (tests/tools/data/bench_tiny_suite.json
# without its broken problem) and `mpiexec -n 2 tilesearch tune-graph --small` on the cpu target:
# every problem's log and the graph's one log hold the budget's records of distinct schedules,
# each measured once, with both ranks' shares in every round line; bench replays each problem's
# best into artifacts, `run-graph` runs the graph from the log, and rank 1 prints nothing.
# Run by ctest (MPI build only) with TILESEARCH and MPIEXEC set.
set -u
source "$(dirname "$0")/cli_lib.sh"
source "$(dirname "$0")/mpi_lib.sh"
suite="$(cd "$(dirname "$0")" && pwd)/data/bench_tiny_suite.json"
fast=(--target cpu --population 16 --generations 1 --min-runs 2 --min-time-ms 0 --warmup 0)

mpirun bench 2 bench --suite "$suite" --problems matmul_tiny,softmax_tiny,dense_bias_relu_tiny \
  "${fast[@]}" --trials 16 --per-round 8 --log-dir "$tmp/logs" --out "$tmp/art"
expect_rc bench 0
for p in matmul_tiny softmax_tiny dense_bias_relu_tiny; do
  check_log "$tmp/logs/$p.jsonl" 16 2
  [[ -s "$tmp/art/$p.json" ]] || fail "bench: no artifact $tmp/art/$p.json"
done
[[ "$(grep -c '^bench: 3 problems' "$tmp/bench.out")" == 1 ]] ||
  fail "bench: the header is not printed once (rank 1 printed?): $(head -n 3 "$tmp/bench.out")"

mpirun graph 2 tune-graph --model swiglu_mlp --small "${fast[@]}" --trials 24 --per-round 8 \
  --log "$tmp/g.jsonl"
expect_rc graph 0
check_log "$tmp/g.jsonl" 24 2
run rungraph run-graph --model swiglu_mlp --small --target cpu --log "$tmp/g.jsonl"
expect_rc rungraph 0
finish "MPI bench and tune-graph"

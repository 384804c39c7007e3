#!/usr/bin/env bash
# README command (1): installs dependencies, builds, and runs the main job: tunes a real operator
# (matmul 512x512x512 float32) on the default target (cuda when a CUDA device answers, else this
# machine's CPU) for TRIALS trials (default 128: a few minutes on 2 cores), printing a progress
# line per round, then summarizes the tuning log and replays its best record into a kernel
# artifact (re-checked against the reference on fresh inputs). The log is kept: running this again
# resumes it (nothing is re-measured), so raise TRIALS to tune further.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh tilesearch
ts=build/tools/tilesearch
out=build/main-job
mkdir -p "$out"
workload=(--op matmul --shape 512x512 --shape 512x512 --dtype float32)
"$ts" tune "${workload[@]}" --target auto --trials "${TRIALS:-128}" --log "$out/matmul512.jsonl"
echo
"$ts" inspect --log "$out/matmul512.jsonl"
echo
"$ts" replay --log "$out/matmul512.jsonl" "${workload[@]}" --target auto --out "$out/kernel"

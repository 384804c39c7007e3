#!/usr/bin/env bash
# Samples every running `tilesearch tune` process every $1 seconds (default 15) until none is
# left or $2 seconds passed: state, kernel wait channel, CPU seconds, children, and GPU load, so a
# job that stops progressing shows whether it waits (lock, pipe) or computes. Output on stdout.
set -u
every=${1:-15}
limit=${2:-900}
start=$(date +%s)
while (( $(date +%s) - start < limit )); do
  pids=$(pgrep -f "tilesearch tune|bin/tilesearch tune" || true)
  [[ -z "$pids" ]] && break
  echo "-- $(date -u +%T)"
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader 2>/dev/null | tr '\n' ';'
  echo
  for p in $pids; do
    [[ -r /proc/$p/stat ]] || continue
    read -r -a st </proc/$p/stat
    args=$(tr '\0' ' ' </proc/$p/cmdline | grep -o -- "--op [a-z0-9_]*\|--model [a-z]*\|--crossover-probability [0-9.]*" | tr '\n' ' ')
    kids=$(pgrep -P "$p" | tr '\n' ',')
    echo "pid $p ${args}state ${st[2]} wchan $(cat /proc/$p/wchan 2>/dev/null) cpu_s $(( (st[13] + st[14]) / 100 )) kids [$kids]"
  done
  sleep "$every"
done

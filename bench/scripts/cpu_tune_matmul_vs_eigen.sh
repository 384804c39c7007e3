#!/usr/bin/env bash
# Tuned matmul 512³ on the cpu target against the naive schedule and Eigen, on this machine, in
# one command:
#   bash bench/scripts/cpu_tune_matmul_vs_eigen.sh [BUILD_DIR]        (default BUILD_DIR: build)
# Env: TRIALS (256), SEED (1), MIN_RUNS (timed runs of the re-measurements and Eigen, 100), TAG (a
# suffix of the output names, e.g. "prelim"), SKIP_TUNE=1 (reuse the logs of an earlier run with
# the same date and tag).
#
# Measures matmul 512x512x512 fp32 on the cpu target:
#   - the naive schedule (`tilesearch measure` of the empty schedule: one thread, no tiling);
#   - `tilesearch tune --trials $TRIALS` with 2 threads and with 1 thread, then the best record of
#     each log re-measured with `tilesearch measure` (same method as the tuner, fresh process);
#   - Eigen's GEMM (bench/eigen_gemm, -march=native, OpenMP) with 1 and 2 threads, before and after
#     our runs (the machine is shared: the bracket shows drift);
# and writes bench/results/cpu-<date>[-TAG]-matmul512-vs-eigen.md (numbers, ratios, load
# averages), the raw output beside it (.log) and the tuning logs in bench/logs/ (compress both into
# bench/logs/*.tar.xz before committing, as the earlier runs are).
#
# Threads of our kernels: measure::MeasureOptions::host_threads (0 = every core). When `tune` and
# `measure` take --host-threads, it is used; otherwise the 1-thread runs are pinned to CPU 0 with
# taskset (the kernel's thread pool then splits parallel loops into 2 chunks that share one core:
# one core's throughput, with a little switching overhead; the report says which was used).
set -uo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
ts="$build/tools/tilesearch"
eigen="$build/bench/eigen_gemm"
trials="${TRIALS:-256}"
seed="${SEED:-1}"
runs="${MIN_RUNS:-100}"
date="$(date -u +%F)"
name="cpu-$date${TAG:+-$TAG}-matmul512-vs-eigen"
md="bench/results/$name.md"
raw="bench/results/$name.log"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for f in "$ts" "$eigen"; do
  [[ -x "$f" ]] || { echo "missing $f: ninja -C $build tilesearch eigen_gemm" >&2; exit 2; }
done
mkdir -p bench/results bench/logs
: > "$raw"
exec > >(tee -a "$raw") 2>&1

shape=(--op matmul --shape 512x512 --shape 512x512 --target cpu)
load() { cut -d' ' -f1-3 /proc/loadavg; }
declare -A result  # key -> "median_ms p10_ms min_ms load"

threads_flag() {  # COMMAND THREADS -> prefix and flags, in the globals pre / flags
  pre=(); flags=()
  if "$ts" "$1" --help 2>&1 | grep -q -- --host-threads; then
    flags=(--host-threads "$2")
    thread_note="1-thread runs: --host-threads 1"
  elif [[ "$2" == 1 ]]; then
    pre=(taskset -c 0)
    thread_note="1-thread runs: no --host-threads option, pinned to CPU 0 with taskset (2 chunks share one core)"
  fi
}

measure() {  # KEY THREADS ARGS... : tilesearch measure, median from its --json
  local key="$1" threads="$2"; shift 2
  threads_flag measure "$threads"
  local l; l="$(load)"
  echo "== $(date -u +%T) measure $key (threads $threads ${pre[*]} ${flags[*]}; load $l)"
  "${pre[@]}" "$ts" measure "$@" "${flags[@]}" --json "$work/$key.json" || return
  result[$key]="$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = r["result"]["timing"]
print(t["median_ms"], t["p10_ms"], t["min_ms"])' "$work/$key.json") $l"
  echo "-> ${result[$key]}"
}

eigen_run() {  # KEY THREADS
  local l; l="$(load)"
  echo "== $(date -u +%T) eigen $1 (threads $2; load $l)"
  local line; line="$("$eigen" --m 512 --n 512 --k 512 --threads "$2" --min-runs "$runs")" || return
  echo "$line"
  result[$1]="$(sed -E 's/.*median_ms=([0-9.]+) p10_ms=([0-9.]+) .*min_ms=([0-9.]+) .*/\1 \2 \3/' <<<"$line") $l"
}

tune() {  # KEY THREADS
  local key="$1" log="bench/logs/cpu-$date${TAG:+-$TAG}-matmul512-$1.jsonl"
  threads_flag tune "$2"
  if [[ -z "${SKIP_TUNE:-}" ]]; then
    rm -f "$log"
    echo "== $(date -u +%T) tune $key: $trials trials (threads $2 ${pre[*]} ${flags[*]}; load $(load))"
    local start=$SECONDS
    "${pre[@]}" "$ts" tune "${shape[@]}" --trials "$trials" --seed "$seed" --log "$log" "${flags[@]}"
    echo "tune $key: $((SECONDS - start)) s wall, load after $(load)"
  fi
  # The best valid record as a schedule file (tilesearch replay does this once it exists).
  python3 - "$log" "$work/$key.best.json" <<'EOF' || return
import json, sys
best = None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    res = r.get("result", {})
    if res.get("error") != "none" or not res.get("costs_s"):
        continue
    c = sorted(res["costs_s"])[len(res["costs_s"]) // 2]
    if best is None or c < best[0]:
        best = (c, r)
if best is None:
    sys.exit("no valid record in " + sys.argv[1])
c, r = best
print(f"best of log: trial {r.get('trial')}, median {c * 1e3:.4f} ms "
      f"({2 * 512**3 / (c * 1e9):.2f} GFLOP/s), {len(r['steps'])} steps")
json.dump({"version": 1, "comment": f"best of {sys.argv[1]} (trial {r.get('trial')})",
           "workload": r["workload"], "target": "cpu", "steps": r["steps"]},
          open(sys.argv[2], "w"), indent=1)
EOF
  cp "$work/$key.best.json" "bench/logs/cpu-$date${TAG:+-$TAG}-matmul512-$key.best.json"
}

commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' + uncommitted changes')"
echo "== $(date -u +%FT%TZ) $(uname -n), commit $commit"
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|L1d|L2|L3"
echo "cpu model $(grep -m1 '^model\s*:' /proc/cpuinfo | cut -d: -f2), vector ISA: $(grep -o -w 'avx512f\|avx2\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"

eigen_run eigen_t1_before 1
eigen_run eigen_t2_before 2
measure naive 1 "${shape[@]}" --min-runs 3 --min-time-ms 0
tune t2 2
tune t1 1
measure best_t2 2 --schedule "$work/t2.best.json" --min-runs "$runs"
measure best_t1 1 --schedule "$work/t1.best.json" --min-runs "$runs"
eigen_run eigen_t1_after 1
eigen_run eigen_t2_after 2

# The report.
python3 - "$md" "$trials" "$seed" "$date" "$raw" "$(lscpu | sed -n 's/^Model name: *//p')" \
  "$commit" "$build" "${thread_note:-}" "$runs" <<EOF
import sys
md, trials, seed, date, raw, model, commit, build, thread_note, runs = sys.argv[1:11]
res = {}
for kv in """$(for k in "${!result[@]}"; do echo "$k ${result[$k]}"; done)""".strip().splitlines():
    k, ms, p10, mn, *l = kv.split()
    res[k] = (float(ms), float(p10), float(mn), " ".join(l))
gflops = lambda ms: 2 * 512**3 / (ms * 1e6)
def row(k, what):
    if k not in res: return f"| {what} | — | — | — | — | — |"
    ms, p10, mn, l = res[k]
    return f"| {what} | {ms:.3f} | {gflops(ms):.1f} | {p10:.3f} | {mn:.3f} | {l} |"
def ratio(a, b):
    return f"{res[b][0] / res[a][0]:.2f}" if a in res and b in res else "—"
eig = lambda t: min((res[k] for k in (f"eigen_t{t}_before", f"eigen_t{t}_after") if k in res),
                    default=None)
tag = "${TAG:-}"
out = [f"# CPU: tuned matmul 512³ fp32 vs the naive schedule and Eigen ({date}{', ' + tag if tag else ''})", "",
       f"Command: \`bash bench/scripts/cpu_tune_matmul_vs_eigen.sh {build}\` (TRIALS={trials}, SEED={seed}{', TAG=' + tag if tag else ''}), "
       f"source: commit {commit} (as built in {build}).",
       f"Machine: {model}, 2 cores (this workplace's shared build machine). Raw output: {raw}.",
       "Times: median of timed runs after warm-up, 64 MiB cache flush before each run (ours:",
       "measure/host_runner.cc; Eigen: bench/cpu/eigen_gemm.cc, the same TimeRepeated and flush).",
       "Eigen 3.4.0 built with -march=native -O3 and OpenMP. Load = /proc/loadavg (1, 5, 15 min)",
       "when the number was taken: other jobs compile on the same 2 cores.",
       f"Threads of our kernels: {thread_note}.", "",
       f"Timed runs: {runs} at least for the re-measurements and Eigen, 3 for the naive schedule.",
       "On a loaded machine the median is the time with a share of a core; p10 and min approach",
       "the unloaded time (quiet-machine estimate, not the acceptance number).", "",
       "| what | median ms | GFLOP/s (median) | p10 ms | min ms | load |", "|---|---|---|---|---|---|",
       row("naive", "naive schedule (empty schedule, 1 thread)"),
       row("best_t1", f"tuned, {trials} trials, 1 thread (re-measured)"),
       row("best_t2", f"tuned, {trials} trials, 2 threads (re-measured)"),
       row("eigen_t1_before", "Eigen, 1 thread, before"), row("eigen_t1_after", "Eigen, 1 thread, after"),
       row("eigen_t2_before", "Eigen, 2 threads, before"), row("eigen_t2_after", "Eigen, 2 threads, after"),
       "", "Acceptance (≥ 20× naive, ≥ 0.5× Eigen; Eigen = the faster of its two runs):", ""]
for t in (1, 2):
    e = eig(t)
    b = res.get(f"best_t{t}")
    if b is None:
        out.append(f"- {t} thread(s): no tuned result"); continue
    sp = res["naive"][0] / b[0] if "naive" in res else float("nan")
    vs = e[0] / b[0] if e else float("nan")
    vs10 = e[1] / b[1] if e else float("nan")
    out.append(f"- {t} thread(s): {sp:.1f}× naive ({'pass' if sp >= 20 else 'FAIL'}), "
               f"{vs:.2f}× Eigen by medians ({'pass' if vs >= 0.5 else 'FAIL'}); "
               f"{vs10:.2f}× by p10")
open(md, "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
echo "== done $(date -u +%FT%TZ): $md"

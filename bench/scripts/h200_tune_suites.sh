#!/usr/bin/env bash
# The benchmark suites on the H200, one chunk of them per device call (each call must stay under 9
# minutes): `tilesearch bench` tunes the chunk's problems on cuda (resuming from earlier logs),
# replays each best record into an artifact named after its problem, then
# bench/harness/score.py scores exactly those problems against PyTorch (device pack from
# tools/pack_device.sh):
#   run(command="CHUNK=0/10 bash bench/scripts/h200_tune_suites.sh", carry=["dist"],
#       kind="nvidia-h200")
#
# Environment (all optional):
#   SUITES      suite names under bench/suites or paths (default "level1 level2")
#   CHUNK       i/n: the i-th (0-based) of n nearly equal slices of the suites' problems in file
#               order (default 0/1: all of them; too many for one call, see below)
#   PROBLEMS    comma-separated problem names (empty entries dropped); replaces CHUNK. Set but
#               naming no problem (PROBLEMS="" or ",") is refused (exit 2), never read as "all"
#   SKIP_SMALL  1: leave out the problems tagged "small"
#   TRIALS      total trials per problem, resumed logs counting (default 64)
#   PER_ROUND   trials per round (default 32)
#   BENCH_S     wall seconds for the tuning step of the chunk (default 300); the problems share
#               it (bench --time-budget-s): each, when it starts, gets (what is left / problems
#               left - ROUND_S) seconds before no new round is started; ROUND_S
#               (default 35) is what one more round plus the replay may take; at BENCH_S the
#               tuner gets SIGINT (it logs the round in flight and stops), BENCH_KILL_S (default
#               45) seconds later SIGKILL
#   SCORE_S     wall seconds for score.py (default 150; SIGKILL 20 s later). The worst case of
#               the whole script is BENCH_S + BENCH_KILL_S + SCORE_S + 20 (+ WARM_S + 10 if longer
#               than BENCH_S + BENCH_KILL_S) plus seconds of unpacking and tar
#   LOGS_FROM   earlier logs to resume from: a directory of <problem>.jsonl or a .tar.xz / .tgz
#               of one (e.g. bench/logs/h200-2026-11-30-suites.tar.xz); copied, never modified
#   BASELINES   score.py --baselines (default: score.py's, eager / eager_no_tf32 / compile)
#   BENCH_ARGS  extra `tilesearch bench` options (default "--warmup 1 --min-runs 3 --min-time-ms 10")
#   PRECISION   ieee (default) or tf32: `bench --precision` and `score.py --precision` (tf32: float32
#               problems may use one-pass TF32 kernels, judged with TF32's unit roundoff)
#   TAG         suffix of the output folder (default: the chunk, e.g. c0of10)
#   SKIP_SCORE  1: tune and replay only (a tuning call; score in a later call from the logs)
#   WARM        N > 0: warm inductor's caches for the compile baseline in N processes while
#               the suites tune/replay (score.py --warm-compile N --warm-only, at most WARM_S
#               seconds, default 300), score after
#   TS_ROOT     an unpacked device pack to use (default: unpack dist/ to /tmp/tilesearch; set it
#               when another script of the same call already unpacked it there)
#   REQUIRE_GPU text the GPU's name must contain (nvidia-smi, e.g. H200); otherwise exit 4 at
#               once, before unpacking (a table that must come from one kind of card; the device
#               tool's `nvidia-h200` kind may land on an H100)
# Output: $OUT/suites-$TAG/{run.log, problems.txt, logs/<problem>.jsonl, artifacts/, bench.json
# (tilesearch bench --json), score.{json,md,png}} tarred into $OUT/suites-$TAG.tgz (one file).
# Exit status: 2 for a refused setting; 4 when the GPU is not REQUIRE_GPU's; else score.py's when it failed, else 3 when `tilesearch
# bench` crashed or was killed (its 1, some problem failed, and 124/130, cut short at BENCH_S,
# are results: bench.json says which), else tar's.
#
# Splitting both suites (level1: 40 problems, 6 of them small; level2: 13; 53 in all) over several
# calls: about 5 problems per call fits 9 minutes at the defaults (≈ 25 s of tuning each, i.e. one
# or two rounds, then scoring with torch.compile), so CHUNK=0/10 ... CHUNK=9/10, one call each, all
# with the same SUITES, SKIP_SMALL and TRIALS. Pass LOGS_FROM=bench/logs/h200-DATE-suites.tar.xz
# once logs are committed there: later calls resume them and only add trials (raise TRIALS to tune
# further). After the calls, on this machine:
#   for c in 0 1 2 3 4 5 6 7 8 9; do tar xzf suites-c${c}of10.tgz; done
#   d=h200-$(date +%F)-suites && mkdir -p "$d" && cp suites-c*of10/logs/*.jsonl "$d/" &&
#     tar -cJf "bench/logs/$d.tar.xz" "$d"
#   python3 bench/harness/score.py --merge suites-c*of10/score.json \
#     --out bench/results/h200-$(date +%F)-suites-scored
# (--merge joins the per-chunk results per suite and recomputes fast_p and the geometric means).
# A chunk cut short keeps what it finished: bench.json and score.json are rewritten after every
# problem; run the chunk again (same TRIALS, LOGS_FROM = its logs) to finish it.
set -uo pipefail
if [[ -n "${REQUIRE_GPU:-}" ]]; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if [[ "$gpu_name" != *"$REQUIRE_GPU"* ]]; then
    echo "REQUIRE_GPU=$REQUIRE_GPU: this GPU is '${gpu_name:-none found}': nothing run"
    exit 4
  fi
fi
SUITES=${SUITES:-"level1 level2"}
CHUNK=${CHUNK:-0/1}
TRIALS=${TRIALS:-64}
PER_ROUND=${PER_ROUND:-32}
BENCH_S=${BENCH_S:-300}
ROUND_S=${ROUND_S:-35}
SCORE_S=${SCORE_S:-150}
BENCH_KILL_S=${BENCH_KILL_S:-45}
BENCH_ARGS=${BENCH_ARGS:-"--warmup 1 --min-runs 3 --min-time-ms 10"}
PRECISION=${PRECISION:-ieee}
[[ "$PRECISION" == ieee || "$PRECISION" == tf32 ]] || { echo "PRECISION=$PRECISION: want ieee or tf32"; exit 2; }
for v in BENCH_S SCORE_S BENCH_KILL_S; do  # `timeout 0` would mean no limit at all
  [[ "${!v}" =~ ^[0-9]+$ ]] && (( 10#${!v} > 0 )) || { echo "$v=${!v}: want seconds > 0"; exit 2; }
done
BENCH_S=$((10#$BENCH_S)) SCORE_S=$((10#$SCORE_S)) BENCH_KILL_S=$((10#$BENCH_KILL_S))
# PROBLEMS set (even to ""): exactly its non-empty entries; unset: the chunk's (below).
problems_given=0
if [[ -n "${PROBLEMS+set}" ]]; then
  problems_given=1
  IFS=, read -ra raw <<<"$PROBLEMS"
  PROBLEMS=
  for p in "${raw[@]}"; do
    p="${p//[[:space:]]/}"
    [[ -n "$p" ]] && PROBLEMS="${PROBLEMS:+$PROBLEMS,}$p"
  done
  [[ -n "$PROBLEMS" ]] || { echo "PROBLEMS is set but names no problem (unset it to use CHUNK)"; exit 2; }
fi
chunk_tag="c${CHUNK%/*}of${CHUNK#*/}"
(( problems_given )) && TAG=${TAG:-custom}
TAG=${TAG:-$chunk_tag}
out="${OUT:-/tmp/out}/suites-$TAG"
mkdir -p "$out/logs" "$out/artifacts"
exec > >(tee -a "$out/run.log") 2>&1
start_all=$(date +%s)

suite_files=()
for s in $SUITES; do
  if [[ -f "$s" ]]; then suite_files+=("$s"); else suite_files+=("bench/suites/$s.json"); fi
done
suite_args=()
for f in "${suite_files[@]}"; do suite_args+=(--suite "$f"); done

# The chunk's problems, in file order (stdlib json only).
if (( !problems_given )); then
  PROBLEMS=$(python3 - "$CHUNK" "${SKIP_SMALL:-0}" "${suite_files[@]}" <<'PY'
import json, sys
i, n = (int(x) for x in sys.argv[1].split("/"))
assert 0 <= i < n, f"CHUNK {sys.argv[1]}: want i/n with 0 <= i < n"
skip_small = sys.argv[2] == "1"
names = [p["name"] for f in sys.argv[3:] for p in json.load(open(f))["problems"]
         if not (skip_small and "small" in p.get("tags", []))]
print(",".join(names[len(names) * i // n:len(names) * (i + 1) // n]))
PY
  ) || { echo "cannot compute the chunk's problems"; exit 2; }
fi
[[ -n "$PROBLEMS" ]] || { echo "chunk $CHUNK of $SUITES is empty"; exit 2; }
tr ',' '\n' <<<"$PROBLEMS" >"$out/problems.txt"
count=$(wc -l <"$out/problems.txt")

root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
[[ -n "$root" && -f "$root/run" && -x "$root/run" ]] || { echo "no unpacked device pack at '$root' (dist/unpack.sh failed?)"; exit 2; }
ts="$root/run"
# The pack's scoring harness carries its device kernels' PTX (from a checkout, score.py would need
# nvcc to compile them).
score_py="$root/bench/harness/score.py"
[[ -f "$score_py" ]] || score_py=bench/harness/score.py
echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(head -3 "$root/MANIFEST" | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
"$ts" bench --help >/dev/null 2>&1 || { echo "the device pack has no 'bench' command: rebuild it (tools/pack_device.sh)"; exit 2; }

if [[ -n "${LOGS_FROM:-}" ]]; then
  echo "== resuming from $LOGS_FROM"
  if [[ -d "$LOGS_FROM" ]]; then
    cp "$LOGS_FROM"/*.jsonl "$out/logs/" 2>/dev/null
  else
    tmp_logs=$(mktemp -d)
    tar -xf "$LOGS_FROM" -C "$tmp_logs" && find "$tmp_logs" -name '*.jsonl' -exec cp {} "$out/logs/" \;
    rm -rf "$tmp_logs"
  fi
  ls "$out/logs" | wc -l | xargs echo "logs copied:"
fi

# Inductor's caches warmed for score.py's torch.compile baseline while the suites tune/replay
# (the warm-up's GPU work is outside the device lock: it may disturb tuning-time measurements,
# never the scoring, which starts after it).
skip_score=0
[[ "${SKIP_SCORE:-0}" == "1" ]] && skip_score=1
warm=${WARM:-0}
[[ "$warm" =~ ^[0-9]+$ ]] || { echo "WARM=$warm: want a number of processes"; warm=0; }
if (( !skip_score && warm > 0 )); then
  timeout -k 10 "${WARM_S:-300}" python3 "$score_py" "${suite_args[@]}" --problems "$PROBLEMS" \
    --warm-compile "$warm" --warm-only >"$out/warm.log" 2>&1 &
  warm_pid=$!
fi

# The problems share BENCH_S: each, when it starts, gets an equal share of what is left less
# ROUND_S (bench --time-budget-s), so one that finishes its trials early leaves its time to the
# later ones.
echo "== tilesearch bench: $count problems ($PROBLEMS), $TRIALS trials, sharing ${BENCH_S} s (each its share less ${ROUND_S} s)"
bench_start=$(date +%s)
# shellcheck disable=SC2086
timeout --foreground -s INT -k "$BENCH_KILL_S" "$BENCH_S" "$ts" bench "${suite_args[@]}" --problems "$PROBLEMS" \
  --target cuda --precision "$PRECISION" --trials "$TRIALS" --per-round "$PER_ROUND" \
  --time-budget-s "$BENCH_S" --round-reserve-s "$ROUND_S" --quiet \
  $BENCH_ARGS --log-dir "$out/logs" --out "$out/artifacts" --json "$out/bench.json"
bench_rc=$?
echo "bench: rc $bench_rc, $(($(date +%s) - bench_start)) s"
rc=0
case $bench_rc in 0|1|124|130) ;; *) rc=3 ;; esac

if [[ -n "${warm_pid:-}" ]]; then
  wait "$warm_pid"
  grep -v Warning "$out/warm.log" | tail -3
fi
if (( skip_score )); then
  echo "== score.py skipped (SKIP_SCORE=1)"
else
  echo "== score.py"
  score_start=$(date +%s)
  baselines=()
  [[ -n "${BASELINES:-}" ]] && baselines=(--baselines "$BASELINES")
  timeout --foreground -k 20 "$SCORE_S" python3 "$score_py" "${suite_args[@]}" \
    --artifacts "$out/artifacts" --problems "$PROBLEMS" --precision "$PRECISION" "${baselines[@]}" \
    --out "$out/score" 2>&1 |
    grep -v Warning | tail -60
  score_rc=${PIPESTATUS[0]}
  echo "score.py: rc $score_rc, $(($(date +%s) - score_start)) s"
  (( score_rc != 0 )) && rc=$score_rc
fi

echo "== done $(date -u +%FT%TZ), $(($(date +%s) - start_all)) s"
cd "$(dirname "$out")" && tar czf "$(basename "$out").tgz" "$(basename "$out")" && rm -rf "$out"
tar_rc=$?
(( rc == 0 )) && rc=$tar_rc
exit "$rc"

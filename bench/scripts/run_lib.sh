# shellcheck shell=bash disable=SC2154  # rc, started and out belong to the caller
# Shared pieces of the H200 run scripts (sourced, not run). The caller defines `rc=0` (the first
# failing status, the script's exit status) and `started=()` (pids of background jobs it
# started), and `out` ($OUT) where score_tuned_matmul is used.

# note_rc STATUS WHAT: prints "WHAT: rc STATUS" and keeps the first non-zero status in rc.
note_rc() { (( rc == 0 && $1 != 0 )) && rc=$1; echo "$2: rc $1"; }

# tree_pids PID: PID and all its descendants, parents first.
# shellcheck disable=SC2317  # called from EXIT traps
tree_pids() { local c; echo "$1"; for c in $(pgrep -P "$1"); do tree_pids "$c"; done; }

# kill_started: kills every job in `started` with its children, by pid (they stay in the script's
# process group, which the device tool may signal). For the callers' EXIT traps.
# shellcheck disable=SC2317  # called from EXIT traps
kill_started() {
  local p all=()
  for p in "${started[@]}"; do mapfile -t -O "${#all[@]}" all < <(tree_pids "$p"); done
  (( ${#all[@]} )) && kill "${all[@]}" 2>/dev/null
  return 0
}

# score_tuned_matmul LOG_NAME TMP SCORE_S: unpacks $out/tune.tgz into TMP/mm, scores its log
# LOG_NAME (e.g. matmul_xgboost.jsonl) as matmul_square_4096 on GPU 0 (bench/scripts/h200_score_matmul_log.sh,
# tag "matmul"), then removes $out/tune (it is in tune.tgz; the device tool returns at most 8
# files). Statuses go to note_rc.
score_tuned_matmul() {
  mkdir -p "$2/mm"
  if tar xzf "$out/tune.tgz" -C "$2/mm"; then
    SCORE_REPLAY_S=45 SCORE_KILL_S=15 SCORE_S=$3 \
      bash bench/scripts/h200_score_matmul_log.sh "$2/mm/tune/$1" matmul 0
    note_rc $? "scoring $1 (h200_score_matmul_log.sh)"
  else
    note_rc 1 "unpack $out/tune.tgz"
  fi
  rm -rf "$out/tune"
}

# begin_run NAME: the common start of a device run script: out=$OUT/NAME (made), stdout and stderr
# also to $out/run.log, the device pack unpacked (or TS_ROOT's) into root with ts=$root/run, and a
# header line (date, host, pack commit) and the GPU's clocks.
begin_run() {
  out="${OUT:-/tmp/out}/$1"
  mkdir -p "$out"
  exec > >(tee -a "$out/run.log") 2>&1
  root="${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}"
  ts="$root/run"
  echo "== $(date -u +%FT%TZ) $(uname -n); pack: $(sed -n 2p "$root/MANIFEST")"
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
}

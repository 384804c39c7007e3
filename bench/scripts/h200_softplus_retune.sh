#!/usr/bin/env bash
# softplus_16384 of level1 re-tuned from an empty log on the H200 and scored against PyTorch eager,
# in under 4 minutes: its threshold select is now emitted without a branch and vectorizes (the
# condition loads the element the branches load; codegen/emitter.cc, EagerSelect), so the search
# can reach 16-byte loads the earlier logs never held. 64 trials in rounds of 16 (~90 s), then
# bench/harness/score.py (h200_tune_suites.sh does both). Device pack from tools/pack_device.sh:
#   run(command="bash bench/scripts/h200_softplus_retune.sh", carry=["dist"])
# Environment: TS_ROOT, an unpacked pack to use (default: unpack dist/); TRIALS (default 64).
# Output: $OUT/suites-softplus-retune.tgz (log, artifacts, score.md) and, on stdout, the score line
# and the best kernel's global loads and stores, branches, and PTX / SASS instruction counts.
# Worst case: unpacking + BENCH_S 95 + BENCH_KILL_S 10 + SCORE_S 60 + 20 s of the tune script's
# margins + 10 s here, about 200 s.
# Exit status: the tune-and-score script's.
set -uo pipefail
root=${TS_ROOT:-$(bash dist/unpack.sh | tail -1)}
TS_ROOT="$root" SUITES=level1 PROBLEMS=softplus_16384 TRIALS=${TRIALS:-64} PER_ROUND=16 \
  BENCH_S=95 ROUND_S=0 BENCH_KILL_S=10 SCORE_S=60 BASELINES=eager TAG=softplus-retune \
  bash "$root/bench/scripts/h200_tune_suites.sh"
rc=$?
echo "tune and score: exit $rc"
tmp=$(mktemp -d)
tar -xzf "$OUT/suites-softplus-retune.tgz" -C "$tmp" 2>/dev/null
grep -E "softplus" "$(find "$tmp" -name score.md | head -n 1)" 2>/dev/null | head -n 4
ptx=$(find "$tmp" -name '*.ptx' | head -n 1)
if [[ -n "$ptx" ]]; then
  echo "best kernel: $(basename "$ptx")"
  grep -oE '(ld|st)\.global[.a-z0-9]*' "$ptx" | sort | uniq -c
  echo "branches: $(grep -cE '\bbra\b' "$ptx")"
  # Instructions of the entry body (not directives, labels or braces).
  echo "PTX instructions: $(sed -n '/\.entry/,$p' "$ptx" | grep -E '^\s+[@a-z]' |
    grep -vcE '^\s*(\.|\)|\{|\})')"
  if command -v cuobjdump >/dev/null; then
    cubin=$(find "$tmp" -name '*.cubin' | head -n 1)
    # Up to the final self-branch: the NOPs after it only pad the section.
    [[ -n "$cubin" ]] && echo "SASS instructions: $(cuobjdump -sass "$cubin" |
      grep -E '^\s+/\*[0-9a-f]{4}\*/' | awk '/BRA/{last=NR} END{print last}')"
  fi
  grep -h '"steps"' "$(find "$tmp" -name 'softplus_16384.jsonl' | head -n 1)" 2>/dev/null |
    python3 -c 'import json,sys
recs=[json.loads(l) for l in sys.stdin]
ok=[r for r in recs if r.get("result",{}).get("error")=="none"]
ok.sort(key=lambda r:r["result"]["timing"]["median_ms"])
for r in ok[:3]: print("%.4f ms" % r["result"]["timing"]["median_ms"], json.dumps(r["steps"]))'
fi
rm -rf "$tmp"
exit "$rc"

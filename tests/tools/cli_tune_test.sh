#!/usr/bin/env bash
# `tilesearch tune` on the cpu target, tiny: 4 trials in 2 rounds write 4 records, each round
# followed by its round line (model quality), whose steps are distinct; a resume to 6 measures only
# 2 more (the first 6 lines unchanged, round 3 numbered after the log's), the best record printed
# is one of the logged ones; the per-round pairwise accuracies printed are the round lines';
# --early-stopping 1 stops before a large budget; the help mentions --target auto; a missing --log,
# an unknown --model, a negative --early-stopping and a crossover probability above 1 are one-line
# errors (exit 2), as are a NaN crossover probability, a family fraction above 1 or NaN, and a
# device lock that is the log or another file with data (left unchanged), a local-search fraction
# above 1, NaN or "0.5x" (not a number) and a local-search state count of 0 (out of range) or
# "two", "abc", "4.5", "" (not an integer: the shared ranged-option check);
# --crossover-probability 0 and --max-family-fraction 1 tune; " 0.5 " (spaces around) is a
# fraction like 0.5, " 2 " a state count like 2; --local-search-fraction 1 tunes its second round
# from local search (the progress line says so), its round lines log the counts (0, then the
# progress line's 2) and the fraction, and `inspect` shows them ("2 from local search");
# --local-search-fraction 0 tunes and its round lines have no local-search fields.
# Run by ctest with TILESEARCH set to the binary.
set -u
source "$(dirname "$0")/cli_lib.sh"
base=(--op matmul --shape 32x32 --shape 32x32 --target cpu --population 16 --generations 1
      --min-runs 2 --min-time-ms 0 --warmup 0 --quiet)
fast=("${base[@]}" --per-round 2 --log "$tmp/t.jsonl")

run first tune "${fast[@]}" --trials 4
expect_rc first 0
expect_out first '^trials: 4 \(4 measured now\)$'
[[ "$(wc -l <"$tmp/t.jsonl")" == 6 ]] || fail "first: log has $(wc -l <"$tmp/t.jsonl") lines, expected 6"
expect_out first '^model pairwise accuracy per round: [-0-9.]+ [-0-9.]+ \(xgboost\)$'
cp "$tmp/t.jsonl" "$tmp/first.jsonl"

run resume tune "${fast[@]}" --trials 6
expect_rc resume 0
expect_out resume '^trials: 6 \(2 measured now\)$'
[[ "$(wc -l <"$tmp/t.jsonl")" == 9 ]] || fail "resume: log has $(wc -l <"$tmp/t.jsonl") lines, expected 9"
[[ "$(head -n 6 "$tmp/t.jsonl")" == "$(cat "$tmp/first.jsonl")" ]] || fail "resume changed the first 6 lines"

# --remeasure 2 on the finished log: no new trial, two records marked remeasured appended with the
# trial numbers of two logged ones, which `inspect` reports as re-measured; a negative count is a
# one-line error.
cp "$tmp/t.jsonl" "$tmp/r.jsonl"
run remeasure tune "${base[@]}" --per-round 2 --log "$tmp/r.jsonl" --trials 6 --remeasure 2
expect_rc remeasure 0
expect_out remeasure '^trials: 6 \(0 measured now\), 2 of the fastest logged schedules re-measured$'
[[ "$(grep -c '"remeasured":true' "$tmp/r.jsonl")" == 2 ]] || fail "remeasure: want 2 marked records"
run remeasure_inspect inspect --log "$tmp/r.jsonl"
expect_out remeasure_inspect '2 records re-measured \(the newest measurement of each is used\)'
run remeasure_negative tune "${base[@]}" --per-round 2 --log "$tmp/r.jsonl" --trials 6 --remeasure -1
expect_error remeasure_negative '--remeasure'

python3 - "$tmp/t.jsonl" "$tmp/resume.out" <<'PY' || fail "log content"
import json, re, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kinds = [l.get("kind", "record") for l in lines]
assert kinds == ["record"] * 2 + ["round"] + ["record"] * 2 + ["round"] + ["record"] * 2 + ["round"], kinds
records = [l for l in lines if l.get("kind", "record") == "record"]
rounds = [l for l in lines if l.get("kind") == "round"]
assert [r["round"] for r in rounds] == [1, 2, 3], [r["round"] for r in rounds]
assert [r["first_trial"] for r in rounds] == [0, 2, 4]
assert [r["train_samples"] for r in rounds] == [0, 2, 4]
printed = re.search(r"^model pairwise accuracy per round: (.*) \(xgboost\)$", open(sys.argv[2]).read(), re.M)
assert printed, "no accuracy line in the resume output"
acc = rounds[2]["pairwise_accuracy"]
assert printed.group(1) == ("-" if acc is None else "%.3f" % acc), (printed.group(1), acc)
steps = [json.dumps(r["steps"], sort_keys=True) for r in records]
assert len(set(steps)) == len(steps), "a schedule was measured twice"
assert sorted(r["trial"] for r in records) == list(range(6)), [r["trial"] for r in records]
valid = [r for r in records if r["result"]["error"] == "none"]
assert valid, "no valid record"
best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"])
m = re.search(r"^best: trial (\d+), median ([0-9.]+) ms", open(sys.argv[2]).read(), re.M)
assert m and int(m.group(1)) == best["trial"], (m and m.group(0), best["trial"])
assert abs(float(m.group(2)) - best["result"]["timing"]["median_ms"]) < 1e-3, m.group(0)
PY

run early tune "${base[@]}" --log "$tmp/early.jsonl" --per-round 1 --trials 200 --model random --early-stopping 1
expect_rc early 0
expect_out early '^trials: [0-9]+ \([0-9]+ measured now\), stopped early$'
python3 - "$tmp/early.jsonl" <<'PY' || fail "early stopping log"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"round"' not in l]
assert len(records) < 200, len(records)
PY

run help tune --help
expect_out help '--target.*auto'

run no_log tune --op matmul --shape 32x32 --shape 32x32 --target cpu --trials 4
expect_error no_log "--log"
run bad_model tune "${fast[@]}" --trials 4 --model forest
expect_error bad_model "--model"
run bad_early tune "${fast[@]}" --trials 4 --early-stopping -1
expect_error bad_early "--early-stopping"
run bad_crossover tune "${fast[@]}" --trials 4 --crossover-probability 1.5
expect_error bad_crossover "--crossover-probability"
run nan_crossover tune "${fast[@]}" --trials 4 --crossover-probability nan
expect_error nan_crossover "--crossover-probability"
run bad_family tune "${fast[@]}" --trials 4 --max-family-fraction 2
expect_error bad_family "--max-family-fraction"
run nan_family tune "${fast[@]}" --trials 4 --max-family-fraction nan
expect_error nan_family "--max-family-fraction"
# The device lock must be a file of its own: the log itself would deadlock, another file's data
# would be overwritten.
cp "$tmp/t.jsonl" "$tmp/precious.jsonl"
TILESEARCH_DEVICE_LOCK="$tmp/precious.jsonl" run lock_other tune "${base[@]}" --per-round 2 --log "$tmp/l.jsonl" --trials 2
expect_error lock_other "not a tilesearch device lock"
cmp -s "$tmp/t.jsonl" "$tmp/precious.jsonl" || fail "lock_other: the file named as the lock was changed"
TILESEARCH_DEVICE_LOCK="$tmp/self.jsonl" timeout 60 "$bin" tune "${base[@]}" --per-round 2 \
  --log "$tmp/self.jsonl" --trials 2 >"$tmp/lock_is_log.out" 2>"$tmp/lock_is_log.err"
echo $? >"$tmp/lock_is_log.rc"
expect_error lock_is_log "is the tuning log"
# Crossover off still tunes (every child a mutation).
run no_crossover tune "${base[@]}" --per-round 2 --log "$tmp/nx.jsonl" --trials 2 --crossover-probability 0
expect_rc no_crossover 0
# The family cap off (1: top-k by score alone) still tunes.
run no_family_cap tune "${base[@]}" --per-round 2 --log "$tmp/nf.jsonl" --trials 2 --max-family-fraction 1
expect_rc no_family_cap 0
# --family-dominance: 0 (off) or >= 1; anything else names the option.
run no_family_share tune "${base[@]}" --per-round 2 --log "$tmp/nd.jsonl" --trials 2 --family-dominance 0
expect_rc no_family_share 0
run half_dominance tune "${fast[@]}" --trials 4 --family-dominance 0.5
expect_error half_dominance "--family-dominance"
run word_dominance tune "${fast[@]}" --trials 4 --family-dominance two
expect_error word_dominance "--family-dominance"
run tiny_dominance tune "${fast[@]}" --trials 4 --family-dominance 1e-400
expect_error tiny_dominance "--family-dominance"
run hex_dominance tune "${fast[@]}" --trials 4 --family-dominance 0x2
expect_error hex_dominance "'0x2' is not a number"
run big_dominance tune "${fast[@]}" --trials 4 --family-dominance 1001
expect_error big_dominance "--family-dominance"
# A misspelled option is named even when a required one is missing too.
run misspelled tune --op matmul --shape 4x4 --shape 4x4 --trails 4
expect_error misspelled "unknown option '--trails'"
run misspelled_value tune --op matmul --trails=4
expect_error misspelled_value "unknown option '--trails'"
run missing_only tune --op matmul --shape 4x4 --shape 4x4
expect_error missing_only "--trials is required"
run bad_local tune "${fast[@]}" --trials 4 --local-search-fraction 1.5
expect_error bad_local "--local-search-fraction"
run nan_local tune "${fast[@]}" --trials 4 --local-search-fraction nan
expect_error nan_local "--local-search-fraction"
run word_local tune "${fast[@]}" --trials 4 --local-search-fraction 0.5x
expect_error word_local "not a number"
run zero_states tune "${fast[@]}" --trials 4 --local-search-states 0
expect_error zero_states "--local-search-states"
run word_states tune "${fast[@]}" --trials 4 --local-search-states two
expect_error word_states "--local-search-states"
# Integers: text that is not one says so (not "not in range"); a real integer out of range keeps
# the range message.
run abc_states tune "${fast[@]}" --trials 4 --local-search-states abc
expect_error abc_states "--local-search-states: 'abc' is not an integer in 1..1000"
run frac_states tune "${fast[@]}" --trials 4 --local-search-states 4.5
expect_error frac_states "--local-search-states: '4.5' is not an integer in 1..1000"
run empty_states tune "${fast[@]}" --trials 4 --local-search-states ""
expect_error empty_states "--local-search-states: '' is not an integer in 1..1000"
expect_error zero_states "not in range 1 to 1000"
! grep -q "not an integer" "$tmp/zero_states.err" || fail "zero_states: $(cat "$tmp/zero_states.err")"
# The command's own numeric options take the same check first (tune's --trials / --per-round /
# --run-timeout-ms here; bench, tune-graph and inspect use the same lines).
run abc_trials tune "${fast[@]}" --trials abc
expect_error abc_trials "--trials: 'abc' is not an integer in 1..1000000"
run exp_per_round tune "${fast[@]}" --trials 4 --per-round 1e3
expect_error exp_per_round "--per-round: '1e3' is not an integer in 0..4096"
run word_timeout tune "${fast[@]}" --trials 4 --run-timeout-ms soon
expect_error word_timeout "--run-timeout-ms: 'soon' is not a number in 100..3600000"
run zero_trials tune "${fast[@]}" --trials 0
expect_error zero_trials "not in range 1 to 1000000"
# Spaces around a number are accepted alike, leading or trailing (both tune one round).
run spaced_fraction tune "${base[@]}" --per-round 2 --log "$tmp/sp.jsonl" --trials 2 \
  --local-search-fraction " 0.5 " --local-search-states " 2 "
expect_rc spaced_fraction 0
grep -q '"local_search_fraction":0.5,' "$tmp/sp.jsonl" ||
  fail "spaced_fraction: no fraction 0.5 in the round line: $(grep round "$tmp/sp.jsonl")"
run help_local tune --help
expect_out help_local '--local-search-fraction'
expect_out help_local '--local-search-states'
# All of round 2 from local search (progress lines on stderr without --quiet); local search off.
loud=()
for a in "${base[@]}"; do [[ "$a" == --quiet ]] || loud+=("$a"); done
run all_local tune "${loud[@]}" --per-round 2 --log "$tmp/ls.jsonl" --trials 4 \
  --local-search-fraction 1 --local-search-states 1
expect_rc all_local 0
grep -q 'trials 4/4 .*(round: 2 local, ' "$tmp/all_local.err" ||
  fail "all_local: no '(round: 2 local, ' on the second round's line: $(cat "$tmp/all_local.err")"
grep -q 'trials 2/4 .*(round: train ' "$tmp/all_local.err" ||
  fail "all_local: the first round's line names local trials: $(cat "$tmp/all_local.err")"
# The round lines log the counts: 0 in the first round (nothing measured yet), then the progress
# line's 2; the fraction in both.
python3 - "$tmp/ls.jsonl" <<'PY' || fail "all_local: round lines' local-search fields"
import json, sys
rounds = [l for l in map(json.loads, open(sys.argv[1])) if l.get("kind") == "round"]
assert [r["local_search_trials"] for r in rounds] == [0, 2], rounds
assert [r["local_search_fraction"] for r in rounds] == [1, 1], rounds
PY
run inspect_local inspect --log "$tmp/ls.jsonl"
expect_rc inspect_local 0
expect_out inspect_local '^  round 1 \(trials 0-1, [0-2] valid, 0 from local search; xgboost '
expect_out inspect_local '^  round 2 \(trials 2-3, [0-2] valid, 2 from local search; xgboost '
run no_local tune "${base[@]}" --per-round 2 --log "$tmp/nl.jsonl" --trials 4 --local-search-fraction 0
expect_rc no_local 0
grep -q '"kind":"round"' "$tmp/nl.jsonl" || fail "no_local: no round lines"
! grep -q 'local_search' "$tmp/nl.jsonl" || fail "no_local: round lines name local search"
run inspect_no_local inspect --log "$tmp/nl.jsonl"
expect_rc inspect_no_local 0
expect_out inspect_no_local '^  round 2 \(trials 2-3, [0-2] valid; xgboost '
expect_no_out inspect_no_local 'local search'

finish "tune"

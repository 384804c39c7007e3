#!/usr/bin/env bash
# `train-model`, `eval-model` and `tune --model-init` on a small committed cpu log (three
# workloads, 24 trials each): the model file's target and provenance counts against the log read
# independently (python), the evaluation table's workloads and evaluated-record counts against the
# log, warm-started tuning whose round lines name the initial model and are trained from the
# first round, refusal of a model of another target naming both, bad options.
set -u
source "$(dirname "$0")/cli_lib.sh"
log="${DATA:?set DATA to tests/data}/cpu-three-workloads.jsonl"

run train train-model --logs "$log" --out "$tmp/m.model" --max-rounds 30 --threads 1 --commit abc123
expect_rc train 0
expect_out train '^target: cpu$'
expect_out train '^tasks: 3$'
python3 - "$log" "$tmp/m.model" <<'PY' || fail "train: the model header disagrees with the log"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
records = [r for r in records if r.get("kind", "record") == "record"]
distinct = {(r["workload_key"], json.dumps(r["steps"])) for r in records}
with open(sys.argv[2], "rb") as f:
    assert f.readline() == b"tilesearch-xgboost-model\n"
    meta = json.loads(f.readline())
p = meta["provenance"]
assert meta["target"] == "cpu", meta["target"]
assert meta["objective"] == "regression"
assert p["records"] == len(distinct), (p["records"], len(distinct))
assert p["tasks"] == len({r["workload_key"] for r in records})
assert p["duplicates_dropped"] == len(records) - len(distinct)
assert p["commit"] == "abc123" and p["logs"] == ["cpu-three-workloads.jsonl"]
PY

run eval eval-model --logs "$log" --online-records 8 --min-eval-records 8 --max-rounds 30 \
  --threads 1 --out "$tmp/eval.md"
expect_rc eval 0
expect_out eval '^\| pretrained \| -?[0-9.]+ \|'
expect_out eval '^\| random \| -?[0-9.]+ \|'
python3 - "$log" "$tmp/eval.out" "$tmp/eval.md" <<'PY' || fail "eval: table disagrees with the log"
import json, re, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by_task = {}
for r in records:
    if r.get("kind", "record") != "record":
        continue
    by_task.setdefault(r["workload_key"], []).append(r)
# Evaluated: valid records after the first 8 distinct ones of each workload.
expected = []
for rs in by_task.values():
    seen, kept = set(), []
    for r in rs:
        s = json.dumps(r["steps"])
        if s not in seen:
            seen.add(s)
            kept.append(r)
    expected.append(sum(1 for r in kept[8:] if r["result"]["error"] == "none"))
rows = [l for l in open(sys.argv[2]) if re.match(r"^\| (matmul|softmax) ", l)]
got = [int(l.split("|")[3]) for l in rows]
assert sorted(got) == sorted(expected), (got, expected)
for l in rows:
    for cell in l.split("|")[4].split("/"):
        assert -1 <= float(cell) <= 1, l  # Spearman
    for cell in l.split("|")[6].split("/"):
        assert float(cell) >= 1, l  # top pick over the best
md = open(sys.argv[3]).read()
assert md.startswith("# eval-model") and "tilesearch eval-model --logs" in md
PY

# --max-eval-records-per-task 20: each held-out workload's first 20 distinct records are its
# online 8 and its evaluation set; the others still train on every record.
run evalcap eval-model --logs "$log" --online-records 8 --min-eval-records 8 --max-rounds 30 \
  --threads 1 --max-eval-records-per-task 20 --out "$tmp/evalcap.md"
expect_rc evalcap 0
python3 - "$log" "$tmp/evalcap.out" "$tmp/evalcap.md" <<'PY' || fail "evalcap: table disagrees with the log"
import json, re, sys
by_task = {}
for l in open(sys.argv[1]):
    r = json.loads(l) if l.strip() else {}
    if r and r.get("kind", "record") == "record":
        by_task.setdefault(r["workload_key"], []).append(r)
expected = []
for rs in by_task.values():
    seen, kept = set(), []
    for r in rs:
        if json.dumps(r["steps"]) not in seen:
            seen.add(json.dumps(r["steps"]))
            kept.append(r)
    ev = sum(1 for r in kept[8:20] if r["result"]["error"] == "none")
    if ev >= 8:
        expected.append((min(len(kept), 20), ev))
rows = [l.split("|") for l in open(sys.argv[2]) if re.match(r"^\| (matmul|softmax) ", l)]
got = [(int(c[2]), int(c[3])) for c in rows]
assert sorted(got) == sorted(expected), (got, expected)
assert "--max-eval-records-per-task 20" in open(sys.argv[3]).read()  # the command, in --out
PY
run evalcap_bad eval-model --logs "$log" --max-eval-records-per-task -3
expect_error evalcap_bad "--max-eval-records-per-task must be >= 0"

# Warm start: the first round is already scored by a trained model, and the round lines say which
# (a later round may be searched by the online-only model beside it: its line names none).
tune=(tune --op matmul --shape 32x48 --shape 48x40 --target cpu --per-round 2 --population 16
  --generations 1 --min-runs 1 --warmup 0 --quiet)
run warm "${tune[@]}" --trials 4 --log "$tmp/w.jsonl" --model-init "$tmp/m.model"
expect_rc warm 0
python3 - "$tmp/w.jsonl" "$tmp/m.model" <<'PY' || fail "warm: round lines"
import json, sys
rounds = [json.loads(l) for l in open(sys.argv[1]) if '"kind":"round"' in l]
assert len(rounds) == 2, len(rounds)
assert rounds[0]["model_init"] == sys.argv[2], rounds[0].get("model_init")
for r in rounds:
    assert r.get("model_init", "") in (sys.argv[2], ""), r.get("model_init")
    if r.get("model_init"):
        assert r["model_trained"] is True and r["boost_rounds"] >= 1, r
PY
run untrained "${tune[@]}" --trials 2 --log "$tmp/u.jsonl" --model-init none
expect_rc untrained 0
grep -q '"model_init"' "$tmp/u.jsonl" && fail "untrained: a round line names an initial model"

# The same model claiming another target is refused, naming both.
python3 - "$tmp/m.model" "$tmp/cuda.model" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(data.replace(b'"target":"cpu"', b'"target":"cuda sm_90"', 1))
PY
run other "${tune[@]}" --trials 2 --log "$tmp/o.jsonl" --model-init "$tmp/cuda.model"
expect_error other "is for cuda sm_90 (feature version 2); this run needs cpu (feature version 2)"
run random "${tune[@]}" --trials 2 --log "$tmp/r.jsonl" --model random --model-init "$tmp/m.model"
expect_error random "--model-init needs --model xgboost"
head -c 100 "$tmp/m.model" >"$tmp/cut.model"
run cut "${tune[@]}" --trials 2 --log "$tmp/c.jsonl" --model-init "$tmp/cut.model"
expect_error cut "model file '$tmp/cut.model'"
# A model that does not load leaves no log behind.
for f in o.jsonl c.jsonl; do [[ ! -e "$tmp/$f" ]] || fail "a refused --model-init created $f"; done

# inspect: trials/s and the time split per phase, summed from the round lines.
run inspect inspect --log "$log" --curve-points 1
expect_rc inspect 0
python3 - "$log" "$tmp/inspect.out" <<'PY' || fail "inspect: phase split disagrees with the log"
import json, re, sys
rounds = {}
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("kind") == "round":
        rounds.setdefault(j["workload_key"], []).append(j)
text = open(sys.argv[2]).read()
lines = re.findall(r"^  time over (\d+) rounds: ([0-9.]+) s, ([0-9.]+) trials/s; train ([0-9.]+) s .*"
                   r"search ([0-9.]+) s .*build ([0-9.]+) s .*measure ([0-9.]+) s", text, re.M)
assert len(lines) == len(rounds) == 3, (len(lines), len(rounds))
for rs in rounds.values():
    total = sum(r[k] for r in rs for k in ("train_s", "search_s", "build_s", "measure_s"))
    rate = "%.2f" % (sum(r["trials"] for r in rs) / total)
    measure = "%.1f" % sum(r["measure_s"] for r in rs)
    assert any(l[0] == str(len(rs)) and l[2] == rate and l[6] == measure for l in lines), (rate, lines)
PY

run bad_objective train-model --logs "$log" --out "$tmp/x.model" --objective forest
expect_error bad_objective "--objective must be regression or rank, got 'forest'"
run no_logs train-model --logs "$tmp/nothing" --out "$tmp/x.model"
expect_error no_logs "log path '$tmp/nothing' does not exist"
run few eval-model --logs "$log" --online-records 30 --min-eval-records 8
expect_error few "no workload has --online-records + --min-eval-records (30 + 8)"

finish "train-model / eval-model / --model-init"

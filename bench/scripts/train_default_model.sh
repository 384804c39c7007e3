#!/usr/bin/env bash
# Rebuilds the shipped default cost model, models/default-cuda-sm_90.model, from the committed
# H200 tuning logs (bench/logs/h200-*.tar.xz), and its provenance file
# models/default-cuda-sm_90.provenance.json (the model header's provenance plus the training
# report). Runs on any machine (no GPU: the logs' schedules are replayed, lowered and featurized
# for the recorded target). `tune` on a cuda sm_90 target starts from this model unless given
# --model-init. The records of the held-out workloads (bench/heldout_workloads.txt: the tasks on
# which bench/scripts/h200_heldout_study.sh measures how the model transfers) are dropped first.
# Environment: TILESEARCH (default build/tools/tilesearch), OBJECTIVE (default rank, the better
# one by bench/results/cpu-2026-12-01-eval-model-h200-logs.md), MAX_RECORDS (per workload,
# default 256 as in that evaluation), MAX_ROUNDS (boosting rounds at most, default 300
# as in that evaluation), MAX_DEPTH (default 8: depth 10 made a 2.05 MB file), THREADS
# (default 0: every core).
# Time: a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${TILESEARCH:-build/tools/tilesearch}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in bench/logs/h200-*.tar.xz; do
  mkdir -p "$tmp/$(basename "$f" .tar.xz)"
  tar -xJf "$f" -C "$tmp/$(basename "$f" .tar.xz)"
done
python3 bench/scripts/heldout_workloads.py drop "$tmp" | tee "$tmp/heldout.out"
mkdir -p models
out=models/default-cuda-sm_90.model
"$bin" train-model --logs "$tmp" --target "cuda -arch=sm_90" --out "$out" \
  --objective "${OBJECTIVE:-rank}" --max-records-per-task "${MAX_RECORDS:-256}" \
  --max-rounds "${MAX_ROUNDS:-300}" --max-depth "${MAX_DEPTH:-8}" \
  --threads "${THREADS:-0}" --commit "$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  | tee "$tmp/train.out"
python3 - "$out" "$tmp/train.out" models/default-cuda-sm_90.provenance.json \
  "$tmp/heldout.out" bench/logs/h200-*.tar.xz <<'PY'
import json, sys
with open(sys.argv[1], "rb") as f:
    f.readline()
    meta = json.loads(f.readline())
prov = dict(meta["provenance"])
prov["archives"] = sorted(a.split("/")[-1] for a in sys.argv[5:])
prov["held_out"] = open(sys.argv[4]).read().splitlines()[-1]
prov["target"] = meta["target"]
prov["feature_version"] = meta["feature_version"]
prov["boosting_rounds"] = meta["rounds"]
prov["train_model_output"] = open(sys.argv[2]).read().splitlines()
prov["rebuild"] = "bash bench/scripts/train_default_model.sh"
with open(sys.argv[3], "w") as f:
    json.dump(prov, f, indent=2)
    f.write("\n")
PY
ls -l "$out"

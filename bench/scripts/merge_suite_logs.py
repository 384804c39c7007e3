#!/usr/bin/env python3
"""Joins the tuning logs of the benchmark suites' problems from several committed log archives into
one directory of <problem>.jsonl, for scoring every problem from its best record so far
(bench/scripts/h200_score_suites.sh with LOGS_FROM=<the directory, tarred>).

Usage:
  bench/scripts/merge_suite_logs.py --out DIR [--suites level1 level2] SOURCE...
where each SOURCE is ARCHIVE.tar.xz or ARCHIVE.tar.xz:SUBDIR (only the .jsonl files directly in
that folder of the archive). A file joins problem P when its name is P.jsonl and P is a problem of
the suites. Lines are appended in the order of the sources, each distinct line once (a record
found in two archives is one trial, not two). DIR/SOURCES.txt lists, per problem, the sources and
the number of lines each added.

--committed-strict adds, before the SOURCEs, every committed H200 log of strict (ieee) mode that
holds suite problems (COMMITTED_STRICT below; add a new archive there when one is committed).

Only logs of one precision mode should be joined (the workload key carries the precision, so a
TF32-mode record would never be replayed for a strict-mode problem, but it would still be carried).
"""
import argparse
import collections
import json
import os
import sys
import tarfile


# The committed strict-mode H200 logs of suite problems, oldest first (TF32-mode and half-precision
# runs, and logs of single-workload experiments, are left out).
COMMITTED_STRICT = [
    "h200-2026-11-30-suites.tar.xz",
    "h200-2026-12-02-suites-strict-tensor-core.tar.xz:chunk-a",
    "h200-2026-12-02-suites-strict-tensor-core.tar.xz:chunk-b",
    "h200-2026-12-02-suites-strict-tensor-core.tar.xz:chunk-c",
    "h200-2026-12-02-suites-strict-tensor-core.tar.xz:chunk-d",
    "h200-2026-12-02-suites-strict-tensor-core.tar.xz:gelu-division",
    "h200-2026-12-02-tensor-core-strict-subset.tar.xz",
    "h200-2026-12-02-precision-rule-magnitudes.tar.xz:strict",
    "h200-2026-12-02-large-inputs.tar.xz",
    "h200-2026-12-02-fast-math-retunes.tar.xz",
    "h200-2026-12-02-memory-bound-retune.tar.xz",
    "h200-2026-12-02-split-transpose.tar.xz",
    "h200-2026-12-02-memory-bound-remeasured.tar.xz",
    "h200-2026-12-02-memory-bound-rescored-newest.tar.xz",
    "h200-2026-12-02-avg-pool-fused.tar.xz",
    "h200-2026-12-02-scale-mask-softmax-one-kernel.tar.xz",
    "h200-2026-12-03-gemv-cross-thread.tar.xz",
    "h200-2026-12-03-depthwise-untiled.tar.xz",
    "h200-2026-12-03-depthwise-points-per-thread.tar.xz",
    "h200-2026-12-03-memory-retune.tar.xz",
    "h200-2026-12-03-population-and-points-per-thread.tar.xz:call2/retune",
]


def suite_problems(names):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "suites")
    problems = set()
    for name in names:
        path = name if name.endswith(".json") else os.path.join(root, name + ".json")
        with open(path) as f:
            for p in json.load(f)["problems"]:
                problems.add(p["name"])
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory to write <problem>.jsonl into")
    parser.add_argument("--suites", nargs="+", default=["level1", "level2"])
    parser.add_argument("--committed-strict", action="store_true",
                        help="join the committed strict-mode H200 logs first")
    parser.add_argument("sources", nargs="*", help="ARCHIVE.tar.xz[:SUBDIR]")
    args = parser.parse_args()
    if args.committed_strict:
        logs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "logs")
        args.sources = [os.path.join(logs, s) for s in COMMITTED_STRICT] + args.sources
    if not args.sources:
        parser.error("no sources (name archives or pass --committed-strict)")
    problems = suite_problems(args.suites)
    lines = collections.defaultdict(list)
    seen = collections.defaultdict(set)
    added = collections.defaultdict(list)
    for source in args.sources:
        archive, _, subdir = source.partition(":")
        if not os.path.isfile(archive):
            sys.exit(f"merge_suite_logs.py: no archive {archive}")
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if not member.isfile() or not member.name.endswith(".jsonl"):
                    continue
                folder, base = os.path.split(member.name)
                if subdir and folder.rstrip("/").split("/", 1)[-1] != subdir.strip("/"):
                    continue
                problem = base[: -len(".jsonl")]
                if problem not in problems:
                    continue
                count = 0
                for raw in tar.extractfile(member).read().decode().splitlines():
                    if raw.strip() and raw not in seen[problem]:
                        seen[problem].add(raw)
                        lines[problem].append(raw)
                        count += 1
                added[problem].append(f"{source} ({member.name}): {count} lines")
    os.makedirs(args.out, exist_ok=True)
    for problem, rows in sorted(lines.items()):
        with open(os.path.join(args.out, problem + ".jsonl"), "w") as f:
            f.write("\n".join(rows) + "\n")
    with open(os.path.join(args.out, "SOURCES.txt"), "w") as f:
        for problem in sorted(added):
            f.write(problem + "\n" + "".join(f"  {a}\n" for a in added[problem]))
    missing = sorted(problems - set(lines))
    print(f"{len(lines)} problems with logs, {len(missing)} without: {' '.join(missing)}")


if __name__ == "__main__":
    main()

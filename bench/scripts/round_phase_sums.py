#!/usr/bin/env python3
"""Summarizes one tuning log: trials, best median, the round lines' phase sums (train, search,
build, measure, and how many rounds were overlapped), and, given the tune's wall seconds, trials per
second. With --best-schedule FILE, also writes the best valid record as a schedule file
(workload, target, steps) that `tilesearch measure --schedule` replays."""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("log")
    ap.add_argument("--wall", type=float, help="wall seconds of the tune that wrote the log")
    ap.add_argument("--label", default="")
    ap.add_argument("--best-schedule", help="write the best valid record here as a schedule file")
    args = ap.parse_args()
    records, rounds = [], []
    with open(args.log, encoding="utf-8") as f:
        for line in f:
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                continue
            (rounds if j.get("kind") == "round" else records).append(j)
    valid = [r for r in records if r.get("result", {}).get("error") == "none"]
    best = min(valid, key=lambda r: r["result"]["timing"]["median_ms"], default=None)
    sums = {k: sum(r.get(k, 0.0) for r in rounds) for k in ("train_s", "search_s", "build_s",
                                                              "measure_s")}
    overlapped = sum(1 for r in rounds if r.get("overlapped"))
    text = f"{args.label}: {len(records)} trials, {len(valid)} valid, {len(rounds)} rounds " \
           f"({overlapped} overlapped); phases " + \
           ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in sums.items())
    if args.wall:
        text += f"; wall {args.wall:.1f} s, {len(records) / args.wall:.2f} trials/s"
    if best is not None:
        text += f"; best {best['result']['timing']['median_ms']:.4f} ms (trial {best.get('trial')})"
    print(text)
    if args.best_schedule and best is not None:
        t = best["target"]
        target = t["kind"] + (f" -arch={t['arch']}" if t.get("arch") else "")
        with open(args.best_schedule, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "workload": best["workload"], "target": target,
                       "steps": best["steps"]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

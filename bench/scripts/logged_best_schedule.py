#!/usr/bin/env python3
"""Writes the fastest valid record of a tuning log as a schedule file (the format `tilesearch
measure --schedule` and `show --schedule` read), so a logged kernel can be profiled or edited by
hand. A schedule's newest record counts (as the log reader keeps it).

  logged_best_schedule.py LOG OUT.json [--rank N] [--comment TEXT]

--rank N picks the N-th fastest distinct schedule (0 = the best). Exit status 1 when the log has
no valid record, 2 on bad arguments.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--comment", default="")
    a = ap.parse_args()
    newest = {}  # steps (as JSON) -> record
    with open(a.log) as f:
        for n, line in enumerate(f, 1):
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                print(f"{a.log}:{n}: not JSON, skipped", file=sys.stderr)
                continue
            r = d.get("result")
            if not isinstance(r, dict) or r.get("error") != "none" or "timing" not in r:
                continue
            newest[json.dumps(d["steps"])] = d
    recs = sorted(newest.values(), key=lambda d: d["result"]["timing"]["median_ms"])
    if len(recs) <= a.rank:
        print(f"{a.log}: {len(recs)} valid schedules, no rank {a.rank}", file=sys.stderr)
        return 1
    d = recs[a.rank]
    t = d["target"]
    if isinstance(t, str):
        target = t
    elif t.get("kind") == "cuda" and t.get("arch"):
        target = f"cuda -arch={t['arch']}"
    else:
        target = t["kind"]
    ms = d["result"]["timing"]["median_ms"]
    comment = a.comment or (f"logged schedule of rank {a.rank} (trial {d.get('trial')}, "
                            f"{ms:.4f} ms when logged)")
    out = {"version": 1, "comment": comment, "workload": d["workload"], "target": target,
           "steps": d["steps"]}
    if d.get("precision", "ieee") != "ieee":
        out["precision"] = d["precision"]
    with open(a.out, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"{a.out}: trial {d.get('trial')}, {ms:.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

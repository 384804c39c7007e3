#!/usr/bin/env python3
"""Summarizes one workload of a tuning log: trials, best median, the round lines' phase sums
(train, search, build, measure, and how many rounds were overlapped), and, given the tune's wall
seconds, trials per second; then the trials, valid trials and best per sketch family (wgmma,
mma.sync, SIMT) and the round lines' tensor-core shares. With --best-schedule FILE, also writes the best valid record as a
schedule file (workload, target, steps) that `tilesearch measure --schedule` replays (a record
tuned with --precision tf32 is measured with `--precision tf32`; the file cannot say it).

The workload is --workload-key, or the one with the most records in the log. Lines that are not
JSON objects, and round lines whose phase times or "overlapped" flag are malformed, are skipped
with a count, as tilesearch skips them."""
import argparse
import collections
import json
import math
import sys

PHASES = ("train_s", "search_s", "build_s", "measure_s")


def read_log(path):
    """(records, rounds, skipped lines) of the log at `path`."""
    records, rounds, skipped = [], [], 0
    # errors="replace": a line cut or corrupted mid-character is skipped as malformed, not fatal.
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                j = json.loads(line)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if not isinstance(j, dict):
                skipped += 1
            elif j.get("kind") == "round":
                well_formed = all(isinstance(j.get(k), (int, float)) and
                                  not isinstance(j.get(k), bool) for k in PHASES)
                if well_formed and isinstance(j.get("overlapped", False), bool):
                    rounds.append(j)
                else:
                    skipped += 1
            elif isinstance(j.get("result"), dict) and isinstance(j.get("workload_key"), str):
                records.append(j)
            else:
                skipped += 1
    return records, rounds, skipped


def median_ms(record):
    """The record's median time, or None when it is not a valid timed record."""
    result = record["result"]
    timing = result.get("timing")
    if result.get("error") != "none" or not isinstance(timing, dict):
        return None
    ms = timing.get("median_ms")
    return ms if isinstance(ms, (int, float)) and math.isfinite(ms) and ms > 0 else None


def family(record):
    """The record's sketch family: "wgmma", "mma.sync" (a tensor_core step without the wgmma
    flag) or "simt" (no tensor_core step)."""
    for step in record.get("steps", []):
        if isinstance(step, list) and step and step[0] == "TC":
            return "wgmma" if "wgmma" in step[1:] else "mma.sync"
    return "simt"


def family_text(records, rounds):
    """Trials, valid trials and best median per family, and the round lines' tensor-core shares."""
    parts = []
    for fam in ("wgmma", "mma.sync", "simt"):
        mine = [r for r in records if family(r) == fam]
        if not mine:
            continue
        times = [t for t in (median_ms(r) for r in mine) if t is not None]
        parts.append(f"{fam} {len(mine)} trials ({len(times)} valid" +
                     (f", best {min(times):.4f} ms)" if times else ")"))
    shares = [r.get("tensor_core_share") for r in rounds]
    text = "families: " + ", ".join(parts)
    if any(isinstance(x, (int, float)) for x in shares):
        text += "; tensor-core share per round " + \
            " ".join("-" if not isinstance(x, (int, float)) else f"{x:g}" for x in shares)
    return text


def schedule_target(target):
    """The record's target as a schedule file writes it: "cpu", or "cuda -arch=sm_XX"."""
    if target.get("kind") == "cuda" and target.get("arch"):
        return f"cuda -arch={target['arch']}"
    return target.get("kind", "cpu")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("log")
    ap.add_argument("--wall", type=float, help="wall seconds (> 0) of the tune that wrote the log")
    ap.add_argument("--label", default="")
    ap.add_argument("--workload-key", help="the workload to summarize (default: the most records)")
    ap.add_argument("--best-schedule", help="write the best valid record here as a schedule file")
    args = ap.parse_args()
    if args.wall is not None and not (math.isfinite(args.wall) and args.wall > 0):
        ap.error(f"--wall {args.wall}: want seconds > 0")
    records, rounds, skipped = read_log(args.log)
    keys = collections.Counter(r["workload_key"] for r in records)
    key = args.workload_key or (keys.most_common(1)[0][0] if keys else None)
    if key is None:
        print(f"{args.log}: no records", file=sys.stderr)
        return 1
    if key not in keys:
        print(f"{args.log}: no record of workload {key} (holds {sorted(keys)})", file=sys.stderr)
        return 1
    records = [r for r in records if r["workload_key"] == key]
    rounds = [r for r in rounds if r.get("workload_key") == key]
    timed = [(median_ms(r), r) for r in records if median_ms(r) is not None]
    best = min(timed, key=lambda t: t[0])[1] if timed else None
    sums = {k: sum(r[k] for r in rounds) for k in PHASES}
    overlapped = sum(1 for r in rounds if r.get("overlapped") is True)
    text = f"{args.label or key}: {len(records)} trials, {len(timed)} valid, {len(rounds)} " \
           f"rounds ({overlapped} overlapped); phases " + \
           ", ".join(f"{k[:-2]} {v:.1f} s" for k, v in sums.items())
    if args.wall:
        text += f"; wall {args.wall:.1f} s, {len(records) / args.wall:.2f} trials/s"
    if best is not None:
        text += f"; best {median_ms(best):.4f} ms (trial {best.get('trial')})"
    if len(keys) > 1:
        text += f"; workload {key} of {len(keys)} in the log"
    if skipped:
        text += f"; {skipped} malformed lines skipped"
    print(text)
    print(f"{args.label or key}: " + family_text(records, rounds))
    if args.best_schedule:
        if best is None:
            print(f"{args.log}: no valid record of {key}: no schedule written", file=sys.stderr)
            return 1
        with open(args.best_schedule, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "workload": best["workload"],
                       "target": schedule_target(best["target"]), "steps": best["steps"]}, f)
        if best.get("precision", "ieee") != "ieee":
            print(f"note: the record was tuned with --precision {best['precision']}: measure it "
                  f"with --precision {best['precision']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The table of the held-out study (bench/scripts/h200_heldout_study.sh): per workload, the long
run's best, the trial at which the SHORT-trial runs (from the shipped model, and online only)
first came within 90 % of that best's throughput, their best over it, the zero-shot ratio, and
the trials/s of every run; then the medians against the acceptance bounds.

  heldout_study_report.py [--out table.md] [--workloads F] DIR...

Each DIR is a workload folder of the study (it holds case.tsv) or a folder of them (the
heldout-study folder of one or several calls' .tgz). Definitions:
- best: the smallest median time of a valid record (error "none", a finite positive median) of the
  workload in the log; trials: its records (the untuned program's included, as `tune` counts).
- trials to 90 %: the number of trials, in trial order, up to and including the first valid one
  whose median is <= long best / 0.9; "not reached" (infinite in the median) otherwise.
- best@N / long: long best / the run's best (1 = as fast as the long run; > 1 faster).
- zero-shot: tuned / predicted median of `tilesearch measure` on the long run's best record and
  on predict's schedule, one after the other in the same call. A prediction that failed its check
  or was not written counts as 0; a workload whose tuned best could not be measured is left out.
Exit status: 0 when a table was written (whatever it says), 1 when no workload folder was found.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from round_phase_sums import median_ms, read_log  # noqa: E402  (the same reading of a log)

RUNS = ("long", "pretrained", "online")


def tsv_rows(path):
    """The tab-separated fields of each line of `path`; none when it does not exist."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


def read_tsv_pairs(path):
    """{first field: second field} of case.tsv's lines (the last one of a name)."""
    return {p[0]: p[1] for p in tsv_rows(path) if len(p) >= 2}


def read_times(path):
    """{step: (wall_s or None, rc text, limit_s)} from times.tsv (the last line of a step)."""
    out = {}
    for p in tsv_rows(path):
        if len(p) == 4:
            try:
                wall = float(p[1])
            except ValueError:
                wall = None
            out[p[0]] = (wall, p[2], p[3])
    return out


def case_dirs(paths):
    found = []
    for p in paths:
        if os.path.exists(os.path.join(p, "case.tsv")):
            found.append(p)
        elif os.path.isdir(p):
            for d in sorted(os.listdir(p)):
                if os.path.exists(os.path.join(p, d, "case.tsv")):
                    found.append(os.path.join(p, d))
    return found


def run_summary(path, key):
    """Records of `key` in trial order as (trial, ms or None), the round lines, and notes."""
    notes = []
    if not os.path.exists(path):
        return None
    records, rounds, skipped = read_log(path)
    keys = {r["workload_key"] for r in records}
    if key not in keys and keys:
        notes.append(f"{os.path.basename(path)} holds {sorted(keys)}, not {key}")
    mine = [r for r in records if r["workload_key"] == key]
    mine.sort(key=lambda r: r.get("trial") if isinstance(r.get("trial"), int) else 1 << 60)
    trials = [(r.get("trial"), median_ms(r)) for r in mine]
    errors = {}
    for r in mine:
        e = r["result"].get("error")
        if e != "none":
            errors[e] = errors.get(e, 0) + 1
    rounds = [r for r in rounds if r.get("workload_key") == key]
    if skipped:
        notes.append(f"{os.path.basename(path)}: {skipped} malformed lines skipped")
    valid = [ms for _, ms in trials if ms is not None]
    return {"trials": trials, "n": len(trials), "valid": len(valid),
            "best": min(valid) if valid else None, "errors": errors,
            "model_init": (rounds[0].get("model_init", "none") if rounds else "?"),
            # Per round, the model that searched it: P the pretrained one (the line names an
            # initial model), O the online-only one (it names none).
            "searched_by": "".join("P" if r.get("model_init") else "O" for r in rounds),
            "notes": notes}


def trials_to(trials, bound_ms):
    """1-based count of trials up to the first valid one <= bound_ms, or None."""
    for i, (_, ms) in enumerate(trials, 1):
        if ms is not None and ms <= bound_ms:
            return i
    return None


def read_measure(d, name):
    """(median ms or None, error text or None) of measure_<name>.json (or its .out)."""
    js = os.path.join(d, f"measure_{name}.json")
    if os.path.exists(js):
        try:
            with open(js, encoding="utf-8") as f:
                j = json.load(f)
            r = j.get("result", {})
            if r.get("error") not in (None, "none"):
                return None, str(r.get("error"))
            ms = r.get("timing", {}).get("median_ms")
            if isinstance(ms, (int, float)) and math.isfinite(ms) and ms > 0:
                return float(ms), None
        except (OSError, ValueError, AttributeError):
            pass
    out = os.path.join(d, f"measure_{name}.out")
    if os.path.exists(out):
        text = open(out, encoding="utf-8", errors="replace").read()
        m = re.search(r"^time: ([0-9.eE+-]+) ms median", text, re.M)
        if m and "\nOK" in "\n" + text:
            return float(m.group(1)), None
        last = [l for l in text.splitlines() if l.strip()]
        return None, (last[-1][:120] if last else "no output")
    return None, "not measured"


def fmt(x, digits=4):
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "not reached"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def median(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", help="write the markdown here (default: stdout)")
    ap.add_argument("--workloads", default=os.path.join(HERE, "..", "heldout_workloads.txt"),
                    help="order the rows as this file does")
    ap.add_argument("--trials-bound", type=float, default=64,
                    help="acceptance: median trials to 90 %% at most this")
    ap.add_argument("--best-bound", type=float, default=0.95,
                    help="acceptance: median best@N / long best at least this")
    ap.add_argument("--zero-shot-bound", type=float, default=0.80,
                    help="acceptance: median tuned / predicted at least this")
    ap.add_argument("--min-workloads", type=int, default=8)
    a = ap.parse_args()

    dirs = case_dirs(a.dirs)
    if not dirs:
        print(f"no workload folder (with case.tsv) in {' '.join(a.dirs)}", file=sys.stderr)
        return 1
    order = []
    if os.path.exists(a.workloads):
        with open(a.workloads, encoding="utf-8") as f:
            order = [l.split("|")[0].strip() for l in f
                     if l.strip() and not l.startswith("#")]
    rows, settings = [], set()
    for d in dirs:
        case = read_tsv_pairs(os.path.join(d, "case.tsv"))
        times = read_times(os.path.join(d, "times.tsv"))
        name, key = case.get("name", os.path.basename(d)), case.get("key", "?")
        settings.add((case.get("target"), case.get("long_trials"), case.get("short_trials"),
                      case.get("seed"), case.get("model_init")))
        row = {"name": name, "key": key, "notes": [], "runs": {}}
        if case.get("show_key") and case.get("show_key") != key:
            row["notes"].append(f"tilesearch show gave key {case.get('show_key')}")
        for run in RUNS:
            s = run_summary(os.path.join(d, f"{run}.jsonl"), key)
            wall, rc, limit = times.get(run, (None, "missing", "?"))
            if s is None:
                row["runs"][run] = {"n": 0, "valid": 0, "best": None, "trials": [],
                                    "errors": {}, "model_init": "?", "notes": [],
                                    "wall": wall, "rc": rc}
                row["notes"].append(f"{run}: no log (rc {rc})")
                continue
            s.update(wall=wall, rc=rc, limit=limit)
            s["rate"] = s["n"] / wall if wall and s["n"] else None
            row["runs"][run] = s
            row["notes"] += s["notes"]
            if rc not in ("0", "missing"):
                why = "cut at its limit" if rc in ("124", "130", "137") else "failed"
                row["notes"].append(f"{run}: rc {rc} ({why}, {s['n']} trials logged)")
        long = row["runs"]["long"]
        want = case.get("long_trials")
        if long["n"] and want and want.isdigit() and long["n"] < int(want):
            row["notes"].append(f"long: {long['n']} of {want} trials")
        best = long["best"]
        row["best"] = best
        for run in RUNS:
            s = row["runs"][run]
            if best is None or s["n"] == 0:
                s["to90"], s["ratio"] = None, None
                continue
            t = trials_to(s["trials"], best / 0.9)
            s["to90"] = float("inf") if t is None else t
            s["ratio"] = best / s["best"] if s["best"] else 0.0
        tuned, tuned_err = read_measure(d, "tuned")
        pred, pred_err = read_measure(d, "predicted")
        predict_rc = times.get("predict", (None, "missing", "?"))[1]
        row["tuned_ms"], row["pred_ms"] = tuned, pred
        if tuned is None:
            row["zero_shot"] = None
            row["notes"].append(f"tuned best not measured: {tuned_err}")
        elif predict_rc == "not_run":
            row["zero_shot"] = None
            row["notes"].append("predict not run (call budget)")
        elif pred is None:
            row["zero_shot"] = 0.0
            why = pred_err if os.path.exists(os.path.join(d, "predicted.json")) else \
                f"predict wrote no schedule (rc {predict_rc})"
            row["notes"].append(f"prediction counts 0: {why}")
        else:
            row["zero_shot"] = tuned / pred
        po = os.path.join(d, "predict.out")
        row["predict"] = ""
        if os.path.exists(po):
            text = open(po, encoding="utf-8", errors="replace").read()
            cand = re.search(r"^candidates: (.*)$", text, re.M)
            orig = re.search(r"^prediction: (.*)$", text, re.M)
            row["predict"] = "; ".join(m.group(1) for m in (cand, orig) if m)
        rows.append(row)
    rank = {n: i for i, n in enumerate(order)}
    rows.sort(key=lambda r: (rank.get(r["name"], len(rank)), r["name"]))

    short = sorted({s[2] for s in settings if s[2]})
    short_text = "/".join(short) or "N"
    L = []
    L.append("# Held-out workloads: trials to reach the long run's best, and zero-shot predictions")
    L.append("")
    L.append("Settings (target, long trials, short trials, seed, model init): " +
             "; ".join(", ".join(str(x) for x in s) for s in sorted(settings, key=str)) +
             f". From {', '.join(a.dirs)}.")
    L.append("")
    L.append(f"| workload | key | long best ms | long trials | long: trials to 90 % | "
             f"pretrained@{short_text}: trials to 90 % | pretrained best / long | "
             f"online@{short_text}: trials to 90 % | online best / long | predicted ms | "
             f"tuned ms (same call) | zero-shot tuned / predicted |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lg, pt, on = (r["runs"][k] for k in RUNS)
        L.append(f"| {r['name']} | {r['key']} | {fmt(r['best'])} | {lg['n']} | "
                 f"{fmt(lg.get('to90'))} | {fmt(pt.get('to90'))} | {fmt(pt.get('ratio'), 3)} | "
                 f"{fmt(on.get('to90'))} | {fmt(on.get('ratio'), 3)} | {fmt(r['pred_ms'])} | "
                 f"{fmt(r['tuned_ms'])} | {fmt(r['zero_shot'], 3)} |")
    L.append("")
    have_short = [r for r in rows if r["runs"]["pretrained"].get("to90") is not None]
    have_zero = [r for r in rows if r["zero_shot"] is not None]
    m_to90 = median([r["runs"]["pretrained"]["to90"] for r in have_short])
    m_ratio = median([r["runs"]["pretrained"]["ratio"] for r in have_short])
    m_on_to90 = median([r["runs"]["online"].get("to90") for r in rows])
    m_on_ratio = median([r["runs"]["online"].get("ratio") for r in rows])
    m_zero = median([r["zero_shot"] for r in have_zero])

    def verdict(value, ok, n):
        if value is None:
            return "no data"
        enough = n >= a.min_workloads
        return ("holds" if ok else "does not hold") + \
            ("" if enough else f" (on {n} workloads; the bound asks >= {a.min_workloads})")

    L.append("| median over the workloads | pretrained | online only | bound | acceptance |")
    L.append("|---|---|---|---|---|")
    n_short, n_zero = len(have_short), len(have_zero)
    ok_to90 = m_to90 is not None and m_to90 <= a.trials_bound
    ok_ratio = m_ratio is not None and m_ratio >= a.best_bound
    ok_zero = m_zero is not None and m_zero >= a.zero_shot_bound
    L.append(f"| trials to 90 % of the long best ({n_short} workloads) | {fmt(m_to90, 1)} | "
             f"{fmt(m_on_to90, 1)} | <= {a.trials_bound:g} | "
             f"{verdict(m_to90, ok_to90, n_short)} |")
    L.append(f"| best@{short_text} / long best ({n_short} workloads) | {fmt(m_ratio, 3)} | "
             f"{fmt(m_on_ratio, 3)} | >= {a.best_bound:g} | {verdict(m_ratio, ok_ratio, n_short)} |")
    L.append(f"| zero-shot tuned / predicted ({n_zero} workloads) | {fmt(m_zero, 3)} | – | "
             f">= {a.zero_shot_bound:g} | {verdict(m_zero, ok_zero, n_zero)} |")
    L.append("")
    L.append("Runs (trials/s: the log's trials over the tune's wall seconds, as the script timed "
             "it; model init: the first round line's; searched by: per round, P the pretrained "
             "model, O the online-only one):")
    L.append("")
    L.append("| workload | run | trials | valid | best ms | wall s | trials/s | model init | "
             "searched by | rc | errors |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        for run in RUNS:
            s = r["runs"][run]
            init = s.get("model_init", "?")
            init = os.path.basename(init) if isinstance(init, str) else init
            errs = ", ".join(f"{k} {v}" for k, v in sorted(s.get("errors", {}).items())) or "–"
            L.append(f"| {r['name']} | {run} | {s['n']} | {s['valid']} | {fmt(s['best'])} | "
                     f"{fmt(s.get('wall'), 1)} | {fmt(s.get('rate'), 2)} | {init} | "
                     f"{s.get('searched_by', '?') or '?'} | {s['rc']} | {errs} |")
    L.append("")
    L.append("Predictions (`tilesearch predict` output):")
    L.append("")
    for r in rows:
        L.append(f"- {r['name']}: {r['predict'] or 'no output'}")
    notes = [(r["name"], n) for r in rows for n in r["notes"]]
    if notes:
        L.append("")
        L.append("Notes:")
        L.append("")
        for name, n in notes:
            L.append(f"- {name}: {n}")
    text = "\n".join(L) + "\n"
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The held-out workloads of bench/heldout_workloads.txt: list them, keep their records out of
tuning logs, and check the file against tilesearch and the committed logs.

  heldout_workloads.py [--file F] list [--cases "NAME ..."]
      prints name|key|arguments per selected workload (all when --cases is empty); exit 2 for a
      name the file does not hold.
  heldout_workloads.py [--file F] drop DIR_OR_FILE...
      rewrites every *.jsonl (directories: recursively) without the lines of a held-out workload
      (their workload_key, or the key with a precision suffix such as -tf32); prints the lines
      dropped per file and in all. What train_default_model.sh runs before training.
  heldout_workloads.py [--file F] pool --out-dir D DIR_OR_FILE...
      joins the measurement records (not round lines) of every *.jsonl into D/<op>.jsonl, one
      file per operator, each distinct line once, held-out workloads left out: the logs that
      `tilesearch predict` transfers from in the held-out study.
  heldout_workloads.py [--file F] check [--tilesearch BIN] [--logs DIR]
      recomputes each key with `BIN show ARGS` and looks for every key in the archives of DIR
      (default bench/logs/*.tar.xz; an archive whose name contains "heldout" is the study's own
      and may hold them). Exit 1 when a key differs or another archive holds one.
"""
import argparse
import errno
import json
import os
import re
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_FILE = os.path.join(ROOT, "bench", "heldout_workloads.txt")


def read_workloads(path):
    """[(name, key, args)] of the file, in its order. Raises ValueError on a malformed line."""
    out, names = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split("|")
            if len(parts) != 3:
                raise ValueError(f"{path}:{n}: want name|key|arguments, got {line!r}")
            name, key, args = (p.strip() for p in parts)
            if not re.fullmatch(r"[a-z0-9_]+", name):
                raise ValueError(f"{path}:{n}: name {name!r}: want [a-z0-9_]+")
            if name in names:
                raise ValueError(f"{path}:{n}: name {name} twice")
            if not re.fullmatch(r"[0-9a-f]{16}", key):
                raise ValueError(f"{path}:{n}: key {key!r}: want 16 hex digits")
            if not args.startswith("--op "):
                raise ValueError(f"{path}:{n}: arguments must start with --op")
            names.add(name)
            out.append((name, key, args))
    if not out:
        raise ValueError(f"{path}: no workloads")
    return out


def base_key(key):
    """A workload key without its precision suffix ("3a0a...c2-tf32" -> "3a0a...c2")."""
    return key.split("-", 1)[0] if isinstance(key, str) else None


def jsonl_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for d, _, files in sorted(os.walk(p)):
                for f in sorted(files):
                    if f.endswith(".jsonl"):
                        yield os.path.join(d, f)
        elif os.path.isfile(p):
            yield p
        else:
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", p)


def held_out_line(line, keys):
    """True when the line is a JSON object of a held-out workload (record or round line)."""
    if not any(k in line for k in keys):  # fast path: most lines mention no held-out key
        return False
    try:
        j = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(j, dict) and base_key(j.get("workload_key")) in keys


def cmd_list(workloads, args):
    wanted = args.cases.split()
    names = [w[0] for w in workloads]
    unknown = [c for c in wanted if c not in names]
    if unknown:
        print(f"unknown workload(s) {' '.join(unknown)}; the file holds {' '.join(names)}",
              file=sys.stderr)
        return 2
    for w in workloads:
        if not wanted or w[0] in wanted:
            print("|".join(w))
    return 0


def cmd_drop(workloads, args):
    keys = {w[1] for w in workloads}
    total = files = 0
    for path in jsonl_files(args.paths):
        files += 1
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.readlines()
        kept = [l for l in lines if not held_out_line(l, keys)]
        if len(kept) != len(lines):
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.writelines(kept)
            print(f"{path}: {len(lines) - len(kept)} held-out lines dropped")
            total += len(lines) - len(kept)
    print(f"held-out workloads: {len(keys)}; {total} lines dropped from {files} logs")
    return 0


def cmd_pool(workloads, args):
    keys = {w[1] for w in workloads}
    os.makedirs(args.out_dir, exist_ok=True)
    seen, per_op, dropped, unreadable = set(), {}, 0, 0
    outs = {}
    try:
        for path in jsonl_files(args.paths):
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                for line in f:
                    if '"workload"' not in line or line in seen:
                        continue
                    try:
                        j = json.loads(line)
                    except json.JSONDecodeError:
                        unreadable += 1
                        continue
                    if not isinstance(j, dict) or j.get("kind", "record") != "record" or \
                            not isinstance(j.get("workload"), dict):
                        continue
                    if base_key(j.get("workload_key")) in keys:
                        dropped += 1
                        continue
                    op = j["workload"].get("op")
                    if not isinstance(op, str) or not re.fullmatch(r"[A-Za-z0-9_]+", op):
                        continue
                    seen.add(line)
                    if op not in outs:
                        outs[op] = open(os.path.join(args.out_dir, op + ".jsonl"), "w",
                                        encoding="utf-8", errors="surrogateescape")
                    outs[op].write(line if line.endswith("\n") else line + "\n")
                    per_op[op] = per_op.get(op, 0) + 1
    finally:
        for f in outs.values():
            f.close()
    print(f"pool {args.out_dir}: " + ", ".join(f"{op} {n}" for op, n in sorted(per_op.items())) +
          f"; {dropped} held-out records left out, {unreadable} unreadable lines skipped")
    return 0


def cmd_check(workloads, args):
    bad = 0
    for name, key, wargs in workloads:
        try:
            p = subprocess.run([args.tilesearch, "show"] + wargs.split(), capture_output=True,
                               text=True)
        except OSError as e:
            print(f"heldout_workloads.py: cannot run {args.tilesearch}: {e}", file=sys.stderr)
            return 2
        m = re.search(r"^workload key: ([0-9a-f]{16})$", p.stdout, re.M)
        got = m.group(1) if m else None
        if got != key:
            bad += 1
            print(f"{name}: key {key} in the file, tilesearch show says {got} "
                  f"(rc {p.returncode}: {p.stderr.strip()[:200]})")
        else:
            print(f"{name}: key {key} ok")
    keys = {w[1] for w in workloads}
    archives = sorted(f for f in os.listdir(args.logs) if f.endswith(".tar.xz"))
    for a in archives:
        try:
            with tarfile.open(os.path.join(args.logs, a), "r:xz") as t:
                for m in t:
                    if not m.isfile():
                        continue
                    data = t.extractfile(m).read().decode("utf-8", "replace")
                    found = sorted(k for k in keys if k in data)
                    if found:
                        allowed = "heldout" in a
                        bad += 0 if allowed else 1
                        print(f"{a}:{m.name}: holds held-out key(s) {' '.join(found)}" +
                              (" (the study's own archive)" if allowed else ""))
        except (tarfile.TarError, EOFError, OSError) as e:
            bad += 1
            print(f"{a}: unreadable archive ({e}): not searched")
    print(f"{len(workloads)} held-out workloads, {len(archives)} archives searched: " +
          ("ok" if bad == 0 else f"{bad} problem(s)"))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default=DEFAULT_FILE, help="the held-out workloads file")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list")
    p.add_argument("--cases", default="", help="space-separated names (default: all)")
    p = sub.add_parser("drop")
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("pool")
    p.add_argument("--out-dir", required=True)
    p.add_argument("paths", nargs="+")
    p = sub.add_parser("check")
    p.add_argument("--tilesearch", default=os.path.join(ROOT, "build", "tools", "tilesearch"))
    p.add_argument("--logs", default=os.path.join(ROOT, "bench", "logs"))
    args = ap.parse_args()
    try:
        workloads = read_workloads(args.file)
    except (OSError, ValueError) as e:
        print(f"heldout_workloads.py: {e}", file=sys.stderr)
        return 2
    try:
        return {"list": cmd_list, "drop": cmd_drop, "pool": cmd_pool, "check": cmd_check}[
            args.cmd](workloads, args)
    except OSError as e:  # a path that is missing or unreadable (FileNotFoundError among them)
        print(f"heldout_workloads.py {args.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Turns the files of an H200 hand-schedule run (bench/scripts/h200_measure_hand_schedules.sh →
hand-schedules/) into the markdown tables of bench/results/: our schedules vs PyTorch eager on the
same shapes, and the compile-time distribution.

  python3 bench/scripts/hand_schedules_table.py DIR > bench/results/h200-DATE-hand-schedules-vs-eager.md
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    d = sys.argv[1]
    torch_rows = {r["case"]: r for r in load(os.path.join(d, "pytorch.json"))["rows"]}
    meta = load(os.path.join(d, "pytorch.json"))["meta"]
    out = []
    out.append("| kernel | schedule | launch (grid × block, regs, smem) | check (trials, max abs err) "
               "| median ms (p10–p90, runs) | GFLOP/s | GB/s | PyTorch eager ms | ours / PyTorch speed |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(glob.glob(os.path.join(d, "measure_*.json"))):
        m = load(path)
        r = m["result"]
        name = os.path.basename(path)[len("measure_"):-len(".json")]
        case = ("softmax:4096x4096" if name.startswith("softmax") else
                "transpose:16384x16384" if name.startswith("transpose") else
                "matmul:2048x2048x2048" if "2048" in name else "matmul:4096x4096x4096")
        t = torch_rows.get(case)
        sched = m["schedule"].split("/tilesearch/")[-1]
        launches = "; ".join(
            f"{'×'.join(str(x) for x in l['grid'] if x != 1) or 1} × {'×'.join(str(x) for x in l['block'] if x != 1) or 1}"
            + (f", {k['registers_per_thread']} regs, {k['static_shared_bytes'] + k['dynamic_shared_bytes']} B"
               if k else "")
            for l, k in zip(m["launches"], r.get("kernels", []) + [None] * len(m["launches"])))
        if r["error"] != "none":
            out.append(f"| {name} | {sched} | {launches} | **{r['error']}**: {r['message'][:120]} | | | | "
                       f"{t['median_ms']:.4f} |  |" if t else "")
            continue
        tm = r["timing"]
        speed = (t["median_ms"] / tm["median_ms"]) if t else float("nan")
        out.append(
            f"| {name} | {sched} | {launches} | {r['check']['trials']}, {float(r['check']['max_abs_error']):.2e} "
            f"| {tm['median_ms']:.4f} ({tm['p10_ms']:.4f}–{tm['p90_ms']:.4f}, {tm['runs']}) "
            f"| {m['gflops_per_s']:.0f} | {m['gbytes_per_s']:.0f} "
            f"| {t['median_ms']:.4f} ({t['p10_ms']:.4f}–{t['p90_ms']:.4f}, {t['runs']}) | {speed:.2f}× |")
    out.append("")
    out.append("PyTorch eager: " + ", ".join(
        f"{c}: {r['median_ms']:.4f} ms median, {r['gflops']:.0f} GFLOP/s, {r['gbps']:.0f} GB/s"
        for c, r in torch_rows.items()) + f" ({meta['device']}, torch {meta['torch']}, CUDA {meta['cuda']}, "
        f"TF32 {'on' if meta['tf32'] else 'off'}, L2 {meta['l2_bytes'] // (1 << 20)} MiB, {meta['sm_count']} SMs).")
    cpath = os.path.join(d, "compile.json")
    if os.path.exists(cpath):
        c = load(cpath)
        out.append("")
        out.append(f"Compile-time distribution: {c['candidates']} distinct tilings of a {c['size']}³ float32 "
                   f"matmul, {c['workers']} workers ({c['invalid']} invalid skipped, {c['failed']} failed).")
        out.append("")
        out.append("| ms per candidate | median | p10 | p90 | max |")
        out.append("|---|---|---|---|---|")

        def row(label, s):
            out.append(f"| {label} | {s['median']:.2f} | {s['p10']:.2f} | {s['p90']:.2f} | {s['max']:.2f} |")
        row("schedule replay + lower", c["lower_ms"])
        row("MLIR → PTX (total)", c["compile_ms"])
        for k, v in c["phases_ms"].items():
            row(f"— {k}", v)
        if "driver_jit_ms" in c:
            row("driver JIT (cuModuleLoadDataEx)", c["driver_jit_ms"])
        out.append("")
        out.append(f"Throughput: **{c['throughput_per_s']:.0f} candidates/s** MLIR → PTX "
                   f"({c['candidates']} in {c['wall_ms']:.0f} ms wall on {c['workers']} workers).")
        if c.get("run_errors"):
            out.append(f"Run errors in the --jit pass: {c['run_errors']}")
    print("\n".join(out))


if __name__ == "__main__":
    main()

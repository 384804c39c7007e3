#!/usr/bin/env python3
"""Does the order of timing decide ours against eager? score.py times our kernel (100 runs) and
then eager (100 runs); on the H100 the tuned 70B GEMMs ran 2.44 ms in their first runs and 2.85
ms at the median while eager stayed at 2.71-2.78. This times each problem's artifact and eager with
score.py's own Harness.time, in blocks: ours, eager, ours, eager, then eager first, then both
interleaved run by run (one flush before each run, as score.py does), and prints every block's
median, min and the median of its first and last 20 runs (the drift within a block).
  python3 bench/scripts/gemm_timing_order.py --suite bench/suites/hopper.json \
      --artifacts DIR --problems a,b --json OUT.json
--steady-s S instead runs each (ours, then eager) back to back without flushes for S seconds of
wall time and prints the mean ms per launch (at the power limit: the energy per GEMM, when both
run at the same power draw; sample nvidia-smi beside it); --once launches each once (for ncu).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import score  # noqa: E402


def runs_summary(ms):
    return {"median_ms": statistics.median(ms), "min_ms": min(ms),
            "first20_ms": statistics.median(ms[:20]), "last20_ms": statistics.median(ms[-20:])}


def time_runs(h, fn):
    """score.py's Harness.time (h.runs runs), returning every run's event time in order."""
    samples = []
    h.time(fn, samples)
    return samples


def interleaved(h, fa, fb, runs):
    """Runs fa and fb alternately, each run as Harness.time times one (a flush, a device-wide
    sync, events around the launch); every run's event time, in order, for each."""
    torch = h.torch
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    a, b = [], []
    for i in range(runs):
        for fn, dst in ((fa, a), (fb, b)):
            h.flush.fill_(i)
            torch.cuda.synchronize()
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()
            dst.append(start.elapsed_time(stop))
    return a, b


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", required=True)
    p.add_argument("--artifacts", required=True)
    p.add_argument("--problems", required=True)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--json", required=True)
    p.add_argument("--steady-s", type=float, default=0)
    p.add_argument("--once", action="store_true")
    a = p.parse_args()
    suite = score.load_suite(a.suite)
    wanted = a.problems.split(",")
    h = score.Harness(runs=a.runs, baselines=("eager",))
    h.set_defaults()
    results = []
    for prob in suite["problems"]:
        if prob["name"] not in wanted:
            continue
        doc, ptx = score.find_artifact(prob, a.artifacts)
        if doc is None:
            print(f"{prob['name']}: no artifact", flush=True)
            continue
        fn = h.expression(prob)
        xs = h.fresh_inputs(prob, "uniform")
        kernel = h.kernel_class(h.drv, doc, ptx)
        bufs = h.launch_buffers(doc["arguments"], xs)[0]
        ours = kernel.bind(bufs, h.stream())
        eager = lambda: fn(*xs)  # noqa: E731
        row = {"name": prob["name"], "blocks": []}
        if a.once or a.steady_s > 0:
            with h.torch.no_grad():
                for label, f in (("ours", ours), ("eager", eager)):
                    if a.once:
                        f()
                        h.torch.cuda.synchronize()
                        continue
                    f()
                    h.torch.cuda.synchronize()
                    n, t0 = 0, time.perf_counter()
                    while time.perf_counter() - t0 < a.steady_s:
                        for _ in range(10):
                            f()
                        n += 10
                        h.torch.cuda.synchronize()
                    ms = (time.perf_counter() - t0) * 1e3 / n
                    print(f"{prob['name']} {label} back to back: {ms:.4f} ms per launch ({n} "
                          f"launches, {time.strftime('%H:%M:%S')})", flush=True)
                    row["blocks"].append({"what": label + " steady", "ms": ms, "launches": n})
                    time.sleep(1.0)
            kernel.close()
            results.append(row)
            continue
        t0 = time.time()
        with h.torch.no_grad():
            for label, f in (("ours", ours), ("eager", eager), ("ours", ours), ("eager", eager),
                             ("eager", eager), ("ours", ours)):
                row["blocks"].append({"what": label, "t_s": round(time.time() - t0, 2),
                                      **runs_summary(time_runs(h, f))})
            ia, ib = interleaved(h, ours, eager, a.runs)
            row["blocks"].append({"what": "ours interleaved", **runs_summary(ia)})
            row["blocks"].append({"what": "eager interleaved", **runs_summary(ib)})
        kernel.close()
        results.append(row)
        print(prob["name"], flush=True)
        for b in row["blocks"]:
            print(f"  {b['what']:18s} median {b['median_ms']:.4f}  min {b['min_ms']:.4f}  "
                  f"first20 {b['first20_ms']:.4f}  last20 {b['last20_ms']:.4f}", flush=True)
        with open(a.json, "w") as f:
            json.dump({"device": h.torch.cuda.get_device_name(), "runs": a.runs,
                       "results": results}, f, indent=1)
        h.torch.cuda.empty_cache()
    with open(a.json, "w") as f:
        json.dump({"device": h.torch.cuda.get_device_name(), "runs": a.runs, "results": results},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

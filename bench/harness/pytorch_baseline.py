#!/usr/bin/env python3
"""Times PyTorch eager on the H200 with tilesearch's measurement method, for side-by-side tables.

Method (the same as runtime/timing.h + the CUDA timer in runtime/cuda_device.cc): fresh random
inputs (never zeros), warm-up runs, then timed runs until at least --min-runs runs AND
--min-time-ms of summed kernel time (at most --max-runs); before every timed run the L2 is flushed
by writing a buffer of twice the device's L2 size, outside the timed region; CUDA events around
the op; median, p10, p90, mean. fp32 with TF32 disabled everywhere (allow_tf32 = False), unless
--tf32.

  python3 bench/harness/pytorch_baseline.py --case matmul:4096x4096x4096 --case softmax:4096x4096 \
      --json out.json
"""
import argparse
import json
import statistics
import sys

import torch


def percentile(sorted_xs, q):
    """Linear interpolation between closest ranks (numpy's default), as runtime/timing.cc."""
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def make_case(spec):
    """Returns (name, fn, flops, bytes) for 'matmul:MxNxK' (matmul_f16 / matmul_bf16: the same in
    float16 / bfloat16), 'softmax:RxC', 'transpose:RxC' (float32, out of place, as
    X.permute(1, 0).contiguous()) or 'conv2d:NxCxHxWxKxRxSxSTRIDExPAD' (NCHW, OIHW weights, no bias,
    as tilesearch's conv2d_nchw; conv2d_f16 / conv2d_bf16: the same in float16 / bfloat16)."""
    kind, _, dims = spec.partition(":")
    d = [int(x) for x in dims.split("x")]
    gen = torch.Generator(device="cuda").manual_seed(1234)
    if kind in ("matmul", "matmul_f16", "matmul_bf16"):
        m, n, k = d
        dtype = {"matmul": torch.float32, "matmul_f16": torch.float16,
                 "matmul_bf16": torch.bfloat16}[kind]
        a = (torch.rand(m, k, device="cuda", generator=gen) * 2 - 1).to(dtype)
        b = (torch.rand(k, n, device="cuda", generator=gen) * 2 - 1).to(dtype)
        size = torch.finfo(dtype).bits / 8
        return (spec, (lambda: torch.matmul(a, b)), 2.0 * m * n * k,
                size * (m * k + k * n + m * n))
    if kind == "softmax":
        r, c = d
        x = torch.rand(r, c, device="cuda", generator=gen) * 2 - 1
        return spec, (lambda: torch.softmax(x, dim=-1)), 5.0 * r * c, 4.0 * 2 * r * c
    if kind == "transpose":
        r, c = d
        x = torch.rand(r, c, device="cuda", generator=gen) * 2 - 1
        return spec, (lambda: x.permute(1, 0).contiguous()), 0.0, 4.0 * 2 * r * c
    if kind in ("conv2d", "conv2d_f16", "conv2d_bf16"):
        n, c, h, w, k, r, s_, stride, pad = d
        dtype = {"conv2d": torch.float32, "conv2d_f16": torch.float16,
                 "conv2d_bf16": torch.bfloat16}[kind]
        size = torch.finfo(dtype).bits / 8
        x = (torch.rand(n, c, h, w, device="cuda", generator=gen) * 2 - 1).to(dtype)
        wt = (torch.rand(k, c, r, s_, device="cuda", generator=gen) * 2 - 1).to(dtype)
        oh = (h + 2 * pad - r) // stride + 1
        ow = (w + 2 * pad - s_) // stride + 1
        fn = lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)
        return (spec, fn, 2.0 * n * k * oh * ow * c * r * s_,
                size * (n * c * h * w + k * c * r * s_ + n * k * oh * ow))
    raise SystemExit(f"unknown case '{spec}' (expected matmul:MxNxK, softmax:RxC, transpose:RxC or "
                     "conv2d:NxCxHxWxKxRxSxSTRIDExPAD)")


def time_case(fn, flush, warmup, min_runs, min_time_ms, max_runs):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    samples = []
    while len(samples) < max_runs and (len(samples) < min_runs or sum(samples) < min_time_ms):
        flush.fill_(len(samples))  # write > L2 bytes: evicts the inputs and outputs
        torch.cuda.synchronize()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop))
    s = sorted(samples)
    return {
        "runs": len(s),
        "median_ms": statistics.median(s),
        "mean_ms": statistics.fmean(s),
        "min_ms": s[0],
        "max_ms": s[-1],
        "p10_ms": percentile(s, 0.10),
        "p90_ms": percentile(s, 0.90),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", action="append", required=True)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--min-runs", type=int, default=100)
    p.add_argument("--min-time-ms", type=float, default=50.0)
    p.add_argument("--max-runs", type=int, default=1000)
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.set_float32_matmul_precision("highest" if not a.tf32 else "high")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 1024 * 1024)
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    rows = []
    for spec in a.case:
        name, fn, flops, nbytes = make_case(spec)
        t = time_case(fn, flush, a.warmup, a.min_runs, a.min_time_ms, a.max_runs)
        t.update(case=name, flops=flops, bytes=nbytes,
                 gflops=flops / (t["median_ms"] * 1e6), gbps=nbytes / (t["median_ms"] * 1e6))
        rows.append(t)
        print(f"pytorch {name:24s} median {t['median_ms']:.4f} ms  p10 {t['p10_ms']:.4f}  "
              f"p90 {t['p90_ms']:.4f}  runs {t['runs']}  {t['gflops']:.1f} GFLOP/s  "
              f"{t['gbps']:.1f} GB/s", flush=True)
    meta = {"device": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
            "l2_bytes": l2, "tf32": a.tf32, "sm_count": props.multi_processor_count}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

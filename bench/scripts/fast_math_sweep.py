#!/usr/bin/env python3
"""Device error sweep of the gelu and softplus kernels of an artifact directory (the format of
`tilesearch replay`; score.py's find_artifact): each problem's kernel runs on float32 inputs made
of every 16th bit pattern of all 2^32 (2^28 values, the 16384 x 16384 input; two passes, offsets 0
and 9, so mantissas ending in other bits are seen too) and is compared with float64 references
(torch on the GPU: x/2 (1 + erf(x / sqrt 2)); softplus x > 20 ? x : log1p(exp(x))), and PyTorch
eager's float32 F.gelu / F.softplus on the same inputs for comparison. Prints, per problem and
implementation: max abs error, max error in float32 ulps of the reference (over references of
magnitude >= 2^-100; gelu's x (1 + erf) cancels for x < -4 in any float32 evaluation, eager's
too), max ulp and relative error where |ref| >= 1e-3, elements outside the checker's 1e-4 + 1e-4 |ref|, and NaN / infinity
mismatches.

Usage: python3 bench/scripts/fast_math_sweep.py --artifacts DIR [--suite bench/suites/level1.json]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
import score  # noqa: E402


def reference(torch, name, xd):
    if name.startswith("gelu"):
        return xd * 0.5 * (1.0 + torch.special.erf(xd / math.sqrt(2.0)))
    return torch.where(xd > 20.0, xd, torch.log1p(torch.exp(xd)))


def errors(torch, got, ref):
    """(max abs, max ulp, worst-ulp input index, max rel for |ref| >= 1e-3, outside tol, nan/inf
    mismatches)."""
    g = got.double()
    finite = torch.isfinite(ref)
    special_bad = int(((~finite) & ~((g == ref) | (torch.isnan(g) & torch.isnan(ref)))).sum())
    special_bad += int((finite & ~torch.isfinite(g)).sum())
    err = torch.where(finite & torch.isfinite(g), (g - ref).abs(), torch.zeros_like(ref))
    _, e = torch.frexp(ref)
    ulp = torch.ldexp(torch.ones_like(ref), torch.clamp(e - 24, min=-149))
    in_range = finite & (ref.abs() >= 2.0 ** -100)
    ulps = torch.where(in_range, err / ulp, torch.zeros_like(ref))
    big = finite & (ref.abs() >= 1e-3)
    rel = torch.where(big, err / ref.abs().clamp(min=1e-3), torch.zeros_like(ref))
    big_ulps = torch.where(big, err / ulp, torch.zeros_like(ref))
    outside = int((finite & (err > 1e-4 + 1e-4 * ref.abs())).sum())
    worst = int(torch.argmax(ulps))
    return (err.max().item(), ulps.max().item(), worst, rel.max().item(), outside, special_bad,
            big_ulps.max().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--suite", default=os.path.join(os.path.dirname(__file__), "..", "suites",
                                                    "level1.json"))
    ap.add_argument("--problems", default="gelu_16384,softplus_16384")
    a = ap.parse_args()
    import torch
    suite = json.load(open(a.suite))
    problems = {p["name"]: p for p in suite["problems"]}
    drv = score.Driver()
    stream = torch.cuda.current_stream().cuda_stream
    F = torch.nn.functional
    for name in a.problems.split(","):
        doc, ptx = score.find_artifact(problems[name], a.artifacts)
        if doc is None:
            print(f"{name}: no artifact in {a.artifacts}")
            continue
        kernel = score.Kernel(drv, doc, ptx)
        shape = problems[name]["shapes"][0]
        n = math.prod(shape)
        rows = {"ours": [], "eager": []}
        for offset in (0, 9):
            bits = torch.arange(n, dtype=torch.int64, device="cuda") * (2 ** 32 // n) + offset
            bits = torch.where(bits >= 2 ** 31, bits - 2 ** 32, bits).to(torch.int32)
            x = bits.view(torch.float32).reshape(shape)
            out = torch.empty_like(x)
            kernel.run([x, out], stream)
            torch.cuda.synchronize()
            ref = reference(torch, name, x.double())
            eager = F.gelu(x) if name.startswith("gelu") else F.softplus(x)
            for who, got in (("ours", out), ("eager", eager)):
                r = errors(torch, got, ref)
                rows[who].append(r + (x.reshape(-1)[r[2]].item(),))  # r[7]: the input
            del ref, eager, out
        for who, rs in rows.items():
            worst = max(rs, key=lambda r: r[1])
            print(f"{name} {who:5s}: max abs {max(r[0] for r in rs):.3g}, max {worst[1]:.2f} ulp "
                  f"(x = {worst[7]:.9g}), where |ref| >= 1e-3 max {max(r[6] for r in rs):.2f} ulp and "
                  f"rel {max(r[3] for r in rs):.3g}, "
                  f"outside 1e-4 + 1e-4|ref|: {sum(r[4] for r in rs)}, NaN/inf mismatches: "
                  f"{sum(r[5] for r in rs)} of {2 * n} inputs")
        kernel.close()


if __name__ == "__main__":
    main()

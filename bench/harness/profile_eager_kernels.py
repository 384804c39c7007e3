#!/usr/bin/env python3
"""Names the CUDA kernels PyTorch eager launches for a case, with their grid, block, registers and
shared memory (from the profiler's Chrome trace), so our kernels can be compared with cuBLAS's
choice on the same shape:  python3 bench/harness/profile_eager_kernels.py matmul:4096x4096x4096
fp32 with TF32 disabled, as bench/harness/pytorch_baseline.py."""
import json
import sys
import tempfile

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def main():
    spec = sys.argv[1] if len(sys.argv) > 1 else "matmul:4096x4096x4096"
    kind, _, dims = spec.partition(":")
    m, n, k = [int(x) for x in dims.split("x")]
    assert kind == "matmul", "only matmul cases"
    a = torch.rand(m, k, device="cuda")
    b = torch.rand(k, n, device="cuda")
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.mm(a, b)
        torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    seen = set()
    for e in json.load(open(path)).get("traceEvents", []):
        if e.get("cat") != "kernel":
            continue
        args = e.get("args", {})
        key = (e.get("name"), str(args.get("grid")), str(args.get("block")))
        if key in seen:
            continue
        seen.add(key)
        print(f"{spec}: kernel {e.get('name')} grid {args.get('grid')} block {args.get('block')} "
              f"registers {args.get('registers per thread')} shared {args.get('shared memory')} B "
              f"dur {e.get('dur')} us")


if __name__ == "__main__":
    main()

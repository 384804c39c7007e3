#!/usr/bin/env python3
"""Times the model graphs of examples/models.h in PyTorch on the H200: eager and torch.compile
(inductor, default mode, compile time excluded), fp32 with TF32 off, with tilesearch's
measurement method (L2 flush before every timed run, CUDA events, median;
bench/harness/pytorch_baseline.py's time_case).

The graphs are the same as examples/models.h builds (same shapes, same operator sequence):
  bert_layer    BERT-base encoder layer, post-LN (batch 8, seq 128, hidden 768, 12 heads, ffn 3072)
  resnet_block  ResNet-50 bottleneck, identity shortcut (56x56, 256 -> 64 -> 64 -> 256), batch 1/16
  swiglu_mlp    LLaMA MLP (16 tokens, hidden 4096, intermediate 11008)

  python3 bench/harness/graph_baseline.py --model bert_layer --model resnet_block:16 --json out.json
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, __import__("os").path.dirname(__file__))
from pytorch_baseline import time_case  # noqa: E402


def bert_layer(batch=8, seq=128, hidden=768, heads=12, ffn=3072, eps=1e-12):
    g = torch.Generator(device="cuda").manual_seed(7)
    r = lambda *s: (torch.rand(*s, device="cuda", generator=g) * 2 - 1) * 0.05
    x = r(batch * seq, hidden)
    wq, wk, wv, wo = (r(hidden, hidden) for _ in range(4))
    bq, bk, bv, bo = (r(hidden) for _ in range(4))
    w1, b1, w2, b2 = r(ffn, hidden), r(ffn), r(hidden, ffn), r(hidden)
    g1, be1, g2, be2 = r(hidden) + 1, r(hidden), r(hidden) + 1, r(hidden)
    d = hidden // heads

    def split(t):
        return t.reshape(batch, seq, heads, d).permute(0, 2, 1, 3).reshape(batch * heads, seq, d)

    def fn():
        q, k, v = F.linear(x, wq, bq), F.linear(x, wk, bk), F.linear(x, wv, bv)
        p = torch.softmax(torch.bmm(split(q), split(k).transpose(1, 2)) * (1.0 / math.sqrt(d)), -1)
        ctx = torch.bmm(p, split(v)).reshape(batch, heads, seq, d).permute(0, 2, 1, 3)
        ctx = ctx.reshape(batch * seq, hidden)
        a = F.layer_norm(F.linear(ctx, wo, bo) + x, (hidden,), g1, be1, eps)
        h = F.linear(F.gelu(F.linear(a, w1, b1)), w2, b2)
        return F.layer_norm(h + a, (hidden,), g2, be2, eps)

    flops = 2.0 * batch * seq * hidden * (4 * hidden + 2 * ffn) + 4.0 * batch * seq * seq * hidden
    return fn, flops


def resnet_block(batch=1, channels=256, bottleneck=64, height=56, width=56):
    g = torch.Generator(device="cuda").manual_seed(7)
    r = lambda *s: (torch.rand(*s, device="cuda", generator=g) * 2 - 1) * 0.1
    x = r(batch, channels, height, width)
    w1, b1 = r(bottleneck, channels, 1, 1), r(bottleneck, 1, 1)
    w2, b2 = r(bottleneck, bottleneck, 3, 3), r(bottleneck, 1, 1)
    w3, b3 = r(channels, bottleneck, 1, 1), r(channels, 1, 1)

    def fn():
        y1 = torch.relu(F.conv2d(x, w1) + b1)
        y2 = torch.relu(F.conv2d(y1, w2, padding=1) + b2)
        return torch.relu(F.conv2d(y2, w3) + b3 + x)

    hw = height * width
    flops = 2.0 * batch * hw * (channels * bottleneck * 2 + bottleneck * bottleneck * 9)
    return fn, flops


def swiglu_mlp(tokens=16, hidden=4096, intermediate=11008):
    g = torch.Generator(device="cuda").manual_seed(7)
    r = lambda *s: (torch.rand(*s, device="cuda", generator=g) * 2 - 1) * 0.02
    x, wg, wu, wd = r(tokens, hidden), r(intermediate, hidden), r(intermediate, hidden), r(
        hidden, intermediate)

    def fn():
        return F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)

    return fn, 2.0 * tokens * hidden * intermediate * 3


MODELS = {"bert_layer": bert_layer, "resnet_block": resnet_block, "swiglu_mlp": swiglu_mlp}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True,
                   help="bert_layer, resnet_block or swiglu_mlp, optionally :BATCH")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 * 1024 * 1024)
    flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    rows = []
    for spec in a.model:
        name, _, batch = spec.partition(":")
        fn, flops = MODELS[name](**({"batch": int(batch)} if batch else {}))
        row = {"model": spec, "flops": flops}
        with torch.no_grad():
            ref = fn()
            row["eager"] = time_case(fn, flush, 3, 100, 50.0, 1000)
            if not a.no_compile:
                try:
                    cfn = torch.compile(fn)
                    err = (cfn() - ref).abs().max().item()
                    row["compile"] = time_case(cfn, flush, 3, 100, 50.0, 1000)
                    row["compile_max_abs_diff"] = err
                except Exception as e:  # inductor may be unavailable: report, do not fail
                    row["compile_error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        c = row.get("compile", {}).get("median_ms")
        print(f"pytorch graph {spec:16s} eager {row['eager']['median_ms']:.4f} ms  "
              f"compile {c if c is None else f'{c:.4f}'} ms  "
              f"{flops / (row['eager']['median_ms'] * 1e6):.1f} GFLOP/s eager"
              + (f"  ({row['compile_error']})" if "compile_error" in row else ""), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": {"device": props.name, "torch": torch.__version__}, "rows": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The planted-cheat kernels of bench/harness/score.py --self-test.

  python3 bench/harness/cheats/build.py              # rewrites the JSON files (needs nvcc)
  python3 bench/harness/cheats/build.py --ptx-only DIR   # PTX only (tools/pack_device.sh)

The default mode writes, for every bench/harness/cheats/<file>.cu, <kernel>.json, a launch
description in the format of tilesearch's replay artifacts (search/replay.h ArtifactToJson: name,
workload, target, files, entries, launches with entry/grid/block/static and dynamic shared bytes,
arguments with index/name/kind/dtype/shape/bytes; the static shared bytes from ptxas -v of the
source compiled in a temporary directory), plus manifest.json: which kernel claims which problem of
suite.json, whether it is honest, and the rejection reasons the harness must give.

--ptx-only DIR compiles the PTX that score.py loads into DIR, laid out as bench/harness:
DIR/device_kernels.ptx (the harness's FMA-peak and shared-memory scribble kernels) and
DIR/cheats/<kernel>.ptx. PTX is generated, never committed; score.py compiles a missing one itself
when nvcc is at hand. Both modes compile with `nvcc -arch=sm_90 -ptx -O3` ($NVCC, default
/usr/local/cuda/bin/nvcc).

A launch may carry "stream": 1 (run on a second, non-blocking stream): the harness honours it so
that the other-stream cheat is expressible; every launch of an honest kernel runs on stream 0.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NVCC = os.environ.get("NVCC", "/usr/local/cuda/bin/nvcc")
ROWS = COLS = 4096
LARGE = 16384

SQUARE = {"op": None, "shapes": [[ROWS, COLS]], "dtype": "float32", "attrs": {}}


def workload(op, shapes, attrs=None):
    return {"op": op, "shapes": shapes, "dtype": "float32", "attrs": attrs or {}}


def arg(index, name, kind, shape):
    n = 4
    for e in shape:
        n *= e
    return {"index": index, "name": name, "kind": kind, "dtype": "float32", "shape": shape,
            "bytes": n}


def launch(entry, grid, block, stream=0):
    d = {"entry": entry, "grid": list(grid), "block": list(block), "static_shared_bytes": 0,
         "dynamic_shared_bytes": 0}
    if stream:
        d["stream"] = stream
    return d


ROWSUM = ("cheat_rowsum", workload("reduce_sum", [[ROWS, COLS]], {"axes": "1"}),
          [arg(0, "X", "input", [ROWS, COLS]), arg(1, "Y", "output", [ROWS])])
MEAN = ("cheat_mean", workload("reduce_mean", [[ROWS, COLS]], {"axes": "1"}),
        [arg(0, "X", "input", [ROWS, COLS]), arg(1, "Y", "output", [ROWS])])
SOFTMAX = ("cheat_softmax", workload("softmax", [[ROWS, COLS]]),
           [arg(0, "X", "input", [ROWS, COLS]), arg(1, "Y", "output", [ROWS, COLS])])
SWISH = ("cheat_swish", workload("swish", [[ROWS, COLS]]),
         [arg(0, "X", "input", [ROWS, COLS]), arg(1, "Y", "output", [ROWS, COLS])])
RELU = ("cheat_relu", workload("relu", [[ROWS, COLS]]),
        [arg(0, "X", "input", [ROWS, COLS]), arg(1, "Y", "output", [ROWS, COLS])])
RELU_LARGE = ("cheat_relu_large", workload("relu", [[LARGE, LARGE]]),
              [arg(0, "X", "input", [LARGE, LARGE]), arg(1, "Y", "output", [LARGE, LARGE])])

ELEM_GRID = (ROWS * COLS // 256, 1, 1)
B256 = (256, 1, 1)

# (source file, kernel name, problem, launches, honest, expected reasons (first = primary), what)
KERNELS = [
    ("honest_rowsum.cu", "honest_rowsum", ROWSUM, [launch("honest_rowsum", (ROWS, 1, 1), B256)],
     True, [], "one block per row, deterministic tree reduction"),
    ("honest_softmax.cu", "honest_softmax", SOFTMAX,
     [launch("honest_softmax", (ROWS, 1, 1), B256)], True, [], "max-subtracted row softmax"),
    ("honest_swish.cu", "honest_swish", SWISH, [launch("honest_swish", ELEM_GRID, B256)], True, [],
     "float32 SiLU"),
    ("honest_relu_large.cu", "honest_relu_large", RELU_LARGE,
     [launch("honest_relu_large", (132 * 16, 1, 1), B256)], True, [],
     "grid-stride relu over 2^28 elements (the other-stream cheat's honest twin)"),
    ("cached_result.cu", "cached_result", ROWSUM,
     [launch("cached_rowsum", (ROWS, 1, 1), B256), launch("cached_rowsum_set_flag", (1, 1, 1), (1, 1, 1))],
     False, ["wrong_answer"], "returns the result cached by its first call"),
    ("partial_output.cu", "partial_output", RELU, [launch("partial_relu", (ROWS * COLS // 512, 1, 1), B256)],
     False, ["incomplete_output"], "writes only the first half of the output"),
    ("skip_reduction.cu", "skip_reduction", ROWSUM, [launch("skip_rowsum", (ROWS, 1, 1), B256)],
     False, ["wrong_answer"], "sums a quarter of each row and multiplies by 4"),
    ("hardcoded_mean.cu", "hardcoded_mean", MEAN, [launch("hardcoded_mean", (ROWS // 256, 1, 1), B256)],
     False, ["wrong_answer"], "writes 0.5, the mean of a torch.rand input"),
    ("modifies_input.cu", "modifies_input", RELU, [launch("inplace_relu", ELEM_GRID, B256)],
     False, ["input_modified"], "writes relu(X) back into X"),
    ("uninit_smem.cu", "uninit_smem", ROWSUM, [launch("uninit_smem_rowsum", (ROWS, 1, 1), B256)],
     False, ["nondeterministic", "wrong_answer", "nan_output"],
     "adds an unwritten half of its shared array"),
    ("uninit_scratch.cu", "uninit_scratch",
     ("cheat_rowsum", ROWSUM[1], ROWSUM[2] + [arg(2, "acc", "scratch", [ROWS])]),
     [launch("uninit_scratch_rowsum", (ROWS, 1, 1), B256)],
     False, ["nondeterministic", "wrong_answer", "nan_output"],
     "accumulates into a scratch buffer it never clears"),
    ("race_blocks.cu", "race_blocks", ROWSUM,
     [launch("race_zero", (ROWS // 256, 1, 1), B256), launch("race_rowsum", (8, ROWS, 1), B256)],
     False, ["nondeterministic", "wrong_answer"], "8 blocks per row add into the output without atomics"),
    ("lower_precision.cu", "lower_precision", SWISH, [launch("half_swish", ELEM_GRID, B256)],
     False, ["imprecise"], "computes through float16"),
    ("unsafe_softmax.cu", "unsafe_softmax", SOFTMAX, [launch("unsafe_softmax", (ROWS, 1, 1), B256)],
     False, ["nan_output", "wrong_answer"], "softmax without the max subtraction (overflows)"),
    ("other_stream.cu", "other_stream", RELU_LARGE,
     [launch("side_stream_relu", (132 * 16, 1, 1), B256, stream=1)],
     False, ["other_stream"], "launches its work on a second stream"),
]


def shared_bytes(ptx_path, entry):
    """Static shared memory of `entry` from ptxas -v (0 when ptxas is not at hand)."""
    ptxas = os.path.join(os.path.dirname(NVCC), "ptxas")
    try:
        r = subprocess.run([ptxas, "-arch=sm_90", "-v", ptx_path, "-o", os.devnull],
                           capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return 0
    current = None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) bytes smem", line)
        if m and current == entry:
            return int(m.group(1))
    return 0


def compile_ptx(src, ptx):
    subprocess.run([NVCC, "-arch=sm_90", "-ptx", "-O3", "-o", ptx, src], check=True)


def write_ptx(out_dir):
    """The PTX score.py loads, under out_dir laid out as bench/harness."""
    os.makedirs(os.path.join(out_dir, "cheats"), exist_ok=True)
    compile_ptx(os.path.join(os.path.dirname(HERE), "device_kernels.cu"),
                os.path.join(out_dir, "device_kernels.ptx"))
    for src, name, *_ in KERNELS:
        compile_ptx(os.path.join(HERE, src), os.path.join(out_dir, "cheats", name + ".ptx"))
    print(f"wrote {len(KERNELS) + 1} PTX files under {out_dir}")
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--ptx-only":
        return write_ptx(sys.argv[2])
    if len(sys.argv) != 1:
        print("usage: build.py [--ptx-only DIR]", file=sys.stderr)
        return 2
    manifest = []
    tmp = tempfile.TemporaryDirectory(prefix="cheats-ptx-")
    for src, name, (problem, wl, args), launches, honest, expect, what in KERNELS:
        ptx = os.path.join(tmp.name, name + ".ptx")
        compile_ptx(os.path.join(HERE, src), ptx)
        for l in launches:
            l["static_shared_bytes"] = shared_bytes(ptx, l["entry"])
        doc = {
            "name": name, "workload": wl, "target": "cuda -arch=sm_90",
            "files": {"ptx": name + ".ptx", "cubin": None, "json": name + ".json"},
            "entries": [l["entry"] for l in launches], "launches": launches, "arguments": args,
            "notes": [f"bench/harness/cheats/{src}: {what}"],
        }
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        manifest.append({"kernel": name, "problem": problem, "honest": honest, "expect": expect,
                         "what": what, "source": src})
    tmp.cleanup()
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump({"version": 1, "suite": "suite.json", "kernels": manifest}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(manifest)} kernels ({sum(k['honest'] for k in manifest)} honest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

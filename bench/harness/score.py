#!/usr/bin/env python3
"""KernelBench-style scoring of kernels against PyTorch on the GPU, with hardened checks.

For each problem of a suite (bench/suites/*.json, read by tools/suite.h too) this loads a
kernel artifact (launch JSON + PTX, the format of `tilesearch replay`, search/replay.h
ArtifactToJson), launches it through the CUDA driver API (ctypes on libcuda.so: cuModuleLoadData,
cuModuleGetFunction, cuFuncSetAttribute, cuLaunchKernel), checks it, and times it and the PyTorch
baselines with one method.

Checks (the same for our kernels and external ones), per trial, TRIALS >= 5 trials:
  1. fresh inputs of the problem's dtype (float32, float16 or bfloat16): new allocations (the
     previous trial's buffers are still alive, so addresses differ) and new values, the
     distribution cycling uniform [0,1) (torch.rand), normal with offset and large magnitude
     (2 + 32·randn: exp overflows in a softmax that skips the maximum; float16, whose range ends
     at 65504, gets 0.5 + 4·randn: NORMAL_BY_DTYPE), uniform [-1,1) (cancellation: exposes reduced
     precision); the reference is the problem's PyTorch expression evaluated in float64 on the
     same values, computed before the launch (for float16 / bfloat16 then rounded once to the
     dtype: past its range that is +-inf, and only the same inf matches it);
  2. the output is poisoned with the dtype's NaN bit pattern (POISON_BITS_BY_DTYPE: 0x7FDEAD00,
     float16 0x7EAD, bfloat16 0x7FDE) and scratch buffers filled with a
     pattern, shared memory of every SM is scribbled, then the kernel runs; device-wide sync;
  3. inputs must be bit-identical to copies taken before the launch       -> input_modified;
  4. no output element may still hold the poison pattern                  -> incomplete_output;
  5. a second launch on the same inputs, after a different poison / scratch / shared-memory
     pattern, must give bit-identical output (races, uninitialized reads) -> nondeterministic;
  6. every element, by the tuner's precision rule (measure/precision_rule.h, one definition;
     both sides are tested on bench/harness/testdata/precision_cases.json):
       |got - ref| <= atol + rtol·|ref| + c·u·M (+ slack where M is not modelled, below)
     with fp32 1e-4 / 1e-4, fp16 / bf16 1e-2 / 1e-2 (KernelBench's values), c = 16
     (CANCELLATION_FACTOR), u the unit roundoff of the arithmetic (float32 2^-24, or TF32's
     2^-11 for float32 problems under --precision tf32; float16 / bfloat16 problems are computed
     in float32 and rounded once, inside rtol) and M the float64 magnitude of the
     terms of the element (magnitude_method): for multilinear problems (matmul, dense, gemv,
     convolutions, sums, means, pools, add, and fused chains of them with relu and scales by
     non-negative constants) the problem's expression in float64 on |inputs|,
     which is exactly the tuner's propagated M; for selections (relu, max, transpose) |ref|;
     NaN / Inf never pass where the reference is finite -> nan_output; failures all within the
     fp16 tolerance -> imprecise, else -> wrong_answer. For the other problems (softmax, norms,
     gelu, ...) M is taken as |ref| (the smallest M can be) and `slack` stays: 0 unless
     PyTorch's own result in the problem's dtype (TF32 off, no reduced-precision reductions)
     misses the rule against the reference; then SLACK_FACTOR times PyTorch's largest excess,
     so that a kernel no less accurate than PyTorch's passes and a lower-precision one does not.
     Under --precision tf32, PyTorch's own TF32 path (allow_tf32 on) on the same inputs is
     measured too and the larger excess counts: a TF32 kernel no less accurate than PyTorch's
     TF32 passes.
Errors reported: the largest |got - ref| (max_abs_error) and |got - ref| / |ref| where |ref| > atol
(max_rel_error) over the trials, and the same of PyTorch's own result in the problem's dtype with
TF32 off and no reduced-precision reductions (eager_max_abs_error, eager_max_rel_error: the
eager_no_tf32 baseline's settings, for float32 matmuls also eager's defaults) against the same
reference; where every trial compared values, error_vs_eager / rel_error_vs_eager (ours / eager's)
and error_within_eager (neither of ours larger) say whether the kernel is as accurate as eager.
Timing (pytorch_baseline.py's method, design.md): warm-up, then >= RUNS runs; before each run the
L2 is flushed (a write of 2x the L2 size) and the device synchronized; CUDA events around the
launches on the timed stream; after the stop event the device is synchronized and the host clock
read, so work on other streams is seen: a kernel whose host-clock time exceeds 2 x its event time +
0.1 ms (after subtracting the harness's own host overhead) is rejected -> other_stream. Median and
mean reported. Baselines, all on the problem's dtype: "eager", PyTorch eager with its defaults
(float32: cuDNN TF32 on, matmul TF32 off; float16 / bfloat16: float32 accumulation, which is
PyTorch's cuBLAS / cuDNN compute type, with cuBLAS allowed reduced-precision split-K reductions,
PyTorch's default); "eager_no_tf32", eager with TF32 off everywhere and reduced-precision
reductions disallowed (the strict float32 baseline); torch.compile (inductor, default mode, compile
time excluded) where it works. Each eager row records its precision in words. The copy bandwidth
and the fp32 FMA peak are measured in the same run, the float16 / bfloat16 tensor-core bound
computed from the device's SM count and maximum clock (HALF_TENSOR_FLOPS_PER_SM_CLOCK); a time
below max(FLOPs / peak, bytes / bandwidth), with the peak of the problem's dtype, is flagged
suspect.

Usage (on the H200; stdlib + torch only):
  python3 bench/harness/score.py --suite bench/suites/level1.json \\
      --suite bench/suites/level2.json --artifacts ART_DIR --out bench/results/h200-$(date +%F)
  python3 bench/harness/score.py --suite bench/suites/level1_half.json \\
      --suite bench/suites/level2_half.json --artifacts ART_DIR --out ...  # float16 / bfloat16
  python3 bench/harness/score.py --kernel k.ptx --launch k.json --problem softmax_rows  # one kernel
  python3 bench/harness/score.py --suite ... --artifacts ART --precision tf32  # tuned under tf32
  python3 bench/harness/score.py --self-test                                # planted cheats
  python3 bench/harness/score.py --merge a.json b.json --out bench/results/h200-DATE  # split runs

The harness's device kernels (device_kernels.cu) and the planted cheats (cheats/*.cu) are sources:
their PTX comes with the device pack (tools/pack_device.sh generates it) or, from a checkout, is
compiled on the spot with nvcc ($NVCC, PATH or /usr/local/cuda/bin/nvcc).

Artifacts: ART_DIR/<problem>.json (+ the PTX it names), or any ART_DIR/*.json whose workload
equals the problem's. A launch JSON needs: launches (entry, grid, block, dynamic_shared_bytes,
optional stream 0/1), arguments (index, name, kind input/output/scratch/tensor_map, dtype, shape)
in kernel argument order, files.ptx (or --kernel). Every kernel gets every argument as a pointer.
A tensor_map argument (int64 [16]) is a Hopper TMA descriptor: its "tensor_map" object (source,
the name of an input or output argument; dims, outermost first; box; swizzle bytes) is encoded over
the source's buffer with cuTensorMapEncodeTiled whenever the buffers are allocated, and the kernel
gets a pointer to the 128 encoded bytes in device memory (tensor_map_errors, tensor_map_encoding).

The pure logic (suite reading, tolerance and verdicts, fast_p, geomean, speed of light, artifact
matching, report rendering) imports without torch: bench/harness/test_score_logic.py tests it.
"""
import argparse
import datetime
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))  # bench/harness
SUITES_DIR = os.path.join(os.path.dirname(HERE), "suites")
RESULTS_DIR = os.path.join(os.path.dirname(HERE), "results")

# ------------------------------------------------------------------------------------------------
# Constants of the method.

POISON_BITS = 0x7FDEAD00  # a quiet NaN with a payload arithmetic never produces (GPUs emit 0x7FFFFFFF)
# The output poison of each dtype: a quiet NaN whose payload neither GPU arithmetic (canonical NaN
# 0x7FFFFFFF / 0x7FFF) nor a host conversion (0x7FC00000 / 0x7E00 / 0x7FC0) produces, so an element
# still holding it was never written. bfloat16's is float32's upper half.
POISON_BITS_BY_DTYPE = {"float32": POISON_BITS, "float16": 0x7EAD, "bfloat16": 0x7FDE}
DISTRIBUTIONS = ("uniform01", "normal", "uniform")  # cycled over the trials
NORMAL_MEAN, NORMAL_STD = 2.0, 32.0
# The "normal" distribution per dtype. float16 tops out at 65504: normal(2, 32) makes the
# contractions of the suites overflow (a 4096-deep dot product of such values has a standard
# deviation near 65000; 2^2 * 65536 = 262144 is the mean of matmul_large_k's), and an honest
# kernel's overflowed intermediate then turns into NaN (gelu(-inf)). normal(0.5, 4) keeps
# 65536-deep dot products below ~40000 while values still reach +-20 (softmax logits of +-100,
# past exp's float32 range, in attention_softmax_qk). bfloat16 has float32's range.
NORMAL_BY_DTYPE = {"float32": (NORMAL_MEAN, NORMAL_STD), "bfloat16": (NORMAL_MEAN, NORMAL_STD),
                   "float16": (0.5, 4.0)}
# IEEE-style formats: (significand bits including the implicit one, minimum normal exponent,
# maximum exponent).
DTYPE_FORMATS = {"float32": (24, -126, 127), "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}
HALF_DTYPES = ("float16", "bfloat16")
# Dense float16 / bfloat16 tensor-core FLOPs per SM per clock by compute capability major (V100
# 125 TFLOP/s = 80 SMs x 1.53 GHz x 1024; A100 312 = 108 x 1.41 GHz x 2048; H100 989 = 132 x 1.83
# GHz x 4096; B200 2250 = 148 x 1.965 GHz x ~7740, rounded up). With the SM count and the maximum
# clock read from the device this bounds any kernel's half-precision FLOP rate from above (wgmma
# reaches more than a timed mma.sync loop would, so the bound is not measured). Unknown
# architectures get the largest entry.
HALF_TENSOR_FLOPS_PER_SM_CLOCK = {7: 1024, 8: 2048, 9: 4096, 10: 8192}
# PyTorch's switches that let cuBLAS reduce float16 / bfloat16 GEMMs' split-K partial sums in
# reduced precision (default True); the accumulation itself is float32 (CUBLAS_COMPUTE_32F).
REDUCED_PRECISION_FLAGS = ("allow_fp16_reduced_precision_reduction",
                           "allow_bf16_reduced_precision_reduction")
DEFAULT_TRIALS = 6
DEFAULT_RUNS = 100
SLACK_FACTOR = 4.0
# The precision rule shared with the tuner (measure/precision_rule.h: why c = 16, and u).
CANCELLATION_FACTOR = 16.0
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "tf32": 2.0 ** -11, "float16": 2.0 ** -11,
                 "bfloat16": 2.0 ** -8}
PRECISIONS = ("ieee", "tf32")
# Problems whose M is the expression evaluated in float64 on |inputs|: every output element a sum
# of products of inputs and positive constants, or a max of inputs and 0 (relu, max pooling, a
# max reduction: the tuner's rule takes the largest M of a max's operands, max |x|, which is
# f(|x|) here). The tuner's propagation gives exactly that.
MAGNITUDE_FROM_ABS_INPUTS = frozenset({
    "matmul", "batch_matmul", "dense", "gemv", "conv2d_nchw", "depthwise_conv2d_nchw",
    "reduce_sum", "reduce_mean", "avg_pool2d", "add", "mul", "relu", "reduce_max", "max_pool2d"})
# Problems whose every element is one input element: M = |value|.
MAGNITUDE_IS_ABS_VALUE = frozenset({"transpose"})
OTHER_STREAM_RATIO = 2.0
OTHER_STREAM_MARGIN_MS = 0.1
FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
BASELINES = ("eager", "eager_no_tf32", "compile")
# TMA tensor maps (CUDA driver API, cuTensorMapEncodeTiled; the tuner's limits: ir/stmt.h
# CheckTensorMap). A map is a 128-byte CUtensorMap, 64-byte aligned, held in an int64 [16]
# argument; the element types its source may have, as (bytes, CU_TENSOR_MAP_DATA_TYPE_*: UINT8 0,
# UINT16 1, UINT32 2, INT32 3, UINT64 4, INT64 5, FLOAT16 6, FLOAT32 7, FLOAT64 8, BFLOAT16 9);
# swizzle bytes -> CU_TENSOR_MAP_SWIZZLE_NONE / 32B / 64B / 128B.
TENSOR_MAP_BYTES, TENSOR_MAP_ALIGN, TENSOR_MAP_WORDS = 128, 64, 16
TENSOR_MAP_DATA_TYPES = {"int32": (4, 3), "int64": (8, 5), "float16": (2, 6), "float32": (4, 7),
                         "bfloat16": (2, 9)}
TENSOR_MAP_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
TENSOR_MAP_MAX_RANK, TENSOR_MAP_MAX_BOX = 5, 256
TENSOR_MAP_INTERLEAVE_NONE = 0
TENSOR_MAP_L2_PROMOTION_128B = 2
TENSOR_MAP_OOB_FILL_NONE = 0  # out-of-bounds box elements read as zeros
TENSOR_MAP_GLOBAL_ALIGN = 16  # bytes: the source's address and every outer stride

REASONS = {
    "ok": "passed every check",
    "missing_artifact": "no kernel artifact for the problem",
    "bad_launch": "the launch JSON does not match the problem or cannot be loaded",
    "launch_error": "a launch failed or the kernel faulted",
    "input_modified": "an input changed during the launch",
    "incomplete_output": "output elements were never written (still the NaN poison)",
    "nondeterministic": "two launches on the same inputs disagree (races or uninitialized reads)",
    "nan_output": "NaN or Inf where the reference is finite",
    "imprecise": "outside the float32 tolerance but within the float16 one (reduced precision; "
                 "float32 problems only)",
    "wrong_answer": "outside tolerance",
    "other_stream": "work runs outside the timed stream",
    "reference_error": "the PyTorch reference failed or is not finite for these inputs",
    "harness_error": "the scorer itself failed on this problem (see detail)",
}


def tolerance(dtype):
    """(atol, rtol) by dtype name: KernelBench's 1e-4 for float32, 1e-2 for float16/bfloat16."""
    if dtype in ("float16", "bfloat16"):
        return 1e-2, 1e-2
    if dtype == "float32":
        return 1e-4, 1e-4
    raise ValueError(f"no tolerance for dtype '{dtype}' (float32, float16, bfloat16)")


def unit_roundoff(dtype, precision="ieee", rounded_intermediates=False):
    """u of the precision rule, that of the arithmetic the result is computed in (the tuner's
    ArithmeticUnitRoundoff): float32 2^-24 (TF32's 2^-11 under precision "tf32") for float32
    results and for float16 / bfloat16 results computed in float32 (accumulation in float32, one
    rounding to the half type at the end, inside rtol 1e-2); the half type's own (float16 2^-11,
    bfloat16 2^-8) only with `rounded_intermediates` (intermediate results stored in it)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision '{precision}' (ieee, tf32)")
    if dtype not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"no unit roundoff for dtype '{dtype}' (float32, float16, bfloat16)")
    if dtype in HALF_DTYPES and rounded_intermediates:
        return UNIT_ROUNDOFF[dtype]
    # TF32 concerns float32 problems only: half-precision MMAs multiply their own inputs.
    return UNIT_ROUNDOFF["tf32" if precision == "tf32" and dtype == "float32" else "float32"]


def rounded_intermediates(problem):
    """Whether `problem` stores intermediate results in a half type, as the tuner's rule decides
    for its DAG (a non-output float16 / bfloat16 stage): a fused chain of two or more operators
    in float16 / bfloat16, whose every operator's output has the problem's dtype."""
    return (problem.get("dtype", "float32") in HALF_DTYPES and problem.get("op") == "fused" and
            len(problem.get("nodes") or []) > 1)


def _multilinear_node(node):
    """Whether a fused node keeps M = the expression on |inputs|: an op of
    MAGNITUDE_FROM_ABS_INPUTS, or a scale by a non-negative constant (M(c·x) = c·M(x))."""
    if node.get("op") in MAGNITUDE_FROM_ABS_INPUTS:
        return True
    if node.get("op") == "scale":
        try:
            return float((node.get("attrs") or {}).get("scale", "nan")) >= 0
        except (TypeError, ValueError, AttributeError):
            return False
    return False


def magnitude_method(problem):
    """How M is computed for `problem`: "abs_inputs" (the expression on |inputs|), "abs_value"
    (|ref|), or None (not modelled: M = |ref| and PyTorch's slack)."""
    op = problem.get("op")
    if op in MAGNITUDE_FROM_ABS_INPUTS:
        return "abs_inputs"
    # A fused chain of such ops (conv2d + bias + relu, conv2d * scale + shift + relu): its
    # expression on |inputs| is the tuner's propagated M too (sums and products of the terms' M,
    # a max's largest M), where |ref| would drop the contraction's cancelled terms.
    nodes = problem.get("nodes") or []
    if op == "fused" and nodes and all(_multilinear_node(n) for n in nodes):
        return "abs_inputs"
    if op in MAGNITUDE_IS_ABS_VALUE:
        return "abs_value"
    return None


def allowed_error(ref, magnitude, atol, rtol, u):
    """atol + rtol·|ref| + c·u·M (the last term dropped when M is not finite)."""
    allowed = atol + rtol * abs(ref)
    if math.isfinite(magnitude):
        allowed += CANCELLATION_FACTOR * u * magnitude
    return allowed


def overflow_threshold(dtype):
    """The smallest magnitude that rounds to infinity in `dtype` (ties to even): 65520 for
    float16, (2 - 2^-8)·2^127 for bfloat16, (2 - 2^-24)·2^127 for float32."""
    p, _, emax = DTYPE_FORMATS[dtype]
    return math.ldexp(2.0 - math.ldexp(1.0, -p), emax)


def overflow_allowed(got, ref, allowed, dtype):
    """Whether an infinite `got` is the overflow that a value within `allowed` of the finite
    float64 `ref`, of the same sign, rounds to in the output's `dtype` (measure/precision_rule.h):
    a float16 output whose float64 value is 65515 may be computed as 65530 within tolerance and
    stored as +inf."""
    return (math.isinf(got) and math.isfinite(ref) and
            math.copysign(1.0, got) == math.copysign(1.0, ref) and
            abs(ref) + allowed >= overflow_threshold(dtype))


def precision_rule_ok(got, ref, magnitude, atol, rtol, u, dtype="float32"):
    """The tuner's rule (measure/precision_rule.h PassesPrecisionRule): NaN ref needs NaN got,
    an infinite ref the same infinity, else got finite and |got - ref| <= allowed_error, or got
    the overflow of the output's `dtype` that the allowed error reaches (overflow_allowed)."""
    if math.isnan(ref):
        return math.isnan(got)
    if math.isinf(ref):
        return got == ref
    if math.isnan(got) or math.isinf(got):
        return overflow_allowed(got, ref, allowed_error(ref, magnitude, atol, rtol, u), dtype)
    return abs(got - ref) <= allowed_error(ref, magnitude, atol, rtol, u)


def poison_bits(dtype):
    """The NaN bit pattern outputs of `dtype` are poisoned with (an int of the element's width)."""
    if dtype not in POISON_BITS_BY_DTYPE:
        raise ValueError(f"no poison pattern for dtype '{dtype}' (float32, float16, bfloat16)")
    return POISON_BITS_BY_DTYPE[dtype]


def dtype_max(dtype):
    """The largest finite value of `dtype` (65504 for float16)."""
    p, _, emax = DTYPE_FORMATS[dtype]
    return math.ldexp(2.0 - math.ldexp(1.0, 1 - p), emax)


def round_to_dtype(x, dtype):
    """`x` (a Python float) rounded once to the nearest value of `dtype`, ties to even, with gradual
    underflow and overflow to +-inf (what converting the float64 value to the dtype gives); NaN,
    +-inf and +-0 unchanged. Written from the formats' parameters (DTYPE_FORMATS), not through a
    library conversion."""
    if x == 0 or math.isnan(x) or math.isinf(x):
        return x
    p, emin, _ = DTYPE_FORMATS[dtype]
    _, e = math.frexp(abs(x))                      # abs(x) = m * 2^e, 0.5 <= m < 1
    quantum_exp = max(e - 1, emin) - (p - 1)       # subnormals share the smallest binade's step
    n = round(math.ldexp(abs(x), -quantum_exp))    # exact scaling; round(): ties to even
    q = math.ldexp(n, quantum_exp)
    if q > dtype_max(dtype):
        return math.copysign(math.inf, x)
    return math.copysign(q, x)


def bits_of(x, dtype):
    """The bit pattern (unsigned int) of `x` rounded to `dtype` (round_to_dtype). NaN gives the
    host's default quiet NaN of the format."""
    import struct
    v = round_to_dtype(x, dtype)
    if dtype == "float16":
        return struct.unpack("<H", struct.pack("<e", v))[0]
    b32 = struct.unpack("<I", struct.pack("<f", v))[0]
    return b32 >> 16 if dtype == "bfloat16" else b32


def count_poison(bit_patterns, dtype):
    """How many output elements (given as bit patterns) still hold the poison: never written."""
    poison = poison_bits(dtype)
    return sum(1 for b in bit_patterns if b == poison)


def reference_in_dtype(ref, dtype):
    """The reference an output of `dtype` is compared with: float16 / bfloat16 round the float64
    reference once to the dtype (the correctly rounded answer; a float64 value past the dtype's
    range becomes +-inf, which an output must then match exactly); float32 keeps the float64 value
    (its float32 rounding, 6e-8 relative, is far inside 1e-4, and the earlier results stay
    comparable)."""
    return [round_to_dtype(r, dtype) for r in ref] if dtype in HALF_DTYPES else list(ref)


def half_tensor_peak_flops(sms, clock_hz, cc_major):
    """Upper bound of dense float16 / bfloat16 tensor-core FLOP/s: SMs x clock x the architecture's
    per-SM rate (HALF_TENSOR_FLOPS_PER_SM_CLOCK; the largest for an unknown architecture)."""
    rate = HALF_TENSOR_FLOPS_PER_SM_CLOCK.get(cc_major,
                                              max(HALF_TENSOR_FLOPS_PER_SM_CLOCK.values()))
    return float(sms) * float(clock_hz) * rate


def eager_precision(dtype, strict, tf32_state=None, reduced_precision=None):
    """What a PyTorch eager baseline computes, in words, for the reports. `strict`: the
    eager_no_tf32 baseline (TF32 off everywhere; for half types reduced-precision reductions off
    too); else PyTorch's defaults (`tf32_state` / `reduced_precision`: the settings read, if
    known)."""
    if dtype in HALF_DTYPES:
        text = (f"{dtype} inputs and outputs, float32 accumulation (cuBLAS / cuDNN compute type "
                "float32)")
        if strict:
            return text + "; reduced-precision split-K reductions disallowed"
        rp = "" if reduced_precision is None else f" ({reduced_precision})"
        return text + f"; reduced-precision split-K reductions allowed{rp} (PyTorch default)"
    if strict:
        return "float32, TF32 off for matmul and cuDNN convolutions"
    st = "" if tf32_state is None else f" (matmul, conv: {', '.join(map(str, tf32_state))})"
    return ("float32 with PyTorch's defaults: matmul TF32 off, cuDNN convolutions TF32 on" + st)


# ------------------------------------------------------------------------------------------------
# Suites.

class SuiteError(ValueError):
    pass


SUITE_FIELDS = ("version", "suite", "description", "problems")
PROBLEM_FIELDS = ("name", "op", "shapes", "dtype", "attrs", "inputs", "torch", "tags", "note",
                  "nodes")
NODE_FIELDS = ("op", "inputs", "attrs")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _operand(text):
    """("p"|"n", index) of a fused node's operand "p<I>" / "n<K>" (no leading zeros), or None."""
    if (not isinstance(text, str) or len(text) < 2 or text[0] not in "pn" or
            not text[1:].isdigit() or not text[1:].isascii() or
            (len(text) > 2 and text[1] == "0")):
        return None
    return text[0], int(text[1:])


def _check_attrs(attrs, where, field):
    if not isinstance(attrs, dict):
        raise SuiteError(f"{where}: field '{field}' must be an object of attributes, got "
                         f"{attrs!r}")
    for k, v in attrs.items():
        if not (isinstance(v, (str, bool)) or _is_int(v)):
            raise SuiteError(f"{where}: field '{field}.{k}' must be a string, an integer or a "
                             f"boolean, got {v!r}")


def _check_nodes(p, where, field):
    """The fused-workload node list (schedule/fused_workload.h): structure and references."""
    nodes = p["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise SuiteError(f"{where}: field '{field}' must be a non-empty list of nodes")
    for k, n in enumerate(nodes):
        nf = f"{field}[{k}]"
        if not isinstance(n, dict):
            raise SuiteError(f"{where}: field '{nf}' must be an object with fields op, inputs "
                             f"and attrs, got {n!r}")
        for key in n:
            if key not in NODE_FIELDS:
                raise SuiteError(f"{where}: unknown field '{nf}.{key}' (expected "
                                 f"{', '.join(NODE_FIELDS)})")
        if not isinstance(n.get("op"), str) or not n["op"]:
            raise SuiteError(f"{where}: field '{nf}.op' must be a non-empty string")
        if not isinstance(n.get("inputs"), list) or not n["inputs"]:
            raise SuiteError(f"{where}: field '{nf}.inputs' must be a non-empty list of operands")
        for i, text in enumerate(n["inputs"]):
            op = _operand(text)
            if op is None:
                raise SuiteError(f"{where}: field '{nf}.inputs[{i}]' must be \"p<index>\" or "
                                 f"\"n<index>\", got {text!r}")
            if op[0] == "p" and op[1] >= len(p["shapes"]):
                raise SuiteError(f"{where}: field '{nf}.inputs[{i}]': placeholder {text} does not "
                                 f"exist (the problem has {len(p['shapes'])} shapes)")
            if op[0] == "n" and op[1] >= k:
                raise SuiteError(f"{where}: field '{nf}.inputs[{i}]': {text} is not an earlier "
                                 f"node (node {k} reads placeholders and nodes before it)")
        if "attrs" in n:
            _check_attrs(n["attrs"], where, f"{nf}.attrs")


def parse_suite(text, source="<suite>"):
    """Reads a suite file's text (format: tools/suite.h; the C++ reader also builds every
    workload; this one checks the same fields and types, so that a file one accepts the other does
    not refuse for its form). Raises SuiteError naming the file, problem and field."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SuiteError(f"{source}: not valid JSON: {e}") from None
    except RecursionError:
        raise SuiteError(f"{source}: nested too deeply to read") from None
    if not isinstance(doc, dict):
        raise SuiteError(f"{source}: must be a JSON object")
    for key in doc:
        if key not in SUITE_FIELDS:
            raise SuiteError(f"{source}: unknown field '{key}' (expected "
                             f"{', '.join(SUITE_FIELDS)})")
    if not _is_int(doc.get("version")) or doc["version"] != 1:
        raise SuiteError(f"{source}: field 'version' must be 1, got {doc.get('version')!r}")
    if not isinstance(doc.get("suite"), str) or not doc["suite"]:
        raise SuiteError(f"{source}: field 'suite' must be a non-empty string")
    if not isinstance(doc.get("description", ""), str):
        raise SuiteError(f"{source}: field 'description' must be a string")
    problems = doc.get("problems")
    if not isinstance(problems, list) or not problems:
        raise SuiteError(f"{source}: field 'problems' must be a non-empty list of problems")
    seen = set()
    for i, p in enumerate(problems):
        where = f"{source}: problem {i}"
        field = f"problems[{i}]"
        if not isinstance(p, dict):
            raise SuiteError(f"{where}: field '{field}' must be an object")
        if isinstance(p.get("name"), str):
            where += f" '{p['name']}'"
        for key in p:
            if key not in PROBLEM_FIELDS:
                raise SuiteError(f"{where}: unknown field '{field}.{key}' (expected "
                                 f"{', '.join(PROBLEM_FIELDS)})")
        for key, kind in (("name", str), ("op", str), ("shapes", list), ("inputs", list),
                          ("torch", str)):
            if key not in p:
                raise SuiteError(f"{where}: field '{field}.{key}' is missing")
            if not isinstance(p[key], kind) or not p[key]:
                raise SuiteError(f"{where}: field '{field}.{key}' must be a non-empty "
                                 f"{kind.__name__}")
        name = p["name"]
        if (not name.isascii() or not name[0].islower() or
                not all(c.islower() or c.isdigit() or c == "_" for c in name)):
            raise SuiteError(f"{where}: field '{field}.name': name '{name}' must be lower-case "
                             "letters, digits and '_', starting with a letter")
        if name in seen:
            raise SuiteError(f"{where}: name '{name}' is used twice")
        seen.add(name)
        for j, s in enumerate(p["shapes"]):
            if not isinstance(s, list) or not s or not all(_is_int(e) and e >= 1 for e in s):
                raise SuiteError(f"{where}: field '{field}.shapes[{j}]' must be a list of "
                                 f"positive integers, got {s!r}")
        if len(p["inputs"]) != len(p["shapes"]):
            raise SuiteError(f"{where}: field '{field}.inputs' names {len(p['inputs'])} "
                             f"inputs but 'shapes' lists {len(p['shapes'])}")
        for name_in in p["inputs"]:
            if (not isinstance(name_in, str) or not name_in.isidentifier() or
                    name_in in ("torch", "F")):
                raise SuiteError(f"{where}: input name {name_in!r} must be an identifier other "
                                 "than torch and F")
        if len(set(p["inputs"])) != len(p["inputs"]):
            raise SuiteError(f"{where}: field '{field}.inputs' names an input twice: "
                             f"{p['inputs']!r}")
        if (p["op"] == "fused") != ("nodes" in p):
            raise SuiteError(f"{where}: field '{field}.nodes' belongs to exactly the "
                             "problems with op \"fused\"")
        p.setdefault("dtype", "float32")
        p.setdefault("attrs", {})
        p.setdefault("tags", [])
        if not isinstance(p["dtype"], str):
            raise SuiteError(f"{where}: field '{field}.dtype' must be a string, got "
                             f"{p['dtype']!r}")
        try:
            tolerance(p["dtype"])  # a dtype the scorer can judge
        except ValueError as e:
            raise SuiteError(f"{where}: field '{field}.dtype': {e}") from None
        _check_attrs(p["attrs"], where, f"{field}.attrs")
        if p["op"] == "fused":
            if p["attrs"]:
                raise SuiteError(f"{where}: field '{field}.attrs' must be empty in a fused "
                                 "problem (attributes belong to its nodes)")
            _check_nodes(p, where, f"{field}.nodes")
        if not isinstance(p["tags"], list) or not all(isinstance(t, str) for t in p["tags"]):
            raise SuiteError(f"{where}: field '{field}.tags' must be a list of strings, got "
                             f"{p['tags']!r}")
        if not isinstance(p.get("note", ""), str):
            raise SuiteError(f"{where}: field '{field}.note' must be a string")
    doc["source"] = source
    return doc


class InputError(ValueError):
    """A file or argument the user gave is unusable (main prints it as one line, exit code 2)."""


def read_text(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"cannot read {what} '{path}': {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{what} '{path}' is not UTF-8 text: {e}") from None


# The harness's own CUDA sources (device_kernels.cu, cheats/*.cu) are committed as source only. The
# device pack carries their PTX, generated at pack time (tools/pack_device.sh runs
# cheats/build.py --ptx-only); from a source checkout they are compiled here with nvcc.
NVCC_PTX_FLAGS = ("-arch=sm_90", "-ptx", "-O3")


def find_nvcc(environ=None):
    """The nvcc to compile the harness's CUDA sources with: $NVCC if set, else nvcc on PATH, else
    /usr/local/cuda/bin/nvcc; None when none of them is an executable file."""
    environ = os.environ if environ is None else environ
    candidates = [environ["NVCC"]] if environ.get("NVCC") else [
        shutil.which("nvcc", path=environ.get("PATH", os.defpath)), "/usr/local/cuda/bin/nvcc"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def device_ptx(cu_path, ptx_path=None, nvcc=None, environ=None):
    """PTX text of one of the harness's CUDA sources: `ptx_path` (default: `cu_path` with the
    extension .ptx) when that file exists, else `cu_path` compiled by nvcc (`nvcc`, default
    find_nvcc()) with NVCC_PTX_FLAGS into a temporary directory. Raises InputError when neither
    the PTX nor nvcc is there, or nvcc fails."""
    if ptx_path is None:
        ptx_path = os.path.splitext(cu_path)[0] + ".ptx"
    if os.path.isfile(ptx_path):
        return read_text(ptx_path, "PTX")
    nvcc = nvcc or find_nvcc(environ)
    if nvcc is None:
        raise InputError(
            f"no PTX '{ptx_path}' and no nvcc to compile '{cu_path}' (set NVCC, put nvcc on PATH, "
            "or run the device pack's copy of the harness: tools/pack_device.sh generates the PTX)")
    if not os.path.isfile(cu_path):
        raise InputError(f"no PTX '{ptx_path}' and no CUDA source '{cu_path}' to compile")
    with tempfile.TemporaryDirectory(prefix="score-ptx-") as d:
        out = os.path.join(d, os.path.basename(ptx_path))
        try:
            r = subprocess.run([nvcc, *NVCC_PTX_FLAGS, "-o", out, cu_path],
                               capture_output=True, text=True)
        except OSError as e:
            raise InputError(f"cannot run nvcc '{nvcc}': {e.strerror or e}") from None
        if r.returncode != 0:
            raise InputError(f"nvcc '{nvcc}' failed on '{cu_path}' (exit {r.returncode}): "
                             f"{(r.stderr or r.stdout).strip()[-2000:]}")
        return read_text(out, "PTX written by nvcc")


def read_json(path, what):
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{what} '{path}' is not valid JSON: {e}") from None
    except RecursionError:
        raise InputError(f"{what} '{path}' is nested too deeply to read") from None


def load_suite(path):
    text = read_text(path, "suite file")
    return parse_suite(text, path)


def check_results_doc(doc, source):
    """Checks a results document (run_suites' JSON) has what merge_results reads; raises
    InputError naming the file and field."""
    if not isinstance(doc, dict):
        raise InputError(f"{source}: a results file must be a JSON object (score.py's .json)")
    if not isinstance(doc.get("meta"), dict):
        raise InputError(f"{source}: field 'meta' is missing or not an object (is this a results "
                         "file of score.py?)")
    if not isinstance(doc.get("suites"), list):
        raise InputError(f"{source}: field 'suites' is missing or not a list (is this a results "
                         "file of score.py?)")
    for i, st in enumerate(doc["suites"]):
        f = f"suites[{i}]"
        if not isinstance(st, dict):
            raise InputError(f"{source}: field '{f}' must be an object")
        for key, kind in (("suite", str), ("source", str), ("results", list)):
            if not isinstance(st.get(key), kind):
                raise InputError(f"{source}: field '{f}.{key}' is missing or not a "
                                 f"{kind.__name__}")
        for j, r in enumerate(st["results"]):
            rf = f"{f}.results[{j}]"
            if not isinstance(r, dict):
                raise InputError(f"{source}: field '{rf}' must be an object")
            if not isinstance(r.get("name"), str):
                raise InputError(f"{source}: field '{rf}.name' is missing or not a string")
            if not isinstance(r.get("correct"), bool):
                raise InputError(f"{source}: field '{rf}.correct' is missing or not a boolean")
            for key in ("ours", "baselines"):
                if not isinstance(r.get(key, {}), dict):
                    raise InputError(f"{source}: field '{rf}.{key}' must be an object")
            for b, v in r.get("baselines", {}).items():
                if v is not None and not isinstance(v, dict):
                    raise InputError(f"{source}: field '{rf}.baselines.{b}' must be an object")


def is_small(problem):
    return "small" in problem.get("tags", [])


def _norm_attrs(attrs):
    return {k: (json.dumps(v) if isinstance(v, bool) else str(v)) for k, v in (attrs or {}).items()}


def _norm_nodes(nodes):
    return [{"op": n["op"], "inputs": list(n["inputs"]), "attrs": _norm_attrs(n.get("attrs"))}
            for n in (nodes or [])]


def workload_matches(problem, workload):
    """True when an artifact's workload (search/replay.h: op, shapes, dtype, attrs[, nodes]) is the
    problem's. Attribute values compare as text (true == "true")."""
    if not isinstance(workload, dict):
        return False
    return (workload.get("op") == problem["op"] and
            workload.get("shapes") == problem["shapes"] and
            workload.get("dtype", "float32") == problem.get("dtype", "float32") and
            _norm_attrs(workload.get("attrs")) == _norm_attrs(problem.get("attrs")) and
            _norm_nodes(workload.get("nodes")) == _norm_nodes(problem.get("nodes")))


def validate_launch(problem, launch, output_shape=None):
    """Checks a launch JSON against a problem; returns a list of problems (empty when usable):
    inputs in order with the problem's shapes and dtype, exactly one output (of `output_shape`
    when given), known kinds, tensor maps the driver can encode (tensor_map_errors), at least one
    launch with 3-element grid/block and stream 0 or 1."""
    errs = []
    args = launch.get("arguments")
    if not isinstance(args, list) or not args:
        return ["no 'arguments' list"]
    ins = [a for a in args if a.get("kind") == "input"]
    outs = [a for a in args if a.get("kind") == "output"]
    for a in args:
        if a.get("kind") not in ("input", "output", "scratch", "tensor_map"):
            errs.append(f"argument {a.get('index')}: unknown kind {a.get('kind')!r}")
        elif a.get("kind") == "tensor_map":
            errs.extend(tensor_map_errors(a, args))
    if [a.get("index") for a in args] != list(range(len(args))):
        errs.append("arguments must be listed by index 0, 1, ...")
    if [a.get("shape") for a in ins] != problem["shapes"]:
        errs.append(f"input shapes {[a.get('shape') for a in ins]} differ from the problem's "
                    f"{problem['shapes']}")
    if args[:len(ins)] != ins:
        errs.append("inputs must come first")
    if len(outs) != 1:
        errs.append(f"expected one output argument, got {len(outs)}")
    elif output_shape is not None and list(outs[0].get("shape", [])) != list(output_shape):
        errs.append(f"output shape {outs[0].get('shape')} differs from the reference's "
                    f"{list(output_shape)}")
    for a in ins + outs:
        if a.get("dtype") != problem.get("dtype", "float32"):
            errs.append(f"argument {a.get('index')}: dtype {a.get('dtype')!r} is not the "
                        f"problem's {problem.get('dtype', 'float32')}")
    launches = launch.get("launches")
    if not isinstance(launches, list) or not launches:
        errs.append("no 'launches' list")
    else:
        for k, l in enumerate(launches):
            if not isinstance(l.get("entry"), str):
                errs.append(f"launch {k}: no entry name")
            for key in ("grid", "block"):
                v = l.get(key)
                if not (isinstance(v, list) and len(v) == 3 and all(isinstance(e, int) and e >= 1
                                                                    for e in v)):
                    errs.append(f"launch {k}: '{key}' must be 3 positive integers, got {v!r}")
            if l.get("stream", 0) not in (0, 1):
                errs.append(f"launch {k}: stream must be 0 or 1, got {l.get('stream')!r}")
    return errs


def tensor_map_errors(arg, args):
    """The problems of tensor_map argument `arg` of a launch with arguments `args` (empty when
    the driver can encode it), by the limits of the CUDA driver API's cuTensorMapEncodeTiled (the
    tuner's ir/stmt.h CheckTensorMap states the same): held as int64 [16]; "source" names one input
    or output argument whose dtype is in TENSOR_MAP_DATA_TYPES; "dims" (outermost first) and "box"
    lists of equal length 1..5 of positive integers, dims under 2^31 with the source's element
    count as product, box extents <= 256; "swizzle" 0, 32, 64 or 128 bytes; the box's inner row
    (box[-1] x element bytes) a multiple of 16 bytes and, when swizzled, at most the swizzle; each
    outer dimension's stride (element bytes x the product of the dims inside it) a multiple of 16
    bytes under 2^40."""
    where = f"argument {arg.get('index')}"
    m = arg.get("tensor_map")
    if not isinstance(m, dict):
        return [f"{where}: a tensor_map argument needs a 'tensor_map' object"]
    errs = []
    if arg.get("dtype") != "int64" or arg.get("shape") != [TENSOR_MAP_WORDS]:
        errs.append(f"{where}: a tensor map is held as int64 [{TENSOR_MAP_WORDS}] "
                    f"({TENSOR_MAP_BYTES} bytes), got {arg.get('dtype')} {arg.get('shape')}")
    name = m.get("source")
    sources = [a for a in args if a.get("kind") in ("input", "output") and a.get("name") == name]
    source = sources[0] if len(sources) == 1 else None
    if not sources:
        errs.append(f"{where}: tensor_map source {name!r} is not an input or output argument "
                    "of the launch")
    elif len(sources) > 1:
        errs.append(f"{where}: tensor_map source {name!r} names {len(sources)} arguments")
    swizzle = m.get("swizzle")
    if not _is_int(swizzle) or swizzle not in TENSOR_MAP_SWIZZLES:
        errs.append(f"{where}: tensor_map swizzle {swizzle!r} is not 0, 32, 64 or 128 bytes")
        swizzle = None
    dims, box = m.get("dims"), m.get("box")
    shape_ok = True
    for field, v in (("dims", dims), ("box", box)):
        if not (isinstance(v, list) and 1 <= len(v) <= TENSOR_MAP_MAX_RANK and
                all(_is_int(e) and e >= 1 for e in v)):
            errs.append(f"{where}: tensor_map {field} {v!r} must be 1 to "
                        f"{TENSOR_MAP_MAX_RANK} positive integers")
            shape_ok = False
    if not shape_ok:
        return errs
    if len(box) != len(dims):
        errs.append(f"{where}: tensor_map box rank {len(box)} differs from the dims' {len(dims)}")
        return errs
    for d, (n, b) in enumerate(zip(dims, box)):
        if n >= 1 << 31:  # box coordinates are signed 32-bit (as ir::CheckTensorMap)
            errs.append(f"{where}: tensor_map dim {d} extent {n} is not under 2^31")
        if b > TENSOR_MAP_MAX_BOX:
            errs.append(f"{where}: tensor_map box dim {d} extent {b} is not in "
                        f"1..{TENSOR_MAP_MAX_BOX}")
    if source is None:
        return errs
    if source.get("dtype") not in TENSOR_MAP_DATA_TYPES:
        errs.append(f"{where}: tensor_map source {name!r} has dtype {source.get('dtype')!r}, "
                    f"not one of {', '.join(TENSOR_MAP_DATA_TYPES)}")
        return errs
    size = TENSOR_MAP_DATA_TYPES[source["dtype"]][0]
    shape = source.get("shape")
    if isinstance(shape, list) and all(_is_int(e) for e in shape) and _prod(dims) != _prod(shape):
        errs.append(f"{where}: tensor_map dims {dims} cover {_prod(dims)} elements, source "
                    f"{name!r} {shape} has {_prod(shape)}")
    inner = box[-1] * size
    if inner % 16:
        errs.append(f"{where}: tensor_map box's inner {inner} bytes are not a multiple of 16")
    elif swizzle and inner > swizzle:
        errs.append(f"{where}: tensor_map box's inner {inner} bytes exceed the {swizzle}-byte "
                    "swizzle")
    stride = size
    for d in range(len(dims) - 1, 0, -1):
        stride *= dims[d]
        if stride % TENSOR_MAP_GLOBAL_ALIGN or stride >= 1 << 40:
            errs.append(f"{where}: tensor_map dim {d - 1} stride {stride} bytes is not a multiple "
                        "of 16 under 2^40")
    return errs


def tensor_map_encoding(tensor_map, dtype):
    """The arguments of cuTensorMapEncodeTiled (CUDA driver API) other than the map and the global
    address, for a tensor_map object that tensor_map_errors accepts over a source of `dtype`, keyed
    by the API's parameter names: tensorDataType (CU_TENSOR_MAP_DATA_TYPE_*), tensorRank,
    globalDim (elements, innermost first: the reverse of "dims"), globalStrides (bytes, the
    rank - 1 dims above the innermost, innermost first: dense row-major), boxDim (elements,
    innermost first), elementStrides (all 1), interleave NONE, swizzle (CU_TENSOR_MAP_SWIZZLE_*),
    l2Promotion L2_128B, oobFill NONE (out-of-bounds elements read as zeros)."""
    size, data_type = TENSOR_MAP_DATA_TYPES[dtype]
    dims = [int(d) for d in reversed(tensor_map["dims"])]
    strides, stride = [], size
    for d in dims[:-1]:
        stride *= d
        strides.append(stride)
    return {"tensorDataType": data_type, "tensorRank": len(dims), "globalDim": dims,
            "globalStrides": strides, "boxDim": [int(b) for b in reversed(tensor_map["box"])],
            "elementStrides": [1] * len(dims), "interleave": TENSOR_MAP_INTERLEAVE_NONE,
            "swizzle": TENSOR_MAP_SWIZZLES[tensor_map["swizzle"]],
            "l2Promotion": TENSOR_MAP_L2_PROMOTION_128B, "oobFill": TENSOR_MAP_OOB_FILL_NONE}


# ------------------------------------------------------------------------------------------------
# Verdicts (pure: the torch path computes the same quantities vectorized).

def element_ok(got, ref, atol, rtol, slack=0.0):
    """|got - ref| <= atol + rtol·|ref| + slack; NaN / Inf pass only where the reference has the
    same non-finite value (the scorer rejects non-finite references before this is asked)."""
    if math.isnan(ref):
        return False
    if math.isinf(ref):
        return got == ref
    if math.isnan(got) or math.isinf(got):
        return False
    return abs(got - ref) <= atol + rtol * abs(ref) + slack


def slack_from_baseline(baseline, ref, atol, rtol, factor=SLACK_FACTOR):
    """SLACK_FACTOR x the largest amount by which PyTorch's float32 result exceeds the tolerance
    against the float64 reference (0 when it is within tolerance everywhere)."""
    excess = 0.0
    for b, r in zip(baseline, ref):
        if math.isfinite(b) and math.isfinite(r):
            excess = max(excess, abs(b - r) - (atol + rtol * abs(r)))
    return factor * excess


def abs_errors(torch, got, ref):
    """|got - ref| per element (float64, ref's shape), the measure of the reported max errors,
    one definition for our kernel's output and PyTorch eager's own: 0 where the reference is
    +-inf (a half dtype's overflow: there only the same inf passes, which the check tests apart),
    +inf where `got` is NaN or +-inf and the reference finite. `torch` is the module (or the
    tests' stand-in for it), passed in so that score.py imports without torch."""
    finite_ref = torch.isfinite(ref)
    err = torch.where(finite_ref, got - ref, 0.0).abs()
    return torch.where(torch.isfinite(got) | ~finite_ref, err, math.inf)


def max_errors(torch, err, ref, atol):
    """(max abs error, max rel error) of one output from its abs_errors `err` and the reference
    `ref`. The relative error counts only where the reference is finite and |ref| > atol: below
    that the quotient measures how small the reference is, not how accurate the result is. 0.0
    where no element counts."""
    max_abs = err.max().item() if err.numel() else 0.0
    big = torch.isfinite(ref) & (ref.abs() > atol)
    max_rel = (err[big] / ref.abs()[big]).max().item() if big.any() else 0.0
    return max_abs, max_rel


def raise_errors(worst, errors, prefix=""):
    """Raises worst[prefix + "max_abs_error"] and worst[prefix + "max_rel_error"] to the
    (max abs, max rel) pair `errors` where it is larger: the worst over the trials."""
    for key, value in zip(("max_abs_error", "max_rel_error"), errors):
        worst[prefix + key] = max(worst[prefix + key], value)


def error_ratio(ours, eager):
    """ours / eager for two max errors: 1.0 where they are equal (both 0 included), None where
    only eager's is 0 (no finite ratio)."""
    if ours == eager:
        return 1.0
    if eager == 0:
        return None
    return ours / eager


def eager_comparison(errors):
    """Our max errors against PyTorch eager's own on the same trials and the same float64
    reference (the acceptance bar "max error no larger than eager's"): error_vs_eager and
    rel_error_vs_eager, the ratios ours / eager's of the max abs and max rel errors, and
    error_within_eager, true when neither of ours is larger than eager's."""
    ours = (errors["max_abs_error"], errors["max_rel_error"])
    eager = (errors["eager_max_abs_error"], errors["eager_max_rel_error"])
    return {"error_vs_eager": error_ratio(ours[0], eager[0]),
            "rel_error_vs_eager": error_ratio(ours[1], eager[1]),
            "error_within_eager": ours[0] <= eager[0] and ours[1] <= eager[1]}


def verdict_from_counts(counts):
    """The reason for one trial from the checker's counts, in check order:
    counts: input_changed, poison_left, disagree, nonfinite (NaN/Inf where the reference is
    finite), bad32 (outside the dtype's tolerance), bad16 (outside the fp16 tolerance)."""
    if counts.get("input_changed", 0):
        return "input_modified"
    if counts.get("poison_left", 0):
        return "incomplete_output"
    if counts.get("disagree", 0):
        return "nondeterministic"
    if counts.get("nonfinite", 0):
        return "nan_output"
    if counts.get("bad32", 0):
        return "imprecise" if counts.get("bad16", 0) == 0 else "wrong_answer"
    return "ok"


def final_reason(trial_reasons):
    """Combines the trials' reasons: the first structural failure (anything but ok, imprecise,
    wrong_answer) decides; else wrong_answer if any trial was wrong, else imprecise if any was,
    else ok."""
    for r in trial_reasons:
        if r not in ("ok", "imprecise", "wrong_answer"):
            return r
    if "wrong_answer" in trial_reasons:
        return "wrong_answer"
    return "imprecise" if "imprecise" in trial_reasons else "ok"


def check_lists(got, ref, dtype="float32", slack=0.0, got2=None, inputs_before=None,
                inputs_after=None, poison_mask=None, got_bits=None, magnitude=None,
                precision="ieee", rounded_intermediates=False):
    """The whole per-trial check on Python lists (the CPU model of the torch path, for tests).
    `ref` is the float64 reference (rounded here to a half dtype: reference_in_dtype), `got` the
    output's values, `magnitude` each element's M (default |ref|); `got_bits`, the output's bit
    patterns as the kernel left them, counts the elements still holding the dtype's poison (as
    `poison_mask` does). Returns (reason, counts)."""
    atol, rtol = tolerance(dtype)
    u = unit_roundoff(dtype, precision, rounded_intermediates)
    ref64, ref = list(ref), reference_in_dtype(ref, dtype)
    if magnitude is None:
        magnitude = [abs(r) for r in ref]
    counts = {"input_changed": 0, "poison_left": 0, "disagree": 0, "nonfinite": 0, "bad32": 0,
              "bad16": 0}
    if inputs_before is not None:
        for b, a in zip(inputs_before, inputs_after):
            counts["input_changed"] += sum(1 for x, y in zip(b, a)
                                           if _bits(x, dtype) != _bits(y, dtype))
    if poison_mask is not None:
        counts["poison_left"] = sum(1 for m in poison_mask if m)
    if got_bits is not None:
        counts["poison_left"] += count_poison(got_bits, dtype)
    if got2 is not None:
        counts["disagree"] = sum(1 for x, y in zip(got, got2) if _bits(x, dtype) != _bits(y, dtype))
    for g, r, r64, m in zip(got, ref, ref64, magnitude):
        allowance = CANCELLATION_FACTOR * u * m if math.isfinite(m) else 0.0
        allowed64 = atol + rtol * abs(r64) + allowance + slack
        if overflow_allowed(g, r64, allowed64, dtype):
            continue
        if not math.isfinite(r) and math.isfinite(g) and abs(g - r64) <= allowed64:
            continue  # the rounded reference overflowed; the rule is anchored on ref64
        if math.isfinite(r) and not math.isfinite(g):
            counts["nonfinite"] += 1
        elif not element_ok(g, r, atol, rtol, slack + allowance):
            counts["bad32"] += 1
            if not element_ok(g, r, 1e-2, 1e-2, slack + allowance):
                counts["bad16"] += 1
    return verdict_from_counts(counts), counts


def _bits(x, dtype="float32"):
    """Bit pattern of a value of `dtype` (NaNs all alike: a value's bits, not a kernel's)."""
    return bits_of(x, dtype)


def other_stream_suspect(event_median_ms, host_median_ms, ratio=OTHER_STREAM_RATIO,
                         margin_ms=OTHER_STREAM_MARGIN_MS):
    """True when the device stays busy well after the timed stream's stop event."""
    return host_median_ms > ratio * event_median_ms + margin_ms


# ------------------------------------------------------------------------------------------------
# Scores (KernelBench score.py).

def speedup(baseline_ms, ours_ms):
    if not (ours_ms and ours_ms > 0 and baseline_ms and baseline_ms > 0 and
            math.isfinite(ours_ms) and math.isfinite(baseline_ms)):
        raise ValueError(f"times must be positive and finite, got ours {ours_ms} ms, "
                         f"baseline {baseline_ms} ms")
    return baseline_ms / ours_ms


def fast_p(rows, p):
    """rows: (correct, ours_ms, baseline_ms). Fraction of ALL rows correct with speedup > p."""
    if not rows:
        raise ValueError("fast_p of no problems")
    if not (p >= 0 and math.isfinite(p)):
        raise ValueError(f"p must be >= 0 and finite, got {p}")
    return sum(1 for c, o, b in rows if c and speedup(b, o) > p) / len(rows)


def geomean_speedup(rows):
    """Geometric mean of the speedups of the correct rows; None when none is correct."""
    logs = [math.log(speedup(b, o)) for c, o, b in rows if c]
    return math.exp(sum(logs) / len(logs)) if logs else None


def speed_of_light_ms(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    if peak_flops_per_s <= 0 or bandwidth_bytes_per_s <= 0:
        raise ValueError("limits must be positive")
    return max(flops / peak_flops_per_s, nbytes / bandwidth_bytes_per_s) * 1e3


def is_suspect(ours_ms, flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s):
    return ours_ms < speed_of_light_ms(flops, nbytes, peak_flops_per_s, bandwidth_bytes_per_s)


def percentile(sorted_xs, q):
    """Linear interpolation between closest ranks (numpy's default), as runtime/timing.cc."""
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def timing_stats(samples):
    s = sorted(samples)
    return {"runs": len(s), "median_ms": statistics.median(s), "mean_ms": statistics.fmean(s),
            "min_ms": s[0], "max_ms": s[-1], "p10_ms": percentile(s, 0.10),
            "p90_ms": percentile(s, 0.90)}


def problem_flops(problem, output_shape):
    """FLOPs of one run by the usual conventions (2 per multiply-add; 1 per output element
    otherwise); fused problems add their nodes' matmul-like work."""
    def prod(xs):
        n = 1
        for x in xs:
            n *= x
        return n
    op, shapes, attrs = problem["op"], problem["shapes"], _norm_attrs(problem.get("attrs"))
    out = prod(output_shape)
    if op in ("matmul", "batch_matmul"):
        a = shapes[0]
        k = a[-2] if attrs.get("transpose_a") == "true" else a[-1]
        return 2.0 * out * k
    if op in ("dense", "gemv"):
        return 2.0 * out * shapes[0][-1]
    if op in ("conv2d_nchw", "depthwise_conv2d_nchw", "conv2d_bias_relu"):
        return 2.0 * out * prod(shapes[1][1:])
    if op == "fused":
        total = 0.0
        for n in problem["nodes"]:
            if n["op"] in ("matmul", "batch_matmul", "dense", "conv2d_nchw"):
                x = shapes[int(n["inputs"][0][1:])] if n["inputs"][0].startswith("p") else None
                w = shapes[int(n["inputs"][1][1:])] if n["inputs"][1].startswith("p") else None
                if x is None or w is None:
                    continue
                if n["op"] == "conv2d_nchw":
                    total += 2.0 * out * prod(w[1:])  # output of the chain has the conv's shape
                elif n["op"] == "dense":
                    total += 2.0 * prod(x[:-1]) * w[0] * x[-1]
                else:
                    tb = _norm_attrs(n.get("attrs")).get("transpose_b") == "true"
                    total += 2.0 * prod(x) * (w[-2] if tb else w[-1])
        return max(total, float(out))
    return float(out)


def problem_bytes(problem, output_shape, itemsize=4):
    n = sum(_prod(s) for s in problem["shapes"]) + _prod(output_shape)
    return float(n * itemsize)


# A problem whose output is at most this share of its input bytes is read-only for its limit.
READ_ONLY_OUTPUT_SHARE = 0.01


def bandwidth_limit(input_bytes, output_bytes, copy_bandwidth, read_bandwidth=None):
    """The bytes/s a kernel moving `input_bytes` in and `output_bytes` out can reach: the measured
    read bandwidth for read-only problems (reductions, GEMV: output at most READ_ONLY_OUTPUT_SHARE
    of the input), whose traffic is nearly all reads and which a read + write copy underrates;
    the copy bandwidth otherwise, or when no read bandwidth was measured. Never below the copy
    bandwidth (a slow read measurement must not flag kernels a copy would pass)."""
    if copy_bandwidth <= 0:
        raise ValueError("copy bandwidth must be positive")
    if read_bandwidth and output_bytes <= READ_ONLY_OUTPUT_SHARE * input_bytes:
        return max(copy_bandwidth, read_bandwidth)
    return copy_bandwidth


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def summarize(results, baselines=BASELINES):
    """Per group ('all' = the non-small problems, 'small') and baseline: fast_p at
    FAST_P_THRESHOLDS, geomean, counts. A problem without a baseline time counts as not fast."""
    out = {}
    groups = {"main": [r for r in results if not r.get("small")],
              "small": [r for r in results if r.get("small")]}
    for group, rs in groups.items():
        if not rs:
            continue
        out[group] = {"problems": len(rs), "correct": sum(1 for r in rs if r["correct"])}
        for b in baselines:
            rows = []
            for r in rs:
                bt = (r.get("baselines", {}).get(b) or {}).get("median_ms")
                ok = bool(r["correct"] and bt and r.get("ours", {}).get("median_ms"))
                rows.append((ok, r.get("ours", {}).get("median_ms") if ok else 1.0,
                             bt if ok else 1.0))
            out[group][b] = {f"fast_{p:g}": fast_p(rows, p) for p in FAST_P_THRESHOLDS}
            out[group][b]["geomean_speedup"] = geomean_speedup(rows)
            out[group][b]["timed"] = sum(1 for ok, _, _ in rows if ok)
    return out


def _fmt(x, spec=".3f"):
    return "—" if x is None else format(x, spec)


def render_markdown(meta, suites):
    """The results file: device and limits, then per suite a summary table and a problem table."""
    lines = [f"# Scoring results ({meta.get('date', '')})", ""]
    lines.append(f"Device {meta.get('device', '?')}, torch {meta.get('torch', '?')}, CUDA "
                 f"{meta.get('cuda', '?')}. Measured limits: copy bandwidth "
                 f"{_fmt(meta.get('bandwidth_tbps'), '.2f')} TB/s (read-only problems: read "
                 f"bandwidth {_fmt(meta.get('read_bandwidth_tbps'), '.2f')} TB/s), fp32 FMA peak "
                 f"{_fmt(meta.get('peak_tflops'), '.1f')} TFLOP/s. Method: bench/harness/score.py "
                 f"({meta.get('trials', '?')} checked trials, {meta.get('runs', '?')} timed runs, "
                 "L2 flushed before each, median).")
    if any(r.get("dtype", "float32") in HALF_DTYPES for s in suites for r in s["results"]):
        lines.append("")
        lines.append("float16 / bfloat16 problems: checked at 1e-2 abs + rel against the float64 "
                     "reference rounded to the dtype; their speed of light uses the tensor-core "
                     f"bound {_fmt(meta.get('half_peak_tflops'), '.0f')} TFLOP/s (SMs x maximum "
                     "clock x the architecture's dense rate). Their eager baseline runs in the "
                     "problem's dtype with float32 accumulation (PyTorch's cuBLAS / cuDNN compute "
                     "type) and PyTorch's default of allowing reduced-precision split-K reductions "
                     f"({meta.get('reduced_precision_defaults') or 'flags not reported'}); the "
                     "no-TF32 column is the same with those reductions disallowed.")
    lines.append("")
    for suite in suites:
        lines.append(f"## {suite['suite']} ({suite['source']})")
        lines.append("")
        lines.append("| group | baseline | problems | correct | timed | fast_0 | fast_1 | fast_1.5 "
                     "| fast_2 | geomean speedup |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|")
        for group, s in suite["summary"].items():
            for b in BASELINES:
                if b not in s:
                    continue
                v = s[b]
                lines.append(f"| {group} | {b} | {s['problems']} | {s['correct']} | {v['timed']} | "
                             f"{v['fast_0']:.2f} | {v['fast_1']:.2f} | {v['fast_1.5']:.2f} | "
                             f"{v['fast_2']:.2f} | {_fmt(v['geomean_speedup'], '.2f')} |")
        lines.append("")
        lines.append("| problem | correct | ours ms | eager ms | no-TF32 ms | compile ms | speedup "
                     "(eager) | TFLOP/s | TB/s | limit | max abs error ours / eager | note |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in suite["results"]:
            b = r.get("baselines", {})
            ours = r.get("ours", {}).get("median_ms")
            eager = (b.get("eager") or {}).get("median_ms")
            sp = eager / ours if (r["correct"] and ours and eager) else None
            note = r.get("reason", "")
            if r.get("dtype", "float32") in HALF_DTYPES:
                note = f"{r['dtype']} (eager: fp32 accumulation) " + note
            if r.get("detail"):
                note += ": " + r["detail"]
            if r.get("suspect"):
                note += " SUSPECT (below the speed of light)"
            lines.append(
                f"| {r['name']}{' (small)' if r.get('small') else ''} | "
                f"{'yes' if r['correct'] else 'no'} | {_fmt(ours, '.4f')} | {_fmt(eager, '.4f')} | "
                f"{_fmt((b.get('eager_no_tf32') or {}).get('median_ms'), '.4f')} | "
                f"{_fmt((b.get('compile') or {}).get('median_ms'), '.4f')} | {_fmt(sp, '.2f')} | "
                f"{_fmt(r.get('tflops'), '.1f')} | {_fmt(r.get('tbps'), '.2f')} | "
                f"{_fmt(r.get('limit_fraction'), '.0%')} | {error_cell(r)} | "
                f"{note.replace('|', '/')[:160]} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def error_cell(r):
    """Our max abs error and eager's as text ("1.22e-05 / 1.53e-05"), "—" for a row that was
    not checked."""
    if "max_abs_error" not in r and "eager_max_abs_error" not in r:
        return "—"
    return f"{_fmt(r.get('max_abs_error'), '.2e')} / {_fmt(r.get('eager_max_abs_error'), '.2e')}"


def render_row(r):
    """One line per problem for the console (and `--kernel`)."""
    ours = r.get("ours", {}).get("median_ms")
    parts = [f"{r['name']:32s}", "PASS" if r["correct"] else f"FAIL {r.get('reason')}",
             f"ours {_fmt(ours, '.4f')} ms"]
    if r.get("dtype", "float32") in HALF_DTYPES:
        parts.append(f"[{r['dtype']}: eager accumulates in fp32]")
    for b in BASELINES:
        t = (r.get("baselines", {}).get(b) or {}).get("median_ms")
        if t is not None:
            parts.append(f"{b} {t:.4f} ms" + (f" ({t / ours:.2f}x)" if ours and r["correct"]
                                               else ""))
    if "eager_max_abs_error" in r:
        parts.append(f"max abs error {error_cell(r)} (ours / eager)")
    if r.get("detail"):
        parts.append(r["detail"])
    if r.get("suspect"):
        parts.append("SUSPECT")
    return "  ".join(parts)


def merge_results(docs):
    """Combines results documents of several runs (the device tool runs at most 10 minutes a
    command, so a full scoring is split with --problems): suites with the same name are joined in
    order, a problem scored again replaces its earlier row, and the summaries are recomputed.
    The limits and metadata come from the first document; runs lists every document's meta."""
    if not docs:
        raise ValueError("nothing to merge")
    suites, order = {}, []
    for d in docs:
        for s in d["suites"]:
            if s["suite"] not in suites:
                suites[s["suite"]] = {"suite": s["suite"], "source": s["source"], "results": []}
                order.append(s["suite"])
            rows = suites[s["suite"]]["results"]
            for r in s["results"]:
                rows[:] = [x for x in rows if x["name"] != r["name"]] + [r]
    baselines = tuple(b for b in BASELINES
                      if any(b in r.get("baselines", {}) for s in suites.values()
                             for r in s["results"]))
    out = []
    for name in order:
        s = suites[name]
        s["summary"] = summarize(s["results"], baselines)
        out.append(s)
    meta = dict(docs[0]["meta"])
    meta["runs_merged"] = [d["meta"] for d in docs]
    return {"meta": meta, "suites": out}


def check_self_test(outcomes, manifest):
    """outcomes: kernel name -> reason given. Returns (passed, lines): an honest kernel must get
    'ok', a cheat one of its expected reasons."""
    lines, passed = [], True
    for k in manifest["kernels"]:
        got = outcomes.get(k["kernel"], "not run")
        want = ["ok"] if k["honest"] else k["expect"]
        good = got in want
        passed &= good
        lines.append(f"{'PASS' if good else 'FAIL'} {k['kernel']:20s} "
                     f"{'honest' if k['honest'] else 'cheat '} got {got:18s} "
                     f"expected {'/'.join(want)}  ({k['what']})")
    return passed, lines


def make_function(problem, scope):
    """def f(<inputs>): return <torch expression>, with `scope` (torch, F) as globals."""
    src = f"def _problem({', '.join(problem['inputs'])}):\n    return {problem['torch']}\n"
    namespace = dict(scope)
    exec(compile(src, f"<{problem['name']}.torch>", "exec"), namespace)
    return namespace["_problem"]


# ------------------------------------------------------------------------------------------------
# Device part (torch + ctypes on libcuda.so). Nothing below runs at import time.

class CudaError(RuntimeError):
    pass


class Driver:
    """The few CUDA driver calls the scorer needs, on torch's primary context."""

    def __init__(self):
        import ctypes
        self.ct = ctypes
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._check(self.lib.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        import torch
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # torch's runtime makes the primary context current
        self._check(self.lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        self.device = dev.value
        self.side_stream = ctypes.c_void_p()
        self._check(self.lib.cuStreamCreate(ctypes.byref(self.side_stream), 1),  # NON_BLOCKING
                    "cuStreamCreate")
        self.lib.cuLaunchKernel.argtypes = [
            ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_void_p]
        self.lib.cuModuleLoadData.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.lib.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                                 ctypes.c_char_p]
        self.lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.lib.cuModuleUnload.argtypes = [ctypes.c_void_p]
        # cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t rank,
        # void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
        # const cuuint32_t* boxDim, const cuuint32_t* elementStrides, interleave, swizzle,
        # l2Promotion, oobFill): CUDA 12.0+ drivers; looked up when a launch needs a map.
        if hasattr(self.lib, "cuTensorMapEncodeTiled"):
            u64, u32 = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
            self.lib.cuTensorMapEncodeTiled.argtypes = [
                ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64, u64, u32,
                u32, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]

    def _check(self, rc, what):
        if rc != 0:
            msg = self.ct.c_char_p()
            self.lib.cuGetErrorString(rc, self.ct.byref(msg))
            raise CudaError(f"{what} failed: CUDA error {rc} "
                            f"({msg.value.decode() if msg.value else '?'})")

    def attribute(self, attr):
        v = self.ct.c_int()
        self._check(self.lib.cuDeviceGetAttribute(self.ct.byref(v), attr, self.device),
                    "cuDeviceGetAttribute")
        return v.value

    def load(self, ptx_text):
        mod = self.ct.c_void_p()
        self._check(self.lib.cuModuleLoadData(self.ct.byref(mod), ptx_text.encode() + b"\0"),
                    "cuModuleLoadData")
        return mod

    def unload(self, mod):
        self.lib.cuModuleUnload(mod)

    def function(self, mod, name, dynamic_shared=0):
        f = self.ct.c_void_p()
        self._check(self.lib.cuModuleGetFunction(self.ct.byref(f), mod, name.encode()),
                    f"cuModuleGetFunction('{name}')")
        if dynamic_shared > 48 * 1024:
            self._check(self.lib.cuFuncSetAttribute(f, 8, int(dynamic_shared)),  # MAX_DYNAMIC_SHARED
                        f"cuFuncSetAttribute('{name}')")
        return f

    def launch(self, f, grid, block, shared, stream, args):
        """args: ctypes scalars (c_uint64 pointers, c_int, ...), kept alive by the caller."""
        ptrs = (self.ct.c_void_p * max(1, len(args)))(
            *[self.ct.cast(self.ct.pointer(a), self.ct.c_void_p) for a in args])
        self._check(self.lib.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1],
                                            block[2], int(shared), stream, ptrs, None),
                    "cuLaunchKernel")

    def synchronize(self):
        self._check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize (a kernel faulted?)")

    def encode_tensor_map(self, enc, address):
        """The 128 bytes of the CUtensorMap that cuTensorMapEncodeTiled (CUDA driver API) encodes
        from `enc` (tensor_map_encoding's arguments) over the device address `address`, into a
        host struct aligned to 64 bytes as the API requires; a failure raises CudaError."""
        ct = self.ct
        if not hasattr(self.lib, "cuTensorMapEncodeTiled"):
            raise CudaError("cuTensorMapEncodeTiled failed: not in this driver (CUDA 12.0+)")
        raw = (ct.c_uint8 * (TENSOR_MAP_BYTES + TENSOR_MAP_ALIGN))()
        where = ct.addressof(raw) + (-ct.addressof(raw) % TENSOR_MAP_ALIGN)
        rank = enc["tensorRank"]

        def array(ctype, values):
            return (ctype * max(1, len(values)))(*values)  # rank 1: no strides, a dummy entry
        rc = self.lib.cuTensorMapEncodeTiled(
            ct.c_void_p(where), ct.c_int(enc["tensorDataType"]), ct.c_uint32(rank),
            ct.c_void_p(address), array(ct.c_uint64, enc["globalDim"]),
            array(ct.c_uint64, enc["globalStrides"]), array(ct.c_uint32, enc["boxDim"]),
            array(ct.c_uint32, enc["elementStrides"]), ct.c_int(enc["interleave"]),
            ct.c_int(enc["swizzle"]), ct.c_int(enc["l2Promotion"]), ct.c_int(enc["oobFill"]))
        self._check(rc, "cuTensorMapEncodeTiled")
        return ct.string_at(where, TENSOR_MAP_BYTES)


class Kernel:
    """A loaded launch JSON + PTX."""

    def __init__(self, drv, launch_doc, ptx_text):
        self.drv = drv
        self.doc = launch_doc
        self.mod = drv.load(ptx_text)
        self.launches = []
        for l in launch_doc["launches"]:
            f = drv.function(self.mod, l["entry"], l.get("dynamic_shared_bytes", 0))
            self.launches.append((f, l["grid"], l["block"], l.get("dynamic_shared_bytes", 0),
                                  l.get("stream", 0)))

    def bind(self, buffers, stream):
        """A no-argument launcher of every kernel on `buffers` (one torch tensor per argument, in
        order), parameters prepared once so that timing sees little host overhead."""
        ct, lib = self.drv.ct, self.drv.lib
        args = [ct.c_uint64(t.data_ptr()) for t in buffers]
        params = (ct.c_void_p * max(1, len(args)))(
            *[ct.cast(ct.pointer(a), ct.c_void_p) for a in args])
        calls = [(f, grid, block, int(shared), self.drv.side_stream if s else stream)
                 for f, grid, block, shared, s in self.launches]

        def launch():
            for f, g, b, shared, st in calls:
                rc = lib.cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], shared, st, params,
                                        None)
                if rc != 0:
                    self.drv._check(rc, "cuLaunchKernel")
        launch.keep = (args, params)
        return launch

    def run(self, buffers, stream):
        """Launches every kernel on `buffers` asynchronously."""
        self.bind(buffers, stream)()

    def close(self):
        self.drv.unload(self.mod)


class Harness:
    """The checker and timer. `torch_module`, `driver` and `kernel_class` default to torch, the
    ctypes Driver and Kernel; test_score_logic.py passes CPU stand-ins to run the same
    checks on planted cheats written in Python."""

    def __init__(self, trials=DEFAULT_TRIALS, runs=DEFAULT_RUNS, warmup=3, seed=1234,
                 baselines=BASELINES, log=print, torch_module=None, driver=None,
                 kernel_class=None, helpers_ptx=None, precision="ieee"):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision '{precision}' (ieee, tf32)")
        self.precision = precision  # u of float32 problems in the precision rule
        if torch_module is None:
            import torch as torch_module
        torch = torch_module
        self.torch = torch
        self.F = torch.nn.functional
        self.trials, self.runs, self.warmup = trials, runs, warmup
        self.baselines = baselines
        self.log = log
        self.drv = driver if driver is not None else Driver()
        self.kernel_class = kernel_class or Kernel
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        props = torch.cuda.get_device_properties(0)
        self.props = props
        l2 = getattr(props, "L2_cache_size", 50 * 1024 * 1024)
        self.flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
        if helpers_ptx is None:
            helpers_ptx = device_ptx(os.path.join(HERE, "device_kernels.cu"))
        self.helpers = self.drv.load(helpers_ptx)
        self.sms = props.multi_processor_count
        self.smem_optin = self.drv.attribute(97)  # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        self.scribble_big = self.drv.function(self.helpers, "smem_scribble", self.smem_optin)
        self.scribble_small = self.drv.function(self.helpers, "smem_scribble", 48 * 1024)
        self.fma = self.drv.function(self.helpers, "fma_peak")
        self.read_peak = self.drv.function(self.helpers, "read_peak")
        self.copy_peak = self.drv.function(self.helpers, "copy_peak")
        self.scribble_count = 0
        self.default_tf32 = self.tf32_state()  # PyTorch's defaults: the "eager" baseline's
        self.default_reduced_precision = self.reduced_precision_state()
        self.peak_flops = None
        self.half_peak_flops = None
        self.bandwidth = None
        self.read_bandwidth = None
        # Host-clock overhead of one timed run that launches nothing (events, syncs, Python).
        self.host_overhead_ms = self.time(lambda: None)["host_median_ms"]

    # -- helpers --------------------------------------------------------------------------------
    def stream(self):
        return self.drv.ct.c_void_p(self.torch.cuda.current_stream().cuda_stream)

    def scribble(self):
        """Fills every SM's shared memory with a new pattern (two shared-memory configurations)."""
        self.scribble_count += 1
        ct = self.drv.ct
        for f, nbytes in ((self.scribble_big, self.smem_optin), (self.scribble_small, 48 * 1024)):
            args = [ct.c_uint(self.scribble_count * 7919), ct.c_uint(nbytes // 4)]
            self.drv.launch(f, (4 * self.sms, 1, 1), (1024, 1, 1), nbytes, self.stream(), args)

    def _new_tf32_api(self):
        b = self.torch.backends
        return hasattr(b.cuda.matmul, "fp32_precision") and hasattr(b.cudnn, "conv")

    def tf32_state(self):
        """PyTorch's TF32 settings (matmul, cuDNN conv), through the API this version prefers
        (fp32_precision from 2.9 on: mixing it with allow_tf32 is refused by some versions)."""
        b = self.torch.backends
        if self._new_tf32_api():
            return (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision)
        return (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)

    def set_tf32_state(self, state):
        b = self.torch.backends
        if self._new_tf32_api():
            b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision = state
        else:
            b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = state

    def set_tf32(self, on):
        """TF32 on or off for both matmul and cuDNN convolutions."""
        if self._new_tf32_api():
            self.set_tf32_state(("tf32", "tf32") if on else ("ieee", "ieee"))
        else:
            self.set_tf32_state((on, on))

    def reduced_precision_state(self):
        """PyTorch's REDUCED_PRECISION_FLAGS (None for a flag this version lacks)."""
        m = self.torch.backends.cuda.matmul
        return tuple(getattr(m, k, None) for k in REDUCED_PRECISION_FLAGS)

    def set_reduced_precision_state(self, state):
        m = self.torch.backends.cuda.matmul
        for k, v in zip(REDUCED_PRECISION_FLAGS, state):
            if v is not None and hasattr(m, k):
                setattr(m, k, v)

    def set_strict(self):
        """The most precise eager PyTorch: TF32 off everywhere, and cuBLAS may not reduce float16
        / bfloat16 partial sums in reduced precision (the eager_no_tf32 baseline and the
        reference run that gives the slack)."""
        self.set_tf32(False)
        self.set_reduced_precision_state(tuple(False for _ in REDUCED_PRECISION_FLAGS))

    def set_defaults(self):
        """PyTorch's defaults as found at start (the eager and compile baselines)."""
        self.set_tf32_state(self.default_tf32)
        self.set_reduced_precision_state(self.default_reduced_precision)

    def bits(self, t):
        """An integer view of `t`'s storage of the same element width (bit-exact comparisons,
        poison fills); 2- and 4-byte floats."""
        torch = self.torch
        return t.view({2: torch.int16, 4: torch.int32}[t.element_size()])

    def launch_buffers(self, args, xs):
        """The kernel's buffers, one per argument of `args` (a launch JSON's, in order): the inputs
        `xs`, a new output of their dtype, new scratch buffers of theirs, and for each tensor_map
        argument a new device copy of its map encoded over its source's buffer among these
        (tensor_map_buffer; the source may come after the map). Returns (buffers, output index,
        scratch buffers); a failed encode raises CudaError."""
        torch = self.torch
        bufs, out_index, scratch, maps = [], None, [], []
        n_in = 0
        for a in args:
            if a["kind"] == "input":
                bufs.append(xs[n_in])
                n_in += 1
            elif a["kind"] == "tensor_map":
                maps.append(len(bufs))
                bufs.append(None)  # encoded once every source is allocated
            else:
                buf_dtype = xs[0].dtype if a["kind"] == "output" else getattr(torch, a["dtype"])
                t = torch.empty(a["shape"], dtype=buf_dtype, device="cuda")
                if a["kind"] == "output":
                    out_index = len(bufs)
                else:
                    scratch.append(t)
                bufs.append(t)
        sources = {a.get("name"): (a, b) for a, b in zip(args, bufs)
                   if a["kind"] in ("input", "output")}
        for i in maps:
            source_arg, source = sources[args[i]["tensor_map"]["source"]]
            bufs[i] = self.tensor_map_buffer(args[i], source_arg, source)
        return bufs, out_index, scratch

    def tensor_map_buffer(self, arg, source_arg, source):
        """A new 128-byte device buffer (uint8) holding tensor_map argument `arg`'s map, encoded
        on the host over `source`, the buffer of its source argument `source_arg`
        (cuTensorMapEncodeTiled wants the global address 16-byte aligned; the kernel reads the map
        from a 64-byte aligned address: PyTorch's allocations are both)."""
        torch = self.torch
        enc = tensor_map_encoding(arg["tensor_map"], source_arg["dtype"])
        address = source.data_ptr()
        if address % TENSOR_MAP_GLOBAL_ALIGN:
            raise CudaError(f"tensor map '{arg.get('name')}': source '{source_arg.get('name')}' "
                            f"at {address:#x} is not {TENSOR_MAP_GLOBAL_ALIGN}-byte aligned")
        blob = self.drv.encode_tensor_map(enc, address)
        t = torch.tensor(list(blob), dtype=torch.uint8, device="cuda")
        if t.data_ptr() % TENSOR_MAP_ALIGN:
            raise CudaError(f"tensor map '{arg.get('name')}': device copy at {t.data_ptr():#x} is "
                            f"not {TENSOR_MAP_ALIGN}-byte aligned")
        return t

    def fresh_inputs(self, problem, dist):
        torch = self.torch
        dtype_name = problem.get("dtype", "float32")
        dtype = getattr(torch, dtype_name)
        mean, std = NORMAL_BY_DTYPE.get(dtype_name, (NORMAL_MEAN, NORMAL_STD))
        xs = []
        for shape in problem["shapes"]:
            if dist == "uniform01":
                x = torch.rand(shape, device="cuda", generator=self.gen)
            elif dist == "normal":
                x = torch.randn(shape, device="cuda", generator=self.gen) * std + mean
            else:
                x = torch.rand(shape, device="cuda", generator=self.gen) * 2 - 1
            xs.append(x.to(dtype))
        return xs

    def expression(self, problem):
        """The problem's PyTorch expression as a plain function of its inputs (a real function, so
        torch.compile traces it)."""
        return make_function(problem, {"torch": self.torch, "F": self.F})

    def measure_limits(self):
        """Copy bandwidth (1 GiB device-to-device copy, read + write bytes), read bandwidth (a sum
        of the same 1 GiB: the limit of read-only problems, bandwidth_limit), each the faster of
        PyTorch's kernel and device_kernels.cu's, and the fp32 FMA peak,
        timed; the float16 / bfloat16 tensor-core bound from the SM count and maximum clock
        (half_tensor_peak_flops)."""
        torch = self.torch
        n = 1 << 28
        src = torch.rand(n, device="cuda", generator=self.gen)
        dst = torch.empty_like(src)
        threads, block, iters = self.sms * 2048, 256, 4096
        out = torch.empty(threads, device="cuda")
        ct = self.drv.ct
        grid = (threads // block, 1, 1)
        # Each limit is the faster of the library's kernel and ours (16-byte accesses, two in
        # flight per thread: device_kernels.cu): torch.sum read 3.8 TB/s where tuned GEMVs and
        # row sums read 4.3-4.6 TB/s, and a limit below what correct kernels reach flags them.
        t = self.time(lambda: dst.copy_(src))
        copy_ms = t["median_ms"]
        n4 = ct.c_longlong(n // 4)
        t = self.time(lambda: self.drv.launch(self.copy_peak, grid, (block, 1, 1), 0, self.stream(),
                                              [ct.c_uint64(src.data_ptr()),
                                               ct.c_uint64(dst.data_ptr()), n4]))
        copy_ms = min(copy_ms, t["median_ms"])
        self.bandwidth = 2.0 * 4 * n / (copy_ms * 1e-3)
        # Read bandwidth: a full sum of the same 1 GiB reads 4n bytes and writes 4.
        t = self.time(lambda: torch.sum(src))
        read_ms = t["median_ms"]
        t = self.time(lambda: self.drv.launch(self.read_peak, grid, (block, 1, 1), 0, self.stream(),
                                              [ct.c_uint64(src.data_ptr()), n4,
                                               ct.c_uint64(out.data_ptr())]))
        read_ms = min(read_ms, t["median_ms"])
        self.read_bandwidth = 4.0 * n / (read_ms * 1e-3)
        args = [ct.c_uint64(out.data_ptr()), ct.c_int(iters)]
        t = self.time(lambda: self.drv.launch(self.fma, (threads // block, 1, 1), (block, 1, 1), 0,
                                              self.stream(), args))
        self.peak_flops = 16.0 * iters * threads / (t["median_ms"] * 1e-3)
        clock_khz = self.drv.attribute(13)  # CU_DEVICE_ATTRIBUTE_CLOCK_RATE: the maximum, in kHz
        self.half_peak_flops = half_tensor_peak_flops(self.sms, clock_khz * 1e3,
                                                      getattr(self.props, "major", 0))
        del src, dst
        return self.bandwidth, self.peak_flops

    def peak_for(self, dtype):
        """The FLOP/s bound of the speed of light for problems of `dtype`: the tensor-core bound for
        float16 / bfloat16; for float32 the larger of the measured fp32 FMA peak and the TF32
        tensor-core bound (half the float16 one), since a float32 kernel may run on TF32 tensor
        cores (3xTF32 at float32 accuracy, or one TF32 mma where allowed): a 3xTF32 matmul 4096³
        at 61 TFLOP/s was flagged SUSPECT against the 53 TFLOP/s FMA peak."""
        if dtype in HALF_DTYPES:
            return self.half_peak_flops
        if self.half_peak_flops and self.peak_flops:
            return max(self.peak_flops, self.half_peak_flops / 2)
        return self.peak_flops

    def time(self, fn, samples=None):
        """pytorch_baseline.py's method plus a device-wide sync and host clock per run; each run's
        event time is also appended to `samples` (a list) when one is given, in order."""
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        ev, host = [], []
        for i in range(self.runs):
            self.flush.fill_(i)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            fn()
            stop.record()
            torch.cuda.synchronize()  # device-wide: work on other streams finishes before t1
            t1 = time.perf_counter()
            ev.append(start.elapsed_time(stop))
            host.append((t1 - t0) * 1e3)
        stats = timing_stats(ev)
        stats["host_median_ms"] = statistics.median(host)
        if samples is not None:
            samples.extend(ev)
        return stats

    # -- the checks -----------------------------------------------------------------------------
    def check(self, problem, kernel):
        """Runs the trials; returns (reason, detail, max errors): our kernel's max_abs_error /
        max_rel_error against the float64 reference, the slack, and eager_max_abs_error /
        eager_max_rel_error, PyTorch's own result in the problem's dtype (strict precision: TF32
        off, no reduced-precision reductions, the eager_no_tf32 baseline's settings) measured the
        same way on the same trials."""
        torch = self.torch
        fn = self.expression(problem)
        dtype = problem.get("dtype", "float32")
        atol, rtol = tolerance(dtype)
        # The u of float32 arithmetic for half problems computed in float32 and rounded once; the
        # half type's own where a fused chain stores its intermediate results in it (as the
        # tuner's rule: RuleFor in measure/checker.cc). Where PyTorch's own half chain rounds
        # between operators beyond that, its excess enters the slack of the problems whose M is
        # not modelled.
        u = unit_roundoff(dtype, self.precision, rounded_intermediates(problem))
        poison = poison_bits(dtype)
        args = kernel.doc["arguments"]
        keep = []  # the previous trial's buffers stay alive: the next ones get new addresses
        worst = {"max_abs_error": 0.0, "max_rel_error": 0.0, "slack": 0.0,
                 "eager_max_abs_error": 0.0, "eager_max_rel_error": 0.0}
        value_failures = []
        for trial in range(self.trials):
            dist = DISTRIBUTIONS[trial % len(DISTRIBUTIONS)]
            xs = self.fresh_inputs(problem, dist)
            with torch.no_grad():
                try:
                    ref64 = fn(*[x.double() for x in xs])
                    self.set_strict()
                    base = fn(*xs).double()  # PyTorch in the problem's dtype, most precise
                    # TF32 mode: PyTorch's own TF32 path on the same inputs, whose excess is the
                    # slack where M is not modelled (the mode's rule: as precise as PyTorch with
                    # allow_tf32).
                    base_tf32 = None
                    if self.precision == "tf32" and dtype == "float32":
                        self.set_tf32(True)
                        base_tf32 = fn(*xs).double()
                finally:
                    self.set_strict()
            if not torch.isfinite(ref64).all():
                return ("reference_error", f"trial {trial} ({dist}): the float64 reference has "
                        f"{int((~torch.isfinite(ref64)).sum())} non-finite elements", worst)
            # float16 / bfloat16: the float64 reference rounded once to the dtype
            # (reference_in_dtype); past the dtype's range it is +-inf, which must be matched.
            ref = ref64 if dtype not in HALF_DTYPES else ref64.to(xs[0].dtype).double()
            finite_ref = torch.isfinite(ref)
            raise_errors(worst, max_errors(torch, abs_errors(torch, base, ref), ref, atol),
                         "eager_")
            # The precision rule's cancellation allowance c·u·M (magnitude_method).
            method = magnitude_method(problem)
            if method == "abs_inputs":
                with torch.no_grad():
                    mag = fn(*[x.double().abs() for x in xs]).abs()
            else:
                mag = ref64.abs()
            allowance = CANCELLATION_FACTOR * u * torch.where(torch.isfinite(mag), mag, 0.0)
            both = finite_ref & torch.isfinite(base)
            excess = torch.where(both, (base - ref).abs() - (atol + rtol * ref.abs() + allowance),
                                 0.0).max().item()
            if base_tf32 is not None:
                both_tf32 = finite_ref & torch.isfinite(base_tf32)
                excess_tf32 = torch.where(
                    both_tf32,
                    (base_tf32 - ref).abs() - (atol + rtol * ref.abs() + allowance),
                    0.0).max().item()
                if math.isfinite(excess_tf32):
                    excess = max(excess, excess_tf32) if math.isfinite(excess) else excess_tf32
            slack = 0.0
            if method is None:  # M not modelled: PyTorch's own excess (TF32's in TF32 mode)
                slack = SLACK_FACTOR * max(0.0, excess if math.isfinite(excess) else 0.0)
            worst["slack"] = max(worst["slack"], slack)
            saved = [x.clone() for x in xs]
            try:  # new buffers, and tensor maps encoded over them
                bufs, out_index, scratch = self.launch_buffers(args, xs)
            except CudaError as e:
                return "launch_error", f"trial {trial}: {e}", worst
            out = bufs[out_index]
            if list(out.shape) != list(ref.shape):
                return ("bad_launch", f"output shape {list(out.shape)} differs from the "
                        f"reference's {list(ref.shape)}", worst)
            results = []
            for rep in range(2):
                self.bits(out).fill_(poison)
                for s in scratch:  # a different pattern before each of the two launches
                    if s.element_size() != 4:
                        s.view(torch.uint8).fill_(0xA5 if rep == 0 else 0x5A)
                    elif rep == 0:
                        s.view(torch.int32).fill_(POISON_BITS)
                    elif s.dtype.is_floating_point:
                        s.normal_(generator=self.gen)
                    else:
                        s.view(torch.int32).fill_(0x5A5A5A5A)
                self.scribble()
                torch.cuda.synchronize()
                try:
                    kernel.run(bufs, self.stream())
                    self.drv.synchronize()
                    torch.cuda.synchronize()
                except CudaError as e:
                    return "launch_error", f"trial {trial}: {e}", worst
                if rep == 0:
                    changed = sum(int((self.bits(x) != self.bits(s)).sum())
                                  for x, s in zip(xs, saved))
                    if changed:
                        return ("input_modified", f"trial {trial} ({dist}): {changed} input "
                                "elements changed", worst)
                    left = int((self.bits(out) == poison).sum())
                    if left:
                        return ("incomplete_output", f"trial {trial} ({dist}): {left} of "
                                f"{out.numel()} output elements never written", worst)
                results.append(out.clone())
            differ = int((self.bits(results[0]) != self.bits(results[1])).sum())
            if differ:
                return ("nondeterministic", f"trial {trial} ({dist}): {differ} elements differ "
                        "between two launches on the same inputs", worst)
            got = results[0].double()
            # An infinite element passes as the output type's overflow where a value within the
            # allowed error of the float64 reference rounds to it (precision_rule_ok).
            allowed64 = atol + rtol * ref64.abs() + allowance + slack
            overflow_ok = (torch.isinf(got) & (torch.signbit(got) == torch.signbit(ref64)) &
                           (ref64.abs() + allowed64 >= overflow_threshold(dtype)))
            nonfinite = int(((~torch.isfinite(got)) & finite_ref & ~overflow_ok).sum())
            if nonfinite:
                return ("nan_output", f"trial {trial} ({dist}): {nonfinite} NaN/Inf elements "
                        "where the reference is finite", worst)
            err = torch.where(~overflow_ok, abs_errors(torch, got, ref), 0.0)
            raise_errors(worst, max_errors(torch, err, ref, atol))
            # Where the rounded reference is +-inf (a half dtype's overflow), that value passes,
            # and so does a finite result within the allowed error of the float64 value: the rule
            # is anchored on ref64 (precision_rule_ok), which may lie just past the threshold
            # (65530 rounds to +inf in float16; a float32 sum of 65510 stores 65504).
            near64 = torch.isfinite(got) & ((got - ref64).abs() <= allowed64)
            inf_missed = (~finite_ref) & (got != ref) & ~near64
            bad32 = (err > atol + rtol * ref.abs() + allowance + slack) | inf_missed
            if bad32.any():
                # A value failure: the remaining trials still run, so that a kernel right only to
                # within 1e-2 on one distribution and far off on another is wrong_answer.
                bad16 = int(((err > 1e-2 + 1e-2 * ref.abs() + allowance + slack) |
                             inf_missed).sum())
                i = int(bad32.flatten().nonzero()[0])
                detail = (f"trial {trial} ({dist}): {int(bad32.sum())} of {got.numel()} elements "
                          f"outside tolerance; first at flat index {i}: got "
                          f"{got.flatten()[i].item():.7g}, expected {ref.flatten()[i].item():.7g}"
                          f" (slack {slack:.3g})")
                value_failures.append(("imprecise" if bad16 == 0 else "wrong_answer", detail))
                # Diagnosis: SCORE_DUMP_MISMATCHES=N logs the first N failing elements with the
                # float64 value, its rounding to the dtype and PyTorch's own result there.
                dump = int(os.environ.get("SCORE_DUMP_MISMATCHES", "0") or 0)
                for k in (bad32.flatten().nonzero()[:dump] if dump > 0 else []):
                    j = int(k)
                    self.log(f"  mismatch at {j}: ours {got.flatten()[j].item():.9g}, float64 "
                             f"{ref64.flatten()[j].item():.9g}, rounded {ref.flatten()[j].item()}"
                             f", eager {base.flatten()[j].item():.9g}")
            keep = [xs, bufs]
            del saved, results
        del keep
        reason = final_reason([f[0] for f in value_failures])
        detail = next((d for r, d in value_failures if r == reason), "")
        return reason, detail, worst

    def score(self, problem, launch_doc, ptx_text, kernel_only=False):
        """Checks and times one problem; returns its result row."""
        torch = self.torch
        r = {"name": problem["name"], "small": is_small(problem), "correct": False,
             "dtype": problem.get("dtype", "float32"), "baselines": {}, "ours": {}}
        fn = self.expression(problem)
        xs = self.fresh_inputs(problem, "uniform")  # timing inputs: never zeros
        with torch.no_grad():
            out_shape = list(fn(*xs).shape)
        flops = launch_doc.get("flops") if launch_doc else None
        flops = flops or problem_flops(problem, out_shape)
        nbytes = problem_bytes(problem, out_shape, xs[0].element_size())
        r["flops"], r["bytes"] = flops, nbytes
        kernel = None
        if launch_doc is None:
            r["reason"], r["detail"] = "missing_artifact", ""
        else:
            errs = validate_launch(problem, launch_doc, out_shape)
            if errs:
                r["reason"], r["detail"] = "bad_launch", "; ".join(errs)
            else:
                try:
                    kernel = self.kernel_class(self.drv, launch_doc, ptx_text)
                except CudaError as e:
                    r["reason"], r["detail"] = "bad_launch", str(e)
        if kernel is not None:
            reason, detail, errors = self.check(problem, kernel)
            r.update(errors)
            if reason in ("ok", "imprecise", "wrong_answer"):  # every trial compared values
                r.update(eager_comparison(errors))
            r["reason"], r["detail"] = reason, detail
            if reason == "ok":
                bufs = self.launch_buffers(launch_doc["arguments"], xs)[0]
                t = self.time(kernel.bind(bufs, self.stream()))
                r["ours"] = t
                if other_stream_suspect(t["median_ms"],
                                        t["host_median_ms"] - self.host_overhead_ms):
                    r["reason"] = "other_stream"
                    r["detail"] = (f"{t['median_ms']:.4f} ms on the timed stream but "
                                   f"{t['host_median_ms']:.4f} ms until the device was idle")
                else:
                    r["correct"] = True
                    ms = t["median_ms"]
                    r["tflops"] = flops / (ms * 1e9)
                    r["tbps"] = nbytes / (ms * 1e9)
                    peak = self.peak_for(r["dtype"])
                    if peak and self.bandwidth:
                        out_bytes = float(_prod(out_shape) * xs[0].element_size())
                        bandwidth = bandwidth_limit(nbytes - out_bytes, out_bytes, self.bandwidth,
                                                    self.read_bandwidth)
                        r["bandwidth_limit"] = bandwidth
                        sol = speed_of_light_ms(flops, nbytes, peak, bandwidth)
                        r["speed_of_light_ms"] = sol
                        r["limit_fraction"] = sol / ms
                        r["suspect"] = ms < sol
            kernel.close()
        if not kernel_only:
            self.time_baselines(problem, fn, xs, r)
        return r

    def time_baselines(self, problem, fn, xs, r):
        """Times the baselines on the problem's dtype: eager with PyTorch's defaults (float32:
        cuDNN TF32 on, matmul TF32 off; float16 / bfloat16: float32 accumulation, reduced-precision
        split-K reductions allowed), eager_no_tf32 with set_strict(), and torch.compile with the
        defaults. Each eager row says which precision it ran ("precision")."""
        torch = self.torch
        dtype = problem.get("dtype", "float32")
        with torch.no_grad():
            for b in self.baselines:
                try:
                    if b == "eager":
                        self.set_defaults()
                        r["baselines"][b] = self.time(lambda: fn(*xs))
                        r["baselines"][b]["precision"] = eager_precision(
                            dtype, False, [str(x) for x in self.default_tf32],
                            self.reduced_precision_text())
                    elif b == "eager_no_tf32":
                        self.set_strict()
                        r["baselines"][b] = self.time(lambda: fn(*xs))
                        r["baselines"][b]["precision"] = eager_precision(dtype, True)
                    elif b == "compile":
                        self.set_defaults()
                        cfn = torch.compile(fn)
                        t0 = time.perf_counter()
                        cfn(*xs)
                        torch.cuda.synchronize()
                        compile_s = time.perf_counter() - t0
                        r["baselines"][b] = self.time(lambda: cfn(*xs))
                        r["baselines"][b]["compile_s"] = compile_s
                except Exception as e:  # a baseline that does not work is reported, not fatal
                    r["baselines"][b] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                finally:
                    self.set_strict()

    def reduced_precision_text(self):
        """PyTorch's default REDUCED_PRECISION_FLAGS as text ("fp16 True, bf16 True"), or None."""
        parts = [f"{k.split('_')[1]} {v}" for k, v in zip(REDUCED_PRECISION_FLAGS,
                                                         self.default_reduced_precision)
                 if v is not None]
        return ", ".join(parts) or None


# ------------------------------------------------------------------------------------------------
# Driver code.

def find_artifact(problem, art_dir):
    """(launch JSON, PTX text) for the problem from an artifact directory, or (None, None)."""
    if not art_dir or not os.path.isdir(art_dir):
        return None, None
    candidates = [os.path.join(art_dir, problem["name"] + ".json")]
    candidates += sorted(os.path.join(art_dir, f) for f in os.listdir(art_dir)
                         if f.endswith(".json"))
    for path in candidates:
        if not os.path.isfile(path):
            continue
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(doc, dict) or not workload_matches(problem, doc.get("workload")):
            continue
        ptx_name = (doc.get("files") or {}).get("ptx")
        if not ptx_name:
            continue
        with open(os.path.join(os.path.dirname(path), ptx_name)) as f:
            return doc, f.read()
    return None, None


def device_meta(h):
    import torch
    return {"date": datetime.date.today().isoformat(), "device": h.props.name,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "sm_count": h.sms, "l2_bytes": getattr(h.props, "L2_cache_size", None),
            "bandwidth_tbps": h.bandwidth / 1e12 if h.bandwidth else None,
            "read_bandwidth_tbps": h.read_bandwidth / 1e12 if h.read_bandwidth else None,
            "peak_tflops": h.peak_flops / 1e12 if h.peak_flops else None,
            "half_peak_tflops": h.half_peak_flops / 1e12 if h.half_peak_flops else None,
            "trials": h.trials, "runs": h.runs, "distributions": list(DISTRIBUTIONS),
            "normal": [NORMAL_MEAN, NORMAL_STD],
            "normal_by_dtype": {k: list(v) for k, v in NORMAL_BY_DTYPE.items()},
            "poison_bits": {k: hex(v) for k, v in POISON_BITS_BY_DTYPE.items()},
            "slack_factor": SLACK_FACTOR,
            "precision": getattr(h, "precision", "ieee"),
            "cancellation_factor": CANCELLATION_FACTOR, "unit_roundoff": dict(UNIT_ROUNDOFF),
            "tf32_defaults": [str(x) for x in h.default_tf32],
            "reduced_precision_defaults": h.reduced_precision_text(),
            "host_overhead_ms": h.host_overhead_ms}


def write_plot(path, suites):
    if not suites:  # nothing to draw (matplotlib refuses a figure of 0 rows)
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(suites), 1, figsize=(10, 4 * len(suites)), squeeze=False)
    for ax, s in zip(axes[:, 0], suites):
        pts = []
        for r in s["results"]:
            e = (r["baselines"].get("eager") or {}).get("median_ms")
            o = r.get("ours", {}).get("median_ms")
            pts.append((e / o if (r["correct"] and e and o) else 0.0, r["name"]))
        pts.sort()
        ax.bar(range(len(pts)), [p for p, _ in pts])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(range(len(pts)))
        ax.set_xticklabels([n for _, n in pts], rotation=90, fontsize=6)
        ax.set_ylabel("speedup vs eager")
        ax.set_title(s["suite"])
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def run_suites(a):
    loaded = [(path, load_suite(path)) for path in a.suite]  # a bad file fails before the GPU work
    h = Harness(a.trials, a.runs, baselines=tuple(a.baselines.split(",")),
                precision=a.precision)
    h.measure_limits()
    read_text = f"{h.read_bandwidth / 1e12:.2f}" if h.read_bandwidth else "?"
    print(f"limits: copy {h.bandwidth / 1e12:.2f} TB/s, read {read_text} TB/s, fp32 FMA "
          f"{h.peak_flops / 1e12:.1f} "
          f"TFLOP/s, fp16/bf16 tensor-core bound {h.half_peak_flops / 1e12:.0f} TFLOP/s; eager "
          "fp16/bf16 accumulates in fp32 (reduced-precision split-K reductions: "
          f"{h.reduced_precision_text() or 'flags not found'})", flush=True)
    only = set(a.problems.split(",")) if a.problems else None
    os.makedirs(os.path.dirname(os.path.abspath(a.out)) or ".", exist_ok=True)
    suites = []
    for path, suite in loaded:
        entry = {"suite": suite["suite"], "source": path, "results": []}
        suites.append(entry)
        for p in suite["problems"]:
            if only and p["name"] not in only:
                continue
            doc, ptx = find_artifact(p, a.artifacts)
            try:
                r = h.score(p, doc, ptx)
            except Exception as e:  # one problem must not lose the others' results
                r = {"name": p["name"], "small": is_small(p), "correct": False, "ours": {},
                     "baselines": {}, "reason": "harness_error",
                     "detail": f"{type(e).__name__}: {str(e)[:300]}"}
            print(render_row(r), flush=True)
            entry["results"].append(r)
            entry["summary"] = summarize(entry["results"], h.baselines)
            h.torch.cuda.empty_cache()
            # Written after every problem: a run cut short by a time limit keeps what it scored.
            with open(a.out + ".json", "w") as f:
                json.dump({"meta": device_meta(h), "suites": suites}, f, indent=1)
    suites = [s for s in suites if s["results"]]
    meta = device_meta(h)
    with open(a.out + ".json", "w") as f:
        json.dump({"meta": meta, "suites": suites}, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(render_markdown(meta, suites))
    plotted = write_plot(a.out + ".png", suites)
    print(f"wrote {a.out}.md, {a.out}.json{', ' + a.out + '.png' if plotted else ' (no matplotlib: no plot)'}")
    return 0


def _warm_compile(job):
    """Worker of warm_compile: torch.compile of each named problem once, in its own process, so
    that inductor's on-disk caches (FX graph, AOT autograd, Triton kernels) are warm when the
    timing process compiles the same function. Returns (compiled names, failures)."""
    paths, names = job
    import torch
    done, failed = [], []
    for path in paths:
        for problem in load_suite(path)["problems"]:
            if problem["name"] not in names:
                continue
            try:
                fn = make_function(problem, {"torch": torch, "F": torch.nn.functional})
                dtype = getattr(torch, problem.get("dtype", "float32"))
                xs = [torch.rand(shape, device="cuda").to(dtype) for shape in problem["shapes"]]
                with torch.no_grad():
                    torch.compile(fn)(*xs)
                torch.cuda.synchronize()
                done.append(problem["name"])
            except Exception as e:  # the timing process reports the baseline's error
                failed.append(f"{problem['name']}: {type(e).__name__}")
            torch._dynamo.reset()
    return done, failed


def warm_compile(suite_paths, only, workers):
    """Compiles the problems' torch.compile baselines in `workers` parallel processes (the
    compile baseline's compile time is excluded from its timing anyway; compiled one after
    another, 50 problems took most of a 10-minute device call). Same PyTorch defaults (TF32) as
    the timing process's compile baseline, so the cache keys match."""
    import multiprocessing
    names = [p["name"] for path in suite_paths for p in load_suite(path)["problems"]
             if not only or p["name"] in only]
    chunks = [set(names[i::workers]) for i in range(workers) if names[i::workers]]
    if not chunks:
        return
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(chunks)) as pool:
        results = pool.map(_warm_compile, [(list(suite_paths), c) for c in chunks])
    done = sum(len(d) for d, _ in results)
    failed = [f for _, fs in results for f in fs]
    print(f"warm compile: {done} of {len(names)} problems in {time.perf_counter() - t0:.0f} s "
          f"with {len(chunks)} processes" + (f"; failed: {', '.join(failed)}" if failed else ""),
          flush=True)


def run_kernel(a):
    problem = None
    for path in a.suite:
        problem = next((p for p in load_suite(path)["problems"] if p["name"] == a.problem), None)
        if problem:
            break
    if problem is None:
        print(f"no problem '{a.problem}' in {', '.join(a.suite)}", file=sys.stderr)
        return 2
    doc = read_json(a.launch, "launch JSON")
    ptx = read_text(a.kernel, "kernel PTX")
    h = Harness(a.trials, a.runs, baselines=tuple(a.baselines.split(",")),
                precision=a.precision)
    h.measure_limits()
    r = h.score(problem, doc, ptx)
    print(render_row(r))
    if a.out:
        with open(a.out + ".json", "w") as f:
            json.dump({"meta": device_meta(h), "result": r}, f, indent=1)
    return 0 if r["correct"] else 1


def run_self_test(a):
    cheats = os.path.join(HERE, "cheats")
    with open(os.path.join(cheats, "manifest.json")) as f:
        manifest = json.load(f)
    suite = load_suite(os.path.join(cheats, manifest["suite"]))
    problems = {p["name"]: p for p in suite["problems"]}
    h = Harness(a.trials, a.runs, baselines=())
    outcomes, rows = {}, []
    for k in manifest["kernels"]:
        with open(os.path.join(cheats, k["kernel"] + ".json")) as f:
            doc = json.load(f)
        ptx = device_ptx(os.path.join(cheats, k["source"]),
                         os.path.join(cheats, doc["files"]["ptx"]))
        r = h.score(problems[k["problem"]], doc, ptx, kernel_only=True)
        outcomes[k["kernel"]] = "ok" if r["correct"] else r["reason"]
        r["kernel"] = k["kernel"]
        rows.append(r)
        print(f"{k['kernel']:20s} {outcomes[k['kernel']]:18s} {r.get('detail', '')}", flush=True)
    passed, lines = check_self_test(outcomes, manifest)
    print("\n".join(lines))
    n_cheat = sum(1 for k in manifest["kernels"] if not k["honest"])
    print(f"self-test: {'PASSED' if passed else 'FAILED'} ({n_cheat} cheats, "
          f"{len(manifest['kernels']) - n_cheat} honest kernels)")
    if a.out:
        with open(a.out + ".json", "w") as f:
            json.dump({"passed": passed, "lines": lines, "results": rows}, f, indent=1)
    return 0 if passed else 1


def check_out_path(out, inputs=()):
    """--out's directory must exist, and its .json must not be one of the files being read."""
    d = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(d):
        raise InputError(f"--out '{out}': directory '{d}' does not exist")
    target = os.path.realpath(out + ".json")
    for path in inputs:
        if os.path.realpath(path) == target:
            raise InputError(f"--out '{out}' would overwrite the input '{path}'; give another "
                             "--out")


def run_merge(a):
    check_out_path(a.out, a.merge)
    docs = []
    for path in a.merge:
        doc = read_json(path, "results file")
        check_results_doc(doc, path)
        docs.append(doc)
    merged = merge_results(docs)
    with open(a.out + ".json", "w") as f:
        json.dump(merged, f, indent=1)
    with open(a.out + ".md", "w") as f:
        f.write(render_markdown(merged["meta"], merged["suites"]))
    plotted = write_plot(a.out + ".png", merged["suites"])
    print(f"merged {len(docs)} runs into {a.out}.md, {a.out}.json"
          f"{', ' + a.out + '.png' if plotted else ''}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", action="append", help="suite file(s) (default: level1 and level2)")
    p.add_argument("--artifacts", help="directory of kernel artifacts (launch JSON + PTX)")
    p.add_argument("--out", help="output path without extension (results .md/.json/.png)")
    p.add_argument("--problems", help="comma-separated problem names to score (default: all)")
    p.add_argument("--kernel", help="PTX of one external kernel (with --launch and --problem)")
    p.add_argument("--launch", help="its launch JSON")
    p.add_argument("--problem", help="the problem it claims to solve")
    p.add_argument("--self-test", action="store_true", help="run the planted-cheat suite")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="merge results JSONs of split runs into --out (no GPU needed)")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS)
    p.add_argument("--precision", choices=PRECISIONS, default="ieee",
                   help="float32 problems: ieee (float32's u in the precision rule) or tf32 "
                        "(TF32's u, for kernels tuned with --precision tf32)")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    p.add_argument("--baselines", default=",".join(BASELINES))
    p.add_argument("--warm-compile", type=int, default=0, metavar="N",
                   help="before scoring, torch.compile every problem in N parallel processes to "
                        "warm inductor's caches (compile time is excluded from timing anyway)")
    p.add_argument("--warm-only", action="store_true",
                   help="only warm the compile caches (with --warm-compile), score nothing")
    a = p.parse_args(argv)
    try:
        return _main(p, a)
    except (SuiteError, InputError) as e:
        print(f"score.py: error: {e}", file=sys.stderr)
        return 2


def _main(p, a):
    if a.trials < 5:
        p.error("--trials must be >= 5")
    if a.runs < 100:
        p.error("--runs must be >= 100")
    if not a.suite:
        a.suite = [os.path.join(SUITES_DIR, "level1.json"),
                   os.path.join(SUITES_DIR, "level2.json")]
    if a.warm_compile < 0:
        p.error("--warm-compile must be >= 0")
    if a.warm_only and a.warm_compile == 0:
        p.error("--warm-only needs --warm-compile N")
    if a.warm_compile and (a.merge or a.self_test or a.kernel or a.launch or a.problem):
        p.error("--warm-compile / --warm-only score suites: not with --merge, --self-test or "
                "--kernel")
    if a.warm_compile and "compile" not in a.baselines.split(","):
        p.error("--warm-compile warms the compile baseline, which --baselines leaves out")
    if a.merge:
        if not a.out:
            p.error("--merge needs --out")
        return run_merge(a)
    if a.self_test:
        return run_self_test(a)
    if a.kernel or a.launch or a.problem:
        if not (a.kernel and a.launch and a.problem):
            p.error("--kernel, --launch and --problem go together")
        return run_kernel(a)
    if a.warm_compile:
        only = set(a.problems.split(",")) if a.problems else None
        names = {q["name"] for path in a.suite for q in load_suite(path)["problems"]}
        if only and only - names:  # a bad file or name fails here, not in the workers
            p.error(f"--problems: no problem {', '.join(sorted(only - names))} in "
                    f"{', '.join(a.suite)}")
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            p.error("--warm-compile needs PyTorch, which this Python does not have")
        warm_compile(a.suite, only, a.warm_compile)
    if a.warm_only:
        return 0
    if not a.out:
        a.out = os.path.join(RESULTS_DIR, f"h200-{datetime.date.today().isoformat()}")
    return run_suites(a)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Tests of bench/harness/score.py's pure logic (no torch, no GPU): suite reading, the checker's
verdicts, fast_p / geomean / speed of light against hand-computed values, artifact matching, the
committed planted-cheat data, locating or compiling the harness's PTX, report rendering, and
score.Harness's whole check-and-time flow on the CPU through a list-based stand-in
for torch with planted cheats written in Python (FakeTorchTest: the CPU half of the cheat suite).

  python3 bench/harness/test_score_logic.py    (or: python3 -m unittest discover -s bench/harness
                                                -p 'test_score_logic.py')
"""
import dis
import json
import math
import os
import struct
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import score  # noqa: E402

CHEATS = os.path.join(HERE, "cheats")
SUITES = os.path.join(os.path.dirname(HERE), "suites")

# correct, ours_ms, baseline_ms: speedups a 2.0, b 0.5, c 1.0, d 4.0, e incorrect (10x), f 1.6.
TABLE = [(True, 1.0, 2.0), (True, 2.0, 1.0), (True, 3.0, 3.0), (True, 0.5, 2.0),
         (False, 0.1, 1.0), (True, 2.5, 4.0)]


def f32(x):
    """x rounded to float32 (what a float32 kernel can return)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# Independent float16 / bfloat16 conversions (not score.py's): float16 by CPython's own binary16
# packer (struct "e", ties to even; it refuses values that round past 65504, which IEEE rounds to
# inf), bfloat16 by the usual bit trick on float32 bits.

def half_bits(x):
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def half_value(bits):
    return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]


def half(x):
    """x rounded to float16, as a Python float."""
    return half_value(half_bits(x))


def bf16_bits_from_f32_bits(b):
    """Round-to-nearest-even of float32 bits to their upper 16 bits; NaN to a quiet NaN."""
    if (b & 0x7F800000) == 0x7F800000 and (b & 0x007FFFFF):
        return ((b >> 16) & 0x8000) | 0x7FC0
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bf16(x):
    """x (a float32 value: the rounding to float32 first is exact) rounded to bfloat16."""
    b = struct.unpack("<I", struct.pack("<f", x))[0]
    return struct.unpack("<f", struct.pack("<I", bf16_bits_from_f32_bits(b) << 16))[0]


PRECISION_CASES = os.path.join(HERE, "testdata", "precision_cases.json")


def case_number(v):
    """A number of the shared table ("nan" / "inf" / "-inf" are strings there)."""
    return float(v) if isinstance(v, str) else v


class PrecisionRuleTest(unittest.TestCase):
    """The precision rule on the table of cases that the tuner's C++ test
    (tests/measure/precision_rule_test.cc) evaluates too: the same verdict on every case."""

    def setUp(self):
        with open(PRECISION_CASES) as f:
            self.table = json.load(f)

    def test_constants_are_the_tables(self):
        self.assertEqual(score.CANCELLATION_FACTOR, self.table["c"])
        for name, u in self.table["unit_roundoff"].items():
            self.assertEqual(score.UNIT_ROUNDOFF[name], u, name)
        self.assertEqual(score.unit_roundoff("float32"), 2.0 ** -24)
        self.assertEqual(score.unit_roundoff("float32", "tf32"), 2.0 ** -11)
        # Half problems compute in float32 (TF32 concerns float32 only); the half type's u only
        # where intermediates were rounded to it.
        self.assertEqual(score.unit_roundoff("bfloat16"), 2.0 ** -24)
        self.assertEqual(score.unit_roundoff("bfloat16", "tf32"), 2.0 ** -24)
        self.assertEqual(score.unit_roundoff("bfloat16", rounded_intermediates=True), 2.0 ** -8)
        self.assertEqual(score.unit_roundoff("float16", rounded_intermediates=True), 2.0 ** -11)
        for dtype, (atol, rtol) in self.table["tolerance"].items():
            self.assertEqual(score.tolerance(dtype), (atol, rtol), dtype)
        with self.assertRaises(ValueError):
            score.unit_roundoff("float32", "tf32x3")

    def test_shared_cases(self):
        self.assertGreaterEqual(len(self.table["cases"]), 10)
        for c in self.table["cases"]:
            with self.subTest(case=c["name"]):
                atol, rtol = score.tolerance(c["dtype"])
                u = score.unit_roundoff(c["dtype"], c["precision"],
                                        c.get("rounded_intermediates", False))
                got, ref, m = (case_number(c[k]) for k in ("got", "ref64", "magnitude"))
                self.assertEqual(score.precision_rule_ok(got, ref, m, atol, rtol, u, c["dtype"]),
                                 c["pass"])
                if "plain_1e4" in c and math.isfinite(ref):  # the scorer refuses others first
                    self.assertEqual(score.element_ok(got, ref, 1e-4, 1e-4), c["plain_1e4"])
                if c["dtype"] == "float32" and math.isfinite(ref):
                    # check_lists applies the same rule to an output of one element.
                    reason, _ = score.check_lists([got], [ref], magnitude=[m],
                                                  precision=c["precision"])
                    self.assertEqual(reason == "ok", c["pass"])

    def test_allowance_by_hand(self):
        self.assertAlmostEqual(score.allowed_error(-2.0, 1024, 1e-4, 1e-4, 2.0 ** -24),
                               1e-4 + 2e-4 + 16 * 2.0 ** -24 * 1024, places=15)
        self.assertEqual(score.allowed_error(1.0, math.inf, 1e-4, 1e-4, 2.0 ** -24), 2e-4)

    def test_magnitude_methods(self):
        self.assertEqual(score.magnitude_method({"op": "matmul"}), "abs_inputs")
        self.assertEqual(score.magnitude_method({"op": "conv2d_nchw"}), "abs_inputs")
        self.assertEqual(score.magnitude_method({"op": "reduce_mean"}), "abs_inputs")
        # relu and max pooling: the tuner's M of a max is its operands' largest, max |x| = f(|x|).
        self.assertEqual(score.magnitude_method({"op": "relu"}), "abs_inputs")
        self.assertEqual(score.magnitude_method({"op": "max_pool2d"}), "abs_inputs")
        self.assertEqual(score.magnitude_method({"op": "transpose"}), "abs_value")
        self.assertIsNone(score.magnitude_method({"op": "softmax"}))
        # Fused chains of modelled ops take the expression on |inputs| (the tuner's propagated M:
        # relu over a cancelling convolution keeps the convolution's M, not |ref|); one
        # unmodelled node leaves the whole chain to the slack.
        conv_bias_relu = {"op": "fused", "nodes": [{"op": "conv2d_nchw"}, {"op": "add"},
                                                   {"op": "relu"}]}
        self.assertEqual(score.magnitude_method(conv_bias_relu), "abs_inputs")
        conv_bn_relu = {"op": "fused", "nodes": [{"op": "conv2d_nchw"}, {"op": "mul"},
                                                 {"op": "add"}, {"op": "relu"}]}
        self.assertEqual(score.magnitude_method(conv_bn_relu), "abs_inputs")
        dense_gelu = {"op": "fused", "nodes": [{"op": "dense"}, {"op": "gelu"}]}
        self.assertIsNone(score.magnitude_method(dense_gelu))
        # A scale by a non-negative constant keeps the chain multilinear on |inputs| (the tuner's
        # M(c·x) = |c|·M(x)); a negative one would flip the expression's sign: not modelled.
        scaled = {"op": "fused", "nodes": [{"op": "matmul"}, {"op": "scale",
                                                             "attrs": {"scale": "0.5"}},
                                           {"op": "add"}]}
        self.assertEqual(score.magnitude_method(scaled), "abs_inputs")
        negated = {"op": "fused", "nodes": [{"op": "matmul"},
                                            {"op": "scale", "attrs": {"scale": "-0.5"}}]}
        self.assertIsNone(score.magnitude_method(negated))
        self.assertIsNone(score.magnitude_method(
            {"op": "fused", "nodes": [{"op": "matmul"}, {"op": "scale", "attrs": {}}]}))
        for attrs in ({"scale": None}, {"scale": [1]}, ["scale"]):  # malformed: not modelled
            self.assertIsNone(score.magnitude_method(
                {"op": "fused", "nodes": [{"op": "matmul"}, {"op": "scale", "attrs": attrs}]}))

    def test_half_fused_chains_round_their_intermediates(self):
        # The tuner's rule takes the half type's u where a non-output stage stores a half type:
        # a fused bfloat16 chain (conv2d * scale + shift + relu rounds after each operator), not
        # a single bfloat16 operator (float32 accumulation, one rounding at the end) nor float32.
        chain = {"op": "fused", "dtype": "bfloat16",
                 "nodes": [{"op": "conv2d_nchw"}, {"op": "mul"}, {"op": "add"}, {"op": "relu"}]}
        self.assertTrue(score.rounded_intermediates(chain))
        self.assertEqual(score.unit_roundoff("bfloat16", "ieee", score.rounded_intermediates(chain)),
                         2.0 ** -8)
        self.assertFalse(score.rounded_intermediates({"op": "conv2d_nchw", "dtype": "bfloat16"}))
        self.assertFalse(score.rounded_intermediates(dict(chain, dtype="float32")))
        # got 5.53125 for a float64 5.4375 whose chain's M is 16: outside float32's u (rtol and
        # c·u·M allow 0.064), inside bfloat16's (16 · 2^-8 · 16 = 1.0 more).
        self.assertFalse(score.precision_rule_ok(5.53125, 5.4375, 16.0, 1e-2, 1e-2, 2.0 ** -24,
                                                 "bfloat16"))
        self.assertTrue(score.precision_rule_ok(5.53125, 5.4375, 16.0, 1e-2, 1e-2, 2.0 ** -8,
                                                "bfloat16"))
        # Every op of the committed suites is classified or knowingly left to the slack.
        unmodelled = {"gelu", "layernorm", "log_softmax", "rmsnorm", "softmax", "softplus",
                      "swish", "fused"}
        for name in sorted(os.listdir(SUITES)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(SUITES, name)) as f:
                for p in json.load(f).get("problems", []):
                    if score.magnitude_method(p) is None:
                        self.assertIn(p["op"], unmodelled, name)

    def test_long_cancelling_sum_passes_where_1e4_fails(self):
        # A dot product of 4096 float32 products whose exact value is 0 (each product appears
        # with both signs): the sequential float32 sum misses 1e-4, the rule accepts it, and the
        # sum with one term dropped is rejected. Values: exact binary fractions from a fixed LCG.
        state = 12345
        terms = []
        for _ in range(2048):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            a = ((state >> 40) / float(1 << 23)) - 1.0
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            b = ((state >> 40) / float(1 << 23)) - 1.0
            p = f32(a * b)
            terms += [p, -p]
        order = list(range(len(terms)))
        for i in range(len(order) - 1, 0, -1):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            j = (state >> 33) % (i + 1)
            order[i], order[j] = order[j], order[i]
        acc = 0.0
        for i in order:
            acc = f32(acc + terms[i])
        m = math.fsum(abs(t) for t in terms)
        u = score.unit_roundoff("float32")
        self.assertTrue(score.precision_rule_ok(acc, 0.0, m, 1e-4, 1e-4, u))
        big = max(terms)
        self.assertFalse(score.precision_rule_ok(acc - big, 0.0, m, 1e-4, 1e-4, u))


class ImportTest(unittest.TestCase):
    def test_imports_without_torch(self):
        self.assertNotIn("torch", sys.modules)


class FastPTest(unittest.TestCase):
    def test_fast_p_counts_correct_and_strictly_faster_over_all(self):
        self.assertAlmostEqual(score.fast_p(TABLE, 0.0), 5 / 6)
        self.assertAlmostEqual(score.fast_p(TABLE, 1.0), 3 / 6)   # c at exactly 1.0 is not > 1
        self.assertAlmostEqual(score.fast_p(TABLE, 1.5), 3 / 6)
        self.assertAlmostEqual(score.fast_p(TABLE, 2.0), 1 / 6)   # a at exactly 2.0 is not > 2
        self.assertAlmostEqual(score.fast_p(TABLE, 5.0), 0.0)     # e's 10x is incorrect

    def test_geomean_over_correct_only(self):
        self.assertAlmostEqual(score.geomean_speedup(TABLE), 6.4 ** 0.2, places=12)
        self.assertAlmostEqual(6.4 ** 0.2, 1.4495, delta=1e-4)
        self.assertIsNone(score.geomean_speedup([(False, 1.0, 1.0)]))

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "no problems"):
            score.fast_p([], 1.0)
        with self.assertRaisesRegex(ValueError, "p must be >= 0"):
            score.fast_p(TABLE, -1)
        with self.assertRaisesRegex(ValueError, "positive and finite"):
            score.fast_p([(True, 0.0, 1.0)], 1.0)

    def test_read_only_problems_take_the_read_bandwidth(self):
        gib = float(1 << 30)
        # A row sum of 1 GiB into 64 KiB: read-only, limited by the (higher) read bandwidth.
        self.assertEqual(score.bandwidth_limit(gib, 65536.0, 4.0e12, 4.6e12), 4.6e12)
        # relu (as much out as in) and a transpose: the copy bandwidth.
        self.assertEqual(score.bandwidth_limit(gib, gib, 4.0e12, 4.6e12), 4.0e12)
        # The boundary share, and a read measurement below the copy never lowers the limit.
        self.assertEqual(score.bandwidth_limit(100.0, 1.0, 4.0e12, 4.6e12), 4.6e12)
        self.assertEqual(score.bandwidth_limit(100.0, 1.01, 4.0e12, 4.6e12), 4.0e12)
        self.assertEqual(score.bandwidth_limit(gib, 4.0, 4.0e12, 3.5e12), 4.0e12)
        # Not measured: the copy bandwidth.
        self.assertEqual(score.bandwidth_limit(gib, 4.0, 4.0e12, None), 4.0e12)
        with self.assertRaises(ValueError):
            score.bandwidth_limit(gib, 4.0, 0.0, 4.6e12)
        # A GEMV at 4.3 TB/s is suspect against the copy limit, not against the read limit.
        nbytes = gib + 65536.0
        ms = nbytes / 4.3e12 * 1e3
        self.assertTrue(score.is_suspect(ms, 0, nbytes, 50e12, 4.0e12))
        self.assertFalse(score.is_suspect(ms, 0, nbytes, 50e12,
                                          score.bandwidth_limit(gib, 65536.0, 4.0e12, 4.6e12)))

    def test_speed_of_light(self):
        flops, nbytes = 2.0 * 4096 ** 3, 3.0 * 4096 * 4096 * 4
        self.assertAlmostEqual(score.speed_of_light_ms(flops, nbytes, 50e12, 4e12), 2.74877906944)
        self.assertAlmostEqual(score.speed_of_light_ms(1e6, 2 ** 31, 50e12, 4e12), 0.536870912)
        self.assertTrue(score.is_suspect(2.0, flops, nbytes, 50e12, 4e12))
        self.assertFalse(score.is_suspect(3.3, flops, nbytes, 50e12, 4e12))
        with self.assertRaises(ValueError):
            score.speed_of_light_ms(1, 1, 0, 1)

    def test_percentile_and_stats(self):
        s = score.timing_stats([4.0, 1.0, 3.0, 2.0])
        self.assertEqual(s["median_ms"], 2.5)
        self.assertEqual(s["mean_ms"], 2.5)
        self.assertAlmostEqual(s["p10_ms"], 1.3)   # 1 + 0.3 · (2 − 1)
        self.assertAlmostEqual(s["p90_ms"], 3.7)

    def test_summarize_groups_and_baselines(self):
        results = [
            {"name": "a", "small": False, "correct": True, "ours": {"median_ms": 1.0},
             "baselines": {"eager": {"median_ms": 2.0}, "eager_no_tf32": {"median_ms": 0.5}}},
            {"name": "b", "small": False, "correct": False, "ours": {},
             "baselines": {"eager": {"median_ms": 2.0}, "eager_no_tf32": {"median_ms": 2.0}}},
            {"name": "s", "small": True, "correct": True, "ours": {"median_ms": 0.01},
             "baselines": {"eager": {"median_ms": 0.005}}},
        ]
        s = score.summarize(results, ("eager", "eager_no_tf32"))
        self.assertEqual(s["main"]["problems"], 2)
        self.assertEqual(s["main"]["correct"], 1)
        self.assertAlmostEqual(s["main"]["eager"]["fast_1"], 0.5)
        self.assertAlmostEqual(s["main"]["eager"]["geomean_speedup"], 2.0)
        self.assertAlmostEqual(s["main"]["eager_no_tf32"]["fast_0"], 0.5)
        self.assertAlmostEqual(s["main"]["eager_no_tf32"]["fast_1"], 0.0)
        self.assertAlmostEqual(s["small"]["eager"]["fast_0"], 1.0)
        self.assertAlmostEqual(s["small"]["eager"]["fast_1"], 0.0)
        # A correct problem without a time of that baseline is not fast against it.
        self.assertEqual(s["small"]["eager_no_tf32"]["timed"], 0)


class VerdictTest(unittest.TestCase):
    def test_tolerances(self):
        self.assertEqual(score.tolerance("float32"), (1e-4, 1e-4))
        self.assertEqual(score.tolerance("float16"), (1e-2, 1e-2))
        self.assertEqual(score.tolerance("bfloat16"), (1e-2, 1e-2))
        with self.assertRaises(ValueError):
            score.tolerance("int8")

    def test_element_ok(self):
        self.assertTrue(score.element_ok(1.0002, 1.0, 1e-4, 1e-4))       # 2e-4 <= 1e-4 + 1e-4
        self.assertFalse(score.element_ok(1.00021, 1.0, 1e-4, 1e-4))
        self.assertTrue(score.element_ok(1.1, 1.0, 1e-4, 1e-4, slack=0.1))
        for bad in (math.nan, math.inf, -math.inf):
            self.assertFalse(score.element_ok(bad, 1.0, 1e9, 1e9))     # NaN/Inf never pass
        self.assertFalse(score.element_ok(math.nan, math.nan, 1, 1))
        self.assertTrue(score.element_ok(math.inf, math.inf, 1, 1))

    def test_slack_is_four_times_pytorchs_excess(self):
        # Baseline errors 0.5 (tolerance 1e-4 + 1e-4·0 → excess 0.4999) and 0 elsewhere.
        self.assertAlmostEqual(score.slack_from_baseline([0.5, 1.0], [0.0, 1.0], 1e-4, 1e-4),
                               4 * (0.5 - 1e-4))
        self.assertEqual(score.slack_from_baseline([1.0], [1.0], 1e-4, 1e-4), 0.0)

    def test_each_reason_of_one_trial(self):
        ref = [1.0, -2.0, 3.0, 0.0]
        exact = [f32(x) for x in ref]
        self.assertEqual(score.check_lists(exact, ref)[0], "ok")
        self.assertEqual(score.check_lists(exact, ref, inputs_before=[[1.0, 2.0]],
                                           inputs_after=[[1.0, 0.0]])[0], "input_modified")
        self.assertEqual(score.check_lists(exact, ref, poison_mask=[0, 0, 1, 0])[0],
                         "incomplete_output")
        self.assertEqual(score.check_lists(exact, ref, got2=[1.0, -2.0, 3.0000002, 0.0])[0],
                         "nondeterministic")
        self.assertEqual(score.check_lists([1.0, math.nan, 3.0, 0.0], ref)[0], "nan_output")
        self.assertEqual(score.check_lists([1.0, math.inf, 3.0, 0.0], ref)[0], "nan_output")
        # 1e-3 relative: outside 1e-4, inside 1e-2.
        _, counts = score.check_lists([1.001, -2.0, 3.0, 0.0], ref)
        self.assertEqual((counts["bad32"], counts["bad16"]), (1, 0))
        self.assertEqual(score.check_lists([1.001, -2.0, 3.0, 0.0], ref)[0], "imprecise")
        self.assertEqual(score.check_lists([1.1, -2.0, 3.0, 0.0], ref)[0], "wrong_answer")
        self.assertEqual(score.check_lists([1.1, -2.0, 3.0, 0.0], ref, slack=0.2)[0], "ok")
        # fp16 problems are judged at 1e-2.
        self.assertEqual(score.check_lists([1.001, -2.0, 3.0, 0.0], ref, dtype="float16")[0],
                         "ok")

    def test_check_order_puts_structural_failures_first(self):
        c = {"input_changed": 1, "poison_left": 1, "disagree": 1, "nonfinite": 1, "bad32": 1,
             "bad16": 1}
        order = ["input_modified", "incomplete_output", "nondeterministic", "nan_output",
                 "wrong_answer"]
        for key, want in zip(["input_changed", "poison_left", "disagree", "nonfinite", "bad32"],
                             order):
            self.assertEqual(score.verdict_from_counts(c), want)
            c[key] = 0

    def test_final_reason_over_trials(self):
        self.assertEqual(score.final_reason(["ok", "ok"]), "ok")
        self.assertEqual(score.final_reason(["imprecise", "ok"]), "imprecise")
        self.assertEqual(score.final_reason(["imprecise", "wrong_answer", "imprecise"]),
                         "wrong_answer")
        self.assertEqual(score.final_reason(["wrong_answer", "nondeterministic"]),
                         "nondeterministic")

    def test_other_stream_rule(self):
        self.assertTrue(score.other_stream_suspect(0.004, 0.52))    # side-stream relu
        self.assertFalse(score.other_stream_suspect(0.50, 0.53))    # honest relu
        self.assertFalse(score.other_stream_suspect(0.005, 0.04))   # a small honest kernel
        self.assertFalse(score.other_stream_suspect(3.0, 6.0))
        self.assertTrue(score.other_stream_suspect(3.0, 6.2))


class SuiteTest(unittest.TestCase):
    def test_committed_suites_parse(self):
        l1 = score.load_suite(os.path.join(SUITES, "level1.json"))
        l2 = score.load_suite(os.path.join(SUITES, "level2.json"))
        self.assertGreaterEqual(sum(1 for p in l1["problems"] if not score.is_small(p)), 24)
        self.assertGreaterEqual(sum(1 for p in l1["problems"] if score.is_small(p)), 3)
        self.assertGreaterEqual(len(l2["problems"]), 10)
        self.assertTrue(all(p["op"] == "fused" for p in l2["problems"]))

    def test_hopper_suite_holds_the_llama3_projections_in_both_half_types(self):
        hop = {p["name"]: p for p in
               score.load_suite(os.path.join(SUITES, "hopper.json"))["problems"]}
        # (M, N, K) of the Llama-3 configs at M = 4096 tokens: 8B hidden 4096, MLP 14336;
        # 70B hidden 8192, MLP 28672.
        want = {"matmul_square_4096": (4096, 4096, 4096),
                "matmul_square_8192": (8192, 8192, 8192),
                "llama3_8b_gate_up": (4096, 14336, 4096), "llama3_8b_down": (4096, 4096, 14336),
                "llama3_70b_qo": (4096, 8192, 8192), "llama3_70b_gate_up": (4096, 28672, 8192),
                "llama3_70b_down": (4096, 8192, 28672)}
        for suffix, dtype in (("_bf16", "bfloat16"), ("_f16", "float16")):
            for name, (m, n, k) in want.items():
                p = hop[name + suffix]
                self.assertEqual((p["op"], p["dtype"], p["shapes"]),
                                 ("matmul", dtype, [[m, k], [k, n]]), p["name"])
                self.assertEqual(score.problem_flops(p, [m, n]), 2.0 * m * n * k)
                self.assertFalse(score.is_small(p))
        att = hop["attention_scores_softmax_32x4096x128_bf16"]
        self.assertEqual(att["shapes"], [[32, 4096, 128], [32, 4096, 128]])
        self.assertEqual(float(att["nodes"][1]["attrs"]["scale"]), 128 ** -0.5)
        self.assertEqual(score.problem_flops(att, [32, 4096, 4096]), 2.0 * 32 * 4096 * 4096 * 128)
        self.assertEqual(len(hop), 2 * len(want) + 1)

    def test_half_suites_are_twins_of_the_float32_ones(self):
        for level, count in (("level1", 15), ("level2", 8)):
            with self.subTest(level=level):
                half = score.load_suite(os.path.join(SUITES, f"{level}_half.json"))
                base = {p["name"]: p for p in
                        score.load_suite(os.path.join(SUITES, f"{level}.json"))["problems"]}
                twins = 0
                for p in half["problems"]:
                    suffix = {"float16": "_f16", "bfloat16": "_bf16"}[p["dtype"]]
                    self.assertTrue(p["name"].endswith(suffix), p["name"])
                    orig = base.get(p["name"][:-len(suffix)])
                    if orig is None:
                        continue
                    twins += 1
                    for key in ("op", "shapes", "attrs", "inputs", "torch", "nodes"):
                        self.assertEqual(p.get(key), orig.get(key), (p["name"], key))
                    self.assertEqual(score.is_small(p), score.is_small(orig))
                self.assertEqual(twins, 2 * count)
                # Every twin in both dtypes; the tuner (tools/suite.h) needs names unique over
                # the suites it is given together.
                names = [p["name"] for p in half["problems"]]
                self.assertFalse(set(names) & set(base))
                f16 = {n[:-4] for n in names if n.endswith("_f16")}
                bf16 = {n[:-5] for n in names if n.endswith("_bf16")}
                self.assertEqual(f16, bf16)
        l1 = {p["name"]: p for p in
              score.load_suite(os.path.join(SUITES, "level1_half.json"))["problems"]}
        for suffix, dtype in (("_f16", "float16"), ("_bf16", "bfloat16")):
            # matmul: A[M, K], B[K, N] (ir/ops/linear.h); M = K = 4096, N = 11008.
            p = l1["matmul_m4096_n11008_k4096" + suffix]
            self.assertEqual((p["op"], p["shapes"], p["dtype"], p["attrs"]),
                             ("matmul", [[4096, 4096], [4096, 11008]], dtype, {}))
            self.assertEqual(score.problem_flops(p, [4096, 11008]), 2.0 * 4096 * 4096 * 11008)
            self.assertEqual(score.problem_bytes(p, [4096, 11008], 2),
                             2.0 * (4096 * 4096 + 4096 * 11008 + 4096 * 11008))
            sq = l1["matmul_square_4096" + suffix]
            self.assertEqual((sq["shapes"], sq["dtype"]), ([[4096, 4096], [4096, 4096]], dtype))
        for twin in ("batch_matmul_qk", "dense_bias_4096", "conv2d_3x3_resnet"):
            self.assertIn(twin + "_bf16", l1)

    def test_expressions_compile_and_use_only_their_inputs(self):
        for name in ("level1.json", "level2.json", "level1_half.json", "level2_half.json",
                     "hopper.json"):
            for p in score.load_suite(os.path.join(SUITES, name))["problems"]:
                with self.subTest(problem=p["name"]):
                    fn = score.make_function(p, {"torch": None, "F": None})
                    self.assertEqual(fn.__code__.co_varnames[:len(p["inputs"])],
                                     tuple(p["inputs"]))
                    # Globals the expression reads: only torch and F.
                    globs = {i.argval for i in dis.get_instructions(fn)
                             if i.opname == "LOAD_GLOBAL"}
                    self.assertLessEqual(globs, {"torch", "F"})
                    # Every input is used.
                    used = {i.argval for i in dis.get_instructions(fn)
                            if i.opname.startswith("LOAD_FAST")}
                    flat = set()
                    for u in used:
                        flat |= set(u) if isinstance(u, tuple) else {u}
                    self.assertEqual(flat, set(p["inputs"]))

    def test_errors_name_file_problem_and_field(self):
        def doc(problems):
            return json.dumps({"version": 1, "suite": "t", "problems": problems})
        good = {"name": "p", "op": "relu", "shapes": [[4]], "inputs": ["X"], "torch": "X"}
        cases = [
            ("{", "f.json: not valid JSON"),
            ("[" * 100000 + "]" * 100000, "f.json: nested too deeply"),
            (json.dumps({"version": 2, "suite": "t", "problems": [good]}),
             "field 'version' must be 1"),
            (doc([]), "field 'problems' must be a non-empty list"),
            (doc([{k: v for k, v in good.items() if k != "torch"}]),
             "f.json: problem 0 'p': field 'problems[0].torch' is missing"),
            (doc([good, good]), "problem 1 'p': name 'p' is used twice"),
            (doc([dict(good, shapes=[[4, 0]])]), "field 'problems[0].shapes[0]' must be a list"),
            (doc([dict(good, inputs=["X", "Y"])]), "names 2 inputs but 'shapes' lists 1"),
            (doc([dict(good, inputs=["torch"])]), "must be an identifier other than torch and F"),
            (doc([dict(good, nodes=[])]), "field 'problems[0].nodes' belongs to exactly"),
            (doc([dict(good, dtype="int8")]), "no tolerance for dtype 'int8'"),
            # Types the scorer relies on, and the C++ reader's rules (tools/suite.h):
            # every one of these used to be accepted here and fail later with a traceback.
            (doc([dict(good, dtype=5)]), "field 'problems[0].dtype' must be a string"),
            (doc([dict(good, tags="small")]), "field 'problems[0].tags' must be a list of strings"),
            (doc([dict(good, tags=[1])]), "field 'problems[0].tags' must be a list of strings"),
            (doc([dict(good, attrs=[1])]), "field 'problems[0].attrs' must be an object"),
            (doc([dict(good, attrs={"axis": 1.5})]), "field 'problems[0].attrs.axis' must be"),
            (doc([dict(good, note=3)]), "field 'problems[0].note' must be a string"),
            (doc([dict(good, bogus=1)]), "unknown field 'problems[0].bogus'"),
            (doc([dict(good, name="Mat-mul")]), "name 'Mat-mul' must be lower-case letters"),
            (doc([dict(good, shapes=[[4], [4]], inputs=["X", "X"])]), "names an input twice"),
            (json.dumps({"version": 1, "suite": "t", "problems": [good], "x": 1}),
             "f.json: unknown field 'x'"),
            (json.dumps({"version": True, "suite": "t", "problems": [good]}),
             "field 'version' must be 1, got True"),
            (json.dumps({"version": 1.0, "suite": "t", "problems": [good]}),
             "field 'version' must be 1, got 1.0"),
            (json.dumps({"version": 1, "suite": "t", "description": 3, "problems": [good]}),
             "field 'description' must be a string"),
            (doc([dict(good, op="fused", nodes=5)]),
             "field 'problems[0].nodes' must be a non-empty list of nodes"),
            (doc([dict(good, op="fused", nodes=[5])]),
             "field 'problems[0].nodes[0]' must be an object"),
            (doc([dict(good, op="fused", nodes=[{"op": "relu"}])]),
             "field 'problems[0].nodes[0].inputs' must be a non-empty list"),
            (doc([dict(good, op="fused", nodes=[{"inputs": ["p0"]}])]),
             "field 'problems[0].nodes[0].op' must be a non-empty string"),
            (doc([dict(good, op="fused", nodes=[{"op": "relu", "inputs": ["p0"], "x": 1}])]),
             "unknown field 'problems[0].nodes[0].x'"),
            (doc([dict(good, op="fused", nodes=[{"op": "relu", "inputs": ["p1"]}])]),
             "placeholder p1 does not exist (the problem has 1 shapes)"),
            (doc([dict(good, op="fused", nodes=[{"op": "relu", "inputs": ["n0"]}])]),
             "n0 is not an earlier node"),
            (doc([dict(good, op="fused", nodes=[{"op": "relu", "inputs": ["p00"]}])]),
             "must be \"p<index>\" or \"n<index>\", got 'p00'"),
            (doc([dict(good, op="fused", attrs={"a": "1"},
                       nodes=[{"op": "relu", "inputs": ["p0"]}])]),
             "field 'problems[0].attrs' must be empty in a fused problem"),
        ]
        for text, message in cases:
            with self.subTest(message=message):
                with self.assertRaises(ValueError) as cm:
                    score.parse_suite(text, "f.json")
                self.assertIn(message, str(cm.exception))

    def test_flops_by_hand(self):
        mm = {"op": "matmul", "shapes": [[4, 8], [8, 16]], "attrs": {}}
        self.assertEqual(score.problem_flops(mm, [4, 16]), 2.0 * 4 * 16 * 8)
        conv = {"op": "conv2d_nchw", "shapes": [[2, 3, 10, 10], [5, 3, 3, 3]], "attrs": {}}
        self.assertEqual(score.problem_flops(conv, [2, 5, 8, 8]), 2.0 * 2 * 5 * 8 * 8 * 27)
        fused = {"op": "fused", "shapes": [[4, 8], [16, 8], [16]],
                 "nodes": [{"op": "dense", "inputs": ["p0", "p1"]},
                           {"op": "add", "inputs": ["n0", "p2"]}]}
        self.assertEqual(score.problem_flops(fused, [4, 16]), 2.0 * 4 * 16 * 8)
        self.assertEqual(score.problem_bytes(mm, [4, 16]), 4.0 * (32 + 128 + 64))


class HalfPrecisionTest(unittest.TestCase):
    """float16 / bfloat16: the rounding of references, the poison patterns and the 1e-2 tolerance
    decisions, each checked against values computed here independently of score.py."""

    def samples(self):
        import random
        rng = random.Random(7)
        xs = [0.0, -0.0, 1.0, -1.0, 1 / 3, 65504.0, 65519.99, 65520.0, -65520.0, 70000.0,
              2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -26, 1e-9, 3.0e38,
              3.4e38, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
              2049.0, 4097.0]
        for _ in range(3000):  # wide magnitudes, both signs, including fp16 subnormals
            xs.append(rng.choice((-1, 1)) * rng.random() * 2.0 ** rng.randint(-30, 20))
        return xs

    def test_float16_rounding_matches_cpythons_binary16_packer(self):
        for x in self.samples():
            with self.subTest(x=x):
                got = score.round_to_dtype(x, "float16")
                self.assertEqual(struct.pack("<d", got), struct.pack("<d", half(x)))
                self.assertEqual(score.bits_of(x, "float16"), half_bits(x))

    def test_float16_rounding_matches_numpy_when_present(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("no numpy here")
        with np.errstate(over="ignore"):
            for x in self.samples():
                self.assertEqual(score.round_to_dtype(x, "float16"), float(np.float16(x)), x)

    def test_bfloat16_rounding_matches_the_bit_trick(self):
        # Float32 values, so that the bit trick's start from float32 bits is exact.
        for x in self.samples():
            x = f32(x) if abs(x) < 3.4e38 else x
            if math.isinf(x):
                continue
            with self.subTest(x=x):
                self.assertEqual(struct.pack("<d", score.round_to_dtype(x, "bfloat16")),
                                 struct.pack("<d", bf16(x)))
                b = struct.unpack("<I", struct.pack("<f", x))[0]
                self.assertEqual(score.bits_of(x, "bfloat16"), bf16_bits_from_f32_bits(b))

    def test_rounding_by_hand(self):
        r = score.round_to_dtype
        # Ties to even: bfloat16 keeps 8 significant bits, float16 11.
        self.assertEqual(r(1 + 2.0 ** -8, "bfloat16"), 1.0)
        self.assertEqual(r(1 + 3 * 2.0 ** -8, "bfloat16"), 1 + 2.0 ** -6)
        self.assertEqual(r(1 + 2.0 ** -11, "float16"), 1.0)
        self.assertEqual(r(1 + 3 * 2.0 ** -11, "float16"), 1 + 2.0 ** -9)
        self.assertEqual(r(2049.0, "float16"), 2048.0)    # spacing 2 above 2048, tie to even
        self.assertEqual(r(2051.0, "float16"), 2052.0)
        # Overflow: float16's largest is 65504, the halfway point to 65536 rounds to inf.
        self.assertEqual(score.dtype_max("float16"), 65504.0)
        self.assertEqual(r(65519.99, "float16"), 65504.0)
        self.assertEqual(r(65520.0, "float16"), math.inf)
        self.assertEqual(r(-70000.0, "float16"), -math.inf)
        self.assertEqual(r(70000.0, "bfloat16"), 70144.0)  # 8 bits: spacing 512 at 65536
        self.assertEqual(score.dtype_max("bfloat16"), (2 - 2.0 ** -7) * 2.0 ** 127)
        # Subnormals: float16's step is 2^-24; half of it ties to 0.
        self.assertEqual(r(2.0 ** -25, "float16"), 0.0)
        self.assertEqual(r(3 * 2.0 ** -26, "float16"), 2.0 ** -24)
        self.assertTrue(math.isnan(r(math.nan, "bfloat16")))

    def test_references_are_rounded_to_half_dtypes_only(self):
        self.assertEqual(score.reference_in_dtype([1 / 3], "float32"), [1 / 3])
        self.assertEqual(score.reference_in_dtype([1 / 3, 70000.0], "float16"),
                         [half(1 / 3), math.inf])
        self.assertEqual(score.reference_in_dtype([1 / 3], "bfloat16"), [bf16(f32(1 / 3))])
        # The rounding decides: float16 reference 2049 -> 2048. 2028 is 20 from 2048 (tolerance
        # 0.01 + 20.48) but 21 from 2049 (tolerance 0.01 + 20.49). M = 0: the tolerance alone.
        m0 = [0.0]
        self.assertEqual(score.check_lists([2028.0], [2049.0], dtype="float16",
                                           magnitude=m0)[0], "ok")
        self.assertEqual(score.check_lists([2030.0], [2049.0], dtype="float16",
                                           magnitude=m0)[0], "ok")
        self.assertEqual(score.check_lists([2027.0], [2049.0], dtype="float16",
                                           magnitude=m0)[0], "wrong_answer")  # 21 > 20.49
        # With M = |ref| = 2048 the rule adds 16 · 2^-11 · 2048 = 16.

    def test_poison_patterns_are_quiet_nans_no_arithmetic_produces(self):
        p16, pb16 = score.poison_bits("float16"), score.poison_bits("bfloat16")
        self.assertEqual(score.poison_bits("float32"), 0x7FDEAD00)
        self.assertTrue(math.isnan(half_value(p16)))
        self.assertTrue(p16 & 0x0200)      # float16's quiet bit
        bf_value = struct.unpack("<f", struct.pack("<I", pb16 << 16))[0]
        self.assertTrue(math.isnan(bf_value))
        self.assertTrue(pb16 & 0x0040)     # bfloat16's quiet bit
        # Not the GPU's canonical NaN, nor a host conversion's default NaN.
        self.assertNotIn(p16, (0x7FFF, 0xFFFF, half_bits(math.nan)))
        self.assertNotIn(pb16, (0x7FFF, 0xFFFF, 0x7FC0, bf16_bits_from_f32_bits(0x7FC00000)))
        with self.assertRaises(ValueError):
            score.poison_bits("int8")

    def test_tolerance_decisions(self):
        # References of magnitude > 1, where 2e-2 relative is outside 1e-2 + 1e-2·|ref| and 5e-3
        # inside: 100 -> tolerance 1.01, error 2 fails, 0.5 passes.
        ref = [100.0, -300.0, 7.25, 1000.0]
        for dtype, rnd in (("float16", half), ("bfloat16", lambda v: bf16(f32(v)))):
            with self.subTest(dtype=dtype):
                exact = [rnd(v) for v in ref]
                self.assertEqual(exact, ref)   # all four are exact in both formats
                for k in range(4):
                    far = list(exact)
                    far[k] = rnd(ref[k] * 1.02)
                    self.assertGreater(abs(far[k] - ref[k]), 0.01 + 0.01 * abs(ref[k]))
                    # M = 0: the tolerance alone decides.
                    reason, counts = score.check_lists(far, ref, dtype=dtype, magnitude=[0.0] * 4)
                    self.assertEqual((reason, counts["bad32"]), ("wrong_answer", 1))
                    near = list(exact)
                    near[k] = rnd(ref[k] * 1.005)
                    self.assertLessEqual(abs(near[k] - ref[k]), 0.01 + 0.01 * abs(ref[k]))
                    self.assertEqual(score.check_lists(near, ref, dtype=dtype)[0], "ok")
                    # With M = |ref| the rule adds 16 u |ref|: computed in float32 (the
                    # default) that is 1e-6 |ref|, 2e-2 still fails; with intermediates rounded
                    # to the half type, float16 0.0078 |ref| (still fails), bfloat16 0.0625 |ref|
                    # (2e-2 passes: bfloat16 keeps 8 bits).
                    reason, _ = score.check_lists(far, ref, dtype=dtype)
                    self.assertEqual(reason, "wrong_answer")
                    reason, _ = score.check_lists(far, ref, dtype=dtype, rounded_intermediates=True)
                    self.assertEqual(reason, "wrong_answer" if dtype == "float16" else "ok")
                # The same 5e-3 error is only "imprecise" for a float32 problem.
                near = [f32(v * 1.005) for v in ref]
                self.assertEqual(score.check_lists(near, ref, dtype="float32")[0], "imprecise")

    def test_overflowed_references(self):
        # 70000 is past float16's range: only +inf matches; 65519 rounds to 65504 (finite).
        self.assertEqual(score.check_lists([math.inf], [70000.0], dtype="float16")[0], "ok")
        self.assertEqual(score.check_lists([65504.0], [70000.0], dtype="float16")[0],
                         "wrong_answer")
        self.assertEqual(score.check_lists([-math.inf], [70000.0], dtype="float16")[0],
                         "wrong_answer")
        self.assertEqual(score.check_lists([65504.0], [65519.0], dtype="float16")[0], "ok")
        # 65519 is within 1e-2 of the overflow threshold 65520: a result within tolerance may
        # round to +inf (the output type's overflow, precision_rule_ok); 64000 is out of reach.
        self.assertEqual(score.check_lists([math.inf], [65519.0], dtype="float16")[0], "ok")
        self.assertEqual(score.check_lists([-math.inf], [65519.0], dtype="float16")[0],
                         "nan_output")
        self.assertEqual(score.check_lists([math.inf], [64000.0], dtype="float16")[0],
                         "nan_output")
        # The other way round: 65530 rounds to +inf, but a float32 sum of 65510 stores 65504,
        # within 1e-2 of the float64 value (the rule is anchored on it).
        self.assertEqual(score.check_lists([65504.0], [65530.0], dtype="float16")[0], "ok")
        self.assertEqual(score.check_lists([math.inf], [65530.0], dtype="float16")[0], "ok")
        self.assertEqual(score.overflow_threshold("float16"), 65520.0)
        self.assertEqual(score.round_to_dtype(score.overflow_threshold("bfloat16"), "bfloat16"),
                         math.inf)
        self.assertLess(score.round_to_dtype(math.nextafter(score.overflow_threshold("bfloat16"),
                                                            0), "bfloat16"), math.inf)
        # bfloat16 holds 70000 (as 70144): inf there is a NaN/Inf output.
        self.assertEqual(score.check_lists([70144.0], [70000.0], dtype="bfloat16")[0], "ok")
        self.assertEqual(score.check_lists([math.inf], [70000.0], dtype="bfloat16")[0],
                         "nan_output")

    def test_poison_left_in_the_output_is_an_unwritten_element(self):
        ref = [1.5, -2.25, 3.0, 4.0]
        for dtype, to_bits in (("float16", half_bits),
                               ("bfloat16", lambda v: bf16_bits_from_f32_bits(
                                   struct.unpack("<I", struct.pack("<f", v))[0]))):
            with self.subTest(dtype=dtype):
                poison = score.poison_bits(dtype)
                # The kernel wrote elements 0 and 1; 2 and 3 still hold the poison.
                out_bits = [to_bits(ref[0]), to_bits(ref[1]), poison, poison]
                self.assertEqual(score.count_poison(out_bits, dtype), 2)
                got = ref[:2] + [math.nan, math.nan]
                reason, counts = score.check_lists(got, ref, dtype=dtype, got_bits=out_bits)
                self.assertEqual((reason, counts["poison_left"]), ("incomplete_output", 2))
                # A NaN the kernel computed (the GPU's canonical 0x7FFF) is not poison: nan_output.
                out_bits[2:] = [0x7FFF, 0x7FFF]
                self.assertEqual(score.count_poison(out_bits, dtype), 0)
                self.assertEqual(score.check_lists(got, ref, dtype=dtype, got_bits=out_bits)[0],
                                 "nan_output")
                # Every element written: ok.
                full = [to_bits(v) for v in ref]
                self.assertEqual(score.check_lists(ref, ref, dtype=dtype, got_bits=full)[0], "ok")

    def test_tensor_core_bound_and_precision_texts(self):
        # H200: 132 SMs at 1.98 GHz, 4096 dense fp16 FLOPs per SM and clock.
        self.assertEqual(score.half_tensor_peak_flops(132, 1.98e9, 9), 132 * 1.98e9 * 4096)
        self.assertGreater(score.half_tensor_peak_flops(132, 1.98e9, 9), 989e12)  # H100's spec
        self.assertEqual(score.half_tensor_peak_flops(108, 1.41e9, 8), 108 * 1.41e9 * 2048)
        self.assertEqual(score.half_tensor_peak_flops(1, 1.0, 42), 8192.0)  # unknown: largest
        t = score.eager_precision("float16", False, reduced_precision="fp16 True, bf16 True")
        self.assertIn("float32 accumulation", t)
        self.assertIn("allowed (fp16 True, bf16 True)", t)
        self.assertIn("disallowed", score.eager_precision("bfloat16", True))
        self.assertIn("TF32 off", score.eager_precision("float32", True))
        self.assertIn("(matmul, conv: ieee, tf32)",
                      score.eager_precision("float32", False, ["ieee", "tf32"]))


class ArtifactTest(unittest.TestCase):
    def test_workload_matching(self):
        p = {"op": "matmul", "shapes": [[4, 8], [8, 16]], "dtype": "float32",
             "attrs": {"transpose_b": "false"}}
        self.assertTrue(score.workload_matches(p, {"op": "matmul", "shapes": [[4, 8], [8, 16]],
                                                   "dtype": "float32",
                                                   "attrs": {"transpose_b": False}}))
        self.assertFalse(score.workload_matches(p, {"op": "matmul", "shapes": [[4, 8], [8, 8]],
                                                    "attrs": {"transpose_b": "false"}}))
        self.assertFalse(score.workload_matches(p, {"op": "matmul", "shapes": [[4, 8], [8, 16]],
                                                    "attrs": {}}))
        f = {"op": "fused", "shapes": [[4]], "attrs": {},
             "nodes": [{"op": "relu", "inputs": ["p0"]}]}
        self.assertTrue(score.workload_matches(f, {"op": "fused", "shapes": [[4]], "attrs": {},
                                                   "nodes": [{"op": "relu", "inputs": ["p0"],
                                                              "attrs": {}}]}))
        self.assertFalse(score.workload_matches(f, {"op": "fused", "shapes": [[4]], "attrs": {},
                                                    "nodes": [{"op": "tanh",
                                                               "inputs": ["p0"]}]}))

    def test_validate_launch_errors(self):
        p = {"op": "relu", "shapes": [[4]], "dtype": "float32"}
        good = {"arguments": [{"index": 0, "kind": "input", "dtype": "float32", "shape": [4]},
                              {"index": 1, "kind": "output", "dtype": "float32", "shape": [4]}],
                "launches": [{"entry": "k", "grid": [1, 1, 1], "block": [4, 1, 1]}]}
        self.assertEqual(score.validate_launch(p, good, [4]), [])
        # Scratch buffers may have any dtype; inputs and outputs must have the problem's.
        scratch = json.loads(json.dumps(good))
        scratch["arguments"].append({"index": 2, "kind": "scratch", "dtype": "int32",
                                     "shape": [2]})
        self.assertEqual(score.validate_launch(p, scratch, [4]), [])
        scratch["arguments"][1]["dtype"] = "float16"
        self.assertIn("argument 1: dtype 'float16' is not the problem's float32",
                      score.validate_launch(p, scratch, [4]))
        self.assertIn("output shape [4] differs from the reference's [5]",
                      score.validate_launch(p, good, [5])[0])
        bad = json.loads(json.dumps(good))
        bad["launches"][0]["grid"] = [0, 1, 1]
        bad["launches"][0]["stream"] = 2
        errs = score.validate_launch(p, bad, [4])
        self.assertTrue(any("'grid' must be 3 positive integers" in e for e in errs))
        self.assertTrue(any("stream must be 0 or 1" in e for e in errs))
        bad = json.loads(json.dumps(good))
        bad["arguments"][0]["shape"] = [8]
        self.assertTrue(any("input shapes [[8]] differ" in e
                            for e in score.validate_launch(p, bad, [4])))

    def test_a_real_replay_artifact_fits_its_level1_problem(self):
        # Written by `tilesearch replay --log matmul_xgboost.jsonl --op matmul --shape 4096x4096
        # --shape 4096x4096 --name matmul_square_4096 --no-check` (the log of the first H200
        # tuning runs, bench/logs/h200-2026-11-30-ops-tuned-partial.tar.xz): the format score.py
        # reads is the one replay writes.
        with open(os.path.join(HERE, "testdata", "replay_matmul_square_4096.json")) as f:
            doc = json.load(f)
        l1 = score.load_suite(os.path.join(SUITES, "level1.json"))
        p = next(p for p in l1["problems"] if p["name"] == "matmul_square_4096")
        self.assertTrue(score.workload_matches(p, doc["workload"]))
        self.assertEqual(score.validate_launch(p, doc, [4096, 4096]), [])
        self.assertEqual(doc["flops"], score.problem_flops(p, [4096, 4096]))
        self.assertEqual(doc["files"]["ptx"], "matmul_square_4096.ptx")

    def test_artifact_directory_lookup(self):
        import tempfile
        p = {"name": "x", "op": "relu", "shapes": [[4]], "dtype": "float32", "attrs": {}}
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(score.find_artifact(p, d), (None, None))
            with open(os.path.join(d, "relu_1234.json"), "w") as f:
                json.dump({"workload": {"op": "relu", "shapes": [[4]], "dtype": "float32",
                                        "attrs": {}}, "files": {"ptx": "relu_1234.ptx"}}, f)
            with open(os.path.join(d, "relu_1234.ptx"), "w") as f:
                f.write("// ptx")
            doc, ptx = score.find_artifact(p, d)
            self.assertEqual(ptx, "// ptx")
            self.assertEqual(doc["files"]["ptx"], "relu_1234.ptx")
            self.assertEqual(score.find_artifact(dict(p, shapes=[[5]]), d), (None, None))


def matmul_tma_launch():
    """A bfloat16 matmul launch whose A (argument 0) is read through a tensor map (argument 3)."""
    p = {"op": "matmul", "shapes": [[4096, 4096], [4096, 4096]], "dtype": "bfloat16"}
    args = [{"index": i, "name": n, "kind": k, "dtype": "bfloat16", "shape": [4096, 4096]}
            for i, (n, k) in enumerate((("A", "input"), ("B", "input"), ("C", "output")))]
    args.append({"index": 3, "name": "A_tmap", "kind": "tensor_map", "dtype": "int64",
                 "shape": [16], "tensor_map": {"source": "A", "dims": [4096, 4096],
                                               "box": [128, 64], "swizzle": 128}})
    return p, {"arguments": args,
               "launches": [{"entry": "k", "grid": [32, 32, 1], "block": [128, 1, 1]}]}


class TensorMapTest(unittest.TestCase):
    """tensor_map arguments: cuTensorMapEncodeTiled's arguments by hand, the validation errors, and
    score.Driver's ctypes call of it on a stand-in libcuda."""

    def test_encoding_of_a_2d_bfloat16_map(self):
        # dims [4096, 4096] outermost first -> globalDim innermost first; the one stride is a row
        # of 4096 bf16 = 8192 bytes; box [128, 64] -> boxDim [64, 128] (64 x 2 = 128 bytes inner).
        m = {"source": "A", "dims": [4096, 4096], "box": [128, 64], "swizzle": 128}
        self.assertEqual(score.tensor_map_encoding(m, "bfloat16"), {
            "tensorDataType": 9, "tensorRank": 2, "globalDim": [4096, 4096],
            "globalStrides": [8192], "boxDim": [64, 128], "elementStrides": [1, 1],
            "interleave": 0, "swizzle": 3, "l2Promotion": 2, "oobFill": 0})

    def test_encoding_of_a_3d_float32_map(self):
        # [8, 100, 96] float32: strides 96 x 4 = 384 bytes (a row), 100 x 384 = 38400 (a plane).
        m = {"source": "X", "dims": [8, 100, 96], "box": [1, 64, 32], "swizzle": 128}
        self.assertEqual(score.tensor_map_encoding(m, "float32"), {
            "tensorDataType": 7, "tensorRank": 3, "globalDim": [96, 100, 8],
            "globalStrides": [384, 38400], "boxDim": [32, 64, 1], "elementStrides": [1, 1, 1],
            "interleave": 0, "swizzle": 3, "l2Promotion": 2, "oobFill": 0})
        src = {"index": 0, "name": "X", "kind": "input", "dtype": "float32",
               "shape": [8, 100, 96]}
        arg = {"index": 1, "name": "X_tmap", "kind": "tensor_map", "dtype": "int64",
               "shape": [16], "tensor_map": m}
        self.assertEqual(score.tensor_map_errors(arg, [src, arg]), [])

    def test_data_types_and_swizzles(self):
        m = {"source": "A", "dims": [64], "box": [64], "swizzle": 0}
        for dtype, want in (("float16", 6), ("int32", 3), ("int64", 5)):
            self.assertEqual(score.tensor_map_encoding(m, dtype)["tensorDataType"], want)
        for swizzle, want in ((0, 0), (32, 1), (64, 2), (128, 3)):
            self.assertEqual(score.tensor_map_encoding(dict(m, swizzle=swizzle), "float32")
                             ["swizzle"], want)

    def test_a_launch_with_a_tensor_map_validates(self):
        p, doc = matmul_tma_launch()
        self.assertEqual(score.validate_launch(p, doc, [4096, 4096]), [])

    def test_each_validation_error(self):
        def errors(change, output_shape=(4096, 4096)):
            p, doc = matmul_tma_launch()
            change(doc["arguments"][3], doc["arguments"])
            return score.validate_launch(p, doc, list(output_shape))

        def field(key, value):
            return lambda a, args: a["tensor_map"].__setitem__(key, value)

        cases = [
            (lambda a, args: a.pop("tensor_map"),
             "argument 3: a tensor_map argument needs a 'tensor_map' object"),
            (lambda a, args: a.__setitem__("shape", [8]),
             "argument 3: a tensor map is held as int64 [16] (128 bytes), got int64 [8]"),
            (field("source", "Z"),
             "argument 3: tensor_map source 'Z' is not an input or output argument of the launch"),
            (lambda a, args: args.append({"index": 4, "name": "S", "kind": "scratch",
                                          "dtype": "bfloat16", "shape": [4096, 4096]})
             or a["tensor_map"].__setitem__("source", "S"),
             "argument 3: tensor_map source 'S' is not an input or output argument of the launch"),
            (lambda a, args: args[1].__setitem__("name", "A"),
             "argument 3: tensor_map source 'A' names 2 arguments"),
            (field("dims", []), "argument 3: tensor_map dims [] must be 1 to 5 positive integers"),
            (field("dims", [1, 1, 1, 1, 4096, 4096]),
             "argument 3: tensor_map dims [1, 1, 1, 1, 4096, 4096] must be 1 to 5 positive "
             "integers"),
            (field("dims", [4096, 0]),
             "argument 3: tensor_map dims [4096, 0] must be 1 to 5 positive integers"),
            (field("box", [128, True]),
             "argument 3: tensor_map box [128, True] must be 1 to 5 positive integers"),
            (field("box", "128x64"),
             "argument 3: tensor_map box '128x64' must be 1 to 5 positive integers"),
            (field("box", [64]), "argument 3: tensor_map box rank 1 differs from the dims' 2"),
            (field("box", [512, 64]),
             "argument 3: tensor_map box dim 0 extent 512 is not in 1..256"),
            (field("dims", [1 << 31, 1]),
             "argument 3: tensor_map dim 0 extent 2147483648 is not under 2^31"),
            (field("dims", [4096, 2048]),
             "argument 3: tensor_map dims [4096, 2048] cover 8388608 elements, source 'A' "
             "[4096, 4096] has 16777216"),
            (field("swizzle", 16), "argument 3: tensor_map swizzle 16 is not 0, 32, 64 or 128 "
             "bytes"),
            (field("swizzle", False), "argument 3: tensor_map swizzle False is not 0, 32, 64 or "
             "128 bytes"),
            (field("box", [128, 4]),
             "argument 3: tensor_map box's inner 8 bytes are not a multiple of 16"),
            (field("box", [128, 128]),
             "argument 3: tensor_map box's inner 256 bytes exceed the 128-byte swizzle"),
            (field("swizzle", 32),
             "argument 3: tensor_map box's inner 128 bytes exceed the 32-byte swizzle"),
            # A row of 2 bfloat16 is 4 bytes: the outer dim's stride is not a multiple of 16.
            (lambda a, args: a["tensor_map"].update(dims=[1 << 23, 2], box=[1, 8]),
             "argument 3: tensor_map dim 0 stride 4 bytes is not a multiple of 16 under 2^40"),
        ]
        for change, want in cases:
            with self.subTest(want=want):
                self.assertIn(want, errors(change))
        # Without a swizzle any inner row that is a multiple of 16 bytes is allowed.
        self.assertEqual(errors(lambda a, args: a["tensor_map"].update(swizzle=0,
                                                                         box=[128, 256])), [])
        # A kind the harness does not know is still an error.
        self.assertIn("argument 3: unknown kind 'tensormap'",
                      errors(lambda a, args: a.__setitem__("kind", "tensormap")))
        # A source dtype the map cannot hold (only reachable past the problem's dtype check).
        src = {"index": 0, "name": "D", "kind": "input", "dtype": "float64", "shape": [64]}
        arg = {"index": 1, "name": "D_tmap", "kind": "tensor_map", "dtype": "int64",
               "shape": [16], "tensor_map": {"source": "D", "dims": [64], "box": [8],
                                             "swizzle": 0}}
        self.assertEqual(score.tensor_map_errors(arg, [src, arg]),
                         ["argument 1: tensor_map source 'D' has dtype 'float64', not one of "
                          "int32, int64, float16, float32, bfloat16"])
        # A 3-D map whose middle stride alone is off: [3, 2, 2] float32 has rows of 8 bytes
        # (dim 1's stride) and planes of 16 (dim 0's).
        src["dtype"], src["shape"] = "float32", [12]
        arg["tensor_map"] = {"source": "D", "dims": [3, 2, 2], "box": [1, 1, 4], "swizzle": 0}
        self.assertEqual(score.tensor_map_errors(arg, [src, arg]),
                         ["argument 1: tensor_map dim 1 stride 8 bytes is not a multiple of 16 "
                          "under 2^40"])

    def test_driver_encodes_through_ctypes_and_checks_the_result(self):
        # score.Driver.encode_tensor_map on a stand-in libcuda (no GPU): the arrays it passes, the
        # 64-byte aligned map it has filled, and a CUresult != 0 raised as Driver._check does.
        import ctypes
        calls, rc = [], [0]

        def encode(tmap, data_type, rank, address, dims, strides, box, element_strides,
                   interleave, swizzle, l2, oob):
            n = rank.value
            calls.append({"map": tmap.value, "address": address.value,
                          "tensorDataType": data_type.value, "tensorRank": n,
                          "globalDim": dims[:n], "globalStrides": strides[:n - 1],
                          "boxDim": box[:n], "elementStrides": element_strides[:n],
                          "interleave": interleave.value, "swizzle": swizzle.value,
                          "l2Promotion": l2.value, "oobFill": oob.value})
            ctypes.memmove(tmap.value, bytes(range(128)), 128)
            return rc[0]

        def error_string(code, ref):
            ref._obj.value = b"invalid argument"
            return 0

        drv = score.Driver.__new__(score.Driver)  # no libcuda, no torch
        drv.ct = ctypes
        drv.lib = _NS(cuTensorMapEncodeTiled=encode, cuGetErrorString=error_string)
        enc = score.tensor_map_encoding({"source": "X", "dims": [8, 100, 96], "box": [1, 64, 32],
                                         "swizzle": 128}, "float32")
        self.assertEqual(drv.encode_tensor_map(enc, 0x7F0000001000), bytes(range(128)))
        call = calls.pop()
        self.assertEqual(call.pop("map") % 64, 0)
        self.assertEqual(call, dict(enc, address=0x7F0000001000))
        rank1 = score.tensor_map_encoding(ROWSUM_Y_MAP, "float32")
        drv.encode_tensor_map(rank1, 0x7F0000002000)
        self.assertEqual(calls.pop()["globalStrides"], [])
        rc[0] = 1  # CUDA_ERROR_INVALID_VALUE
        with self.assertRaisesRegex(score.CudaError, r"^cuTensorMapEncodeTiled failed: CUDA error "
                                    r"1 \(invalid argument\)$"):
            drv.encode_tensor_map(enc, 0x7F0000001000)
        drv.lib = _NS(cuGetErrorString=error_string)  # a driver before CUDA 12.0
        with self.assertRaisesRegex(score.CudaError, "not in this driver"):
            drv.encode_tensor_map(enc, 0x7F0000001000)


class CheatDataTest(unittest.TestCase):
    """The committed planted-cheat suite is consistent: every kernel's launch JSON matches its
    problem, every entry is defined in its CUDA source, and the expectations name known
    reasons."""

    def setUp(self):
        with open(os.path.join(CHEATS, "manifest.json")) as f:
            self.manifest = json.load(f)
        self.suite = score.load_suite(os.path.join(CHEATS, self.manifest["suite"]))
        self.problems = {p["name"]: p for p in self.suite["problems"]}

    def test_counts(self):
        kernels = self.manifest["kernels"]
        self.assertGreaterEqual(sum(1 for k in kernels if not k["honest"]), 8)
        self.assertGreaterEqual(sum(1 for k in kernels if k["honest"]), 3)

    def test_every_kernel_is_consistent(self):
        # Output shapes by hand: row reductions [4096], elementwise / softmax same as the input.
        out_shapes = {"cheat_rowsum": [4096], "cheat_mean": [4096], "cheat_softmax": [4096, 4096],
                      "cheat_swish": [4096, 4096], "cheat_relu": [4096, 4096],
                      "cheat_relu_large": [16384, 16384]}
        for k in self.manifest["kernels"]:
            with self.subTest(kernel=k["kernel"]):
                p = self.problems[k["problem"]]
                with open(os.path.join(CHEATS, k["kernel"] + ".json")) as f:
                    doc = json.load(f)
                self.assertTrue(score.workload_matches(p, doc["workload"]))
                self.assertEqual(score.validate_launch(p, doc, out_shapes[p["name"]]), [])
                self.assertEqual(doc["files"]["ptx"], k["kernel"] + ".ptx")
                with open(os.path.join(CHEATS, k["source"])) as f:
                    source = f.read()
                for l in doc["launches"]:
                    self.assertIn(f'extern "C" __global__ void {l["entry"]}(', source)
                for r in k["expect"]:
                    self.assertIn(r, score.REASONS)
                self.assertNotIn("ok", k["expect"])
                self.assertEqual(k["honest"], not k["expect"])
                # Only the other-stream cheat asks for a second stream.
                streams = {l.get("stream", 0) for l in doc["launches"]}
                self.assertEqual(streams == {1}, k["kernel"] == "other_stream")

    def test_self_test_judgement(self):
        outcomes = {k["kernel"]: ("ok" if k["honest"] else k["expect"][0])
                    for k in self.manifest["kernels"]}
        passed, lines = score.check_self_test(outcomes, self.manifest)
        self.assertTrue(passed)
        self.assertEqual(len(lines), len(self.manifest["kernels"]))
        # A false reject of an honest kernel, a cheat accepted, a wrong reason: all fail.
        for kernel, got in (("honest_rowsum", "wrong_answer"), ("cached_result", "ok"),
                            ("modifies_input", "wrong_answer")):
            bad = dict(outcomes, **{kernel: got})
            self.assertFalse(score.check_self_test(bad, self.manifest)[0], kernel)

    def test_no_generated_ptx_is_committed_beside_the_sources(self):
        # PTX is generated (pack time or score.device_ptx); a stale committed copy would win.
        for d in (HERE, CHEATS):
            self.assertEqual([f for f in os.listdir(d) if f.endswith((".ptx", ".cubin"))], [], d)


def write_script(path, text):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + text)
    os.chmod(path, 0o755)


class DevicePtxTest(unittest.TestCase):
    """score.device_ptx: a PTX file beside the source wins, else nvcc compiles the source into a
    temporary directory, else a clear InputError."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.cu = os.path.join(self.d, "k.cu")
        with open(self.cu, "w") as f:
            f.write('extern "C" __global__ void k() {}\n')
        self.no_nvcc = {"NVCC": os.path.join(self.d, "missing-nvcc"), "PATH": ""}

    def tearDown(self):
        self.tmp.cleanup()

    def test_existing_ptx_is_read_without_nvcc(self):
        with open(os.path.join(self.d, "k.ptx"), "w") as f:
            f.write("// packed ptx")
        self.assertEqual(score.device_ptx(self.cu, environ=self.no_nvcc), "// packed ptx")
        other = os.path.join(self.d, "named.ptx")
        with open(other, "w") as f:
            f.write("// named")
        self.assertEqual(score.device_ptx(self.cu, other, environ=self.no_nvcc), "// named")

    def test_no_ptx_and_no_nvcc_is_an_input_error_naming_both(self):
        self.assertIsNone(score.find_nvcc(self.no_nvcc))
        with self.assertRaises(score.InputError) as e:
            score.device_ptx(self.cu, environ=self.no_nvcc)
        msg = str(e.exception)
        self.assertIn(os.path.join(self.d, "k.ptx"), msg)
        self.assertIn(self.cu, msg)
        self.assertIn("no nvcc", msg)
        self.assertIn("tools/pack_device.sh", msg)

    def test_nvcc_compiles_into_a_temporary_directory(self):
        # A stand-in nvcc that records its arguments and writes its -o file.
        fake = os.path.join(self.d, "nvcc")
        args = os.path.join(self.d, "args.txt")
        write_script(fake, f'echo "$@" > {args}\n'
                           'while [ "$1" != "-o" ]; do shift; done; echo "// compiled" > "$2"\n')
        self.assertEqual(score.find_nvcc({"NVCC": fake}), fake)
        self.assertEqual(score.find_nvcc({"PATH": self.d}), fake)
        self.assertEqual(score.device_ptx(self.cu, environ={"NVCC": fake}), "// compiled\n")
        with open(args) as f:
            got = f.read().split()
        self.assertEqual(got[:3], ["-arch=sm_90", "-ptx", "-O3"])
        self.assertEqual(got[-1], self.cu)
        out = got[got.index("-o") + 1]
        self.assertEqual(os.path.basename(out), "k.ptx")
        self.assertNotEqual(os.path.dirname(out), self.d)
        self.assertFalse(os.path.exists(out))  # the temporary directory is gone
        self.assertFalse(os.path.exists(os.path.join(self.d, "k.ptx")))

    def test_nvcc_failure_is_an_input_error_with_its_message(self):
        fake = os.path.join(self.d, "nvcc")
        write_script(fake, 'echo "k.cu(1): error: expected a declaration" >&2; exit 3\n')
        with self.assertRaises(score.InputError) as e:
            score.device_ptx(self.cu, nvcc=fake)
        self.assertIn("exit 3", str(e.exception))
        self.assertIn("expected a declaration", str(e.exception))

    def test_missing_source_is_an_input_error(self):
        fake = os.path.join(self.d, "nvcc")
        write_script(fake, "exit 0\n")
        with self.assertRaises(score.InputError) as e:
            score.device_ptx(os.path.join(self.d, "gone.cu"), nvcc=fake)
        self.assertIn("no CUDA source", str(e.exception))

    @unittest.skipIf(score.find_nvcc() is None, "no nvcc here")
    def test_harness_kernels_compile_with_the_real_nvcc(self):
        ptx = score.device_ptx(os.path.join(HERE, "device_kernels.cu"))
        self.assertIn(".target sm_90", ptx)
        self.assertIn(".entry fma_peak(", ptx)
        self.assertIn(".entry smem_scribble(", ptx)
        self.assertIn(".entry read_peak(", ptx)
        self.assertIn(".entry copy_peak(", ptx)


class MergeTest(unittest.TestCase):
    def test_merge_joins_suites_and_replaces_rescored_problems(self):
        def row(name, ours, eager, correct=True):
            return {"name": name, "small": False, "correct": correct,
                    "ours": {"median_ms": ours} if correct else {},
                    "baselines": {"eager": {"median_ms": eager}}}
        a = {"meta": {"device": "H200", "bandwidth_tbps": 4.3},
             "suites": [{"suite": "level1", "source": "l1", "results": [row("x", 1.0, 2.0),
                                                                        row("y", 1.0, 0.5)]}]}
        b = {"meta": {"device": "H200"},
             "suites": [{"suite": "level1", "source": "l1", "results": [row("y", 0.25, 0.5)]},
                        {"suite": "level2", "source": "l2", "results": [row("z", 1, 1, False)]}]}
        m = score.merge_results([a, b])
        self.assertEqual([s["suite"] for s in m["suites"]], ["level1", "level2"])
        l1 = m["suites"][0]
        self.assertEqual([r["name"] for r in l1["results"]], ["x", "y"])
        self.assertEqual(l1["results"][1]["ours"]["median_ms"], 0.25)
        # Speedups 2 and 2: fast_1 = 1, geomean 2.
        self.assertAlmostEqual(l1["summary"]["main"]["eager"]["fast_1"], 1.0)
        self.assertAlmostEqual(l1["summary"]["main"]["eager"]["geomean_speedup"], 2.0)
        self.assertAlmostEqual(m["suites"][1]["summary"]["main"]["eager"]["fast_0"], 0.0)
        self.assertEqual(m["meta"]["bandwidth_tbps"], 4.3)
        self.assertEqual(len(m["meta"]["runs_merged"]), 2)
        with self.assertRaises(ValueError):
            score.merge_results([])

    def test_no_plot_of_no_suites(self):
        # (matplotlib, where installed, refuses a figure of 0 rows: a merge of empty runs.)
        with tempfile.TemporaryDirectory() as d:
            self.assertFalse(score.write_plot(os.path.join(d, "x.png"), []))
            self.assertEqual(os.listdir(d), [])


class CommandLineErrorTest(unittest.TestCase):
    """Bad files and paths given to score.py end in one line "score.py: error: ..." naming the
    file and exit code 2, never a traceback, and never overwrite an input."""

    def run_main(self, argv):
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = score.main(argv)
        return rc, err.getvalue()

    def expect_error(self, argv, message):
        rc, err = self.run_main(argv)
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertTrue(err.startswith("score.py: error: "), err)
        self.assertIn(message, err)

    def test_merge_of_bad_files(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            def write(name, text):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(text)
                return path
            out = os.path.join(d, "merged")
            missing = os.path.join(d, "missing.json")
            self.expect_error(["--merge", missing, "--out", out],
                              f"cannot read results file '{missing}'")
            bad = write("bad.json", "{not json")
            self.expect_error(["--merge", bad, "--out", out], "bad.json' is not valid JSON")
            deep = write("deep.json", "[" * 100000 + "]" * 100000)
            self.expect_error(["--merge", deep, "--out", out], "nested too deeply")
            cut = write("cut.json", '{"meta": {}, "suites": [{"suite": "l1", "sou')
            self.expect_error(["--merge", cut, "--out", out], "cut.json' is not valid JSON")
            for text, message in [
                    ("[]", "a results file must be a JSON object"),
                    ("{}", "field 'meta' is missing"),
                    ('{"meta": {}}', "field 'suites' is missing"),
                    ('{"meta": {}, "suites": [{"suite": "x"}]}', "field 'suites[0].source'"),
                    ('{"meta": {}, "suites": [{"suite": "x", "source": "s", "results": [{}]}]}',
                     "field 'suites[0].results[0].name'"),
                    ('{"meta": {}, "suites": [{"suite": "x", "source": "s", "results": '
                     '[{"name": "a", "correct": "yes"}]}]}',
                     "field 'suites[0].results[0].correct'"),
                    ('{"meta": {}, "suites": [{"suite": "x", "source": "s", "results": '
                     '[{"name": "a", "correct": true, "baselines": {"eager": 3}}]}]}',
                     "field 'suites[0].results[0].baselines.eager'")]:
                with self.subTest(text=text):
                    path = write("doc.json", text)
                    self.expect_error(["--merge", path, "--out", out], f"{path}: {message}")
            self.assertFalse(os.path.exists(out + ".json"))
            good = write("good.json", json.dumps({"meta": {}, "suites": []}))
            self.expect_error(["--merge", good, "--out", os.path.join(d, "no", "dir", "m")],
                              "directory")
            # --out whose .json is an input would replace the split run's file.
            self.expect_error(["--merge", good, "--out", os.path.join(d, "good")],
                              "would overwrite the input")
            with open(good) as f:
                self.assertEqual(json.load(f), {"meta": {}, "suites": []})
            rc, err = self.run_main(["--merge", good, "--out", out])
            self.assertEqual(rc, 0, err)

    def test_warm_compile_option_errors(self):
        # Usage errors (argparse: exit status 2, "score.py: error: ..." on the last line); none of
        # them may start workers or score anything.
        import contextlib
        import io
        for argv, message in [
                (["--warm-only"], "--warm-only needs --warm-compile N"),
                (["--warm-compile", "-1"], "--warm-compile must be >= 0"),
                (["--warm-compile", "2", "--baselines", "eager", "--warm-only"],
                 "which --baselines leaves out"),
                (["--warm-compile", "2", "--warm-only", "--problems", "nosuch"],
                 "no problem nosuch in"),
                (["--merge", "x.json", "--out", "o", "--warm-compile", "1"],
                 "not with --merge, --self-test or --kernel"),
                (["--self-test", "--warm-compile", "1", "--warm-only"],
                 "not with --merge, --self-test or --kernel")]:
            with self.subTest(argv=argv):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    with self.assertRaises(SystemExit) as exit_:
                        score.main(argv)
                self.assertEqual(exit_.exception.code, 2)
                self.assertIn(message, err.getvalue().strip().splitlines()[-1])

    def test_bad_suite_and_kernel_files(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            missing = os.path.join(d, "missing.json")
            self.expect_error(["--suite", missing, "--kernel", "k.ptx", "--launch", "k.json",
                               "--problem", "p"], f"cannot read suite file '{missing}'")
            suite = os.path.join(d, "s.json")
            with open(suite, "w") as f:
                f.write('{"version": 1, "suite": "s", "problems": [{"name": "a", "op": "relu", '
                        '"shapes": [[4]], "inputs": ["X"], "torch": "X", "tags": "small"}]}')
            self.expect_error(["--suite", suite, "--kernel", "k.ptx", "--launch", "k.json",
                               "--problem", "a"], "field 'problems[0].tags'")
            with open(suite, "w") as f:
                f.write('{"version": 1, "suite": "s", "problems": [{"name": "a", "op": "relu", '
                        '"shapes": [[4]], "inputs": ["X"], "torch": "X"}]}')
            self.expect_error(["--suite", suite, "--kernel", os.path.join(d, "k.ptx"),
                               "--launch", os.path.join(d, "k.json"), "--problem", "a"],
                              "cannot read launch JSON")


class ReportTest(unittest.TestCase):
    def test_markdown_and_row(self):
        results = [
            {"name": "mm", "small": False, "correct": True, "ours": {"median_ms": 1.0},
             "baselines": {"eager": {"median_ms": 2.0}}, "reason": "ok", "tflops": 12.5,
             "tbps": 0.1, "limit_fraction": 0.25, "max_abs_error": 1e-5,
             "eager_max_abs_error": 2e-5},
            {"name": "bad", "small": False, "correct": False, "ours": {},
             "baselines": {"eager": {"median_ms": 1.0}}, "reason": "wrong_answer",
             "detail": "trial 0 (uniform01): 3 of 4 elements outside tolerance"},
        ]
        suite = {"suite": "level1", "source": "bench/suites/level1.json", "results": results,
                 "summary": score.summarize(results, ("eager",))}
        md = score.render_markdown({"date": "2026-11-30", "device": "NVIDIA H200",
                                    "bandwidth_tbps": 4.3, "peak_tflops": 66.9, "trials": 6,
                                    "runs": 100}, [suite])
        self.assertIn("| main | eager | 2 | 1 | 1 | 0.50 | 0.50 | 0.50 | 0.00 | 2.00 |", md)
        self.assertIn("| mm | yes | 1.0000 | 2.0000 | — | — | 2.00 | 12.5 | 0.10 | 25% | "
                      "1.00e-05 / 2.00e-05 | ok |", md)
        self.assertIn("| bad | no | — | 1.0000 | — | — | — | — | — | — | — | wrong_answer",
                      md)
        self.assertIn("wrong_answer: trial 0 (uniform01)", md)
        self.assertIn("4.30 TB/s", md)
        row = score.render_row(results[0])
        self.assertIn("PASS", row)
        self.assertIn("eager 2.0000 ms (2.00x)", row)
        self.assertIn("max abs error 1.00e-05 / 2.00e-05 (ours / eager)", row)
        self.assertNotIn("max abs error", score.render_row(results[1]))
        self.assertIn("FAIL wrong_answer", score.render_row(results[1]))


def f64(values):
    """A float64 tensor of the CPU stand-in for torch."""
    return T.of(values, (len(values),), F64)


class ErrorReportTest(unittest.TestCase):
    """The reported max errors (abs_errors, max_errors: one definition for our kernel and eager)
    and the comparison with eager's, on hand-made tensors of the CPU stand-in."""

    def errors(self, got, ref, atol=1e-4):
        fake = FakeTorch()
        ref = f64(ref)
        err = score.abs_errors(fake, f64(got), ref)
        return err.vals(), score.max_errors(fake, err, ref, atol)

    def test_abs_and_rel_error_on_known_values(self):
        # Errors 1/8, 1/2, 2^-15, 2^-16; relative errors 1/8, 1/4 where |ref| > atol.
        err, (max_abs, max_rel) = self.errors([1.125, -2.5, 2.0 ** -14, 2.0 ** -16],
                                              [1.0, -2.0, 2.0 ** -15, 0.0])
        self.assertEqual(err, [0.125, 0.5, 2.0 ** -15, 2.0 ** -16])
        self.assertEqual((max_abs, max_rel), (0.5, 0.25))

    def test_relative_error_only_where_the_reference_exceeds_atol(self):
        # |ref| = 2^-15 < 1e-4 with a relative error of 1 and ref = 0 are left out; ref = 1 is in.
        self.assertEqual(self.errors([2.0 ** -14, 1e-6, 1.0], [2.0 ** -15, 0.0, 1.0])[1],
                         (2.0 ** -15, 0.0))
        # No element above atol: the relative error stays 0 while the absolute one is reported.
        self.assertEqual(self.errors([1e-5, 5e-5], [0.0, 5e-5])[1], (1e-5, 0.0))
        # The bound is atol's: with atol 1e-2 the element of |ref| 2^-7 < 1e-2 does not count.
        _, (max_abs, max_rel) = self.errors([2.0 ** -6, 1.5], [2.0 ** -7, 1.0], atol=1e-2)
        self.assertEqual((max_abs, max_rel), (0.5, 0.5))

    def test_infinite_reference_is_left_out(self):
        # A half dtype's overflow: ref +-inf; the same inf, or a finite value, adds no error.
        err, errors = self.errors([math.inf, 65504.0, 1.5], [math.inf, -math.inf, 1.0])
        self.assertEqual(err, [0.0, 0.0, 0.5])
        self.assertEqual(errors, (0.5, 0.5))

    def test_nan_or_inf_result_where_the_reference_is_finite_is_an_infinite_error(self):
        for bad in (math.nan, math.inf, -math.inf):
            with self.subTest(got=bad):
                err, errors = self.errors([bad, 1.0], [1.0, 1.0])
                self.assertEqual(err, [math.inf, 0.0])
                self.assertEqual(errors, (math.inf, math.inf))

    def test_worst_over_trials(self):
        worst = {"max_abs_error": 0.0, "max_rel_error": 0.0, "eager_max_abs_error": 0.0,
                 "eager_max_rel_error": 0.0}
        score.raise_errors(worst, (0.5, 0.01))
        score.raise_errors(worst, (0.25, 0.02))
        score.raise_errors(worst, (3e-5, 1e-6), "eager_")
        self.assertEqual(worst, {"max_abs_error": 0.5, "max_rel_error": 0.02,
                                 "eager_max_abs_error": 3e-5, "eager_max_rel_error": 1e-6})

    def test_comparison_with_eager(self):
        def cmp(ours_abs, ours_rel, eager_abs, eager_rel):
            return score.eager_comparison({"max_abs_error": ours_abs, "max_rel_error": ours_rel,
                                           "eager_max_abs_error": eager_abs,
                                           "eager_max_rel_error": eager_rel})
        self.assertEqual(cmp(1e-5, 2e-6, 4e-5, 2e-6),
                         {"error_vs_eager": 0.25, "rel_error_vs_eager": 1.0,
                          "error_within_eager": True})
        # Ours smaller in abs but larger in rel: not within eager's.
        self.assertEqual(cmp(2e-5, 3e-6, 4e-5, 2e-6),
                         {"error_vs_eager": 0.5, "rel_error_vs_eager": 1.5,
                          "error_within_eager": False})
        # Both exact; eager exact and ours not (no finite ratio); eager's output not finite.
        self.assertEqual(cmp(0.0, 0.0, 0.0, 0.0),
                         {"error_vs_eager": 1.0, "rel_error_vs_eager": 1.0,
                          "error_within_eager": True})
        self.assertEqual(cmp(1e-7, 0.0, 0.0, 0.0),
                         {"error_vs_eager": None, "rel_error_vs_eager": 1.0,
                          "error_within_eager": False})
        self.assertEqual(cmp(1e-3, 1e-3, math.inf, math.inf),
                         {"error_vs_eager": 0.0, "rel_error_vs_eager": 0.0,
                          "error_within_eager": True})


class FakeTorchTest(unittest.TestCase):
    """Runs score.Harness's checks and timing on the CPU with a list-based stand-in for torch and
    planted cheats written in Python (the CPU half of the planted-cheat suite): each cheat must
    get its reason and the honest kernels must pass."""

    def score(self, kernel, problem=None):
        fake = FakeTorch()
        h = score.Harness(trials=6, runs=100, warmup=1, baselines=("eager",), log=lambda *a: None,
                          torch_module=fake, driver=FakeDriver(fake), kernel_class=FakeKernel,
                          helpers_ptx="")
        p = problem or ROWSUM_PROBLEM
        doc = launch_doc(p, scratch=(kernel == "uninit_scratch"))
        return h.score(p, doc, kernel, kernel_only=(problem is None)), fake

    def test_honest_kernels_pass(self):
        for k in ("honest_rowsum", "honest_rowsum_float32_order"):
            with self.subTest(kernel=k):
                r, _ = self.score(k)
                self.assertEqual((r["reason"], r["detail"]), ("ok", ""))
                self.assertTrue(r["correct"])
                self.assertEqual(r["ours"]["runs"], 100)
                self.assertAlmostEqual(r["ours"]["median_ms"], 0.2)

    def test_each_cheat_gets_its_reason(self):
        expected = {"cached_result": "wrong_answer", "partial_output": "incomplete_output",
                    "skip_reduction": "wrong_answer", "hardcoded": "wrong_answer",
                    "modifies_input": "input_modified", "uninit_smem": "nondeterministic",
                    "uninit_scratch": "nondeterministic", "race": "nondeterministic",
                    "lower_precision": "imprecise", "nan_rows": "nan_output",
                    "other_stream": "other_stream"}
        for k, want in expected.items():
            with self.subTest(kernel=k):
                r, _ = self.score(k)
                self.assertEqual(r["reason"], want, r.get("detail"))
                self.assertFalse(r["correct"])

    def test_fresh_allocations_and_distributions(self):
        r, fake = self.score("honest_rowsum")
        # Six trials, each with a new input allocation, all addresses distinct.
        ptrs = fake.launch_input_ptrs[:12:2]
        self.assertEqual(len(set(ptrs)), 6)
        # Inputs of the trials: uniform01 in [0,1), normal with a large spread, uniform [-1,1).
        # (two launches per trial: trial t's inputs are launch 2t's)
        lo, hi = fake.input_ranges[0]
        self.assertTrue(0 <= lo and hi < 1)
        lo, hi = fake.input_ranges[2]
        self.assertTrue(hi - lo > 40)
        lo, hi = fake.input_ranges[4]
        self.assertTrue(-1 <= lo < 0 < hi < 1)

    def test_eager_errors_are_measured_like_ours(self):
        # PyTorch's own summation order (the stand-in's float32 accumulation): exactly eager's
        # errors, over the same trials and reference.
        r, _ = self.score("honest_rowsum_float32_order")
        self.assertGreater(r["eager_max_abs_error"], 0.0)
        self.assertEqual((r["max_abs_error"], r["max_rel_error"]),
                         (r["eager_max_abs_error"], r["eager_max_rel_error"]))
        self.assertEqual((r["error_vs_eager"], r["rel_error_vs_eager"], r["error_within_eager"]),
                         (1.0, 1.0, True))
        # Correctly rounded sums: no larger than eager's; the ratios are ours / eager's.
        r, _ = self.score("honest_rowsum")
        self.assertTrue(r["error_within_eager"])
        self.assertLess(r["max_abs_error"], r["eager_max_abs_error"])
        self.assertEqual(r["error_vs_eager"], r["max_abs_error"] / r["eager_max_abs_error"])
        self.assertEqual(r["rel_error_vs_eager"], r["max_rel_error"] / r["eager_max_rel_error"])
        # Sums of float16-rounded inputs: imprecise, and larger errors than eager's.
        r, _ = self.score("lower_precision")
        self.assertEqual(r["reason"], "imprecise")
        self.assertFalse(r["error_within_eager"])
        self.assertGreater(r["error_vs_eager"], 1.0)
        # A check stopped at a failing trial reports eager's errors but no comparison.
        r, _ = self.score("nan_rows")
        self.assertEqual(r["reason"], "nan_output")
        self.assertGreater(r["eager_max_abs_error"], 0.0)
        self.assertNotIn("error_vs_eager", r)
        self.assertNotIn("error_within_eager", r)

    def test_baseline_is_timed_and_reported(self):
        r, _ = self.score("honest_rowsum", problem=ROWSUM_PROBLEM)
        self.assertIn("median_ms", r["baselines"]["eager"])
        self.assertTrue(r["correct"])
        self.assertIn("cuDNN convolutions TF32 on", r["baselines"]["eager"]["precision"])


class FakeTorchHalfTest(unittest.TestCase):
    """score.Harness's check on float16 / bfloat16 problems, on the CPU stand-in: the dtype's
    poison, inputs of the dtype, the rounded reference, the 1e-2 tolerance, and the eager
    baselines' precision settings."""

    def score(self, kernel, dtype, baselines=()):
        fake = FakeTorch()
        h = score.Harness(trials=6, runs=100, warmup=1, baselines=baselines,
                          log=lambda *a: None, torch_module=fake, driver=FakeDriver(fake),
                          kernel_class=FakeKernel, helpers_ptx="")
        p = dict(ROWSUM_PROBLEM, dtype=dtype)
        return h.score(p, launch_doc(p), kernel, kernel_only=not baselines), fake

    def test_honest_kernel_passes_and_cheats_are_caught(self):
        expected = {"honest_rowsum": "ok", "honest_rowsum_float32_order": "ok",
                    "off_by_5e-3": "ok", "off_by_2e-2": "wrong_answer",
                    "off_by_1e-1": "wrong_answer",
                    "partial_output": "incomplete_output", "canonical_nan": "nan_output",
                    "modifies_input": "input_modified", "race": "nondeterministic",
                    "cached_result": "wrong_answer", "hardcoded": "wrong_answer"}
        for dtype in ("float16", "bfloat16"):
            for k, want in expected.items():
                with self.subTest(dtype=dtype, kernel=k):
                    r, _ = self.score(k, dtype)
                    self.assertEqual(r["reason"], want, r.get("detail"))
                    self.assertEqual(r["correct"], want == "ok")
                    self.assertEqual(r["dtype"], dtype)

    def test_inputs_are_of_the_dtype_and_float16_normal_is_narrower(self):
        for dtype, fake_dtype in (("float16", F16), ("bfloat16", BF16)):
            with self.subTest(dtype=dtype):
                r, fake = self.score("honest_rowsum", dtype)
                self.assertEqual(fake.launch_dtypes, {(fake_dtype, fake_dtype)})
                lo, hi = fake.input_ranges[2]   # trial 1: the normal distribution
                mean, std = score.NORMAL_BY_DTYPE[dtype]
                self.assertLess(hi - lo, 14 * std)
                self.assertGreater(hi - lo, 2 * std)
        self.assertEqual(score.NORMAL_BY_DTYPE["float32"], (2.0, 32.0))
        self.assertEqual(score.NORMAL_BY_DTYPE["bfloat16"], (2.0, 32.0))
        # float16: a 65536-deep dot product of normal(0.5, 4) values, 6 standard deviations
        # out, stays below 65504 (products have mean 0.25 and standard deviation
        # sqrt((16 + 0.25)^2 - 0.25^2)).
        mean, std = score.NORMAL_BY_DTYPE["float16"]
        k = 65536
        sd = math.sqrt(k * ((std ** 2 + mean ** 2) ** 2 - mean ** 4))
        self.assertLess(k * mean ** 2 + 6 * sd, 65504)

    def test_eager_baselines_say_and_use_their_precision(self):
        r, fake = self.score("honest_rowsum", "float16", baselines=("eager", "eager_no_tf32"))
        self.assertTrue(r["correct"], r.get("detail"))
        eager = r["baselines"]["eager"]["precision"]
        self.assertIn("float16 inputs and outputs, float32 accumulation", eager)
        self.assertIn("allowed (fp16 True, bf16 True)", eager)
        self.assertIn("disallowed", r["baselines"]["eager_no_tf32"]["precision"])
        self.assertIn("eager accumulates in fp32", score.render_row(r))
        # PyTorch's float16 runs, in order, with the reduced-precision flags they saw: the output
        # shape (defaults), the check's six (the slack: strict), eager's warm-up and 100 timed
        # runs (defaults), eager_no_tf32's (strict); the scorer leaves them strict.
        import itertools
        runs = [(f, b) for d, f, b in fake.reduced_precision_seen if d == "float16"]
        self.assertEqual([(k, len(list(g))) for k, g in itertools.groupby(runs)],
                         [((True, True), 1), ((False, False), 6), ((True, True), 101),
                          ((False, False), 101)])
        self.assertFalse(fake.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)

    def test_markdown_explains_half_precision_baselines(self):
        r, _ = self.score("honest_rowsum", "bfloat16", baselines=("eager",))
        suite = {"suite": "half", "source": "s.json", "results": [r],
                 "summary": score.summarize([r], ("eager",))}
        md = score.render_markdown({"half_peak_tflops": 1070.5,
                                    "reduced_precision_defaults": "fp16 True, bf16 True"}, [suite])
        self.assertIn("float32 accumulation", md)
        self.assertIn("1070 TFLOP/s", md)
        self.assertIn("bfloat16 (eager: fp32 accumulation) ok", md)


class FakeTensorMapTest(unittest.TestCase):
    """tensor_map arguments through score.Harness on the CPU stand-in: each set of buffers (every
    trial's, the timing's) gets its maps encoded over its own sources, passed at the maps'
    indices; a failed encode is a launch_error."""

    def harness(self):
        fake = FakeTorch()
        drv = FakeDriver(fake)
        h = score.Harness(trials=6, runs=100, warmup=1, baselines=(), log=lambda *a: None,
                          torch_module=fake, driver=drv, kernel_class=FakeKernel,
                          helpers_ptx="")
        return h, fake, drv

    def test_maps_are_encoded_over_each_set_of_buffers(self):
        h, fake, drv = self.harness()
        doc = launch_doc(ROWSUM_PROBLEM, tensor_maps=True)
        self.assertEqual(score.validate_launch(ROWSUM_PROBLEM, doc, [8]), [])
        r = h.score(ROWSUM_PROBLEM, doc, "honest_rowsum", kernel_only=True)
        self.assertEqual((r["reason"], r["detail"]), ("ok", ""))
        # Two launches per trial, then the warm-up and the timed runs on one set of buffers.
        self.assertEqual(len(fake.launch_bufs), 6 * 2 + 1 + 100)
        for bufs in fake.launch_bufs:
            for index, source, want in ((1, 2, ROWSUM_Y_ENCODING), (3, 0, ROWSUM_X_ENCODING)):
                enc, address = drv.decode(bufs[index])
                self.assertEqual(enc, want)
                self.assertEqual(address, bufs[source].data_ptr())
        # One encode per map and set of buffers (6 trials + the timing set), each over new
        # addresses; the two launches of a trial share theirs.
        self.assertEqual(len(drv.encoded), 2 * 7)
        self.assertEqual(len({a for _, a in drv.encoded}), 2 * 7)
        self.assertIs(fake.launch_bufs[0][1], fake.launch_bufs[1][1])

    def test_the_kernel_gets_the_maps_device_pointers_at_their_indices(self):
        # score.Kernel's real parameter assembly (ctypes), on buffers from launch_buffers.
        h, fake, drv = self.harness()
        doc = launch_doc(ROWSUM_PROBLEM, tensor_maps=True)
        xs = h.fresh_inputs(ROWSUM_PROBLEM, "uniform")
        bufs, out_index, scratch = h.launch_buffers(doc["arguments"], xs)
        self.assertEqual((out_index, scratch), (2, []))
        score.Kernel(drv, doc, "honest_rowsum").bind(bufs, h.stream())()
        params = drv.launched_params.pop()
        self.assertEqual(params, [b.data_ptr() for b in bufs])
        self.assertEqual(params[0], xs[0].data_ptr())
        self.assertEqual(drv.decode(bufs[1]), (ROWSUM_Y_ENCODING, params[2]))
        self.assertEqual(drv.decode(bufs[3]), (ROWSUM_X_ENCODING, params[0]))
        self.assertEqual([p % score.TENSOR_MAP_ALIGN for p in (params[1], params[3])], [0, 0])

    def test_half_sources_encode_their_dtype(self):
        h, fake, drv = self.harness()
        p = dict(ROWSUM_PROBLEM, dtype="bfloat16")
        r = h.score(p, launch_doc(p, tensor_maps=True), "honest_rowsum", kernel_only=True)
        self.assertEqual(r["reason"], "ok", r["detail"])
        enc, _ = drv.encoded[-1]  # X's map: 16 x 2 bytes per row
        self.assertEqual((enc["tensorDataType"], enc["globalStrides"]), (9, [32]))

    def test_a_failed_encode_is_a_launch_error(self):
        h, fake, drv = self.harness()
        drv.fail_encode = True
        r = h.score(ROWSUM_PROBLEM, launch_doc(ROWSUM_PROBLEM, tensor_maps=True),
                    "honest_rowsum", kernel_only=True)
        self.assertEqual(r["reason"], "launch_error")
        self.assertEqual(r["detail"], "trial 0: cuTensorMapEncodeTiled failed: CUDA error 1 "
                         "(invalid argument)")
        self.assertEqual(fake.launch_bufs, [])

    def test_an_unaligned_source_is_a_launch_error(self):
        h, fake, drv = self.harness()
        real_empty = fake.empty

        def empty(shape, dtype=F32, device=None):
            t = real_empty(shape, dtype, device)
            t.ptr += 8  # an address no PyTorch allocation has
            return t
        fake.empty = empty
        r = h.score(ROWSUM_PROBLEM, launch_doc(ROWSUM_PROBLEM, tensor_maps=True),
                    "honest_rowsum", kernel_only=True)
        self.assertEqual(r["reason"], "launch_error")
        self.assertRegex(r["detail"], r"^trial 0: tensor map 'Y_tmap': source 'Y' at 0x[0-9a-f]+ "
                         "is not 16-byte aligned$")


ROWSUM_PROBLEM = {"name": "rowsum", "op": "reduce_sum", "shapes": [[8, 16]], "dtype": "float32",
                  "attrs": {"axes": "1"}, "inputs": ["X"], "torch": "torch.sum(X, dim=1)",
                  "tags": []}
# Tensor maps over the row sum's X [8, 16] (boxes of 4 rows of 64 bytes, 64-byte swizzle) and Y [8]
# (one 32-byte box, no swizzle), as float32, and cuTensorMapEncodeTiled's arguments for them.
ROWSUM_X_MAP = {"source": "X", "dims": [8, 16], "box": [4, 16], "swizzle": 64}
ROWSUM_Y_MAP = {"source": "Y", "dims": [8], "box": [8], "swizzle": 0}
ROWSUM_X_ENCODING = {"tensorDataType": 7, "tensorRank": 2, "globalDim": [16, 8],
                     "globalStrides": [64], "boxDim": [16, 4], "elementStrides": [1, 1],
                     "interleave": 0, "swizzle": 2, "l2Promotion": 2, "oobFill": 0}
ROWSUM_Y_ENCODING = {"tensorDataType": 7, "tensorRank": 1, "globalDim": [8], "globalStrides": [],
                     "boxDim": [8], "elementStrides": [1], "interleave": 0, "swizzle": 0,
                     "l2Promotion": 2, "oobFill": 0}


def launch_doc(problem, scratch=False, tensor_maps=False):
    """The row sum's launch JSON; with `tensor_maps`, maps of Y (before Y: its source is allocated
    after it) and of X at indices 1 and 3: X 0, Y_tmap 1, Y 2, X_tmap 3."""
    dt = problem["dtype"]
    args = [{"index": 0, "name": "X", "kind": "input", "dtype": dt, "shape": [8, 16]},
            {"index": 1, "name": "Y", "kind": "output", "dtype": dt, "shape": [8]}]
    if tensor_maps:
        args.insert(1, {"index": 1, "name": "Y_tmap", "kind": "tensor_map", "dtype": "int64",
                        "shape": [16], "tensor_map": ROWSUM_Y_MAP})
        args[2]["index"] = 2
        args.append({"index": 3, "name": "X_tmap", "kind": "tensor_map", "dtype": "int64",
                     "shape": [16], "tensor_map": ROWSUM_X_MAP})
    if scratch:
        args.append({"index": len(args), "name": "acc", "kind": "scratch", "dtype": "float32",
                     "shape": [8]})
    return {"workload": {k: problem[k] for k in ("op", "shapes", "dtype", "attrs")},
            "arguments": args,
            "launches": [{"entry": "k", "grid": [8, 1, 1], "block": [16, 1, 1]}]}


# --- a list-based stand-in for the part of torch that score.Harness uses ----------------------

class _DType:
    def __init__(self, name, size):
        self.name, self.size = name, size
        self.is_floating_point = name.startswith("float")

    def __repr__(self):
        return self.name


F32, F64, I32, BOOL = _DType("float32", 4), _DType("float64", 8), _DType("int32", 4), \
    _DType("bool", 1)
F16, BF16, I16 = _DType("float16", 2), _DType("bfloat16", 2), _DType("int16", 2)
U8 = _DType("uint8", 1)


def _f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _bits_f32(b):
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def _f32(x):
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


class T:
    """A dense tensor: float32 keeps its bit patterns (so int32 views alias them), float64 and
    bool keep Python values."""
    _next_ptr = [4096]

    def __init__(self, shape, dtype, store=None, bits=False):
        self.shape = tuple(shape)
        self.dtype = dtype
        n = 1
        for e in self.shape:
            n *= e
        self.n = n
        self.store = store if store is not None else [0] * n  # float32/int32: bits
        self.ptr = T._next_ptr[0]
        T._next_ptr[0] += 256 * (1 + n)

    @staticmethod
    def of(values, shape, dtype):
        t = T(shape, dtype)
        t.set(values)
        return t

    def vals(self):
        if self.dtype is F32:
            return [_bits_f32(b) for b in self.store]
        if self.dtype is F16:
            return [half_value(b) for b in self.store]
        if self.dtype is BF16:
            return [_bits_f32(b << 16) for b in self.store]
        if self.dtype is I32:
            return [b - (1 << 32) if b >= 1 << 31 else b for b in self.store]
        if self.dtype is I16:
            return [b - (1 << 16) if b >= 1 << 15 else b for b in self.store]
        return list(self.store)

    def set(self, values):
        if self.dtype is F32:
            self.store[:] = [_f32_bits(_f32(v)) for v in values]
        elif self.dtype is F16:
            self.store[:] = [half_bits(v) for v in values]
        elif self.dtype is BF16:  # as torch: float64 -> float32 -> bfloat16
            self.store[:] = [bf16_bits_from_f32_bits(_f32_bits(_f32(v))) for v in values]
        elif self.dtype is I32:
            self.store[:] = [int(v) & 0xFFFFFFFF for v in values]
        elif self.dtype is I16:
            self.store[:] = [int(v) & 0xFFFF for v in values]
        elif self.dtype is U8:
            self.store[:] = [int(v) & 0xFF for v in values]
        elif self.dtype is BOOL:
            self.store[:] = [bool(v) for v in values]
        else:
            self.store[:] = [float(v) for v in values]

    # views, copies, conversions
    def view(self, dtype):
        assert {self.dtype, dtype} <= {F32, I32} or {self.dtype, dtype} <= {F16, BF16, I16}
        v = T(self.shape, dtype, store=self.store)
        v.ptr = self.ptr
        return v

    def clone(self):
        return T(self.shape, self.dtype, store=list(self.store))

    def to(self, dtype):
        return T.of(self.vals(), self.shape, dtype)

    def double(self):
        return self.to(F64)

    def flatten(self):
        return T(self.shape and (self.n,), self.dtype, store=self.store)

    def numel(self):
        return self.n

    def data_ptr(self):
        return self.ptr

    def element_size(self):
        return self.dtype.size

    def fill_(self, v):
        self.set([v] * self.n)
        return self

    def normal_(self, generator=None):
        self.set([generator.rng.gauss(0, 1) for _ in range(self.n)])
        return self

    # elementwise arithmetic (same shape or scalar)
    def _bin(self, other, f, dtype=None):
        a = self.vals()
        b = other.vals() if isinstance(other, T) else [other] * self.n
        if dtype is None:
            dtype = F64 if (self.dtype is F64 or (isinstance(other, T) and other.dtype is F64)) \
                else F32
        return T.of([f(x, y) for x, y in zip(a, b)], self.shape, dtype)

    def __add__(self, o): return self._bin(o, lambda x, y: x + y)
    __radd__ = __add__
    def __sub__(self, o): return self._bin(o, lambda x, y: x - y)
    def __rsub__(self, o): return self._bin(o, lambda x, y: y - x)
    def __mul__(self, o): return self._bin(o, lambda x, y: x * y)
    __rmul__ = __mul__
    def __truediv__(self, o): return self._bin(o, lambda x, y: x / y if y else math.inf)
    def __gt__(self, o): return self._bin(o, lambda x, y: x > y, BOOL)
    def __ge__(self, o): return self._bin(o, lambda x, y: x >= y, BOOL)
    def __eq__(self, o): return self._bin(o, lambda x, y: x == y, BOOL)
    def __ne__(self, o): return self._bin(o, lambda x, y: x != y, BOOL)
    def __and__(self, o): return self._bin(o, lambda x, y: bool(x and y), BOOL)
    def __or__(self, o): return self._bin(o, lambda x, y: bool(x or y), BOOL)
    __hash__ = object.__hash__

    def __invert__(self):
        return T.of([not v for v in self.vals()], self.shape, BOOL)

    def abs(self):
        return T.of([abs(v) for v in self.vals()], self.shape, self.dtype)

    # reductions and indexing
    def _scalar(self, v):
        return T.of([v], (), F64 if isinstance(v, float) else I32 if not isinstance(v, bool)
                    else BOOL)

    def sum(self):
        return self._scalar(int(sum(self.vals())) if self.dtype is BOOL else
                            float(sum(self.vals())))

    def max(self):
        vs = self.vals()
        return self._scalar(math.nan if any(v != v for v in vs) else float(max(vs)))

    def any(self):
        return any(self.vals())

    def all(self):
        return all(self.vals())

    def item(self):
        return self.vals()[0]

    def __int__(self):
        assert self.n == 1
        return int(self.vals()[0])

    def __bool__(self):
        assert self.n == 1
        return bool(self.vals()[0])

    def nonzero(self):
        idx = [i for i, v in enumerate(self.vals()) if v]
        return [T.of([i], (1,), I32) for i in idx]

    def __getitem__(self, key):
        if isinstance(key, T):
            return T.of([v for v, m in zip(self.vals(), key.vals()) if m],
                        (sum(1 for m in key.vals() if m),), self.dtype)
        return T.of([self.vals()[key]], (), self.dtype)


class _NS:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeGenerator:
    def __init__(self, device=None):
        import random
        self.rng = random.Random(0)

    def manual_seed(self, seed):
        self.rng.seed(seed)
        return self


class FakeTorch:
    """The subset of torch that score.Harness calls."""
    float32, float64, int32 = F32, F64, I32
    float16, bfloat16, int16, uint8 = F16, BF16, I16, U8

    def __init__(self):
        self.gpu_ms = 0.0  # the timed stream's clock: advanced by launches on it
        self.launch_input_ptrs = []
        self.launch_bufs = []  # every launch's buffers, in argument order
        self.input_ranges = []
        self.reduced_precision_seen = []  # (dtype, fp16 flag, bf16 flag) of every sum
        self.launch_dtypes = set()
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = 0.0

            def record(self):
                self.t = fake.gpu_ms

            def elapsed_time(self, other):
                return other.t - self.t

        class NoGrad:
            def __enter__(self):
                return self

            def __exit__(self, *a):
                return False

        self.no_grad = NoGrad
        self.Generator = FakeGenerator
        self.cuda = _NS(
            init=lambda: None, synchronize=lambda: None, Event=Event,
            current_stream=lambda: _NS(cuda_stream=0), empty_cache=lambda: None,
            get_device_properties=lambda i: _NS(name="fake", L2_cache_size=64,
                                                multi_processor_count=2))
        # PyTorch's defaults; the reduced-precision flags are seen by each reduction (sum).
        self.backends = _NS(cuda=_NS(matmul=_NS(fp32_precision="ieee",
                                                allow_fp16_reduced_precision_reduction=True,
                                                allow_bf16_reduced_precision_reduction=True)),
                            cudnn=_NS(conv=_NS(fp32_precision="tf32")))
        self.nn = _NS(functional=_NS())

    def _random(self, shape, generator, draw):
        shape = tuple(shape)
        n = 1
        for e in shape:
            n *= e
        t = T.of([draw(generator.rng) for _ in range(n)], shape, F32)
        return t

    def rand(self, shape, device=None, generator=None):
        return self._random(shape, generator, lambda r: r.random())

    def randn(self, shape, device=None, generator=None):
        return self._random(shape, generator, lambda r: r.gauss(0, 1))

    def empty(self, shape, dtype=F32, device=None):
        return T(shape if isinstance(shape, (list, tuple)) else (shape,), dtype)

    def zeros(self, shape, device=None):
        return T(shape if isinstance(shape, (list, tuple)) else (shape,), F32)

    def tensor(self, values, dtype=F32, device=None):
        return T.of(list(values), (len(values),), dtype)

    def where(self, cond, a, b):
        bv = b.vals() if isinstance(b, T) else [b] * a.n
        return T.of([x if c else y for c, x, y in zip(cond.vals(), a.vals(), bv)], a.shape,
                    a.dtype)

    def isfinite(self, t):
        return T.of([math.isfinite(v) for v in t.vals()], t.shape, BOOL)

    def isinf(self, t):
        return T.of([math.isinf(v) for v in t.vals()], t.shape, BOOL)

    def signbit(self, t):
        return T.of([math.copysign(1.0, v) < 0 for v in t.vals()], t.shape, BOOL)

    def sum(self, x, dim):
        assert dim == 1 and len(x.shape) == 2
        rows, cols = x.shape
        m = self.backends.cuda.matmul
        self.reduced_precision_seen.append((x.dtype.name,
                                            m.allow_fp16_reduced_precision_reduction,
                                            m.allow_bf16_reduced_precision_reduction))
        v = x.vals()
        out = []
        for i in range(rows):
            acc = 0.0
            for j in range(cols):
                acc = acc + v[i * cols + j]
                if x.dtype in (F32, F16, BF16):  # PyTorch's acc_type: float32
                    acc = _f32(acc)
            out.append(acc)
        return T.of(out, (rows,), x.dtype)  # float16 / bfloat16: rounded once


class FakeDriver:
    """Stands in for score.Driver: scribbles change a 'shared memory' seed; encode_tensor_map
    records its arguments and returns 128 bytes that start with the record's number (little
    endian; the rest 0xEE), or fails as Driver._check does when `fail_encode` is set; lib's
    cuLaunchKernel records the values that score.Kernel's parameters point to."""

    def __init__(self, fake):
        import ctypes
        self.ct = ctypes
        self.fake = fake
        self.side_stream = "side"
        self.smem_seed = 0
        self.encoded = []  # (encoding, global address) of every encode_tensor_map
        self.fail_encode = False
        self.launched_params = []
        self.lib = _NS(cuLaunchKernel=self._cu_launch_kernel)

    def encode_tensor_map(self, enc, address):
        if self.fail_encode:
            raise score.CudaError("cuTensorMapEncodeTiled failed: CUDA error 1 (invalid argument)")
        self.encoded.append((enc, address))
        return (len(self.encoded) - 1).to_bytes(8, "little") + b"\xee" * 120

    def decode(self, map_buffer):
        """The (encoding, address) record whose bytes a stand-in device buffer holds."""
        assert (map_buffer.dtype, map_buffer.numel()) == (U8, 128)
        return self.encoded[int.from_bytes(bytes(map_buffer.vals()[:8]), "little")]

    def _cu_launch_kernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        n = len(params)
        self.launched_params.append(
            [self.ct.c_uint64.from_address(params[i]).value for i in range(n)])
        return 0

    def load(self, text):
        return text

    def unload(self, mod):
        pass

    def attribute(self, attr):
        return 1024

    def function(self, mod, name, dynamic_shared=0):
        return name

    def launch(self, f, grid, block, shared, stream, args):
        if f == "smem_scribble":
            self.smem_seed = args[0].value

    def synchronize(self):
        pass


class FakeKernel:
    """The planted kernels of the CPU suite, by name (passed as the 'PTX')."""
    state = {}

    def __init__(self, drv, doc, name):
        self.drv, self.doc, self.name = drv, doc, name
        self.cache = None

    def close(self):
        pass

    def bind(self, bufs, stream):
        return lambda: self.launch(bufs)

    def run(self, bufs, stream):
        self.launch(bufs)

    def launch(self, bufs):
        fake = self.drv.fake
        fake.launch_bufs.append(list(bufs))
        kinds = [a["kind"] for a in self.doc["arguments"]]
        x, y = bufs[0], bufs[kinds.index("output")]
        fake.launch_input_ptrs.append(x.data_ptr())
        fake.launch_dtypes.add((x.dtype, y.dtype))
        xs = x.vals()
        fake.input_ranges.append((min(xs), max(xs)))
        rows = [xs[i * 16:(i + 1) * 16] for i in range(8)]
        exact = [math.fsum(r) for r in rows]
        k = self.name
        main_ms = 0.2
        if k in ("honest_rowsum", "other_stream"):
            y.set(exact)
            if k == "other_stream":
                main_ms = 0.0
                time.sleep(0.0005)  # the work, on a stream the events do not see
        elif k == "honest_rowsum_float32_order":
            y.set(fake.sum(x, 1).vals())
        elif k == "cached_result":
            if self.cache is None:
                self.cache = exact
            y.set(self.cache)
        elif k == "partial_output":  # stores the first 4 elements only (the rest keep their bits)
            y.store[:4] = T.of(exact, y.shape, y.dtype).store[:4]
        elif k == "skip_reduction":
            y.set([4 * math.fsum(r[:4]) for r in rows])
        elif k == "hardcoded":
            y.set([8.0] * 8)
        elif k == "modifies_input":
            y.set(exact)
            x.set([max(v, 0.0) for v in xs])
        elif k == "uninit_smem":
            y.set([e + (self.drv.smem_seed % 97) * 0.37 for e in exact])
        elif k == "uninit_scratch":
            acc = bufs[kinds.index("scratch")]
            # GPU arithmetic on a NaN returns the canonical NaN (x86 would keep the payload).
            acc.set([a + e if a == a else math.nan for a, e in zip(acc.vals(), exact)])
            y.set(acc.vals())
        elif k == "race":
            import random
            y.set([e - (r[0] if random.random() < 0.5 else 0.0) for e, r in zip(exact, rows)])
        elif k == "lower_precision":
            h = [struct.unpack("<e", struct.pack("<e", v))[0] for v in xs]
            y.set([math.fsum(h[i * 16:(i + 1) * 16]) for i in range(8)])
        elif k == "nan_rows":
            y.set([e if abs(e) < 100 else math.nan for e in exact])
        elif k == "off_by_5e-3":
            y.set([e * 1.005 for e in exact])
        elif k == "off_by_2e-2":
            y.set([e * 1.02 + 0.02 for e in exact])
        elif k == "off_by_1e-1":
            y.set([e * 1.1 + 0.1 for e in exact])
        elif k == "canonical_nan":  # the GPU's NaN (0x7FFF) in two elements: computed, not poison
            y.set(exact)
            y.view(I16).store[3:5] = [0x7FFF, 0x7FFF]
        else:
            raise AssertionError(k)
        fake.gpu_ms += main_ms


if __name__ == "__main__":
    unittest.main()

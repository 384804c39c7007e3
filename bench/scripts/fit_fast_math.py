#!/usr/bin/env python3
"""Fits the float32 polynomial coefficients of the GPU math expansions (codegen/fast_math.cc).

Standard library only (no numpy): a Remez exchange in float64 on a dense grid, the polynomial in a
variable scaled to [-1, 1] (well conditioned), then expanded into monomials of the variable the
kernel evaluates, rounded to float32, and the rounded polynomial evaluated by emulated float32
Horner steps (fma: the product of two float32 is exact in float64, then one rounding to float32)
against float64 libm. The maximum errors printed are of the float32 polynomial alone, not of the
hardware ex2 / lg2 it feeds (those are measured on the device).

  erf, |x| < 1:        erf(x) = x + x * P(x^2)            P ~ erf(x) / x - 1 (the x term exact),
                                                          relative error of erf(x) / x
  erf, 1 <= |x| < 3.92: erf(x) = 1 - 2^Q(|x|)             Q ~ log2(erfc(|x|)), weighted by the
                                                          error it causes in erf (ln 2 erfc / erf)
  log1p, -0.25 <= y < 0.33: log1p(y) = y + y^2 R(y)       relative error of log1p

Usage: python3 bench/scripts/fit_fast_math.py   (prints the C++ constants and the fit errors)
"""
import math
import struct


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def f32_hex(v):
    return "0x%08X" % struct.unpack("<I", struct.pack("<f", v))[0]


def solve(a, b):
    """Gaussian elimination with partial pivoting (small dense systems)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(c + 1, n):
            k = m[r][c] / m[c][c]
            for j in range(c, n + 1):
                m[r][j] -= k * m[c][j]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][j] * x[j] for j in range(r + 1, n))) / m[r][r]
    return x


def peval(c, u):
    acc = 0.0
    for cj in reversed(c):
        acc = acc * u + cj
    return acc


def remez(f, w, lo, hi, deg, grid=6000, iters=30):
    """Coefficients (in u = (v - mid) / half) minimizing max |w(v) (f(v) - p(v))| on [lo, hi]."""
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    # Chebyshev-distributed grid (dense near the ends, where the extrema crowd).
    us = [-math.cos(math.pi * i / (grid - 1)) for i in range(grid)]
    vs = [mid + half * u for u in us]
    fv = [f(v) for v in vs]
    wv = [w(v) for v in vs]
    n = deg + 2
    ref = [round((grid - 1) * (1 - math.cos(math.pi * i / (n - 1))) / 2) for i in range(n)]
    c = None
    for _ in range(iters):
        rows = [[us[i] ** j for j in range(deg + 1)] + [(-1) ** k / wv[i]] for k, i in enumerate(ref)]
        sol = solve(rows, [fv[i] for i in ref])
        c = sol[:-1]
        err = [wv[i] * (fv[i] - peval(c, us[i])) for i in range(grid)]
        # One extremum per run of equal sign, then keep n alternating ones of largest magnitude.
        runs = []
        i = 0
        while i < grid:
            j = i
            best = i
            while j < grid and (err[j] >= 0) == (err[i] >= 0):
                if abs(err[j]) > abs(err[best]):
                    best = j
                j += 1
            runs.append(best)
            i = j
        while len(runs) > n:
            # Drop the smaller of the two end runs (keeps alternation).
            if abs(err[runs[0]]) < abs(err[runs[-1]]):
                runs.pop(0)
            else:
                runs.pop()
        if len(runs) < n:
            break
        ref = runs
    return c, mid, half


def to_monomials(c, mid, half, shift):
    """Coefficients in (v - shift) of the polynomial given in u = (v - mid) / half."""
    # u = ((v - shift) - (mid - shift)) / half = (s - d) / half.
    d = mid - shift
    deg = len(c) - 1
    out = [0.0] * (deg + 1)
    for j, cj in enumerate(c):
        # cj * ((s - d) / half)^j = cj / half^j * sum_k binom(j, k) s^k (-d)^(j-k)
        for k in range(j + 1):
            out[k] += cj / half ** j * math.comb(j, k) * (-d) ** (j - k)
    return out


def horner_f32(coef, s):
    """Float32 Horner with fma, highest coefficient first."""
    acc = coef[-1]
    for cj in reversed(coef[:-1]):
        acc = f32(acc * s + cj)
    return acc


def floats_between(lo, hi, count):
    """About `count` float32 values evenly spaced in bit pattern over [lo, hi] (lo, hi >= 0)."""
    a = struct.unpack("<I", struct.pack("<f", lo))[0]
    b = struct.unpack("<I", struct.pack("<f", hi))[0]
    step = max(1, (b - a) // count)
    return [struct.unpack("<f", struct.pack("<I", k))[0] for k in range(a, b, step)]


def ulp_err(got, want):
    """Error in units of the float32 ulp at the float64 reference."""
    if want == 0:
        return 0.0 if got == 0 else math.inf
    e = math.frexp(abs(want))[1] - 24
    return abs(got - want) / max(2.0 ** e, 2.0 ** -149)


def fit_erf_small(b1, deg):
    def g(t):
        if t == 0:
            return 2 / math.sqrt(math.pi) - 1
        s = math.sqrt(t)
        return math.erf(s) / s - 1

    c, mid, half = remez(g, lambda t: 1 / (1 + g(t)), 0.0, b1 * b1, deg)
    p = [f32(v) for v in to_monomials(c, mid, half, 0.0)]
    worst = 0.0
    for x in floats_between(2.0 ** -126, b1, 200000):
        t = f32(x * x)
        got = f32(x * horner_f32(p, t) + x)
        worst = max(worst, ulp_err(got, math.erf(x)))
    return p, worst


def fit_erf_large(b1, b2, deg):
    q = lambda a: math.log2(math.erfc(a))
    w = lambda a: math.log(2) * math.erfc(a) / math.erf(a)
    c, mid, half = remez(q, w, b1, b2, deg)
    p = [f32(v) for v in to_monomials(c, mid, half, 0.0)]
    worst = 0.0
    for a in floats_between(b1, b2, 200000):
        got = f32(1 - f32(2.0 ** horner_f32(p, a)))
        worst = max(worst, ulp_err(got, math.erf(a)))
    return p, worst


def fit_log1p(lo, hi, deg):
    def r(y):
        if abs(y) < 1e-4:  # series: (log1p(y) - y) / y^2 = -1/2 + y/3 - y^2/4 + ...
            return -0.5 + y / 3 - y * y / 4 + y ** 3 / 5
        return (math.log1p(y) - y) / (y * y)

    # Weight: the error of y + y^2 R relative to log1p(y).
    def w(y):
        return 1.0 if y == 0 else y * y / abs(math.log1p(y))

    c, mid, half = remez(r, w, lo, hi, deg)
    p = [f32(v) for v in to_monomials(c, mid, half, 0.0)]
    worst = 0.0
    ys = floats_between(2.0 ** -126, hi, 100000) + [-v for v in floats_between(2.0 ** -126, -lo, 100000)]
    for y in ys:
        got = f32(f32(y * y) * horner_f32(p, y) + y)
        worst = max(worst, ulp_err(got, math.log1p(y)))
    return p, worst


def print_coefficients(name, p):
    print("// %s, lowest degree first" % name)
    print("constexpr float %s[] = {%s};" % (name, ", ".join("%.9gf" % v for v in p)))
    print("//   bits: %s" % " ".join(f32_hex(v) for v in p))


def main():
    b1 = 1.0
    # Above b2, erfc(x) < 2^-25: float32 erf rounds to 1 (the expansion clamps |x| to b2).
    b2 = 3.0
    while math.erfc(b2) >= 2.0 ** -25:
        b2 = f32(b2 + 2.0 ** -10)
    print("erf clamp b2 = %.9g (erfc = %.3g, 2^-25 = %.3g)" % (b2, math.erfc(b2), 2.0 ** -25))
    # The degrees codegen/fast_math.cc uses: the lowest whose float32 evaluation stays within about
    # 1.3 ulp (one degree less is 20 ulp for P, 1.2 ulp for Q, 1.2 ulp for R).
    p, e = fit_erf_small(b1, 5)
    print("erf |x| < %g: P degree 5 in x^2: max %.3f ulp (float32 evaluation)" % (b1, e))
    print_coefficients("kErfSmall", p)
    p, e = fit_erf_large(b1, b2, 5)
    print("erf [%g, %g): Q degree 5: max %.3f ulp" % (b1, b2, e))
    print_coefficients("kErfLarge", p)
    p, e = fit_log1p(-0.25, 1.0 / 3, 7)
    print("log1p [-0.25, 1/3): R degree 7: max %.3f ulp" % e)
    print_coefficients("kLog1pSmall", p)


if __name__ == "__main__":
    main()

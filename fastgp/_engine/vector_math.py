"""Vectorisable exp, log1p and sin/cos of pi x for rows of a tile.

The fill and the gradient pass each evaluate N^2 / 2 exponentials, and libm's
scalar ``exp`` is a call LLVM cannot vectorise (Numba has no vector math
library unless Intel's SVML is installed). This routine is plain arithmetic, so
LLVM vectorises it; it is about three times as fast as libm's per element here and
accurate to about one ulp (checked against numpy.exp in tests/test_vexp.py).

Method (Cody & Waite 1980; Tang 1989): x = k ln2 + r with k = round(x / ln2)
and |r| <= ln2 / 2; k is rounded by adding 1.5 * 2^52, which also leaves k's
bits where 2^k can be assembled without a float-to-int conversion; ln2 is
split into a high part with trailing zero bits and a low part so that
k * LN2_HI is exact; exp(r) is its Taylor polynomial of degree 13 (truncation
error r^14 / 14! < 2e-18 relative). Arguments below -708 (results below the smallest normal double)
give 0, past log(DBL_MAX) inf, NaN stays NaN.

:func:`log1p_inplace` and :func:`sincos_pi` follow the same plan (range
reduction by exact floating-point steps, then a polynomial, no libm call in
the loop); their methods are in their docstrings.
"""

import math

import numpy as np

from .config import jit

__all__ = ["exp_inplace", "log1p_inplace", "sincos_pi"]

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm: 32 trailing zero bits
_LN2_LO = 1.90821492927058770002e-10
_SHIFT = 6755399441055744.0  # 1.5 * 2^52
_C = tuple(1.0 / math.factorial(k) for k in range(14))
(_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13) = _C


@jit(_nrt=False)  # allocates nothing (see .interpreter, "Reference counting")
def exp_inplace(x, n, scratch):
    """x[t] = exp(x[t]) for t < n.

    x       (>= n,) float64, overwritten
    scratch (>= n,) float64, overwritten (holds the 2^k bit patterns)
    """
    bits = scratch.view(np.int64)
    for t in range(n):
        xt = x[t]
        v = min(max(xt, -708.0), 709.78)
        # z = k + 1.5 * 2^52: adding the shift rounds v / ln2 to the nearest
        # integer k and leaves k in z's low mantissa bits
        z = v * _LOG2E + _SHIFT
        k = z - _SHIFT
        r = (v - k * _LN2_HI) - k * _LN2_LO
        # Horner's rule, highest power innermost
        p = _C0 + r * (_C1 + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * (_C6 + r * (
            _C7 + r * (_C8 + r * (_C9 + r * (_C10 + r * (_C11 + r * (_C12 + r * _C13))))))))))))
        if xt < -708.0:
            p = 0.0
        if xt > 709.782712893384:
            p = math.inf
        if xt != xt:
            p = xt
        scratch[t] = z
        x[t] = p
    # 2^(k-1) from z's bits: shifting k + 1022 into the exponent field drops the
    # shift's own exponent and leading mantissa bit (k - 1 + 1023 >= 1 for v >= -708)
    for t in range(n):
        bits[t] = (bits[t] + 1022) << 52
    for t in range(n):
        x[t] = x[t] * scratch[t] * 2.0
    return x


# log1p: log(1 + f) on [sqrt(2)/2 - 1, sqrt(2) - 1] through s = f / (2 + f),
# 2 atanh(s) = 2 s + s R(s^2), R = sum_k 2 s^(2k) / (2k + 1)
_L = tuple(2.0 / (2 * k + 1) for k in range(1, 12))
(_L1, _L2, _L3, _L4, _L5, _L6, _L7, _L8, _L9, _L10, _L11) = _L
_MANTISSA = (1 << 52) - 1
_SQRT2_MANTISSA = 0x6A09E667F3BCD  # the mantissa bits of sqrt(2)
_EXP_ONE = 1023 << 52  # the exponent bits of 1.0
_EXP_HALF = 1022 << 52  # ... and of 0.5
_INT_AS_FLOAT = 0x4330000000000000  # the bits of 2^52: OR-ing a small int in gives 2^52 + int
_TWO52 = 4503599627370496.0


@jit(_nrt=False)  # allocates nothing (see .interpreter, "Reference counting")
def log1p_inplace(x, n, scratch1, scratch2):
    """x[t] = log(1 + x[t]) for t < n, for x >= 0 (and +inf, NaN).

    x                  (>= n,) float64, overwritten
    scratch1, scratch2 (>= n,) float64, overwritten

    Method (the plan of fdlibm's log1p): b = fl(1 + x) and its rounding
    error c = (1 + x) - b, exact by Fast2Sum, so log1p(x) = log b + c / b to
    within c^2; b = 2^e m with m in [sqrt(2)/2, sqrt(2)) split from b's bits
    (an integer e is turned into a float by OR-ing it into the mantissa of
    2^52, so no conversion instruction is needed); f = m - 1 (exact) and
    log m = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f), where R is the
    series of 2 atanh(s) / s - 2 to s^22 (truncation below 1e-19 relative);
    log b = e ln2_hi + (e ln2_lo + log m) with ln2_hi's trailing zero bits
    keeping e ln2_hi exact. Accurate to a few ulp (tests/test_vexp.py).
    """
    bits1 = scratch1.view(np.int64)
    bits2 = scratch2.view(np.int64)
    for t in range(n):
        xt = x[t]
        b = 1.0 + xt
        c = (xt - (b - 1.0)) if xt < 1.0 else (1.0 - (b - xt))
        scratch1[t] = b
        # the correction c / b, or b itself if b is inf or NaN
        x[t] = c / b if b < math.inf else b
    for t in range(n):
        bt = bits1[t]
        mantissa = bt & _MANTISSA
        big = mantissa > _SQRT2_MANTISSA  # m = b's mantissa / 2, e one higher
        bits1[t] = mantissa | (_EXP_HALF if big else _EXP_ONE)
        bits2[t] = ((bt >> 52) + (1 if big else 0)) | _INT_AS_FLOAT
    for t in range(n):
        e = (scratch2[t] - _TWO52) - 1023.0
        f = scratch1[t] - 1.0
        s = f / (2.0 + f)
        z = s * s
        # Horner's rule, highest power innermost
        R = _L1 + z * (_L2 + z * (_L3 + z * (_L4 + z * (_L5 + z * (
            _L6 + z * (_L7 + z * (_L8 + z * (_L9 + z * (_L10 + z * _L11)))))))))
        R = R * z
        hfsq = 0.5 * f * f
        ct = x[t]
        lo = s * (hfsq + R) + (e * _LN2_LO + ct)
        result = e * _LN2_HI - ((hfsq - lo) - f)
        x[t] = result if abs(ct) < math.inf else ct
    return x


# sin and cos on [-pi/4, pi/4]: Taylor polynomials to x^15 and x^16
# (truncation below 7e-17 relative)
_S = tuple((-1.0) ** k / math.factorial(2 * k + 1) for k in range(1, 8))
(_S3, _S5, _S7, _S9, _S11, _S13, _S15) = _S
_K = tuple((-1.0) ** k / math.factorial(2 * k) for k in range(1, 9))
(_K2, _K4, _K6, _K8, _K10, _K12, _K14, _K16) = _K
_HALF_PI = math.pi / 2.0
#: Beyond it |2 x| may not round to an integer by the shift: libm's path
_SINCOS_LIMIT = 2.0 ** 50


@jit(_nrt=False)  # allocates nothing (see .interpreter, "Reference counting")
def sincos_pi(x, n, sin_out, cos_out):
    """sin_out[t] = sin(pi x[t]), cos_out[t] = cos(pi x[t]) for t < n.

    x                (>= n,) float64, read only
    sin_out, cos_out (>= n,) float64, overwritten (distinct from x)

    Method: k = round(2 x) (by adding 1.5 * 2^52, as exp_inplace does) and
    g = 2 x - k are exact, so pi x = k pi/2 + r with r = (pi/2) g,
    |r| <= pi/4, carries one rounding (of the product), not the error of
    rounding pi x to a double first: near the zeros of sin(pi x) the result
    keeps its relative accuracy (numpy's sin(pi * x) cannot).  sin r and
    cos r are Taylor polynomials; the quadrant k mod 4 swaps them and sets
    the signs. |x| >= 2^50 (and infinities) go through libm's sin and cos of
    pi x; NaN stays NaN.
    """
    n_large = 0
    for t in range(n):
        xt = x[t]
        x2 = 2.0 * xt
        k = (x2 + _SHIFT) - _SHIFT
        r = _HALF_PI * (x2 - k)
        r2 = r * r
        # Horner's rule, highest power innermost
        s = _S3 + r2 * (_S5 + r2 * (_S7 + r2 * (_S9 + r2 * (_S11 + r2 * (_S13 + r2 * _S15)))))
        s = r + r * (r2 * s)
        # Horner's rule, highest power innermost
        c = _K2 + r2 * (_K4 + r2 * (_K6 + r2 * (
            _K8 + r2 * (_K10 + r2 * (_K12 + r2 * (_K14 + r2 * _K16))))))
        c = 1.0 + r2 * c
        # q = k mod 4 in {-2, -1, 0, 1, 2} (k / 4 is exact, so is q)
        q = k - 4.0 * ((0.25 * k + _SHIFT) - _SHIFT)
        odd = q == 1.0 or q == -1.0
        sin_t = c if odd else s
        cos_t = s if odd else c
        sin_out[t] = -sin_t if (q < 0.0 or q == 2.0) else sin_t
        cos_out[t] = -cos_t if (q == 1.0 or q == 2.0 or q == -2.0) else cos_t
        n_large += 1 if abs(xt) >= _SINCOS_LIMIT else 0
    if n_large > 0:
        for t in range(n):
            if abs(x[t]) >= _SINCOS_LIMIT:
                sin_out[t] = math.sin(math.pi * x[t])
                cos_out[t] = math.cos(math.pi * x[t])

"""A vectorisable exp for rows of a tile.

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
"""

import math

import numpy as np

from .config import jit

__all__ = ["exp_inplace"]

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
        p = _C13
        p = p * r + _C12
        p = p * r + _C11
        p = p * r + _C10
        p = p * r + _C9
        p = p * r + _C8
        p = p * r + _C7
        p = p * r + _C6
        p = p * r + _C5
        p = p * r + _C4
        p = p * r + _C3
        p = p * r + _C2
        p = p * r + _C1
        p = p * r + _C0
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

"""The kernel interpreter: values and log-parameter gradients of a lowered
kernel program for one *tile* of matrix entries.

A tile is up to ``TILE`` entries k(X1[i0 + t], X2[j]), t = 0 .. n-1, of one
column j. Evaluating a tile per operation (rather than an entry per call)
amortises the opcode dispatch over ``TILE`` entries and leaves simple loops
that LLVM vectorises; this matters because the fill and the gradient pass each
touch N^2 / 2 entries and must stay small beside LAPACK's N^3 work.

Scratch arrays (caller-owned, reused across tiles, never shared between
threads):

- ``V``  (stack_depth, TILE) float64: the value stack; the result is ``V[0]``.
- ``G``  (max(n_theta, 1), TILE) float64: ``G[p, t]`` = dk/dtheta_p for entry
  t, theta = log of the natural parameter. Written only if ``want_grad``.
  Every free theta belongs to exactly one leaf, which *assigns* its rows, and
  operators only rescale rows of their subtree's range, so ``G`` needs no
  zeroing between tiles.
- ``R``  (TILE,) float64: per-entry squared scaled distances.

Each leaf's formulas are those of scikit-learn's kernels (Rasmussen & Williams
2006, ch. 4: eq. 4.9 RBF, eq. 4.14 Matern, eq. 4.19 rational quadratic), with
gradients taken with respect to log-parameters as scikit-learn does.
"""

import math

import numpy as np

from . import opcodes as op
from .config import jit
from .vector_math import exp_inplace

TILE = 256

_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)


@jit
def scaled_sqdist(X1, i0, n, X2, j, params, pstart, m, R):
    """R[t] = sum_k ((X1[i0+t, k] - X2[j, k]) / l_k)^2, l = params[pstart:pstart+m]
    (m == 1: one length scale for all k)."""
    d = X1.shape[1]
    for t in range(n):
        R[t] = 0.0
    for k in range(d):  # dimension-outer: the inner loop over t vectorises
        inv = 1.0 / (params[pstart] if m == 1 else params[pstart + k])
        x2 = X2[j, k]
        for t in range(n):
            diff = (X1[i0 + t, k] - x2) * inv
            R[t] += diff * diff


#: Leaves whose value is a function of the scaled squared distance r2 alone.
STATIONARY_R2_LEAVES = (op.RBF, op.MATERN12, op.MATERN32, op.MATERN52)


@jit
def stationary_profile(code, R, n, V_row, W_row):
    """Value and radial factor of a leaf in STATIONARY_R2_LEAVES, from
    R[t] = r2 (see scaled_sqdist): V_row[t] = k(r2) and
    W_row[t] = -2 dk/d(r2), so that dk/dlog l_k = W D_k (D_k = ((x_k - x'_k)
    / l_k)^2) and dk/dx_k = -W (x_k - x'_k) / l_k^2. The one place these
    kernels' formulas live (Rasmussen & Williams 2006, eq. 4.9 and 4.14):

        RBF        k = e^(-r2/2)                        W = k
        Matern 1/2 k = e^-r                             W = e^-r / r  (0 at r = 0)
        Matern 3/2 k = (1 + a) e^-a,      a = sqrt(3) r   W = 3 e^-a
        Matern 5/2 k = (1 + a + a^2/3) e^-a, a = sqrt(5) r  W = 5/3 (1 + a) e^-a

    (At r = 0 Matern 1/2's one-sided derivatives cancel; scikit-learn's
    gradient uses 0 there too.) V_row, W_row (>= n,) float64, overwritten.
    """
    if code == op.RBF:
        for t in range(n):
            V_row[t] = -0.5 * R[t]
        exp_inplace(V_row, n, W_row)
        for t in range(n):
            W_row[t] = V_row[t]
        return
    scale = 1.0 if code == op.MATERN12 else (_SQRT3 if code == op.MATERN32 else _SQRT5)
    for t in range(n):
        V_row[t] = -scale * math.sqrt(R[t])
    exp_inplace(V_row, n, W_row)
    if code == op.MATERN12:
        for t in range(n):
            r = math.sqrt(R[t])
            W_row[t] = V_row[t] / r if r > 0.0 else 0.0
    elif code == op.MATERN32:
        for t in range(n):
            e = V_row[t]
            W_row[t] = 3.0 * e
            V_row[t] = (1.0 + _SQRT3 * math.sqrt(R[t])) * e
    else:
        for t in range(n):
            a = _SQRT5 * math.sqrt(R[t])
            e = V_row[t]
            W_row[t] = (5.0 / 3.0) * (1.0 + a) * e
            V_row[t] = (1.0 + a + a * a / 3.0) * e


@jit
def _stationary_grad(X1, i0, n, X2, j, params, theta_of_param, pstart, m, radial,
                     G, R):
    """Length-scale gradients of a stationary leaf whose value depends on
    r2 = R[t] only: dk/dlog l_k = radial[t] * D_k with D_k = ((x_k - x'_k)/l_k)^2
    (and D = r2 when isotropic). ``radial[t]`` = -2 dk/d(r2)."""
    if m == 1:
        ti = theta_of_param[pstart]
        if ti >= 0:
            for t in range(n):
                G[ti, t] = radial[t] * R[t]
    else:
        for k in range(m):
            ti = theta_of_param[pstart + k]
            if ti < 0:
                continue
            inv = 1.0 / params[pstart + k]
            for t in range(n):
                diff = (X1[i0 + t, k] - X2[j, k]) * inv
                G[ti, t] = radial[t] * diff * diff


# --- leaves added for issue 3: DotProduct, ExpSineSquared, and the ARD kernels
# of fastgp.kernels. Each helper writes its value row and *assigns* its own
# gradient rows (see the module docstring); R and W are per-entry scratch.


@jit
def _dot_product_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, want_grad,
                      V_row, G):
    """DotProduct (Rasmussen & Williams 2006, sec. 4.2.2):
    k = sigma_0^2 + x . x',  dk/dlog sigma_0 = 2 sigma_0^2.
    params[ps] = sigma_0."""
    d = X1.shape[1]
    s0 = params[ps] * params[ps]
    for t in range(n):
        s = 0.0
        for k in range(d):
            s += X1[i0 + t, k] * X2[j, k]
        V_row[t] = s + s0
    if want_grad:
        ti = theta_of_param[ps]
        if ti >= 0:
            for t in range(n):
                G[ti, t] = 2.0 * s0


@jit
def _exp_sine_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, want_grad,
                   V_row, G, R, W):
    """scikit-learn's ExpSineSquared (MacKay's periodic kernel, Rasmussen &
    Williams 2006, eq. 4.31) on the Euclidean distance r = |x - x'|:
    k = exp(-2 sin^2(a) / l^2), a = pi r / p, params[ps:ps+2] = (l, p);
    dk/dlog l = 4 sin^2(a) / l^2 k,  dk/dlog p = 4 a sin(a) cos(a) / l^2 k.
    Leaves R[t] = sin^2(a), W[t] = a sin(a) cos(a)."""
    d = X1.shape[1]
    inv_l2 = 1.0 / (params[ps] * params[ps])
    p = params[ps + 1]
    for t in range(n):
        s = 0.0
        for k in range(d):
            diff = X1[i0 + t, k] - X2[j, k]
            s += diff * diff
        a = math.pi * math.sqrt(s) / p
        sn = math.sin(a)
        R[t] = sn * sn
        W[t] = a * sn * math.cos(a)
        V_row[t] = math.exp(-2.0 * inv_l2 * R[t])
    if want_grad:
        tl = theta_of_param[ps]
        if tl >= 0:
            for t in range(n):
                G[tl, t] = 4.0 * inv_l2 * R[t] * V_row[t]
        tp = theta_of_param[ps + 1]
        if tp >= 0:
            for t in range(n):
                G[tp, t] = 4.0 * inv_l2 * W[t] * V_row[t]


@jit
def _rq_ard_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, m, want_grad,
                 V_row, G, R, W):
    """RationalQuadratic (Rasmussen & Williams 2006, eq. 4.19): scikit-learn's
    (m == 1) and fastgp.kernels' (one length scale per dimension): params[ps] = alpha,
    params[ps+1 : ps+1+m] = l (m == 1: shared).
    k = b^-alpha, b = 1 + r2 / (2 alpha), r2 = sum_k ((x_k - x'_k) / l_k)^2;
    dk/dlog alpha = k (-alpha log b + r2 / (2 b)),  dk/dlog l_k = k D_k / b
    with D_k = ((x_k - x'_k) / l_k)^2 (D = r2 when m == 1)."""
    alpha = params[ps]
    scaled_sqdist(X1, i0, n, X2, j, params, ps + 1, m, R)
    for t in range(n):
        b = 1.0 + R[t] / (2.0 * alpha)
        V_row[t] = b ** (-alpha)
        W[t] = b
    if want_grad:
        ta = theta_of_param[ps]
        if ta >= 0:
            for t in range(n):
                G[ta, t] = V_row[t] * (-alpha * math.log(W[t]) + R[t] / (2.0 * W[t]))
        for t in range(n):
            W[t] = V_row[t] / W[t]  # -2 dk/d(r2)
        _stationary_grad(X1, i0, n, X2, j, params, theta_of_param, ps + 1, m,
                         W, G, R)


@jit
def _exp_sine_ard_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, m, m2,
                       want_grad, V_row, G, R, W):
    """fastgp.kernels.ExpSineSquared, a product over dimensions of MacKay's
    periodic kernel (Rasmussen & Williams 2006, eq. 4.31):
    k = exp(-2 S), S = sum_k sin^2(a_k) / l_k^2, a_k = pi (x_k - x'_k) / p_k;
    params[ps : ps+m] = l, params[ps+m : ps+m+m2] = p (size 1: shared).
    dk/dlog l_k = 4 sin^2(a_k) / l_k^2 k,
    dk/dlog p_k = 4 a_k sin(a_k) cos(a_k) / l_k^2 k
    (a shared parameter's derivative is the sum over k). Leaves R[t] = S."""
    d = X1.shape[1]
    pp = ps + m
    for t in range(n):
        s = 0.0
        for k in range(d):
            lk = params[ps + k] if m > 1 else params[ps]
            pk = params[pp + k] if m2 > 1 else params[pp]
            sn = math.sin(math.pi * (X1[i0 + t, k] - X2[j, k]) / pk)
            s += sn * sn / (lk * lk)
        R[t] = s
        V_row[t] = math.exp(-2.0 * s)
    if not want_grad:
        return
    if m == 1:
        tl = theta_of_param[ps]
        if tl >= 0:
            for t in range(n):
                G[tl, t] = 4.0 * R[t] * V_row[t]
    else:
        for k in range(d):
            tl = theta_of_param[ps + k]
            if tl < 0:
                continue
            inv_l2 = 1.0 / (params[ps + k] * params[ps + k])
            pk = params[pp + k] if m2 > 1 else params[pp]
            for t in range(n):
                sn = math.sin(math.pi * (X1[i0 + t, k] - X2[j, k]) / pk)
                G[tl, t] = 4.0 * inv_l2 * sn * sn * V_row[t]
    if m2 == 1:
        tp = theta_of_param[pp]
        if tp >= 0:
            for t in range(n):
                W[t] = 0.0
            for k in range(d):
                lk = params[ps + k] if m > 1 else params[ps]
                inv_l2 = 1.0 / (lk * lk)
                for t in range(n):
                    a = math.pi * (X1[i0 + t, k] - X2[j, k]) / params[pp]
                    W[t] += inv_l2 * a * math.sin(a) * math.cos(a)
            for t in range(n):
                G[tp, t] = 4.0 * W[t] * V_row[t]
    else:
        for k in range(d):
            tp = theta_of_param[pp + k]
            if tp < 0:
                continue
            lk = params[ps + k] if m > 1 else params[ps]
            inv_l2 = 1.0 / (lk * lk)
            for t in range(n):
                a = math.pi * (X1[i0 + t, k] - X2[j, k]) / params[pp + k]
                G[tp, t] = 4.0 * inv_l2 * a * math.sin(a) * math.cos(a) * V_row[t]


@jit
def eval_tile(X1, i0, n, X2, j, diag_t, ops, op_float, params, theta_of_param,
              want_grad, V, G, R, W):
    """Evaluate the program for entries k(X1[i0 + t], X2[j]), t < n <= TILE.

    X1 (n1, d), X2 (n2, d) float64 C-contiguous.  diag_t: the t at which the
    entry lies on the training diagonal (WhiteKernel is nonzero only there),
    or -1.  ops/op_float/params/theta_of_param: see KernelProgram.  V, G, R, W:
    caller-owned scratch (W (TILE,) is a second per-entry work row).
    Result: V[0, :n]; if want_grad, G[:n_theta, :n].
    """
    sp = 0
    for o in range(ops.shape[0]):
        code = ops[o, op.COL_CODE]
        ps = ops[o, op.COL_PSTART]
        m = ops[o, op.COL_M]
        if code == op.CONST:
            c = params[ps]
            for t in range(n):
                V[sp, t] = c
            if want_grad:
                ti = theta_of_param[ps]
                if ti >= 0:
                    for t in range(n):
                        G[ti, t] = c
            sp += 1
        elif code == op.WHITE:
            for t in range(n):
                V[sp, t] = 0.0
            if diag_t >= 0:
                V[sp, diag_t] = params[ps]
            if want_grad:
                ti = theta_of_param[ps]
                if ti >= 0:
                    for t in range(n):
                        G[ti, t] = V[sp, t]
            sp += 1
        elif code in STATIONARY_R2_LEAVES:
            scaled_sqdist(X1, i0, n, X2, j, params, ps, m, R)
            stationary_profile(code, R, n, V[sp], W)
            if want_grad:
                _stationary_grad(X1, i0, n, X2, j, params, theta_of_param, ps, m,
                                 W, G, R)
            sp += 1
        elif code == op.DOT:
            _dot_product_leaf(X1, i0, n, X2, j, params, theta_of_param, ps,
                              want_grad, V[sp], G)
            sp += 1
        elif code == op.EXPSINE:
            _exp_sine_leaf(X1, i0, n, X2, j, params, theta_of_param, ps,
                           want_grad, V[sp], G, R, W)
            sp += 1
        elif code == op.RQ or code == op.RQ_ARD:  # RQ: scikit-learn's, m == 1
            _rq_ard_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, m,
                         want_grad, V[sp], G, R, W)
            sp += 1
        elif code == op.EXPSINE_ARD:
            _exp_sine_ard_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, m,
                               ops[o, op.COL_M2], want_grad, V[sp], G, R, W)
            sp += 1
        elif code == op.SUM:
            sp -= 1
            for t in range(n):
                V[sp - 1, t] += V[sp, t]
        elif code == op.PRODUCT:
            # (ab)' = a'b + ab': the left subtree owns theta [T0, TM), the right
            # [TM, T1); each leaf assigned its own rows, so scale them in place.
            sp -= 1
            a = sp - 1
            if want_grad:
                for ti in range(ops[o, op.COL_T0], ops[o, op.COL_TM]):
                    for t in range(n):
                        G[ti, t] *= V[sp, t]
                for ti in range(ops[o, op.COL_TM], ops[o, op.COL_T1]):
                    for t in range(n):
                        G[ti, t] *= V[a, t]
            for t in range(n):
                V[a, t] *= V[sp, t]
        elif code == op.POW:
            # (k^e)' = e k^(e-1) k'
            e = op_float[o]
            a = sp - 1
            if want_grad:
                for t in range(n):
                    W[t] = e * V[a, t] ** (e - 1.0)
                for ti in range(ops[o, op.COL_T0], ops[o, op.COL_T1]):
                    for t in range(n):
                        G[ti, t] *= W[t]
            for t in range(n):
                V[a, t] = V[a, t] ** e
    return sp


@jit
def allocate_scratch(stack_depth, n_theta):
    """Scratch arrays (V, G, R, W) for one thread; see the module docstring."""
    V = np.empty((max(stack_depth, 1), TILE))
    G = np.empty((max(n_theta, 1), TILE))
    R = np.empty(TILE)
    W = np.empty(TILE)
    return V, G, R, W

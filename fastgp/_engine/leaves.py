"""The leaves of a kernel program: each leaf kernel's value and derivatives,
written once, in one helper per leaf.

:func:`call_leaf` is the one door the interpreter (:mod:`.interpreter`) calls
for a leaf opcode: it calls the leaf's *entry* (one per leaf family, all with
:data:`.signatures.LEAF_SIGNATURE`) through the engine table
(:mod:`.address_call`), so each family compiles once, on its own, when a
kernel first needs it. Every helper evaluates its kernel for one tile, the entries
k(x_t, x') for t < n <= TILE, x_t = X1[:, i0 + t] and x' = X2[:, j] (the
inputs are stored transposed: see below), and writes, from the same
subexpressions,

- always the values ``V[s, :n]`` (s: the leaf's stack slot);
- if ``want_theta``: for each of its parameter slots p with a free
  hyperparameter (ti = theta_of_param[p] >= 0) the row ``G[ti, :n]`` =
  dk/dtheta_ti, theta = log of the natural parameter (scikit-learn's
  ``K_gradient``). The leaf *assigns* its rows (a hyperparameter shared by
  all dimensions sums its per-dimension terms first), never touches another
  leaf's, and never touches the rows of fixed parameters;
- if ``want_x1``: ``D1[s, k, :n]`` = dk/dx_t,k for k < Q;
- if ``want_x2`` (only asked together with ``want_x1``): ``D2[s, k, :n]`` =
  dk/dx'_k; for a stationary leaf, k(x, x') = k(x - x'), that is -D1[s].

Arguments common to all helpers: X1 (Q, n1), X2 (Q, n2) float64
C-contiguous, the inputs transposed (docs/design.md, "Inputs in column
order"): a tile's values of input dimension k are read through the view
``X1[k, i0:i0 + n]``, consecutive numbers indexed from 0, so the loops over
the tile vectorise; params (n_params,) natural scale; theta_of_param (n_params,)
int64; ps the leaf's first parameter slot; V, G, D1, D2, Wk the
interpreter's scratch (:mod:`.interpreter`), indexed by stack slot s; Wk
(4, TILE) float64 work rows, overwritten. The transcendental functions run
a tile row at a time through :mod:`.vector_math` (exp, log1p, sin and cos
of pi x), never libm's scalar calls, so their loops vectorise. All helpers
are compiled without Numba's reference counting (see :mod:`.interpreter`,
"Reference counting"): they allocate nothing. See docs/design.md, "Adding a kernel", for adding a
leaf here.

The formulas are scikit-learn's kernels (Rasmussen & Williams 2006, ch. 4:
eq. 4.9 RBF, eq. 4.14 Matern, eq. 4.19 rational quadratic, eq. 4.31 the
periodic kernel, sec. 4.2.2 the dot product).
"""

import math

from numba.extending import intrinsic

from . import opcodes as op
from .address_call import JIT, python_table_call, table_call
from .config import jit
from .signatures import LEAF_SIGNATURE
from .vector_math import exp_inplace, log1p_inplace, sincos_pi

#: The engine table's slot of leaf opcode 0 (slot 0 is the interpreter's).
LEAF_SLOT = 1

_SQRT3 = math.sqrt(3.0)
_SQRT5 = math.sqrt(5.0)


@jit(_nrt=False)
def scaled_sqdist(X1, i0, n, X2, j, params, pstart, m, Wk):
    """Wk[0, t] = r2 = sum_k ((X1[k, i0+t] - X2[k, j]) / l_k)^2,
    l = params[pstart:pstart+m] (m == 1: one length scale for all k)."""
    d = X1.shape[0]
    for t in range(n):
        Wk[0, t] = 0.0
    for k in range(d):  # dimension-outer: the inner loop over t vectorises
        inv = 1.0 / (params[pstart] if m == 1 else params[pstart + k])
        x2 = X2[k, j]
        x1 = X1[k, i0:i0 + n]  # a view: indices from 0 let the loop vectorise
        for t in range(n):
            diff = (x1[t] - x2) * inv
            Wk[0, t] += diff * diff


@jit(_nrt=False)
def stationary_profile(code, n, V, s, Wk):
    """Value and radial factor of a leaf in op.STATIONARY_R2_LEAVES, from
    Wk[0, t] = r2 (see scaled_sqdist): V[s, t] = k(r2) and
    Wk[1, t] = W = -2 dk/d(r2) (Rasmussen & Williams 2006, eq. 4.9 and 4.14):

        RBF        k = e^(-r2/2)                        W = k
        Matern 1/2 k = e^-r                             W = e^-r / r  (0 at r = 0)
        Matern 3/2 k = (1 + a) e^-a,      a = sqrt(3) r   W = 3 e^-a
        Matern 5/2 k = (1 + a + a^2/3) e^-a, a = sqrt(5) r  W = 5/3 (1 + a) e^-a

    (At r = 0 Matern 1/2's one-sided derivatives cancel; scikit-learn's
    gradient uses 0 there too.) Overwrites V[s, :n] and Wk[1:3, :n].
    """
    if code == op.RBF:
        for t in range(n):
            V[s, t] = -0.5 * Wk[0, t]
        exp_inplace(V[s], n, Wk[2])
        for t in range(n):
            Wk[1, t] = V[s, t]
        return
    scale = 1.0 if code == op.MATERN12 else (_SQRT3 if code == op.MATERN32 else _SQRT5)
    for t in range(n):  # Wk[1] = r, one sqrt per entry for value and W
        r = math.sqrt(Wk[0, t])
        Wk[1, t] = r
        V[s, t] = -scale * r
    exp_inplace(V[s], n, Wk[2])
    if code == op.MATERN12:
        for t in range(n):
            r = Wk[1, t]
            Wk[1, t] = V[s, t] / r if r > 0.0 else 0.0
    elif code == op.MATERN32:
        for t in range(n):
            e = V[s, t]
            V[s, t] = (1.0 + _SQRT3 * Wk[1, t]) * e
            Wk[1, t] = 3.0 * e
    else:
        for t in range(n):
            a = _SQRT5 * Wk[1, t]
            e = V[s, t]
            Wk[1, t] = (5.0 / 3.0) * (1.0 + a) * e
            V[s, t] = (1.0 + a + a * a / 3.0) * e


@jit(_nrt=False)
def _mirror(n, d, s, D1, D2):
    """D2[s] = -D1[s]: the second argument's derivative of a stationary leaf."""
    for k in range(d):
        for t in range(n):
            D2[s, k, t] = -D1[s, k, t]


@jit(_nrt=False)
def _zero_dx(n, d, s, want_x2, D1, D2):
    """A leaf that does not depend on the inputs' positions."""
    for k in range(d):
        for t in range(n):
            D1[s, k, t] = 0.0
    if want_x2:
        _mirror(n, d, s, D1, D2)


@jit(_nrt=False)
def _scaled_sqdist_kept(X1, i0, n, X2, j, params, theta_of_param, ls, m,
                        want_theta, want_x1, s, G, D1, Wk):
    """scaled_sqdist (Wk[0, t] = r2, l = params[ls : ls+m]) that keeps each
    dimension's u_k = (X1[k, i0+t] - X2[k, j]) / l_k for the derivatives
    (_radial_derivatives), so that no distance is computed twice:

    - if want_x1: u_k in D1[s, k, :n];
    - else, if want_theta and m > 1: u_k in G[ti, :n] for each free
      length scale (ti = theta_of_param[ls + k] >= 0); rows of fixed ones
      are not touched.
    """
    d = X1.shape[0]
    for t in range(n):
        Wk[0, t] = 0.0
    for k in range(d):
        inv = 1.0 / (params[ls] if m == 1 else params[ls + k])
        x2 = X2[k, j]
        tk = theta_of_param[ls + k] if (want_theta and m > 1) else -1
        x1 = X1[k, i0:i0 + n]
        if want_x1:
            for t in range(n):
                u = (x1[t] - x2) * inv
                D1[s, k, t] = u
                Wk[0, t] += u * u
        elif tk >= 0:
            for t in range(n):
                u = (x1[t] - x2) * inv
                G[tk, t] = u
                Wk[0, t] += u * u
        else:
            for t in range(n):
                u = (x1[t] - x2) * inv
                Wk[0, t] += u * u


@jit(_nrt=False)
def _radial_derivatives(n, d, params, theta_of_param, ls, m, want_theta,
                        want_x1, want_x2, s, G, D1, D2, Wk):
    """Length-scale and input derivatives of a leaf whose value depends on
    r2 = Wk[0, t] alone, from its radial factor Wk[1, t] = W = -2 dk/d(r2)
    and the u_k = (x_k - x'_k) / l_k (l = params[ls : ls+m]) that
    _scaled_sqdist_kept left in D1[s] or G:

        dk/dlog l_k = W u_k^2   (m == 1: dk/dlog l = W r2)
        dk/dx_k     = -W u_k / l_k,    dk/dx'_k = -dk/dx_k
    """
    if want_theta and m == 1:
        ti = theta_of_param[ls]
        if ti >= 0:
            for t in range(n):
                G[ti, t] = Wk[1, t] * Wk[0, t]
    if not want_x1 and not (want_theta and m > 1):
        return
    for k in range(d):
        inv = 1.0 / (params[ls] if m == 1 else params[ls + k])
        tk = theta_of_param[ls + k] if (want_theta and m > 1) else -1
        if tk >= 0 and want_x1:
            for t in range(n):
                u = D1[s, k, t]
                wu = Wk[1, t] * u
                G[tk, t] = wu * u
                D1[s, k, t] = -wu * inv
        elif tk >= 0:  # the same rounding as with want_x1: (W u) u
            for t in range(n):
                u = G[tk, t]
                G[tk, t] = (Wk[1, t] * u) * u
        elif want_x1:
            for t in range(n):
                D1[s, k, t] = -(Wk[1, t] * D1[s, k, t]) * inv
    if want_x2:
        _mirror(n, d, s, D1, D2)


@jit(_nrt=False)
def _radial_leaf(code, X1, i0, n, X2, j, params, theta_of_param, ps, m,
                 want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """RBF and Matern (op.STATIONARY_R2_LEAVES), functions of
    r2 = sum_k ((x_k - x'_k) / l_k)^2, params[ps : ps+m] = l: the value and
    radial factor from stationary_profile, the derivatives from
    _radial_derivatives. Leaves Wk[0] = r2, Wk[1] = W."""
    # (spelled out, not a helper: one more call level costs RBF's fill 10 %)
    if want_x1 or (want_theta and m > 1):
        _scaled_sqdist_kept(X1, i0, n, X2, j, params, theta_of_param, ps, m,
                            want_theta, want_x1, s, G, D1, Wk)
    else:
        scaled_sqdist(X1, i0, n, X2, j, params, ps, m, Wk)
    stationary_profile(code, n, V, s, Wk)
    _radial_derivatives(n, X1.shape[0], params, theta_of_param, ps, m,
                        want_theta, want_x1, want_x2, s, G, D1, D2, Wk)


@jit(_nrt=False)
def _rational_quadratic_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, m,
                             want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """The rational quadratic (RQ: scikit-learn's, m == 1; RQ_ARD:
    fastgp.kernels', m in {1, Q}), params[ps] = alpha,
    params[ps+1 : ps+1+m] = l, a function of r2 as in _radial_leaf
    (Rasmussen & Williams 2006, eq. 4.19):

        k = b^-alpha = exp(-alpha log1p(r2 / (2 alpha))),  b = 1 + r2 / (2 alpha),
        W = -2 dk/d(r2) = k / b,   dk/dlog alpha = k (-alpha log b + r2 / (2 b)),

    log1p and exp vectorised over the row. Leaves Wk[0] = r2, Wk[1] = W."""
    ls = ps + 1
    # (spelled out, not a helper: one more call level costs RBF's fill 10 %)
    if want_x1 or (want_theta and m > 1):
        _scaled_sqdist_kept(X1, i0, n, X2, j, params, theta_of_param, ls, m,
                            want_theta, want_x1, s, G, D1, Wk)
    else:
        scaled_sqdist(X1, i0, n, X2, j, params, ls, m, Wk)
    alpha = params[ps]
    two_alpha = 2.0 * alpha
    for t in range(n):
        V[s, t] = Wk[0, t] / two_alpha
    log1p_inplace(V[s], n, Wk[2], Wk[3])  # V[s] = log b
    ta = theta_of_param[ps] if want_theta else -1
    if ta >= 0:  # dk/dlog alpha / k, scaled by k below
        for t in range(n):
            r2 = Wk[0, t]
            G[ta, t] = -alpha * V[s, t] + r2 / (2.0 * (1.0 + r2 / two_alpha))
    for t in range(n):
        V[s, t] = -alpha * V[s, t]
    exp_inplace(V[s], n, Wk[2])
    for t in range(n):
        Wk[1, t] = V[s, t] / (1.0 + Wk[0, t] / two_alpha)
    if ta >= 0:
        for t in range(n):
            G[ta, t] *= V[s, t]
    _radial_derivatives(n, X1.shape[0], params, theta_of_param, ls, m,
                        want_theta, want_x1, want_x2, s, G, D1, D2, Wk)


@jit(_nrt=False)
def _exp_sine_leaf(X1, i0, n, X2, j, params, theta_of_param, ps,
                   want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """scikit-learn's ExpSineSquared (MacKay's periodic kernel, Rasmussen &
    Williams 2006, eq. 4.31) on the Euclidean distance r = |x - x'|;
    params[ps : ps+2] = (l, p). With a = pi r / p, sn = sin(a), c = cos(a):

        k = exp(-2 sn^2 / l^2)
        dk/dlog l = 4 sn^2 / l^2 k,   dk/dlog p = 4 a sn c / l^2 k
        dk/dx_k   = -(4 pi / (p l^2)) k (sn c / r) (x_k - x'_k),  dk/dx' = -dk/dx

    (sn c / r -> pi / p as r -> 0); sn and c come from one sincos_pi of
    the row r / p, k from one exp_inplace, and every derivative from them."""
    d = X1.shape[0]
    inv_l2 = 1.0 / (params[ps] * params[ps])
    p = params[ps + 1]
    dx_scale = -4.0 * math.pi / p * inv_l2
    derivatives = want_theta or want_x1
    for t in range(n):
        Wk[0, t] = 0.0
    for k in range(d):
        x2 = X2[k, j]
        x1 = X1[k, i0:i0 + n]
        for t in range(n):
            diff = x1[t] - x2
            Wk[0, t] += diff * diff
    for t in range(n):
        r = math.sqrt(Wk[0, t])
        Wk[0, t] = r
        V[s, t] = r / p
    sincos_pi(V[s], n, Wk[1], Wk[2])  # sn, c of a = pi V[s]
    if derivatives:
        for t in range(n):
            r = Wk[0, t]
            sn = Wk[1, t]
            sc = sn * Wk[2, t]
            Wk[2, t] = sc / r if r > 0.0 else math.pi / p
            Wk[1, t] = math.pi * V[s, t] * sc
            Wk[0, t] = sn * sn
            V[s, t] = -2.0 * inv_l2 * (sn * sn)
    else:
        for t in range(n):
            sn = Wk[1, t]
            Wk[0, t] = sn * sn
            V[s, t] = -2.0 * inv_l2 * (sn * sn)
    exp_inplace(V[s], n, Wk[3])
    if want_x1:
        for t in range(n):
            Wk[2, t] *= dx_scale * V[s, t]
    if want_theta:
        tl = theta_of_param[ps]
        if tl >= 0:
            for t in range(n):
                G[tl, t] = 4.0 * inv_l2 * Wk[0, t] * V[s, t]
        tp = theta_of_param[ps + 1]
        if tp >= 0:
            for t in range(n):
                G[tp, t] = 4.0 * inv_l2 * Wk[1, t] * V[s, t]
    if want_x1:
        for k in range(d):
            x2 = X2[k, j]
            x1 = X1[k, i0:i0 + n]
            for t in range(n):
                D1[s, k, t] = Wk[2, t] * (x1[t] - x2)
        if want_x2:
            _mirror(n, d, s, D1, D2)


@jit(_nrt=False)
def _exp_sine_ard_leaf(X1, i0, n, X2, j, params, theta_of_param, ps, m, m2,
                       want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """fastgp.kernels.ExpSineSquared, a product over dimensions of MacKay's
    periodic kernel (Rasmussen & Williams 2006, eq. 4.31);
    params[ps : ps+m] = l, params[ps+m : ps+m+m2] = p (size 1: shared).
    With a_k = pi (x_k - x'_k) / p_k, sn_k = sin(a_k), c_k = cos(a_k):

        k = exp(-2 S),  S = sum_k sn_k^2 / l_k^2
        dk/dlog l_k = 4 sn_k^2 / l_k^2 k,  dk/dlog p_k = 4 a_k sn_k c_k / l_k^2 k
        dk/dx_k = -4 (pi / p_k) sn_k c_k / l_k^2 k,  dk/dx' = -dk/dx

    (a shared parameter's derivative is the sum over k; a shared l's is 4 S k)."""
    d = X1.shape[0]
    pp = ps + m
    # Per dimension, from one sincos_pi of the row: S into V[s]; the
    # derivatives' factors before k (4 sn^2 / l^2 into l's row, 4 a sn c / l^2
    # into p's, -4 (pi / p) sn c / l^2 into D1[s, k]), scaled by k at the end.
    tl_all = theta_of_param[ps] if (want_theta and m == 1) else -1
    tp_all = theta_of_param[pp] if (want_theta and m2 == 1) else -1
    for t in range(n):
        V[s, t] = 0.0
    for ti in (tl_all, tp_all):
        if ti >= 0:
            for t in range(n):
                G[ti, t] = 0.0
    for k in range(d):
        lk = params[ps + k] if m > 1 else params[ps]
        pk = params[pp + k] if m2 > 1 else params[pp]
        inv_l2 = 1.0 / (lk * lk)
        x2 = X2[k, j]
        x1 = X1[k, i0:i0 + n]
        for t in range(n):
            Wk[0, t] = (x1[t] - x2) / pk
        sincos_pi(Wk[0], n, Wk[1], Wk[2])
        for t in range(n):
            V[s, t] += Wk[1, t] * Wk[1, t] * inv_l2
        tl = theta_of_param[ps + k] if (want_theta and m > 1) else tl_all
        if tl >= 0:
            for t in range(n):
                g = 4.0 * inv_l2 * (Wk[1, t] * Wk[1, t])
                G[tl, t] = G[tl, t] + g if m == 1 else g
        tp = theta_of_param[pp + k] if (want_theta and m2 > 1) else tp_all
        if tp >= 0:
            for t in range(n):
                g = 4.0 * inv_l2 * (math.pi * Wk[0, t]) * (Wk[1, t] * Wk[2, t])
                G[tp, t] = G[tp, t] + g if m2 == 1 else g
        if want_x1:
            c = -4.0 * math.pi / pk * inv_l2
            for t in range(n):
                D1[s, k, t] = c * (Wk[1, t] * Wk[2, t])
    for t in range(n):
        V[s, t] = -2.0 * V[s, t]
    exp_inplace(V[s], n, Wk[3])
    if want_theta:
        for q in range(ps, pp + m2):  # every parameter slot once
            ti = theta_of_param[q]
            if ti >= 0:
                for t in range(n):
                    G[ti, t] *= V[s, t]
    if want_x1:
        for k in range(d):
            for t in range(n):
                D1[s, k, t] *= V[s, t]
        if want_x2:
            _mirror(n, d, s, D1, D2)


@jit(_nrt=False)
def _dot_product_leaf(X1, i0, n, X2, j, params, theta_of_param, ps,
                      want_theta, want_x1, want_x2, V, s, G, D1, D2):
    """DotProduct (Rasmussen & Williams 2006, sec. 4.2.2), params[ps] = sigma_0:

        k = sigma_0^2 + x . x',  dk/dlog sigma_0 = 2 sigma_0^2,
        dk/dx = x',  dk/dx' = x   (not stationary: dk/dx' != -dk/dx)."""
    d = X1.shape[0]
    s0 = params[ps] * params[ps]
    for t in range(n):
        V[s, t] = 0.0
    for k in range(d):  # dimension-outer, as scaled_sqdist
        x2 = X2[k, j]
        x1 = X1[k, i0:i0 + n]
        for t in range(n):
            V[s, t] += x1[t] * x2
    for t in range(n):
        V[s, t] += s0
    ti = theta_of_param[ps] if want_theta else -1
    if ti >= 0:
        for t in range(n):
            G[ti, t] = 2.0 * s0
    if want_x1:
        for k in range(d):
            x2 = X2[k, j]
            for t in range(n):
                D1[s, k, t] = x2
            if want_x2:
                x1 = X1[k, i0:i0 + n]
                for t in range(n):
                    D2[s, k, t] = x1[t]


@jit(_nrt=False)
def _constant_leaf(n, d, params, theta_of_param, ps, want_theta, want_x1,
                   want_x2, V, s, G, D1, D2):
    """ConstantKernel: k = c, dk/dlog c = c, no input derivative."""
    c = params[ps]
    for t in range(n):
        V[s, t] = c
    ti = theta_of_param[ps] if want_theta else -1
    if ti >= 0:
        for t in range(n):
            G[ti, t] = c
    if want_x1:
        _zero_dx(n, d, s, want_x2, D1, D2)


@jit(_nrt=False)
def _white_leaf(n, d, diag_t, params, theta_of_param, ps, want_theta, want_x1,
                want_x2, V, s, G, D1, D2):
    """WhiteKernel: k = noise_level on the training diagonal (the entry
    t = diag_t, if diag_t >= 0), else 0; dk/dlog noise_level = k. It depends
    on the samples' indices, not on their positions: no input derivative."""
    for t in range(n):
        V[s, t] = 0.0
    if diag_t >= 0:
        V[s, diag_t] = params[ps]
    ti = theta_of_param[ps] if want_theta else -1
    if ti >= 0:
        for t in range(n):
            G[ti, t] = V[s, t]
    if want_x1:
        _zero_dx(n, d, s, want_x2, D1, D2)


# The leaf entries: one per leaf family, each with LEAF_SIGNATURE, so that
# the interpreter calls them through the engine table (call_leaf), each
# compiled once, on its own (.address_call). Each reads its leaf's row
# ops[o] and calls the family's helper; ``engine`` is unused here.


@jit(_nrt=False)
def radial_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params, theta_of_param,
                 want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """RBF and the Matern kernels (op.STATIONARY_R2_LEAVES): _radial_leaf."""
    _radial_leaf(ops[o, op.COL_CODE], X1, i0, n, X2, j, params, theta_of_param,
                 ops[o, op.COL_PSTART], ops[o, op.COL_M], want_theta, want_x1, want_x2,
                 V, s, G, D1, D2, Wk)


@jit(_nrt=False)
def rational_quadratic_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params,
                             theta_of_param, want_theta, want_x1, want_x2, V, s, G,
                             D1, D2, Wk):
    """RQ and RQ_ARD: _rational_quadratic_leaf."""
    _rational_quadratic_leaf(X1, i0, n, X2, j, params, theta_of_param,
                             ops[o, op.COL_PSTART], ops[o, op.COL_M], want_theta,
                             want_x1, want_x2, V, s, G, D1, D2, Wk)


@jit(_nrt=False)
def constant_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params, theta_of_param,
                   want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """CONST: _constant_leaf."""
    _constant_leaf(n, X1.shape[0], params, theta_of_param, ops[o, op.COL_PSTART],
                   want_theta, want_x1, want_x2, V, s, G, D1, D2)


@jit(_nrt=False)
def white_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params, theta_of_param,
                want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """WHITE: _white_leaf."""
    _white_leaf(n, X1.shape[0], diag_t, params, theta_of_param, ops[o, op.COL_PSTART],
                want_theta, want_x1, want_x2, V, s, G, D1, D2)


@jit(_nrt=False)
def exp_sine_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params, theta_of_param,
                   want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """EXPSINE: _exp_sine_leaf."""
    _exp_sine_leaf(X1, i0, n, X2, j, params, theta_of_param, ops[o, op.COL_PSTART],
                   want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk)


@jit(_nrt=False)
def exp_sine_ard_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params,
                       theta_of_param, want_theta, want_x1, want_x2, V, s, G, D1, D2,
                       Wk):
    """EXPSINE_ARD: _exp_sine_ard_leaf."""
    _exp_sine_ard_leaf(X1, i0, n, X2, j, params, theta_of_param, ops[o, op.COL_PSTART],
                       ops[o, op.COL_M], ops[o, op.COL_M2], want_theta, want_x1,
                       want_x2, V, s, G, D1, D2, Wk)


@jit(_nrt=False)
def dot_product_entry(engine, X1, i0, n, X2, j, diag_t, ops, o, params,
                      theta_of_param, want_theta, want_x1, want_x2, V, s, G, D1, D2,
                      Wk):
    """DOT: _dot_product_leaf."""
    _dot_product_leaf(X1, i0, n, X2, j, params, theta_of_param, ops[o, op.COL_PSTART],
                      want_theta, want_x1, want_x2, V, s, G, D1, D2)


_ENTRY_OF_CODE = {op.RBF: radial_entry, op.MATERN12: radial_entry,
                  op.MATERN32: radial_entry, op.MATERN52: radial_entry,
                  op.RQ: rational_quadratic_entry, op.RQ_ARD: rational_quadratic_entry,
                  op.CONST: constant_entry, op.WHITE: white_entry,
                  op.EXPSINE: exp_sine_entry, op.EXPSINE_ARD: exp_sine_ard_entry,
                  op.DOT: dot_product_entry}
if sorted(_ENTRY_OF_CODE) != sorted(op.LEAVES) or sorted(op.LEAVES) != list(
        range(len(op.LEAVES))):
    raise ImportError("every leaf opcode needs an entry, and the opcodes must be 0 .. n-1: "
                      "see docs/adding_a_kernel.md")

#: The entry of each leaf opcode, indexed by the opcode.
LEAF_ENTRIES = tuple(_ENTRY_OF_CODE[code] for code in range(len(op.LEAVES)))


@intrinsic
def call_leaf(typingctx, engine, code, X1, i0, n, X2, j, diag_t, ops, o, params,
              theta_of_param, want_theta, want_x1, want_x2, V, s, G, D1, D2, Wk):
    """Value and requested derivatives of the leaf ``ops[o]`` (a row of
    KernelProgram.ops, opcode ``code``) into stack slot ``s``: the entry
    ``LEAF_ENTRIES[code]`` called through the engine table, at slot
    ``LEAF_SLOT + code`` (.interpreter.engine_table). Arguments as the
    module docstring; types as :data:`.signatures.LEAF_SIGNATURE`."""
    return table_call(engine, code, (X1, i0, n, X2, j, diag_t, ops, o, params,
                                     theta_of_param, want_theta, want_x1, want_x2, V, s,
                                     G, D1, D2, Wk), LEAF_SIGNATURE, offset=LEAF_SLOT)


if not JIT:  # plain Python (NUMBA_DISABLE_JIT=1): the same call, by handle
    def call_leaf(engine, code, *args):  # noqa: F811
        return python_table_call(engine, LEAF_SLOT + code, *args)

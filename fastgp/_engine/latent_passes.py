"""Input derivatives of a lowered kernel program, and the GPLVM's fused
gradient pass over the lower triangle.

The GP latent variable model (Lawrence 2005) optimises the inputs X (N x Q) of
the covariance as well as its hyperparameters. For the negative log marginal
likelihood L with W = D K^-1 - A A^T, A = K^-1 Y (DESIGN.md),

    dL/dK_ij = W_ij / 2,     dL/dx_n = 1/2 sum_ij W_ij dK_ij/dx_n,

and K_ij = k(x_i, x_j) depends on x_n through its first argument (i = n) or
its second (j = n). Over the lower triangle an entry (i, j), i > j, stands for
itself and its mirror, so it contributes

    W_ij dk(x_i, x_j)/dx_i   to row i,   W_ij dk(x_i, x_j)/dx_j   to row j,

and a diagonal entry (n, n) contributes W_nn / 2 (d1 + d2) k(x_n, x_n), zero
for stationary kernels. For a stationary kernel d2 = -d1; the dot product is
not stationary, so both argument derivatives are carried where it occurs.

:func:`eval_tile_dx` mirrors :func:`fastgp._tiles.eval_tile` (same program
arrays, same tiles of up to ``TILE`` entries k(X1[i0 + t], X2[j])) but
returns, besides the value, the derivatives with respect to both arguments,
one (Q, TILE) row block per stack slot, combined by the sum, product and
power rules. Scratch arrays (caller-owned, one set per thread):

- ``V``  (stack_depth, TILE) float64: values; the result is ``V[0]``.
- ``D1`` (stack_depth, Q, TILE) float64: ``D1[s, k, t]`` = d value / d X1[i0+t, k].
- ``D2`` (stack_depth, Q, TILE) float64: d value / d X2[j, k]; written only if
  ``want_d2`` (a program without DOT has D2 = -D1, so callers use -D1).
- ``R``, ``W`` (TILE,) float64: per-entry work rows.

Leaf formulas: stationary leaves depend on r2 = sum_k ((x_k - x'_k) / l_k)^2
only, and dk/dx_k = 2 dk/d(r2) (x_k - x'_k) / l_k^2 = -radial (x_k - x'_k) / l_k^2
with radial = -2 dk/d(r2), the same per-entry factor that
:func:`fastgp._tiles._stationary_grad` multiplies length-scale gradients by
(Rasmussen & Williams 2006, eq. 4.9, 4.14, 4.19; eq. 4.31 for the periodic
kernel, whose value is a function of the distance, not of r2).
"""

import math

import numpy as np

from . import opcodes as op
from .config import jit, parallel_jit, prange
from .interpreter import (STATIONARY_R2_LEAVES, TILE, scaled_sqdist, allocate_scratch,
                     eval_tile, stationary_profile)

#: Leaf opcodes whose input derivatives :func:`eval_tile_dx` knows.
SUPPORTED_LEAVES = STATIONARY_R2_LEAVES + (op.CONST, op.WHITE, op.RQ, op.EXPSINE,
                                           op.DOT, op.RQ_ARD, op.EXPSINE_ARD)
#: Leaf opcodes with k(x, x') != k(x - x'), for which d/dx' != -d/dx.
NON_STATIONARY_LEAVES = (op.DOT,)


#: Columns of the latent pass that share each row tile's reads of A (A A^T is
#: formed panel by panel, so A is read N / PANEL times instead of N times).
PANEL = 16


@jit
def _stationary_dx(X1, i0, n, X2, j, params, pstart, m, radial, want_d2, D1s, D2s):
    """D1s[k, t] = -radial[t] (X1[i0+t, k] - X2[j, k]) / l_k^2, D2s = -D1s.

    D1s, D2s (Q, TILE) float64 views of one stack slot; D2s written only if
    ``want_d2``. radial (TILE,) = -2 dk/d(r2)."""
    d = X1.shape[1]
    for k in range(d):
        lk = params[pstart] if m == 1 else params[pstart + k]
        c = 1.0 / (lk * lk)
        for t in range(n):
            D1s[k, t] = -radial[t] * (X1[i0 + t, k] - X2[j, k]) * c
        if want_d2:
            for t in range(n):
                D2s[k, t] = -D1s[k, t]


@jit
def _zero_dx(n, want_d2, D1s, D2s):
    for k in range(D1s.shape[0]):
        for t in range(n):
            D1s[k, t] = 0.0
        if want_d2:
            for t in range(n):
                D2s[k, t] = 0.0


@jit
def eval_tile_dx(X1, i0, n, X2, j, diag_t, ops, op_float, params, want_d2,
                 V, D1, D2, R, W):
    """Values and input derivatives of the program for entries
    k(X1[i0 + t], X2[j]), t < n <= TILE.

    X1 (n1, Q), X2 (n2, Q) float64 C-contiguous.  diag_t: the t at which the
    entry lies on the training diagonal (WhiteKernel is nonzero only there), or
    -1.  ops/op_float/params: see fastgp.lowering.KernelProgram (natural-scale
    params).  want_d2: also carry derivatives with respect to X2[j] (needed
    only when the program has a non-stationary leaf).  V, D1, D2, R, W:
    caller-owned scratch, see the module docstring; all overwritten.
    Result: V[0, :n], D1[0, :, :n] and, if want_d2, D2[0, :, :n].
    """
    d = X1.shape[1]
    sp = 0
    for o in range(ops.shape[0]):
        code = ops[o, op.COL_CODE]
        ps = ops[o, op.COL_PSTART]
        m = ops[o, op.COL_M]
        if code == op.CONST:
            c = params[ps]
            for t in range(n):
                V[sp, t] = c
            _zero_dx(n, want_d2, D1[sp], D2[sp])
            sp += 1
        elif code == op.WHITE:
            # depends on the sample's index, not on its position
            for t in range(n):
                V[sp, t] = 0.0
            if diag_t >= 0:
                V[sp, diag_t] = params[ps]
            _zero_dx(n, want_d2, D1[sp], D2[sp])
            sp += 1
        elif code in STATIONARY_R2_LEAVES:
            scaled_sqdist(X1, i0, n, X2, j, params, ps, m, R)
            stationary_profile(code, R, n, V[sp], W)
            _stationary_dx(X1, i0, n, X2, j, params, ps, m, W, want_d2,
                           D1[sp], D2[sp])
            sp += 1
        elif code == op.RQ or code == op.RQ_ARD:
            # k = b^-alpha, b = 1 + r2 / (2 alpha); radial = k / b
            # (RQ: one length scale; RQ_ARD: m of them)
            alpha = params[ps]
            mm = 1 if code == op.RQ else m
            scaled_sqdist(X1, i0, n, X2, j, params, ps + 1, mm, R)
            for t in range(n):
                b = 1.0 + R[t] / (2.0 * alpha)
                V[sp, t] = b ** (-alpha)
                W[t] = V[sp, t] / b
            _stationary_dx(X1, i0, n, X2, j, params, ps + 1, mm, W, want_d2,
                           D1[sp], D2[sp])
            sp += 1
        elif code == op.EXPSINE:
            # k = exp(-2 sin^2(a) / l^2), a = pi r / p, r = |x - x'|:
            # dk/dx_k = -(2 pi / (p l^2)) k sin(2a) / r (x_k - x'_k), and
            # sin(2a) / r -> 2 pi / p as r -> 0.
            inv_l2 = 1.0 / (params[ps] * params[ps])
            p = params[ps + 1]
            for t in range(n):
                s = 0.0
                for k in range(d):
                    diff = X1[i0 + t, k] - X2[j, k]
                    s += diff * diff
                r = math.sqrt(s)
                a = math.pi * r / p
                sn = math.sin(a)
                V[sp, t] = math.exp(-2.0 * inv_l2 * sn * sn)
                ratio = math.sin(2.0 * a) / r if r > 0.0 else 2.0 * math.pi / p
                W[t] = (2.0 * math.pi / p) * inv_l2 * V[sp, t] * ratio
            for k in range(d):
                for t in range(n):
                    D1[sp, k, t] = -W[t] * (X1[i0 + t, k] - X2[j, k])
                if want_d2:
                    for t in range(n):
                        D2[sp, k, t] = -D1[sp, k, t]
            sp += 1
        elif code == op.EXPSINE_ARD:
            # k = exp(-2 S), S = sum_k sin^2(a_k) / l_k^2, a_k = pi (x_k - x'_k) / p_k:
            # dk/dx_k = -2 pi k sin(2 a_k) / (p_k l_k^2)
            m2 = ops[o, op.COL_M2]
            pp = ps + m
            for t in range(n):
                s = 0.0
                for k in range(d):
                    lk = params[ps + k] if m > 1 else params[ps]
                    pk = params[pp + k] if m2 > 1 else params[pp]
                    sn = math.sin(math.pi * (X1[i0 + t, k] - X2[j, k]) / pk)
                    s += sn * sn / (lk * lk)
                V[sp, t] = math.exp(-2.0 * s)
            for k in range(d):
                lk = params[ps + k] if m > 1 else params[ps]
                pk = params[pp + k] if m2 > 1 else params[pp]
                c = -2.0 * math.pi / (pk * lk * lk)
                for t in range(n):
                    a = math.pi * (X1[i0 + t, k] - X2[j, k]) / pk
                    D1[sp, k, t] = c * V[sp, t] * math.sin(2.0 * a)
                if want_d2:
                    for t in range(n):
                        D2[sp, k, t] = -D1[sp, k, t]
            sp += 1
        elif code == op.DOT:
            # k = sigma_0^2 + x . x': dk/dx = x', dk/dx' = x
            s0 = params[ps] * params[ps]
            for t in range(n):
                s = 0.0
                for k in range(d):
                    s += X1[i0 + t, k] * X2[j, k]
                V[sp, t] = s + s0
            for k in range(d):
                for t in range(n):
                    D1[sp, k, t] = X2[j, k]
                if want_d2:
                    for t in range(n):
                        D2[sp, k, t] = X1[i0 + t, k]
            sp += 1
        elif code == op.SUM:
            sp -= 1
            a = sp - 1
            for t in range(n):
                V[a, t] += V[sp, t]
            for k in range(d):
                for t in range(n):
                    D1[a, k, t] += D1[sp, k, t]
                if want_d2:
                    for t in range(n):
                        D2[a, k, t] += D2[sp, k, t]
        elif code == op.PRODUCT:
            # (ab)' = a'b + ab'
            sp -= 1
            a = sp - 1
            for k in range(d):
                for t in range(n):
                    D1[a, k, t] = D1[a, k, t] * V[sp, t] + V[a, t] * D1[sp, k, t]
                if want_d2:
                    for t in range(n):
                        D2[a, k, t] = D2[a, k, t] * V[sp, t] + V[a, t] * D2[sp, k, t]
            for t in range(n):
                V[a, t] *= V[sp, t]
        elif code == op.POW:
            # (k^e)' = e k^(e-1) k'
            e = op_float[o]
            a = sp - 1
            for t in range(n):
                W[t] = e * V[a, t] ** (e - 1.0)
            for k in range(d):
                for t in range(n):
                    D1[a, k, t] *= W[t]
                if want_d2:
                    for t in range(n):
                        D2[a, k, t] *= W[t]
            for t in range(n):
                V[a, t] = V[a, t] ** e
    return sp


@jit
def allocate_dx_scratch(stack_depth, n_dims):
    """Scratch arrays (V, D1, D2, R, W) for one thread; see the module docstring."""
    depth = max(stack_depth, 1)
    V = np.empty((depth, TILE))
    D1 = np.empty((depth, n_dims, TILE))
    D2 = np.empty((depth, n_dims, TILE))
    R = np.empty(TILE)
    W = np.empty(TILE)
    return V, D1, D2, R, W


@parallel_jit
def grad_latent_lower(X, ops, op_float, params, theta_of_param, stack_depth,
                      n_theta, want_theta, want_d2, Kinv, A_T, bounds,
                      theta_partial_out, x_partial_out):
    """The GPLVM's fused gradient pass (module docstring; Lawrence 2005).

    For each lower-triangle entry (i, j) of block b, with
    w_ij = c_ij W_ij, W = T K^-1 - A A^T (T = A_T.shape[0]), c_ij = 2 off the
    diagonal and 1 on it, accumulate

        theta_partial_out[b, p] += w_ij dK_ij/dtheta_p      (if want_theta)
        x_partial_out[b, i, :]  += w_ij dk(x_i, x_j)/dx_i
        x_partial_out[b, j, :]  += w_ij dk(x_i, x_j)/dx_j

    so that dL/dtheta = 0.5 sum_b theta_partial_out[b] (Rasmussen & Williams
    2006, eq. 5.9) and dL/dX = 0.5 sum_b x_partial_out[b]. W, dK/dtheta and
    dK/dX are never stored: each tile's kernel derivatives are recomputed from
    X (eval_tile for theta, eval_tile_dx for X) and reduced at once. Columns
    are taken PANEL at a time so that A A^T's entries for a tile of rows are
    formed with one read of those rows of A (per-thread scratch PANEL x TILE).

    X        (n, Q) float64 C-contiguous: latent points
    ops ...  the KernelProgram arrays; params (n_params,) natural scale
    want_d2  True if the program has a non-stationary leaf (else d2 = -d1)
    Kinv     (n, n) float64 F-contiguous, lower triangle holds K^-1 (read
             only; the strict upper triangle is never read)
    A_T      (T, n) float64 C-contiguous: (K^-1 Y)^T, so that a tile's rows of
             A are contiguous for each output
    bounds   (n_blocks + 1,) int64 column blocks of equal triangle area
    theta_partial_out (n_blocks, n_theta) float64, overwritten; row b by
             iteration b (not written if not want_theta)
    x_partial_out (n_blocks, n, Q) float64, overwritten; slab b by iteration b
    Each prange iteration writes only its own row/slab of the outputs and its
    own scratch, so the loop has no write races; the caller sums the blocks in
    block order, so the result does not depend on the number of threads.
    """
    n, d = X.shape
    T = A_T.shape[0]
    for b in prange(bounds.size - 1):
        V, G, R, W = allocate_scratch(stack_depth, n_theta)
        Vx, D1, D2, Rx, Wx = allocate_dx_scratch(stack_depth, d)
        acc = np.zeros(n_theta)
        w = np.empty(TILE)
        AA = np.empty((PANEL, TILE))
        acc_row = np.empty(TILE)
        xj = np.empty((PANEL, d))
        xp = x_partial_out[b]
        for i in range(n):
            for k in range(d):
                xp[i, k] = 0.0
        for c0 in range(bounds[b], bounds[b + 1], PANEL):
            nj = min(PANEL, bounds[b + 1] - c0)
            for jj in range(nj):
                for k in range(d):
                    xj[jj, k] = 0.0
            # Row tiles start at the panel's first column, so that each tile's
            # rows of A are read once for all the panel's columns. A column j
            # of the panel skips the rows of its first tile above its diagonal
            # (weight 0; at most PANEL - 1 of them).
            for i0 in range(c0, n, TILE):
                m = min(TILE, n - i0)
                # AA[jj, t] = A_i . A_j (i = i0 + t, j = c0 + jj), output-outer
                # into a private row so that the loop over the tile's rows
                # vectorises (2.5x the loop with AA[jj, t] as accumulator)
                for jj in range(nj):
                    for t in range(m):
                        acc_row[t] = 0.0
                    for q in range(T):
                        a_j = A_T[q, c0 + jj]
                        a_rows = A_T[q, i0:i0 + m]
                        for t in range(m):
                            acc_row[t] += a_rows[t] * a_j
                    for t in range(m):
                        AA[jj, t] = acc_row[t]
                for jj in range(nj):
                    j = c0 + jj
                    if j >= i0 + m:
                        continue  # the whole tile lies above column j's diagonal
                    first = max(j - i0, 0)
                    diag_t = j - i0 if j >= i0 else -1
                    for t in range(first):
                        w[t] = 0.0
                    for t in range(first, m):
                        w[t] = 2.0 * (T * Kinv[i0 + t, j] - AA[jj, t])
                    if diag_t >= 0:
                        w[diag_t] *= 0.5
                    if want_theta and n_theta > 0:
                        eval_tile(X, i0, m, X, j, diag_t, ops, op_float, params,
                                  theta_of_param, True, V, G, R, W)
                        for p in range(n_theta):
                            s = 0.0
                            for t in range(first, m):
                                s += w[t] * G[p, t]
                            acc[p] += s
                    eval_tile_dx(X, i0, m, X, j, diag_t, ops, op_float, params,
                                 want_d2, Vx, D1, D2, Rx, Wx)
                    for k in range(d):
                        s = 0.0
                        if want_d2:
                            for t in range(first, m):
                                xp[i0 + t, k] += w[t] * D1[0, k, t]
                                s += w[t] * D2[0, k, t]
                        else:
                            for t in range(first, m):
                                g = w[t] * D1[0, k, t]
                                xp[i0 + t, k] += g
                                s -= g
                        xj[jj, k] += s
            for jj in range(nj):
                for k in range(d):
                    xp[c0 + jj, k] += xj[jj, k]
        if want_theta:
            for p in range(n_theta):
                theta_partial_out[b, p] = acc[p]


@parallel_jit
def grad_cross_weighted(X_train, X_query, ops, op_float, params, stack_depth,
                        want_d2, Omega, grad_out):
    """grad_out[c, k] = sum_i Omega[i, c] dk(X_train[i], X_query[c]) / dX_query[c, k]
    (no WhiteKernel term: the points are distinct draws).

    X_train (n, Q), X_query (m, Q) float64 C-contiguous
    Omega   (n, m) float64 F-contiguous (read only)
    grad_out (m, Q) float64, overwritten; row c by iteration c, so no races.
    """
    n, d = X_train.shape
    for c in prange(X_query.shape[0]):
        V, D1, D2, R, W = allocate_dx_scratch(stack_depth, d)
        for k in range(d):
            grad_out[c, k] = 0.0
        for i0 in range(0, n, TILE):
            m = min(TILE, n - i0)
            eval_tile_dx(X_train, i0, m, X_query, c, -1, ops, op_float, params,
                         want_d2, V, D1, D2, R, W)
            for k in range(d):
                s = 0.0
                if want_d2:
                    for t in range(m):
                        s += Omega[i0 + t, c] * D2[0, k, t]
                else:
                    for t in range(m):
                        s -= Omega[i0 + t, c] * D1[0, k, t]
                grad_out[c, k] += s


@jit
def diag_with_dx(X_query, ops, op_float, params, stack_depth, want_d2,
                 kdiag_out, dkdiag_out):
    """kdiag_out[c] = k(x_c, x_c) with the WhiteKernel term (scikit-learn's
    ``kernel.diag``) and dkdiag_out[c, k] = d k(x_c, x_c) / dx_c,k (both
    arguments move; zero for stationary kernels).

    X_query (m, Q) float64 C-contiguous; kdiag_out (m,), dkdiag_out (m, Q)
    float64, overwritten.
    """
    m, d = X_query.shape
    V, D1, D2, R, W = allocate_dx_scratch(stack_depth, d)
    for c in range(m):
        eval_tile_dx(X_query, c, 1, X_query, c, 0, ops, op_float, params,
                     want_d2, V, D1, D2, R, W)
        kdiag_out[c] = V[0, 0]
        for k in range(d):
            dkdiag_out[c, k] = D1[0, k, 0] + D2[0, k, 0] if want_d2 else 0.0

"""The GPLVM's passes: the fused gradient pass over the lower triangle, and the
input derivatives that placing new points needs.

The GP latent variable model (Lawrence 2005) optimises the inputs X (N x Q) of
the covariance as well as its hyperparameters. For the negative log marginal
likelihood L with W = D K^-1 - A A^T, A = K^-1 Y (docs/design.md, "The
engine"),

    dL/dK_ij = W_ij / 2,     dL/dx_n = 1/2 sum_ij W_ij dK_ij/dx_n,

and K_ij = k(x_i, x_j) depends on x_n through its first argument (i = n) or
its second (j = n). Over the lower triangle an entry (i, j), i > j, stands for
itself and its mirror, so it contributes

    W_ij dk(x_i, x_j)/dx_i   to row i,   W_ij dk(x_i, x_j)/dx_j   to row j,

and a diagonal entry (n, n) contributes W_nn / 2 (d1 + d2) k(x_n, x_n), zero
for stationary kernels. For a stationary kernel d2 = -d1; the dot product is
not stationary, so both argument derivatives are carried where it occurs
(mode bit D_X2, ``want_d2`` below).

Every kernel evaluation here is the one interpreter
(:func:`.interpreter.eval_tile`): :func:`grad_latent_lower` asks it for
values, theta-derivatives and input derivatives of a tile at once
(``D_THETA | D_X1``), so each tile of K is interpreted once per gradient;
:func:`grad_cross_weighted` and :func:`diag_with_dx` ask for input
derivatives only. Each reaches the interpreter through the engine table,
its first argument ``engine`` (:func:`.interpreter.engine_table`;
:mod:`.address_call`). Scratch arrays are the interpreter's
(:func:`.interpreter.allocate_scratch`, Q = X.shape[0]), one set per
``prange`` iteration, plus the per-block accumulators documented below.
"""

import numpy as np

from . import opcodes as op
from .config import jit, parallel_jit, prange
from .interpreter import D_THETA, D_X1, D_X2, TILE, allocate_scratch, call_eval_tile

#: Leaf opcodes with k(x, x') != k(x - x'), for which d/dx' != -d/dx.
NON_STATIONARY_LEAVES = op.NON_STATIONARY_LEAVES


#: Columns of the latent pass that share each row tile's reads of A (A A^T is
#: formed panel by panel, so A is read N / PANEL times instead of N times).
PANEL = 16


@parallel_jit
def grad_latent_lower(engine, X, ops, op_float, params, theta_of_param, stack_depth, n_theta,
                      want_theta, want_d2, Kinv, A_T, bounds, theta_partial_out, x_partial_out):
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
    X by one interpretation (eval_tile, mode D_THETA | D_X1 [| D_X2]) and
    reduced at once. Columns
    are taken PANEL at a time so that A A^T's entries for a tile of rows are
    formed with one read of those rows of A (per-thread scratch PANEL x TILE).

    X        (Q, n) float64 C-contiguous: the latent points, transposed
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
    d, n = X.shape
    T = A_T.shape[0]
    mode = np.int64(D_X1 | (D_X2 if want_d2 else 0) | (D_THETA if want_theta else 0))
    for b in prange(bounds.size - 1):
        V, G, D1, D2, Wk = allocate_scratch(stack_depth, n_theta, d)
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
                    kinv_column = Kinv[i0:i0 + m, j]  # a view from 0: vectorises
                    for t in range(first, m):
                        w[t] = 2.0 * (T * kinv_column[t] - AA[jj, t])
                    if diag_t >= 0:
                        w[diag_t] *= 0.5
                    call_eval_tile(engine, X, i0, m, X, j, diag_t, ops, op_float, params,
                                   theta_of_param, mode, V, G, D1, D2, Wk)
                    if want_theta:
                        for p in range(n_theta):
                            s = 0.0
                            for t in range(first, m):
                                s += w[t] * G[p, t]
                            acc[p] += s
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
def grad_cross_weighted(engine, X_train, X_query, ops, op_float, params, stack_depth, want_d2,
                        Omega, grad_out):
    """grad_out[c, k] = sum_i Omega[i, c] dk(X_train[i], X_query[c]) / dX_query[c, k]
    (no WhiteKernel term: the points are distinct draws).

    X_train (Q, n), X_query (Q, m) float64 C-contiguous (transposed)
    Omega   (n, m) float64 F-contiguous (read only)
    grad_out (m, Q) float64, overwritten; row c by iteration c, so no races.
    """
    d, n = X_train.shape
    mode = np.int64(D_X1 | D_X2 if want_d2 else D_X1)  # typed: see .interpreter
    no_diagonal = np.int64(-1)
    theta_of_param = np.full(params.size, -1, dtype=np.int64)  # no theta rows
    for c in prange(X_query.shape[1]):
        j = np.int64(c)  # prange's index is unsigned: keep one eval_tile type
        V, G, D1, D2, Wk = allocate_scratch(stack_depth, 0, d)
        for k in range(d):
            grad_out[c, k] = 0.0
        for i0 in range(0, n, TILE):
            m = min(TILE, n - i0)
            call_eval_tile(engine, X_train, i0, m, X_query, j, no_diagonal, ops, op_float, params,
                           theta_of_param, mode, V, G, D1, D2, Wk)
            weights = Omega[i0:i0 + m, c]  # a view from 0: vectorises
            for k in range(d):
                s = 0.0
                if want_d2:
                    for t in range(m):
                        s += weights[t] * D2[0, k, t]
                else:
                    for t in range(m):
                        s -= weights[t] * D1[0, k, t]
                grad_out[c, k] += s


@jit
def diag_with_dx(engine, X_query, ops, op_float, params, stack_depth, want_d2, kdiag_out,
                 dkdiag_out):
    """kdiag_out[c] = k(x_c, x_c) with the WhiteKernel term (scikit-learn's
    ``kernel.diag``) and dkdiag_out[c, k] = d k(x_c, x_c) / dx_c,k (both
    arguments move; zero for stationary kernels).

    X_query (Q, m) float64 C-contiguous (transposed); kdiag_out (m,), dkdiag_out (m, Q)
    float64, overwritten.
    """
    d, m = X_query.shape
    mode = np.int64(D_X1 | D_X2 if want_d2 else D_X1)  # typed: see .interpreter
    one, diagonal = np.int64(1), np.int64(0)
    theta_of_param = np.full(params.size, -1, dtype=np.int64)  # no theta rows
    V, G, D1, D2, Wk = allocate_scratch(stack_depth, 0, d)
    for c in range(m):
        call_eval_tile(engine, X_query, c, one, X_query, c, diagonal, ops, op_float, params,
                       theta_of_param, mode, V, G, D1, D2, Wk)
        kdiag_out[c] = V[0, 0]
        for k in range(d):
            dkdiag_out[c, k] = D1[0, k, 0] + D2[0, k, 0] if want_d2 else 0.0

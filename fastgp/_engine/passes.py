"""Parallel Numba passes over the covariance matrix: the fill and the fused
gradient reduction (docs/design.md, "The engine": steps 1 and 5 of the one
N x N buffer), and the cross-covariance used by prediction. Each runs the one
interpreter (:func:`.interpreter.eval_tile`) in the mode it needs: values for
the fills, values and theta-derivatives for the gradient.

Load balance and determinism. The lower triangle's column j holds n - j
entries, so a plain ``prange`` over columns gives the first thread most of the
work. The columns are instead cut into ``n_blocks`` blocks of (nearly) equal
area by :func:`column_blocks`; ``n_blocks`` depends only on n, never on the
thread count, and each block writes its own columns (fill) or its own row of
``partial_out`` (reduction). So no two iterations write the same memory, and
the final sum over blocks, taken in block order by the caller, gives the same
bits whatever the number of threads.
"""

import numpy as np

from .config import jit, parallel_jit, prange
from .interpreter import D_THETA, TILE, VALUES, allocate_scratch, eval_lower_tile, eval_tile

#: Blocks per triangle; fixed so that results do not depend on thread count.
MAX_BLOCKS = 256


def column_blocks(n):
    """Boundaries (n_blocks + 1,) int64 of column blocks of equal lower-triangle
    area: block b covers columns [bounds[b], bounds[b + 1])."""
    n_blocks = max(1, min(n, MAX_BLOCKS))
    # area of columns [0, j) is j n - j (j - 1) / 2; invert it at equal steps
    targets = np.arange(n_blocks + 1) * (n * (n + 1) / 2.0) / n_blocks
    b = 2.0 * n + 1.0
    j = (b - np.sqrt(np.maximum(b * b - 8.0 * targets, 0.0))) / 2.0
    bounds = np.clip(np.round(j), 0, n).astype(np.int64)
    bounds[0], bounds[-1] = 0, n
    return np.maximum.accumulate(bounds)


@parallel_jit
def fill_cov_lower(X, ops, op_float, params, theta_of_param, stack_depth,
                   diag_add, bounds, K_out):
    """Write tril(k(X, X)) + diag(diag_add) into K_out; the strict upper
    triangle is not touched.

    X        (n, d) float64 C-contiguous     diag_add (n,) float64 (alpha)
    ops ...  the KernelProgram arrays; params (n_params,) natural scale
    bounds   (n_blocks + 1,) int64 from column_blocks(n)
    K_out    (n, n) float64 F-contiguous, overwritten (lower triangle)
    Each prange iteration owns the columns of one block: no write races.
    """
    n = X.shape[0]
    values = np.int64(VALUES)  # a typed, not literal, mode: see .interpreter
    for b in prange(bounds.size - 1):
        V, G, D1, D2, Wk = allocate_scratch(stack_depth, 0, 0)
        for j in range(bounds[b], bounds[b + 1]):
            for i0 in range(j, n, TILE):
                m = eval_lower_tile(X, i0, j, ops, op_float, params,
                                    theta_of_param, values, V, G, D1, D2, Wk)
                for t in range(m):
                    K_out[i0 + t, j] = V[0, t]
            K_out[j, j] += diag_add[j]


@parallel_jit
def grad_trace_lower(X, ops, op_float, params, theta_of_param, stack_depth,
                     n_theta, Kinv, A, bounds, partial_out):
    """Fused gradient pass: partial_out[b, p] = sum over the lower-triangle
    entries (i, j) of block b of c_ij W_ij dK_ij/dtheta_p, with
    W = T K^-1 - A A^T (T = A.shape[1]) and c_ij = 2 off the diagonal, 1 on
    it; so dL/dtheta = 0.5 * partial_out.sum(0) for the negative log marginal
    likelihood L (Rasmussen & Williams 2006, eq. 5.9). W and dK are never
    stored: dK is recomputed tile by tile from X.

    Kinv     (n, n) float64 F-contiguous, lower triangle holds K^-1 (read only)
    A        (n, T) float64 C-contiguous: K^-1 Y
    partial_out (n_blocks, n_theta) float64, overwritten; row b by iteration b.
    """
    n = X.shape[0]
    mode = np.int64(D_THETA)  # a typed, not literal, mode: see .interpreter
    At = np.ascontiguousarray(A.T)  # (T, n): row q's entries i0 .. i0+m are contiguous
    for b in prange(bounds.size - 1):
        V, G, D1, D2, Wk = allocate_scratch(stack_depth, n_theta, 0)
        # acc[p, t]: this block's running sum of w dK/dtheta_p over the
        # entries at offset t of their tile; summed over t once, at the end,
        # so that the inner loops are elementwise and vectorise.
        acc = np.zeros((n_theta, TILE))
        w = np.empty(TILE)
        for j in range(bounds[b], bounds[b + 1]):
            for i0 in range(j, n, TILE):
                m = eval_lower_tile(X, i0, j, ops, op_float, params,
                                    theta_of_param, mode, V, G, D1, D2, Wk)
                _weights(Kinv, At, A, i0, m, j, w)
                if i0 == j:
                    w[0] *= 0.5
                for p in range(n_theta):
                    for t in range(m):
                        acc[p, t] += w[t] * G[p, t]
        for p in range(n_theta):
            s = 0.0
            for t in range(TILE):
                s += acc[p, t]
            partial_out[b, p] = s


@jit(_nrt=False)
def _weights(Kinv, At, A, i0, m, j, w):
    """w[t] = 2 (T Kinv[i, j] - sum_q A[i, q] A[j, q]), i = i0 + t, t < m:
    the trace weights of the gradient pass (c_ij W_ij off the diagonal).
    The sum over the T columns of A runs in panels, one column q at a time
    over the whole tile, reading At = A^T (T, n) C-contiguous, so the loop
    over t vectorises."""
    T = At.shape[0]
    for t in range(m):
        w[t] = 0.0
    for q in range(T):
        a = A[j, q]
        for t in range(m):
            w[t] += At[q, i0 + t] * a
    for t in range(m):
        w[t] = 2.0 * (T * Kinv[i0 + t, j] - w[t])


@parallel_jit
def fill_cross_cov(X_train, X_query, ops, op_float, params, theta_of_param,
                   stack_depth, K_out):
    """K_out[i, c] = k(X_train[i], X_query[c]) (no WhiteKernel term: the
    points are distinct draws, as in scikit-learn's k(X, Y)).

    X_train (n, d), X_query (m, d) float64 C-contiguous
    K_out   (n, m) float64 F-contiguous, overwritten; column c by iteration c.
    """
    n = X_train.shape[0]
    values = np.int64(VALUES)  # typed, not literal: see .interpreter
    no_diagonal = np.int64(-1)
    for c in prange(X_query.shape[0]):
        j = np.int64(c)  # prange's index is unsigned: keep one eval_tile type
        V, G, D1, D2, Wk = allocate_scratch(stack_depth, 0, 0)
        for i0 in range(0, n, TILE):
            m = min(TILE, n - i0)
            eval_tile(X_train, i0, m, X_query, j, no_diagonal, ops, op_float,
                      params, theta_of_param, values, V, G, D1, D2, Wk)
            for t in range(m):
                K_out[i0 + t, c] = V[0, t]

"""Parallel Numba passes over the covariance matrix: the fill and the fused
gradient reduction (docs/design.md, "The engine": steps 1 and 5 of the one
N x N buffer), and the cross-covariance used by prediction. Each runs the one
interpreter (:func:`.interpreter.eval_tile`) in the mode it needs: values for
the fills, values and theta-derivatives for the gradient, through the
engine table (:func:`.interpreter.engine_table`; :mod:`.address_call`), so
that compiling the pass does not compile the interpreter again.

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
from .interpreter import (D_THETA, TILE, VALUES, allocate_scratch, call_eval_tile,
                          engine_table)

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


#: What :func:`covariance_pass` computes (a runtime argument: one compiled
#: pass serves all three, so a first fit and predict compile one parallel
#: routine, not three; docs/design.md, "Numba's cache").
FILL, GRAD_TRACE, CROSS = 0, 1, 2


@parallel_jit
def covariance_pass(engine, kind, X, X2, ops, op_float, params, theta_of_param, stack_depth,
                    n_theta, diag_add, M, A, bounds, partial_out):
    """The passes over a covariance matrix, chosen by ``kind``; each prange
    iteration b owns the columns [bounds[b], bounds[b + 1]) of its output (or
    row b of ``partial_out``), so no two iterations write the same memory.

    - FILL: M[i, j] = k(X[i], X[j]) for i >= j, plus diag_add[j] on the
      diagonal; M's strict upper triangle is not touched (``X2``, ``A``,
      ``partial_out`` unused; ``bounds`` from :func:`column_blocks`).
    - GRAD_TRACE: the fused gradient pass: partial_out[b, p] = sum over the
      lower-triangle entries (i, j) of block b of c_ij W_ij dK_ij/dtheta_p,
      with W = T K^-1 - A A^T (T = A.shape[1]) and c_ij = 2 off the
      diagonal, 1 on it; so dL/dtheta = 0.5 * partial_out.sum(0) for the
      negative log marginal likelihood L (Rasmussen & Williams 2006,
      eq. 5.9). The lower triangle of M holds K^-1 (read only). W and dK
      are never stored: dK is recomputed tile by tile from X.
    - CROSS: M[i, c] = k(X[i], X2[c]) for every training row i and query c
      in the blocks of ``bounds`` (no WhiteKernel term: the points are
      distinct draws, as in scikit-learn's k(X, Y)).

    engine: :func:`.interpreter.engine_table`. X (d, n), X2 (d, m)
    float64 C-contiguous (the inputs transposed); ops ... stack_depth: the
    KernelProgram arrays, params (n_params,) natural scale; n_theta: free
    hyperparameters (GRAD_TRACE); diag_add (n,) float64; M (n, n) or (n, m)
    float64 F-contiguous; A (n, T) float64 C-contiguous; bounds int64;
    partial_out (n_blocks, n_theta) float64 C-contiguous, overwritten
    (GRAD_TRACE).
    """
    n = X.shape[1]
    # a typed, not literal, mode: see .interpreter
    mode = np.int64(D_THETA) if kind == GRAD_TRACE else np.int64(VALUES)
    n_rows = n_theta if kind == GRAD_TRACE else 0
    At = np.ascontiguousarray(A.T)  # (T, n): row q's entries i0 .. i0+m are contiguous
    no_diagonal = np.int64(-1)
    for b in prange(bounds.size - 1):
        V, G, D1, D2, Wk = allocate_scratch(stack_depth, n_rows, 0)
        if kind == CROSS:
            for c in range(bounds[b], bounds[b + 1]):
                for i0 in range(0, n, TILE):
                    m = min(TILE, n - i0)
                    call_eval_tile(engine, X, i0, m, X2, c, no_diagonal, ops, op_float, params,
                                   theta_of_param, mode, V, G, D1, D2, Wk)
                    column = M[i0:i0 + m, c]  # a view: see _weights
                    for t in range(m):
                        column[t] = V[0, t]
        else:
            # acc[p, t]: this block's running sum of w dK/dtheta_p over the
            # entries at offset t of their tile; summed over t once, at the
            # end, so that the inner loops are elementwise and vectorise.
            acc = np.zeros((n_rows, TILE))
            w = np.empty(TILE)
            for j in range(bounds[b], bounds[b + 1]):
                # column j's tiles of the lower triangle, from the diagonal
                # down; the diagonal entry is at t = 0 of the first
                for i0 in range(j, n, TILE):
                    m = min(TILE, n - i0)
                    diag_t = np.int64(0) if i0 == j else no_diagonal
                    call_eval_tile(engine, X, i0, m, X, j, diag_t, ops, op_float, params,
                                   theta_of_param, mode, V, G, D1, D2, Wk)
                    if kind == FILL:
                        column = M[i0:i0 + m, j]
                        for t in range(m):
                            column[t] = V[0, t]
                    else:
                        _weights(M, At, A, i0, m, j, w)
                        if i0 == j:
                            w[0] *= 0.5
                        for p in range(n_rows):
                            for t in range(m):
                                acc[p, t] += w[t] * G[p, t]
                if kind == FILL:
                    M[j, j] += diag_add[j]
            for p in range(n_rows):
                s = 0.0
                for t in range(TILE):
                    s += acc[p, t]
                partial_out[b, p] = s


# The passes by name: every one runs covariance_pass, with placeholders of the
# right types for the arguments its kind does not read.
_NO_VECTOR = np.zeros(1)
_NO_MATRIX = np.zeros((1, 1))


def fill_cov_lower(X, ops, op_float, params, theta_of_param, stack_depth,
                   diag_add, bounds, K_out):
    """Write tril(k(X, X)) + diag(diag_add) into K_out; the strict upper
    triangle is not touched.

    X        (d, n) float64 C-contiguous     diag_add (n,) float64 (alpha)
    ops ...  the KernelProgram arrays; params (n_params,) natural scale
    bounds   (n_blocks + 1,) int64 from column_blocks(n)
    K_out    (n, n) float64 F-contiguous, overwritten (lower triangle)
    """
    # a writeable copy of a read-only diag_add (a broadcast alpha): read-only
    # is another Numba type, which would compile the pass a second time
    diag_add = np.require(diag_add, np.float64, ["C", "W"])
    covariance_pass(engine_table(ops), FILL, X, X, ops, op_float, params, theta_of_param,
                    stack_depth, 0, diag_add, K_out, _NO_MATRIX, bounds, _NO_MATRIX)


def grad_trace_lower(X, ops, op_float, params, theta_of_param, stack_depth,
                     n_theta, Kinv, A, bounds, partial_out):
    """The fused gradient pass (:func:`covariance_pass`, GRAD_TRACE).

    Kinv     (n, n) float64 F-contiguous, lower triangle holds K^-1 (read only)
    A        (n, T) float64 C-contiguous: K^-1 Y
    partial_out (n_blocks, n_theta) float64, overwritten; row b by iteration b.
    """
    covariance_pass(engine_table(ops), GRAD_TRACE, X, X, ops, op_float, params,
                    theta_of_param, stack_depth, n_theta, _NO_VECTOR, Kinv, A, bounds,
                    partial_out)


def fill_cross_cov(X_train, X_query, ops, op_float, params, theta_of_param,
                   stack_depth, K_out):
    """K_out[i, c] = k(X_train[i], X_query[c]) (no WhiteKernel term).

    X_train (d, n), X_query (d, m) float64 C-contiguous (transposed)
    K_out   (n, m) float64 F-contiguous, overwritten; column c by iteration c.
    """
    bounds = np.arange(X_query.shape[1] + 1, dtype=np.int64)
    covariance_pass(engine_table(ops), CROSS, X_train, X_query, ops, op_float, params,
                    theta_of_param, stack_depth, 0, _NO_VECTOR, K_out, _NO_MATRIX, bounds,
                    _NO_MATRIX)


@jit(_nrt=False)
def _weights(Kinv, At, A, i0, m, j, w):
    """w[t] = 2 (T Kinv[i, j] - sum_q A[i, q] A[j, q]), i = i0 + t, t < m:
    the trace weights of the gradient pass (c_ij W_ij off the diagonal).
    The sum over the T columns of A runs in panels, one column q at a time
    over the whole tile, reading At = A^T (T, n) C-contiguous, so the loop
    over t vectorises. Rows are read through views that start at the tile
    (``At[q, i0:i0 + m]``): indexed from 0, the loops carry no negative-index
    test (Numba wraps a negative index around, and ``i0 + t`` could be one as
    far as LLVM knows), and they vectorise."""
    T = At.shape[0]
    for t in range(m):
        w[t] = 0.0
    for q in range(T):
        a = A[j, q]
        row = At[q, i0:i0 + m]
        for t in range(m):
            w[t] += row[t] * a
    column = Kinv[i0:i0 + m, j]
    for t in range(m):
        w[t] = 2.0 * (T * column[t] - w[t])

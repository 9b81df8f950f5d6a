"""Parallel Numba passes that multiply the covariance, or its hyperparameter
derivatives, by a block of vectors without storing any N x N array
(docs/design.md, "Products with vectors"). They serve the matrix-free solver
(conjugate gradients against K, and the gradient's bilinear forms
u^T dK/dtheta z) and the Laplace classifier (Newton's products by K and the
implicit gradient term's products by dK/dtheta).

Each pass runs the one interpreter (:func:`.interpreter.eval_tile`), a tile of
kernel entries at a time, in the mode it needs: values for K V, values and
theta-derivatives for dK V and the bilinear forms.

Determinism. :func:`kernel_matmat` owns output rows: row c of the result is
accumulated by one ``prange`` iteration, in a fixed order over the tiles of
that row, so its bits do not depend on the thread count.
:func:`grad_bilinear_lower` writes one row of ``partial_out`` per column
block of :func:`.passes.column_blocks` (fixed by n alone), summed in block
order by the caller, as the gradient trace does.

Memory beyond the inputs and the output: one scratch set (a few TILE-long
rows) and one accumulator of t (or n_theta x t) floats per thread.
"""

import numpy as np

from .config import parallel_jit, prange
from .interpreter import D_THETA, TILE, VALUES, allocate_scratch, eval_lower_tile, eval_tile

#: Row blocks of the product passes (fixed: results do not depend on threads).
MAX_ROW_BLOCKS = 256


@parallel_jit
def kernel_matmat(X1, X2, on_diagonal, row_offset, ops, op_float, params,
                  theta_of_param, stack_depth, n_theta, V, out):
    """Products of the kernel matrix k(X1, X2)^T, or of its theta-derivatives,
    with the columns of V, one output row per query row X2[c]:

        n_theta == 0:  out[0, c, q] = sum_j k(X1[j], X2[c]) V[j, q]
        n_theta  > 0:  out[p, c, q] = sum_j dk(X1[j], X2[c])/dtheta_p V[j, q]

    X1 (d, n), X2 (d, m) float64 C-contiguous (the inputs transposed);
    V (n, t) float64 C-contiguous.
    on_diagonal: True when X2 is the rows X1[row_offset:row_offset + m] of
    X1 (the training covariance, or a block of its rows: docs/design.md,
    "Products on a cluster"): WhiteKernel then adds its value on the entries
    j == row_offset + c (row_offset is ignored otherwise). ops ... stack_depth: the
    KernelProgram arrays and params (natural scale), as the other passes.
    out (max(n_theta, 1), m, t) float64, overwritten; row c by one iteration.
    """
    n = X1.shape[1]
    m_rows = X2.shape[1]
    t_cols = V.shape[1]
    n_out = max(n_theta, 1)
    mode = np.int64(D_THETA) if n_theta > 0 else np.int64(VALUES)
    n_blocks = max(1, min(m_rows, MAX_ROW_BLOCKS))
    for b in prange(n_blocks):
        Vs, G, D1, D2, Wk = allocate_scratch(stack_depth, n_theta, 0)
        acc = np.empty((n_out, t_cols))
        c_begin = (b * m_rows) // n_blocks
        c_end = ((b + 1) * m_rows) // n_blocks
        for c in range(c_begin, c_end):
            acc[:, :] = 0.0
            for j0 in range(0, n, TILE):
                width = min(TILE, n - j0)
                diag_t = np.int64(-1)
                if on_diagonal and j0 <= row_offset + c < j0 + width:
                    diag_t = np.int64(row_offset + c - j0)
                eval_tile(X1, np.int64(j0), width, X2, np.int64(c), diag_t, ops,
                          op_float, params, theta_of_param, mode, Vs, G, D1, D2, Wk)
                if n_theta > 0:
                    for p in range(n_theta):
                        for tt in range(width):
                            g = G[p, tt]
                            for q in range(t_cols):
                                acc[p, q] += g * V[j0 + tt, q]
                else:
                    for tt in range(width):
                        k = Vs[0, tt]
                        for q in range(t_cols):
                            acc[0, q] += k * V[j0 + tt, q]
            for p in range(n_out):
                for q in range(t_cols):
                    out[p, c, q] = acc[p, q]


@parallel_jit
def grad_bilinear_lower(X, ops, op_float, params, theta_of_param, stack_depth,
                        n_theta, P_T, Q_T, bounds, partial_out):
    """Bilinear forms of the theta-derivatives of K with low-rank weights:
    partial_out[b, p] = the sum, over the lower-triangle entries (i, j) of
    column block b, of W_ij dK_ij/dtheta_p with the symmetric weight
    W = P Q^T + Q P^T off the diagonal and (P Q^T)_ii on it, so that

        partial_out.sum(0)[p] = sum_q P[:, q]^T dK/dtheta_p Q[:, q]
                              = tr(P^T dK/dtheta_p Q).

    With P = [U, a], Q = [Z, -a] this is the matrix-free gradient's
    sum_q u_q^T dK z_q - a^T dK a in one pass (docs/design.md, "Products with
    vectors"); dK is recomputed tile by tile, never stored.

    X (d, n) float64 C-contiguous (transposed); P_T and Q_T (t, n) float64
    C-contiguous, P's and Q's transposes; bounds (n_blocks + 1,) int64 from
    :func:`.passes.column_blocks`; partial_out (n_blocks, n_theta) float64,
    overwritten; row b by iteration b.

    The weights of a tile are summed in panels, one column q of P and Q at a
    time over the whole tile (rows of P_T and Q_T read through views from 0),
    and the products with dK accumulate elementwise per tile offset, summed
    once at the end, as in the dense gradient pass: every inner loop runs
    over the tile's entries and vectorises (without reassociating a sum).
    """
    n = X.shape[1]
    t_cols = P_T.shape[0]
    mode = np.int64(D_THETA)  # a typed, not literal, mode: see .interpreter
    for b in prange(bounds.size - 1):
        Vs, G, D1, D2, Wk = allocate_scratch(stack_depth, n_theta, 0)
        acc = np.zeros((n_theta, TILE))
        w = np.empty(TILE)
        for j in range(bounds[b], bounds[b + 1]):
            for i0 in range(j, n, TILE):
                width = eval_lower_tile(X, i0, j, ops, op_float, params,
                                        theta_of_param, mode, Vs, G, D1, D2, Wk)
                for tt in range(width):
                    w[tt] = 0.0
                for q in range(t_cols):
                    p_j = P_T[q, j]
                    q_j = Q_T[q, j]
                    p_rows = P_T[q, i0:i0 + width]
                    q_rows = Q_T[q, i0:i0 + width]
                    for tt in range(width):
                        w[tt] += p_rows[tt] * q_j + q_rows[tt] * p_j
                if i0 == j:
                    w[0] *= 0.5
                for p in range(n_theta):
                    for tt in range(width):
                        acc[p, tt] += w[tt] * G[p, tt]
        for p in range(n_theta):
            s = 0.0
            for tt in range(TILE):
                s += acc[p, tt]
            partial_out[b, p] = s

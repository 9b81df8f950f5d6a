"""One Vecchia block at a time: the kernel block B = K~_ss of a point and
its conditioning set, through the engine's interpreter, and its Cholesky
factor with the forward substitution folded in (docs/design.md, "Vecchia's
approximation").

Positions i = 0 .. N-1 of an ordering ``perm`` (position -> sample); c(i) the
at most m nearest samples among earlier positions (row i of ``nbrs``, -1
padded); s(i) = c(i) then the point p = perm[i] itself, LAST. With B = K~_ss
(the kernel on s(i), the nugget ``diag_add`` on its diagonal, WhiteKernel on
its diagonal only) and B = L L^T,

    v_i  = L_ll^2 = k_pp - k_pc B_cc^-1 k_cp          (the conditional variance)
    r_it = y_pt - k_pc B_cc^-1 y_ct                    (the conditional residual)

Both come from one factor of B (:func:`factor_block`): the last pivot of the
Cholesky factorisation is v_i (the Schur complement of B_cc), and the forward
substitution of y_s, folded into the factorisation, leaves r_it in the last
slot (r = L_ll z_last, z = L^-1 y_s). No second factor of B_cc is needed.
A block's lower triangle is held by rows of columns: A[j, i] = B[i, j], i >= j.

Kernel values through the one interpreter. Every block's entries and their
theta-derivatives come from :func:`.interpreter.eval_tile`, called through
the engine table (:func:`.interpreter.call_eval_tile`); there is no second
copy of any kernel formula here. Two ways of laying the entries on tiles,
chosen by ``packed`` (bits identical, tested):

- column tiles (any program): a block's points gathered into a (d, m + 1)
  array; column j of its lower triangle is one tile, rows j .. |s| - 1
  (i0 = j), with diag_t = 0 so that WhiteKernel lands on the block's
  diagonal entry (j, j) and nowhere else: |s| tiles per point, of lengths
  |s|, |s| - 1, .., 1. The interpreter's fixed cost per tile (about 0.35 us
  for C * Matern + White, against 5.3 ns per entry) then dominates: at
  m = 30 the kernel entries took 26.5 us per point in column tiles, 3.9 us
  in packed ones (a one-off measurement).
- packed tiles (programs without a non-stationary leaf,
  ``opcodes.NON_STATIONARY_LEAVES``): every leaf then reads its inputs only
  through the differences X1[k, i0 + t] - X2[k, j], so k(x_a, x_b) is the
  kernel at (x_a - x_b, 0). The strict lower triangles' differences are
  written into a (d, TILE) array and evaluated against a zero column, TILE
  entries per call (diag_t = -1: no WhiteKernel off the diagonal), and the
  diagonal k(x, x) (WhiteKernel included), the same for every x, once per
  pass block (one tile of length 1, diag_t = 0). x_a - x_b is computed here
  instead of in the leaf, and (x_a - x_b) - 0 is x_a - x_b exactly, so the
  entries carry the column tiles' bits.

The workers that go one block at a time (prediction and the inverse factor's
rows, :mod:`.vecchia_workers`) use these routines; the likelihood lays the
same tiles over LANES blocks at once (:mod:`.vecchia_batch`).
"""

import math

import numpy as np

from .config import jit
from .interpreter import TILE, VALUES, allocate_scratch, call_eval_tile

__all__ = ["set_size", "gather_set", "block_columns", "block_packed", "kernel_diagonal",
           "block_values", "factor_block", "values_scratch"]


@jit(_nrt=False)
def set_size(nbrs, i, m):
    """|c(i)|: the entries of nbrs[i] before the first -1."""
    n_c = 0
    while n_c < m and nbrs[i, n_c] >= 0:
        n_c += 1
    return n_c


@jit(_nrt=False)
def gather_set(X, Y, nbrs, row, n_c, Xs, Ys):
    """The conditioning set of ``row`` into the block's first n_c slots:
    Xs[:, a] = X[:, nbrs[row, a]] (Xs (d, m + 1), X (d, N)) and Ys[:, a] =
    Y[nbrs[row, a], :] (Ys (T, m + 1), Y (N, T)) for a < n_c."""
    for a in range(n_c):
        idx = nbrs[row, a]
        for k in range(X.shape[0]):
            Xs[k, a] = X[k, idx]
        for q in range(Y.shape[1]):
            Ys[q, a] = Y[idx, q]


@jit(_nrt=False)
def block_columns(engine, Xs, n_s, ops, op_float, params, theta_of_param, mode, n_rows,
                  V, G, D1, D2, Wk, A, dKs, dKd):
    """The block's kernel entries by column tiles (module docstring): for
    column j, one tile of rows j .. n_s - 1 (diag_t = 0: the block's diagonal
    entry (j, j) gets WhiteKernel). Writes A[j, i] = k(x_i, x_j) for i >= j
    (row j of A holds column j of the lower triangle); with D_THETA also
    dKd[p, j] (diagonal) and dKs[p, e] (strict lower triangle, column-major:
    column j's rows j + 1 .. n_s - 1 at e = j (n_s - 1) - j (j - 1) / 2 ..)."""
    zero = np.int64(0)
    e = 0
    for j in range(n_s):
        n = n_s - j
        call_eval_tile(engine, Xs, j, n, Xs, j, zero, ops, op_float, params,
                       theta_of_param, mode, V, G, D1, D2, Wk)
        row = A[j, j:n_s]
        for t in range(n):
            row[t] = V[0, t]
        for p in range(n_rows):
            dKd[p, j] = G[p, 0]
            dst = dKs[p, e:e + n - 1]
            src = G[p, 1:n]
            for t in range(n - 1):
                dst[t] = src[t]
        e += n - 1


@jit(_nrt=False)
def block_packed(engine, Xs, n_s, Z, P, Kv, ops, op_float, params, theta_of_param, mode,
                 n_rows, V, G, D1, D2, Wk, A, dKs):
    """The block's strict lower triangle by packed tiles of differences
    (module docstring): entry e (column-major, as :func:`block_columns`)
    is k(x_i - x_j, 0), up to TILE entries per interpreter call, against the
    zero column Z (d, 1), diag_t = -1. Writes A[j, i] for i > j and, with
    D_THETA, dKs[p, e]; P (d, TILE) and Kv (>= n_s (n_s - 1) / 2,) scratch.
    The diagonal is the caller's (the same for every point)."""
    d = Xs.shape[0]
    none = np.int64(-1)
    zero = np.int64(0)
    n_e = (n_s * (n_s - 1)) // 2
    e0 = 0  # first entry of the current tile
    t = 0
    for j in range(n_s - 1):
        for i in range(j + 1, n_s):
            for k in range(d):
                P[k, t] = Xs[k, i] - Xs[k, j]
            t += 1
            if t == TILE or e0 + t == n_e:
                call_eval_tile(engine, P, zero, np.int64(t), Z, zero, none, ops, op_float,
                               params, theta_of_param, mode, V, G, D1, D2, Wk)
                dst = Kv[e0:e0 + t]
                for u in range(t):
                    dst[u] = V[0, u]
                for p in range(n_rows):
                    dst = dKs[p, e0:e0 + t]
                    src = G[p, 0:t]
                    for u in range(t):
                        dst[u] = src[u]
                e0 += t
                t = 0
    e = 0
    for j in range(n_s - 1):
        n = n_s - 1 - j
        row = A[j, j + 1:n_s]
        src = Kv[e:e + n]
        for u in range(n):
            row[u] = src[u]
        e += n


@jit(_nrt=False)
def kernel_diagonal(engine, Z, ops, op_float, params, theta_of_param, mode, V, G, D1, D2,
                    Wk):
    """k(x, x) of a stationary program, the same for every x (module
    docstring): one tile of length 1 at the zero column Z (d, 1), diag_t = 0
    (WhiteKernel included). With D_THETA its theta-derivatives are left in
    G[:, 0]."""
    call_eval_tile(engine, Z, np.int64(0), np.int64(1), Z, np.int64(0), np.int64(0),
                   ops, op_float, params, theta_of_param, mode, V, G, D1, D2, Wk)
    return V[0, 0]


@jit(_nrt=False)
def block_values(engine, Xs, n_s, packed, kdiag, Z, P, Kv, ops, op_float, params,
                 theta_of_param, V, G, D1, D2, Wk, A, dKs, dKd):
    """The block's kernel values (VALUES mode: no theta-derivatives),
    A[j, i] = k(x_i, x_j) for i >= j: by packed tiles (:func:`block_packed`)
    with the diagonal kdiag (:func:`values_scratch`) where ``packed``, else
    by column tiles (:func:`block_columns`); the arrays as theirs."""
    mode = np.int64(VALUES)
    if packed:
        block_packed(engine, Xs, n_s, Z, P, Kv, ops, op_float, params,
                     theta_of_param, mode, np.int64(0), V, G, D1, D2, Wk, A, dKs)
        for a in range(n_s):
            A[a, a] = kdiag
    else:
        block_columns(engine, Xs, n_s, ops, op_float, params, theta_of_param, mode,
                      np.int64(0), V, G, D1, D2, Wk, A, dKs, dKd)


@jit(_nrt=False)
def factor_block(A, n_s, Ys, T):
    """Cholesky factorisation of the block B (its lower triangle in A, row j
    of A = column j of B: A[j, i] = B[i, j], i >= j), right-looking, with the
    forward substitution of the T right-hand sides Ys (T, >= n_s) folded in
    (Golub & Van Loan 2013, Alg. 4.2.2, by columns).

    The first n_s - 1 pivots are factored: on return A[j, i] = L[i, j] for
    j < n_s - 1 and Ys[q, a] = (L_cc^-1 y_cq)[a] for a < n_s - 1. The last
    pivot is left as the Schur complement B_ll - l^T l, and Ys[q, n_s - 1]
    as y_lq - l^T z_cq, l = L[n_s - 1, :n_s - 1]: the conditional variance
    and residual (module docstring). Returns that Schur complement, or NaN
    where an earlier pivot is not positive (the block is not positive
    definite; A is then partly factored).

    Column k's update of the trailing columns j > k is an axpy over a
    contiguous row of A (A[j, j:] -= L[j, k] A[k, j:]), read through views
    from 0 so that it vectorises; its order is fixed, so are its bits."""
    last = n_s - 1
    for k in range(last):
        piv = A[k, k]
        if not piv > 0.0:  # also NaN
            return np.nan
        lkk = math.sqrt(piv)
        A[k, k] = lkk
        inv = 1.0 / lkk
        col = A[k, k + 1:n_s]
        n = n_s - k - 1
        for t in range(n):
            col[t] *= inv
        for q in range(T):
            yq = Ys[q, k + 1:n_s]
            z = Ys[q, k] * inv
            Ys[q, k] = z
            for t in range(n):
                yq[t] -= z * col[t]
        for j in range(k + 1, n_s):
            f = A[k, j]
            dst = A[j, j:n_s]
            src = A[k, j:n_s]
            for t in range(n_s - j):
                dst[t] -= f * src[t]
    return A[last, last]


@jit
def values_scratch(engine, packed, ops, op_float, params, theta_of_param, stack_depth, d, T,
                   m):
    """What the workers that go one block at a time (prediction and the
    inverse factor's rows, :mod:`.vecchia_workers`) hold for blocks of up to
    m + 1 points, kernel values only (VALUES mode): (kdiag, V, G, D1, D2, Wk,
    Xs, Ys, A, P, Z, Kv, dKs, dKd). kdiag is k(x, x) (:func:`kernel_diagonal`) where ``packed``,
    else 0.0 (unused); V .. Wk the interpreter's scratch (allocate_scratch);
    Xs (d, m + 1), Ys (T, m + 1), A (m + 1, m + 1), P (d, TILE), the zero
    column Z (d, 1), Kv (max(m (m + 1) / 2, 1),); dKs (1, 1) and
    dKd (1, m + 1), the theta-derivative outputs VALUES mode leaves unused."""
    V, G, D1, D2, Wk = allocate_scratch(stack_depth, 0, 0)
    mp1 = m + 1
    n_e_max = (mp1 * m) // 2
    Xs = np.empty((d, mp1))
    Ys = np.empty((T, mp1))
    A = np.empty((mp1, mp1))
    P = np.empty((d, TILE))
    Z = np.zeros((d, 1))
    Kv = np.empty(max(n_e_max, 1))
    dKs = np.empty((1, 1))
    dKd = np.empty((1, mp1))
    kdiag = 0.0
    if packed:
        kdiag = kernel_diagonal(engine, Z, ops, op_float, params, theta_of_param,
                                np.int64(VALUES), V, G, D1, D2, Wk)
    return kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv, dKs, dKd

"""Parallel Numba passes that multiply the covariance, or its hyperparameter
derivatives, by a block of vectors without storing any N x N array
(docs/design.md, "Products with vectors"). They serve the matrix-free solver
(conjugate gradients against K, and the gradient's bilinear forms
u^T dK/dtheta z) and the Laplace classifier (Newton's products by K and the
implicit gradient term's products by dK/dtheta).

Each pass runs the one interpreter (:func:`.interpreter.eval_tile`), a tile of
kernel entries at a time, in the mode it needs: values for K V, values and
theta-derivatives for dK V and the bilinear forms. It reaches the interpreter
through the engine table, its first argument ``engine``
(:func:`.interpreter.engine_table`; :mod:`.address_call`).

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

from .config import jit, parallel_jit, prange
from .interpreter import D_THETA, TILE, VALUES, allocate_scratch, call_eval_tile

#: Row blocks of the product passes (fixed: results do not depend on threads).
MAX_ROW_BLOCKS = 256


@parallel_jit
def kernel_matmat(engine, X1, X2, on_diagonal, row_offset, ops, op_float, params, theta_of_param,
                  stack_depth, n_theta, V, out):
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
                call_eval_tile(engine, X1, np.int64(j0), width, X2, np.int64(c), diag_t, ops,
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


def pair_schedule(n):
    """Row blocks and the rounds of the symmetric product
    (:func:`kernel_matmat_symmetric`), functions of n alone.

    Returns (bounds (B + 1,) int64, rounds (B - 1, B / 2, 2) int64). The rows
    are cut into B equal blocks (B even, about n / TILE = n / 512, at least
    2, at most :data:`MAX_PAIR_BLOCKS`); every pair of distinct blocks
    (I, J), I > J, appears in exactly one round, and no block twice in a
    round (the circle method of round-robin tournaments: block B - 1 stays,
    the others rotate). A round's pairs therefore write disjoint rows of the
    output.
    """
    n_blocks = min(MAX_PAIR_BLOCKS, max(2, n // TILE))
    n_blocks += n_blocks % 2
    edges = (np.arange(n_blocks + 1) * n) // n_blocks
    others = n_blocks - 1
    rounds = np.empty((others, n_blocks // 2, 2), dtype=np.int64)
    for r in range(others):
        pairs = [(r, others)]
        for k in range(1, n_blocks // 2):
            pairs.append(((r + k) % others, (r - k) % others))
        for s_, (a_, b_) in enumerate(pairs):
            rounds[r, s_] = (max(a_, b_), min(a_, b_))
    return edges.astype(np.int64), rounds


#: Most row blocks of the symmetric product (B - 1 rounds of B / 2 pairs).
MAX_PAIR_BLOCKS = 64


@parallel_jit
def kernel_matmat_symmetric(engine, X, bounds, rounds, ops, op_float, params, theta_of_param,
                            stack_depth, V_T, out_T):
    """out = K V, K = k(X, X) with WhiteKernel's value on the diagonal, each
    entry of K's lower triangle evaluated once and used twice (K is
    symmetric): half the kernel evaluations of :func:`kernel_matmat`.

    X (d, n) float64 C-contiguous (transposed); bounds, rounds from
    :func:`pair_schedule` (n); V_T (t, n) float64 C-contiguous, V's
    transpose; out_T (t, n) float64, overwritten with (K V)'s transpose.

    Determinism. First every diagonal block (I, I) adds its own lower
    triangle's products to out[I]; then, round by round, each pair (I, J)
    of the round evaluates K[I, J] a tile at a time and adds K[I, J] V[J] to
    out[I] and K[I, J]^T V[I] to out[J]. A round's pairs touch disjoint rows
    and the rounds run in order, so every row's sum is taken in one fixed
    order whatever the thread count. The bits differ from
    :func:`kernel_matmat`'s (another summation order) by rounding only.

    Every inner loop runs over a tile's rows of one column of V_T and out_T
    (consecutive numbers, views from 0) and vectorises (:func:`_symmetric_block`).
    """
    n = X.shape[1]
    t_cols = V_T.shape[0]
    mode = np.int64(VALUES)
    n_blocks = bounds.size - 1
    for q in range(t_cols):
        for r in range(n):
            out_T[q, r] = 0.0
    for task in prange(n_blocks):  # the diagonal blocks
        _pair_task(engine, X, bounds, task, task, True, True, ops, op_float, params,
                   theta_of_param, stack_depth, mode, V_T, out_T)
    for rnd in range(rounds.shape[0]):
        for slot in prange(rounds.shape[1]):
            _pair_task(engine, X, bounds, rounds[rnd, slot, 0], rounds[rnd, slot, 1], True, True,
                       ops, op_float, params, theta_of_param, stack_depth, mode, V_T, out_T)


@parallel_jit
def kernel_matmat_symmetric_rows(engine, X, bounds, rounds, first_block, last_block, ops, op_float,
                                 params, theta_of_param, stack_depth, V_T, out_T):
    """The rows of blocks [first_block, last_block) of
    :func:`kernel_matmat_symmetric`'s product, with its bits, computed alone
    (a cluster worker's share: docs/design.md, "Products on a cluster").

    Each block replays the arithmetic that reaches its rows in the whole
    product, in the same order: its diagonal task, then, round by round, its
    side of the round's pair (the rows of K[I, J] V[J] when it is the pair's
    row block, the sums of K[J, I]^T V[J] when it is the column block). The
    pair's other side is not written, but its kernel entries are evaluated:
    the blocks cost their full rows' evaluations. Arguments as
    :func:`kernel_matmat_symmetric`; out_T (t, n) float64: the columns of
    the blocks' rows are overwritten, the others are left as they were.
    """
    t_cols = V_T.shape[0]
    mode = np.int64(VALUES)
    for blk in prange(first_block, last_block):
        for q in range(t_cols):
            for r in range(bounds[blk], bounds[blk + 1]):
                out_T[q, r] = 0.0
        _pair_task(engine, X, bounds, blk, blk, True, True, ops, op_float, params, theta_of_param,
                   stack_depth, mode, V_T, out_T)
        for rnd in range(rounds.shape[0]):
            for slot in range(rounds.shape[1]):
                row_block, col_block = rounds[rnd, slot, 0], rounds[rnd, slot, 1]
                if row_block == blk or col_block == blk:
                    _pair_task(engine, X, bounds, row_block, col_block, row_block == blk,
                               col_block == blk, ops, op_float, params, theta_of_param,
                               stack_depth, mode, V_T, out_T)


@jit
def _pair_task(engine, X, bounds, row_block, col_block, rows_side, cols_side, ops, op_float,
               params, theta_of_param, stack_depth, mode, V_T, out_T):
    """:func:`_symmetric_block` on the blocks (row_block, col_block) of
    ``bounds``: a diagonal block's lower triangle where they are equal."""
    _symmetric_block(engine, X, bounds[row_block], bounds[row_block + 1], bounds[col_block],
                     bounds[col_block + 1], row_block == col_block, rows_side, cols_side, ops,
                     op_float, params, theta_of_param, stack_depth, mode, V_T, out_T)


#: Columns of K evaluated together, so that each pass over a tile's rows of
#: out^T serves GROUP columns (one load and store of out per GROUP products).
GROUP = 8


@jit(fastmath={"reassoc", "contract"})
def _group_tile(k_group, v_group, v_rows, o_rows, width, sums):
    """One tile's products for a group of :data:`GROUP` columns of K, in
    one sweep: o_rows[tt] += sum_c k_group[c, tt] v_group[c] and sums[c] =
    sum_tt k_group[c, tt] v_rows[tt], tt < width; k_group (GROUP, >= width),
    v_group (GROUP,), v_rows and o_rows float64 views from 0; o_rows and
    sums (GROUP,) overwritten.

    Compiled with reassociation and contraction (only here), so that LLVM
    splits the sums into vector-register partial sums and fuses each
    product into them: without, it runs one scalar add at a time (0.25 ns
    per term, 2.5 x the vectorised sum). The order of the partial sums is
    the compiled loop's and depends on ``width`` alone: the same bits
    whatever the thread count, on one machine and build; they may differ
    between CPUs that vectorise with other widths. One loop serves every
    caller (a task that does not own the rows passes a scratch o_rows), so
    a cluster worker's replay sums in the same order."""
    k0, k1, k2, k3 = k_group[0], k_group[1], k_group[2], k_group[3]
    k4, k5, k6, k7 = k_group[4], k_group[5], k_group[6], k_group[7]
    v0, v1, v2, v3 = v_group[0], v_group[1], v_group[2], v_group[3]
    v4, v5, v6, v7 = v_group[4], v_group[5], v_group[6], v_group[7]
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    s4 = 0.0
    s5 = 0.0
    s6 = 0.0
    s7 = 0.0
    for tt in range(width):
        a0 = k0[tt]
        a1 = k1[tt]
        a2 = k2[tt]
        a3 = k3[tt]
        a4 = k4[tt]
        a5 = k5[tt]
        a6 = k6[tt]
        a7 = k7[tt]
        v = v_rows[tt]
        o_rows[tt] += (a0 * v0 + a1 * v1 + a2 * v2 + a3 * v3
                       + a4 * v4 + a5 * v5 + a6 * v6 + a7 * v7)
        s0 += a0 * v
        s1 += a1 * v
        s2 += a2 * v
        s3 += a3 * v
        s4 += a4 * v
        s5 += a5 * v
        s6 += a6 * v
        s7 += a7 * v
    sums[0] = s0
    sums[1] = s1
    sums[2] = s2
    sums[3] = s3
    sums[4] = s4
    sums[5] = s5
    sums[6] = s6
    sums[7] = s7


@jit
def _symmetric_block(engine, X, row_first, row_last, col_first, col_last, diagonal, rows_side,
                     cols_side, ops, op_float, params, theta_of_param, stack_depth, mode, V_T,
                     out_T):
    """One task of :func:`kernel_matmat_symmetric`: the entries (i, j) of K
    with i in [row_first, row_last), j in [col_first, col_last) (i >= j when
    ``diagonal``, the block's lower triangle), each added as K_ij V[j] to
    out[i] (if ``rows_side``) and as K_ij V[i] to out[j] (if ``cols_side``;
    on the diagonal once, with the rows). A task writes only the rows of
    its sides, with the same arithmetic whichever it writes, so a process
    that holds one block's rows can replay its share alone
    (:func:`kernel_matmat_symmetric_rows`).

    Columns go in groups of :data:`GROUP`: the group's tiles (rows i0 ..,
    one per column) are evaluated into ``k_group`` (entries above the
    diagonal zeroed), then out[i] gains the group's terms in column order
    and each column's out[j] gains the tile's dot product, both in one sweep
    (:func:`_group_tile`), tile after tile, in ``acc``, added to out[j]
    when the column ends (a column past the block's end has zero entries).
    All orders depend on n alone."""
    t_cols = V_T.shape[0]
    Vs, G, D1, D2, Wk = allocate_scratch(stack_depth, 0, 0)
    k_group = np.empty((GROUP, TILE))
    v_group = np.empty(GROUP)
    acc = np.empty((GROUP, t_cols))
    discard = np.zeros(TILE)  # the row updates of a task that does not own the rows
    sums = np.empty(GROUP)
    for g0 in range(col_first, col_last, GROUP):
        g_cols = min(GROUP, col_last - g0)
        acc[:, :] = 0.0
        first = g0 if diagonal else row_first
        for i0 in range(first, row_last, TILE):
            width = min(TILE, row_last - i0)
            for c in range(GROUP):
                k = k_group[c]
                if c >= g_cols:
                    for tt in range(width):
                        k[tt] = 0.0
                    continue
                j = g0 + c
                diag_t = np.int64(j - i0) if diagonal and i0 <= j < i0 + width else np.int64(-1)
                call_eval_tile(engine, X, np.int64(i0), width, X, np.int64(j), diag_t, ops,
                               op_float, params, theta_of_param, mode, Vs, G, D1, D2, Wk)
                for tt in range(width):
                    k[tt] = Vs[0, tt]
                if diag_t >= 0:  # K_jj V[j] once; rows above j are not this column's
                    if rows_side:
                        for q in range(t_cols):
                            out_T[q, j] += k[diag_t] * V_T[q, j]
                    for tt in range(diag_t + 1):
                        k[tt] = 0.0
            for q in range(t_cols):
                for c in range(GROUP):
                    v_group[c] = V_T[q, g0 + c] if c < g_cols else 0.0
                o_rows = out_T[q, i0:i0 + width] if rows_side else discard[:width]
                _group_tile(k_group, v_group, V_T[q, i0:i0 + width], o_rows, width, sums)
                for c in range(GROUP):
                    acc[c, q] += sums[c]
        if not cols_side:
            continue
        for c in range(g_cols):
            for q in range(t_cols):
                out_T[q, g0 + c] += acc[c, q]


#: Columns j of the bilinear pass handled together: each read of a tile's
#: rows of the vector panels (from L2 at t + T + k = 117 columns) serves
#: this many columns' weights (:func:`grad_bilinear_lower`).
WEIGHT_GROUP = 8


@parallel_jit
def grad_bilinear_lower(engine, X, ops, op_float, params, theta_of_param, stack_depth, n_theta,
                        P_T, Q_T, S_T, s_scale, bounds, partial_out):
    """Bilinear forms of the theta-derivatives of K with low-rank weights:
    partial_out[b, p] = the sum, over the lower-triangle entries (i, j) of
    column block b, of W_ij dK_ij/dtheta_p with the symmetric weight
    W = P Q^T + Q P^T + 2 s S S^T off the diagonal and (P Q^T + s S S^T)_ii
    on it (s = ``s_scale``), so that

        partial_out.sum(0)[p] = tr(P^T dK/dtheta_p Q) + s tr(S^T dK/dtheta_p S).

    With P = [U, a], Q = [Z, -a] the first term is the matrix-free gradient's
    sum_q u_q^T dK z_q - a^T dK a, and S its preconditioner's trace factor
    (docs/design.md, "Products with vectors"): one pass, dK recomputed tile
    by tile, never stored. A symmetric column costs half a pair's
    arithmetic and one panel instead of two.

    X (d, n) float64 C-contiguous (transposed); P_T and Q_T (t, n), S_T
    (k, n) float64 C-contiguous, the transposes (t or k may be 0); bounds
    (n_blocks + 1,) int64 from :func:`.passes.column_blocks`; partial_out
    (n_blocks, n_theta) float64, overwritten; row b by iteration b.

    Columns j go in groups of :data:`WEIGHT_GROUP`; for each tile of rows
    i0 .. (the first starts at the group's first column), the group's
    weights are summed one panel column q at a time (rows of P_T, Q_T, S_T
    read through views from 0, once per group), entries above the diagonal
    zeroed; then each column's tile of dK is evaluated and its products
    with the weights accumulate elementwise per tile offset, summed once at
    the end, as in the dense gradient pass. Every inner loop runs over a
    tile's entries and vectorises without reassociating a sum; every order
    depends on n alone.
    """
    n = X.shape[1]
    t_cols = P_T.shape[0]
    s_cols = S_T.shape[0]
    mode = np.int64(D_THETA)  # a typed, not literal, mode: see .interpreter
    for b in prange(bounds.size - 1):
        Vs, G, D1, D2, Wk = allocate_scratch(stack_depth, n_theta, 0)
        acc = np.zeros((n_theta, TILE))
        W = np.empty((WEIGHT_GROUP, TILE))
        j_first, j_last = bounds[b], bounds[b + 1]
        for g0 in range(j_first, j_last, WEIGHT_GROUP):
            g_cols = min(WEIGHT_GROUP, j_last - g0)
            for i0 in range(g0, n, TILE):
                width = min(TILE, n - i0)
                W[:, :] = 0.0
                for q in range(t_cols):
                    p_rows = P_T[q, i0:i0 + width]
                    q_rows = Q_T[q, i0:i0 + width]
                    for c in range(g_cols):
                        p_j = P_T[q, g0 + c]
                        q_j = Q_T[q, g0 + c]
                        w = W[c]
                        for tt in range(width):
                            w[tt] += p_rows[tt] * q_j + q_rows[tt] * p_j
                for q in range(s_cols):
                    s_rows = S_T[q, i0:i0 + width]
                    for c in range(g_cols):
                        s_j = 2.0 * s_scale * S_T[q, g0 + c]
                        w = W[c]
                        for tt in range(width):
                            w[tt] += s_rows[tt] * s_j
                for c in range(g_cols):
                    j = g0 + c
                    w = W[c]
                    diag_t = np.int64(-1)
                    if i0 == g0:  # the group's diagonal tile: j - i0 < WEIGHT_GROUP
                        diag_t = np.int64(j - i0)
                        for tt in range(diag_t):
                            w[tt] = 0.0
                        w[diag_t] *= 0.5
                    call_eval_tile(engine, X, np.int64(i0), width, X, np.int64(j), diag_t, ops,
                                   op_float, params, theta_of_param, mode, Vs, G, D1, D2, Wk)
                    for p in range(n_theta):
                        for tt in range(width):
                            acc[p, tt] += w[tt] * G[p, tt]
        for p in range(n_theta):
            s = 0.0
            for tt in range(TILE):
                s += acc[p, tt]
            partial_out[b, p] = s

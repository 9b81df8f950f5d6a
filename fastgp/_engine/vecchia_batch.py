"""Vecchia blocks LANES = 8 at a time, for the likelihood and its gradient:
a batch's points gathered, its kernel entries and theta-derivatives, its
factors and the gradient's trace weights, in a compact layout whose innermost
index is the point (docs/design.md, "Vecchia's approximation").

The likelihood (Vecchia 1988; Guinness 2018, 2021; Katzfuss & Guinness 2021).
With v_i and r_it from the factor of each point's block B = K~_ss
(:mod:`.vecchia_block`),

    NLL  = sum_i sum_t 1/2 [log(2 pi v_i) + r_it^2 / v_i].

The gradient, from the last-row form. With b = B_cc^-1 k_cp, w = [-b; 1],
a_t = [B_cc^-1 y_ct; 0]:

    v   = w^T B w                 so  dv = w^T dB w        (b is stationary)
    r_t = -w^T B a_t + y_pt       so  dr_t = -w^T dB a_t
    dNLL_i = sum_t [dv / (2 v) - r_t^2 dv / (2 v^2) + r_t dr_t / v]
           = sum_jk M_jk dB_jk,
    M = 1/2 [(T / v - sum_t r_t^2 / v^2) w w^T - (1 / v)(w g^T + g w^T)],
    g = sum_t r_t a_t = [L_cc^-T (sum_t r_t z_ct); 0],   b = L_cc^-T l,

l the last row of L without its diagonal, z_c = L_cc^-1 y_c the first
slots of the forward substitution: two back substitutions with L_cc^T per
point, whatever T. Over the lower triangle an off-diagonal entry stands for
itself and its mirror (weight 2 M_jk), a diagonal one for itself (M_jj).
dB/dtheta is the interpreter's D_THETA output on the block (the nugget is
constant).

The layout. A batch is LANES points with the same |s|, held in flat arrays
in which (j, i) of the batch's matrices is the LANES numbers at
((j (m + 1) + i) LANES), lane l at + l (Ab[j, i] = B_l[i, j], i >= j;
Xb[k, a]; Yb[q, a]). Every step of the factorisation, the substitutions and
the weights is then an operation on LANES independent numbers, one vector of
:mod:`.lanes`, where one block's own loops are too short to vectorise: at
|s| = 31 one block's factor took 5.2 us alone, 0.45 us in a batch
(a one-off measurement). The batch's kernel entries
go through the interpreter LANES at a time as well (entry e of lane l is
t = e LANES + l of the sequence), so a tile of TILE packed entries serves 64
entries of 8 blocks, and the interpreter writes the theta-derivatives
straight into the batch's per-tile storage (its G argument), so dK is never
copied. Lanes past the batch's points repeat its first point and are never
added.
"""

import math

import numpy as np

from .config import jit
from .interpreter import TILE, call_eval_tile
from .lanes import LANES, lanes_add, lanes_diff, lanes_set, lanes_sub

__all__ = ["TILE_ENTRIES", "gather_batch", "batch_packed", "batch_columns", "factor_batch",
           "weights_batch", "residual_square"]


#: Lane entries (LANES numbers each) per interpreter tile.
TILE_ENTRIES = TILE // LANES


@jit(_nrt=False)
def gather_batch(X, Y, diag_add, perm, nbrs, i0, n_lanes, n_c, mp1, T, Xb, Yb, Db):
    """The batch's points: lane l < n_lanes is row i0 + l (its conditioning
    set nbrs[i0 + l, :n_c], then perm[i0 + l] last); lanes from n_lanes on
    repeat lane 0. Writes Xb[k, a], Yb[q, a], Db[a] (the nugget) in the
    compact layout (module docstring)."""
    d = X.shape[0]
    for l in range(LANES):
        r = i0 + (l if l < n_lanes else 0)
        for a in range(n_c + 1):
            idx = nbrs[r, a] if a < n_c else perm[r]
            for k in range(d):
                Xb[(k * mp1 + a) * LANES + l] = X[k, idx]
            for q in range(T):
                Yb[(q * mp1 + a) * LANES + l] = Y[idx, q]
            Db[a * LANES + l] = diag_add[idx]


@jit(_nrt=False)
def batch_packed(engine, Xb, n_s, mp1, Z, P, ops, op_float, params, theta_of_param, mode,
                 V, Gt, D1, D2, Wk, Ab, ones, run):
    """The batch's strict lower triangles by packed tiles of differences
    (:mod:`.vecchia_block`). Entry e (column-major: column j's rows j + 1 ..
    n_s - 1) of lane l is number e LANES + l of the sequence, k(x_i - x_j, 0);
    the sequence goes TILE at a time through the interpreter against the zero
    column Z (diag_t = -1), tile tau's theta-derivatives written by the
    interpreter straight into Gt[tau] (its G: (n_theta, TILE) C-contiguous),
    so dK is never copied: number f of the sequence is Gt[f // TILE, p,
    f % TILE]. The values go into Ab[j, i] (i > j). Each column's run of
    rows is packed and scattered by lane operations. P (d, TILE), run
    (4, TILE_ENTRIES) int64 scratch; ones (LANES,) = 1."""
    d = Z.shape[0]
    none = np.int64(-1)
    zero = np.int64(0)
    t = 0  # lane entries in the current tile
    tau = 0
    n_runs = 0
    for j in range(n_s - 1):
        i = j + 1
        while i < n_s:
            c = min(n_s - i, TILE_ENTRIES - t)
            for k in range(d):
                lanes_diff(P[k], t * LANES, LANES, Xb, (k * mp1 + i) * LANES, LANES,
                           Xb, (k * mp1 + j) * LANES, c)
            run[0, n_runs] = j
            run[1, n_runs] = i
            run[2, n_runs] = c
            run[3, n_runs] = t
            n_runs += 1
            t += c
            i += c
            if t == TILE_ENTRIES or (i == n_s and j == n_s - 2):
                call_eval_tile(engine, P, zero, np.int64(t * LANES), Z, zero, none, ops,
                               op_float, params, theta_of_param, mode, V, Gt[tau], D1, D2, Wk)
                values = V[0]
                for r in range(n_runs):
                    lanes_set(Ab, (run[0, r] * mp1 + run[1, r]) * LANES, LANES, values,
                              run[3, r] * LANES, LANES, ones, 0, run[2, r])
                tau += 1
                t = 0
                n_runs = 0


@jit(_nrt=False)
def batch_columns(engine, Xb, n_s, mp1, n_lanes, Xl, ops, op_float, params, theta_of_param,
                  mode, n_rows, V, G, D1, D2, Wk, Ab, Gt, dKd):
    """The batch's entries by column tiles (any program), lane by lane: lane
    l's points into Xl (d, m + 1), then column j's tile of rows j .. n_s - 1
    (diag_t = 0: WhiteKernel on the block's diagonal entry (j, j) only),
    written into Ab[j, i] (i >= j), dKd[p, j LANES + l] and, for the strict
    lower triangle's entry e, number f = e LANES + l of the sequence
    Gt[f // TILE, p, f % TILE] (as :func:`batch_packed` leaves it). Lanes
    from n_lanes on copy lane 0."""
    d = Xl.shape[0]
    zero = np.int64(0)
    for l in range(n_lanes):
        for k in range(d):
            for a in range(n_s):
                Xl[k, a] = Xb[(k * mp1 + a) * LANES + l]
        e = 0
        for j in range(n_s):
            n = n_s - j
            call_eval_tile(engine, Xl, j, n, Xl, j, zero, ops, op_float, params,
                           theta_of_param, mode, V, G, D1, D2, Wk)
            for t in range(n):
                Ab[(j * mp1 + j + t) * LANES + l] = V[0, t]
            for p in range(n_rows):
                dKd[p, j * LANES + l] = G[p, 0]
                for t in range(1, n):
                    f = (e + t - 1) * LANES + l
                    Gt[f // TILE, p, f % TILE] = G[p, t]
            e += n - 1
    n_e = (n_s * (n_s - 1)) // 2
    for l in range(n_lanes, LANES):
        for j in range(n_s):
            for i in range(j, n_s):
                Ab[(j * mp1 + i) * LANES + l] = Ab[(j * mp1 + i) * LANES]
        for p in range(n_rows):
            for a in range(n_s):
                dKd[p, a * LANES + l] = dKd[p, a * LANES]
            for e in range(n_e):
                f = e * LANES
                Gt[(f + l) // TILE, p, (f + l) % TILE] = Gt[f // TILE, p, f % TILE]


@jit(_nrt=False)
def factor_batch(Ab, n_s, mp1, Yb, T, inv, v, ok):
    """:func:`.vecchia_block.factor_block` on every lane at once (right-looking Cholesky
    with the forward substitution of Yb folded in; Golub & Van Loan 2013,
    Alg. 4.2.2): on return Ab[j, i] = L[i, j] for j < n_s - 1,
    Yb[q, a] = (L_cc^-1 y_cq)[a] for a < n_s - 1, v = the last Schur
    complement (the conditional variances) and Yb[q, n_s - 1] the conditional
    residuals. ok[l]: every pivot of lane l, the last included, positive (a
    lane that fails goes on with NaN, which stays in its lane). inv (LANES,)
    scratch. Each update of column k is one lane operation per column j > k
    over its rows j .. n_s - 1 (contiguous: stride LANES)."""
    last = n_s - 1
    for l in range(LANES):
        ok[l] = True
    for k in range(last):
        kk = (k * mp1 + k) * LANES
        for l in range(LANES):
            p = Ab[kk + l]
            ok[l] = ok[l] and p > 0.0
            lkk = math.sqrt(p) if p > 0.0 else np.nan
            Ab[kk + l] = lkk
            inv[l] = 1.0 / lkk
        n = last - k  # rows below the pivot
        below = kk + LANES  # Ab[k, k + 1]
        lanes_set(Ab, below, LANES, Ab, below, LANES, inv, 0, n)  # column k of L
        for q in range(T):
            yk = (q * mp1 + k) * LANES
            lanes_set(Yb, yk, 0, Yb, yk, 0, inv, 0, 1)  # z_k
            lanes_sub(Yb, yk + LANES, LANES, Ab, below, LANES, Yb, yk, n)
        for j in range(k + 1, n_s):
            kj = (k * mp1 + j) * LANES
            lanes_sub(Ab, (j * mp1 + j) * LANES, LANES, Ab, kj, LANES, Ab, kj, n_s - j)
    ll = (last * mp1 + last) * LANES
    for l in range(LANES):
        v[l] = Ab[ll + l]
        ok[l] = ok[l] and v[l] > 0.0


@jit(_nrt=False)
def weights_batch(Ab, n_s, mp1, Yb, T, v, ok, w, g, c1, c2, rr, Ws, Wd, ones):
    """The gradient's weights (module docstring) on every lane: w[a] =
    (-b; 1), g[a] = (L_cc^-T sum_t r_t z_ct; 0), rr = sum_t r_t^2, the trace
    weights
    Ws[e LANES + l] = 2 M_ij (strict lower triangle, column-major e) and
    Wd[a LANES + l] = M_aa (module docstring). A lane with ok[l] False gets
    v = 1, rr = 0, w = g = 0, so that all its weights are 0. c1, c2 (LANES,)
    scratch; ones (LANES,) = 1."""
    n_c = n_s - 1
    last = (n_c * LANES)
    for l in range(LANES):
        rr[l] = 0.0
    for q in range(T):
        rq = (q * mp1 + n_c) * LANES
        for l in range(LANES):
            rr[l] += Yb[rq + l] * Yb[rq + l]
    # right-hand sides: l = L[last, :n_c] (Ab[a, last]) and sum_t r_t z_ct
    lanes_set(w, 0, LANES, Ab, n_c * LANES, mp1 * LANES, ones, 0, n_c)
    for q in range(T):
        rq = (q * mp1 + n_c) * LANES
        if q == 0:
            lanes_set(g, 0, LANES, Yb, q * mp1 * LANES, LANES, Yb, rq, n_c)
        else:
            lanes_add(g, 0, LANES, Yb, q * mp1 * LANES, LANES, Yb, rq, n_c)
    # L_cc^T x = rhs, by columns from the last: x_b /= L_bb, then
    # x_a -= L_ba x_b for a < b (L_ba = Ab[a, b]: stride (m + 1) LANES)
    for b in range(n_c - 1, -1, -1):
        bb = (b * mp1 + b) * LANES
        for l in range(LANES):
            dinv = 1.0 / Ab[bb + l]
            w[b * LANES + l] *= dinv
            g[b * LANES + l] *= dinv
        lanes_sub(w, 0, LANES, Ab, b * LANES, mp1 * LANES, w, b * LANES, b)
        lanes_sub(g, 0, LANES, Ab, b * LANES, mp1 * LANES, g, b * LANES, b)
    for u in range(n_c * LANES):
        w[u] = -w[u]  # w = (-b; 1)
    for l in range(LANES):
        w[last + l] = 1.0
        g[last + l] = 0.0
        if not ok[l]:
            v[l] = 1.0
            rr[l] = 0.0
            for a in range(n_s):
                w[a * LANES + l] = 0.0
                g[a * LANES + l] = 0.0
    # M = 1/2 [beta w w^T - gamma (w g^T + g w^T)], beta = T / v - rr / v^2,
    # gamma = 1 / v; over the strict lower triangle 2 M_ij = w_i c1_j +
    # g_i c2_j, c1_j = beta w_j - gamma g_j, c2_j = -gamma w_j
    e = 0
    for j in range(n_s):
        jo = j * LANES
        for l in range(LANES):
            gamma = 1.0 / v[l]
            beta = T * gamma - rr[l] * gamma * gamma
            wj = w[jo + l]
            gj = g[jo + l]
            c1[l] = beta * wj - gamma * gj
            c2[l] = -gamma * wj
            Wd[jo + l] = 0.5 * wj * (beta * wj - 2.0 * gamma * gj)
        n = n_s - 1 - j
        if n > 0:
            lanes_set(Ws, e * LANES, LANES, w, jo + LANES, LANES, c1, 0, n)
            lanes_add(Ws, e * LANES, LANES, g, jo + LANES, LANES, c2, 0, n)
        e += n


@jit(_nrt=False)
def residual_square(Yb, T, mp1, n_c, l):
    """sum_t r_t^2 of lane l (the residuals are Yb[q, n_c])."""
    s = 0.0
    for q in range(T):
        r = Yb[(q * mp1 + n_c) * LANES + l]
        s += r * r
    return s

"""The work of one position block of rows for each of Vecchia's three
passes, and the Vecchia table through which the passes reach it
(docs/design.md, "Numba's cache"):

- :func:`_likelihood_block`: the rows' negative log-likelihood and its
  gradient, in batches of LANES rows (:mod:`.vecchia_batch`);
- :func:`_predict_block`: query points' conditional means and variances,
  one block at a time (:mod:`.vecchia_block`);
- :func:`_weights_block`: the rows of the sparse inverse Cholesky factor,
  one block at a time.

Each worker allocates its own scratch, so the passes' ``prange`` iterations
share nothing. A block B (or, for prediction, B_nn) whose pivot is not
positive (or NaN) is counted (the worker returns the count) and contributes
nothing.

Compilation. The workers are compiled once each for a fixed signature
(:data:`.signatures.LIKELIHOOD_BLOCK_SIGNATURE` and the others) and called
from the parallel passes (:mod:`.vecchia_passes`) through the Vecchia table
(:func:`vecchia_table`: the engine table of the program, whose slots the
workers' own calls of the interpreter use, followed by the workers' three
addresses), as the passes call the interpreter: linked into the passes
instead, they were optimised again there (cold compile 39 s against 20 s).
The argument types at each call are checked against the signature when the
pass compiles (:func:`.address_call.table_call`).
"""

import math

import numpy as np
from numba.extending import intrinsic

from .address_call import JIT, compiled_address, python_table_call, table_call
from .config import jit
from .interpreter import D_THETA, TILE, VALUES, allocate_scratch, engine_table
from .lanes import LANES, lanes_dot_add
from .leaves import LEAF_ENTRIES, LEAF_SLOT
from .signatures import (LIKELIHOOD_BLOCK_SIGNATURE, PREDICT_BLOCK_SIGNATURE,
                         WEIGHTS_BLOCK_SIGNATURE)
from .vecchia_batch import (TILE_ENTRIES, batch_columns, batch_packed, factor_batch,
                            gather_batch, residual_square, weights_batch)
from .vecchia_block import (block_values, factor_block, gather_set, kernel_diagonal,
                            set_size, values_scratch)

__all__ = ["vecchia_table", "call_likelihood_block", "call_predict_block",
           "call_weights_block"]

_LOG_2PI = math.log(2.0 * math.pi)


@jit
def _likelihood_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params,
                      theta_of_param, stack_depth, n_theta, packed, start, end, out):
    """One position block of :func:`.vecchia_passes.vecchia_pass` (the
    arguments as its): rows [start, end), their NLL into out[0] and
    dNLL/dtheta into out[1:]; returns the number of rows whose block was not
    positive definite. Consecutive rows with the same |c| go in batches of up
    to LANES (:mod:`.vecchia_batch`). Compiled once for
    LIKELIHOOD_BLOCK_SIGNATURE and called through the Vecchia table
    (:func:`vecchia_table`), so that the parallel pass does not link and
    optimise it again (docs/design.md, "Numba's cache": with it linked, the
    pass took 24 s to compile cold, against 11.5 s for the block alone)."""
    d = X.shape[0]
    T = Y.shape[1]
    m = nbrs.shape[1]
    mp1 = m + 1
    n_e_max = max((mp1 * m) // 2, 1)
    n_tiles = (n_e_max * LANES + TILE - 1) // TILE
    mode = np.int64(D_THETA) if n_theta > 0 else np.int64(VALUES)
    n_rows = n_theta
    nr1 = max(n_rows, 1)
    V, G, D1, D2, Wk = allocate_scratch(stack_depth, n_rows, 0)
    Xb = np.empty(d * mp1 * LANES)
    Yb = np.empty(T * mp1 * LANES)
    Db = np.empty(mp1 * LANES)
    Ab = np.empty(mp1 * mp1 * LANES)
    Xl = np.empty((d, mp1))
    Gt = np.empty((n_tiles, nr1, TILE))
    dKd = np.empty((nr1, mp1 * LANES))
    acc = np.zeros(nr1 * LANES)
    run = np.empty((4, TILE_ENTRIES), dtype=np.int64)
    Ws = np.empty(n_e_max * LANES)
    Wd = np.empty(mp1 * LANES)
    w = np.empty(mp1 * LANES)
    g = np.empty(mp1 * LANES)
    inv = np.empty(LANES)
    c1 = np.empty(LANES)
    c2 = np.empty(LANES)
    ones = np.ones(LANES)
    v = np.empty(LANES)
    rr = np.empty(LANES)
    ok = np.empty(LANES, dtype=np.bool_)
    P = np.empty((d, TILE))
    Z = np.zeros((d, 1))
    kdiag = 0.0
    if packed:  # k(x, x) and its derivatives: the same for every x
        kdiag = kernel_diagonal(engine, Z, ops, op_float, params, theta_of_param, mode,
                                V, G, D1, D2, Wk)
        for p in range(n_rows):
            for u in range(mp1 * LANES):
                dKd[p, u] = G[p, 0]
    nll = 0.0
    bad = 0
    i = start
    while i < end:
        n_c = set_size(nbrs, i, m)
        n_lanes = 1
        while (n_lanes < LANES and i + n_lanes < end
               and set_size(nbrs, i + n_lanes, m) == n_c):
            n_lanes += 1
        n_s = n_c + 1
        gather_batch(X, Y, diag_add, perm, nbrs, i, n_lanes, n_c, mp1, T, Xb, Yb, Db)
        i += n_lanes
        if packed:
            batch_packed(engine, Xb, n_s, mp1, Z, P, ops, op_float, params,
                         theta_of_param, mode, V, Gt, D1, D2, Wk, Ab, ones, run)
            for a in range(n_s):
                aa = (a * mp1 + a) * LANES
                for l in range(LANES):
                    Ab[aa + l] = kdiag + Db[a * LANES + l]
        else:
            batch_columns(engine, Xb, n_s, mp1, n_lanes, Xl, ops, op_float, params,
                          theta_of_param, mode, n_rows, V, G, D1, D2, Wk, Ab, Gt, dKd)
            for a in range(n_s):
                aa = (a * mp1 + a) * LANES
                for l in range(LANES):
                    Ab[aa + l] += Db[a * LANES + l]
        factor_batch(Ab, n_s, mp1, Yb, T, inv, v, ok)
        for l in range(n_lanes):
            if ok[l]:
                nll += 0.5 * (T * (_LOG_2PI + math.log(v[l]))
                              + residual_square(Yb, T, mp1, n_c, l) / v[l])
            else:
                bad += 1
        for l in range(n_lanes, LANES):
            ok[l] = False  # repeats of lane 0: never added
        weights_batch(Ab, n_s, mp1, Yb, T, v, ok, w, g, c1, c2, rr, Ws, Wd, ones)
        # dNLL/dtheta_p += sum of weight x dK over the batch, per lane
        n_u = ((n_s * n_c) // 2) * LANES
        for p in range(n_rows):
            for tau in range((n_u + TILE - 1) // TILE):
                f0 = tau * TILE
                lanes_dot_add(acc, p * LANES, Ws, f0, LANES, Gt[tau, p], 0, LANES,
                              (min(TILE, n_u - f0)) // LANES)
            lanes_dot_add(acc, p * LANES, Wd, 0, LANES, dKd[p], 0, LANES, n_s)
    out[0] = nll
    for p in range(n_rows):
        total = 0.0
        for l in range(LANES):
            total += acc[p * LANES + l]
        out[1 + p] = total
    return bad


@jit
def _predict_block(engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params, theta_of_param,
                   stack_depth, packed, start, end, mean_out, var_out):
    """The query points [start, end) of :func:`.vecchia_passes.vecchia_predict_pass`
    (the arguments as its), one block at a time; returns
    how many had a neighbours' block that was not positive definite. Called
    through the Vecchia table, as :func:`_likelihood_block`."""
    d = X.shape[0]
    T = Y.shape[1]
    m = nbrs.shape[1]
    kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv, dKs, dKd = values_scratch(
        engine, packed, ops, op_float, params, theta_of_param, stack_depth, d, T, m)
    bad = 0
    for c in range(start, end):
        n_c = set_size(nbrs, c, m)
        gather_set(X, Y, nbrs, c, n_c, Xs, Ys)
        for k in range(d):
            Xs[k, n_c] = Xq[k, c]
        for q in range(T):
            Ys[q, n_c] = 0.0  # leaves -mean in the last slot
        n_s = n_c + 1
        block_values(engine, Xs, n_s, packed, kdiag, Z, P, Kv, ops, op_float, params,
                     theta_of_param, V, G, D1, D2, Wk, A, dKs, dKd)
        for a in range(n_c):  # the nugget on the training diagonal only
            A[a, a] += diag_add[nbrs[c, a]]
        var = factor_block(A, n_s, Ys, T)
        if var != var:
            bad += 1
            for q in range(T):
                mean_out[c, q] = np.nan
            var_out[c] = np.nan
            continue
        for q in range(T):
            mean_out[c, q] = -Ys[q, n_c]
        var_out[c] = var
    return bad


@jit
def _weights_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                   stack_depth, packed, start, end, b_out, v_out, r_out):
    """The rows [start, end) of :func:`.vecchia_passes.vecchia_weights_pass`
    (the arguments as its), one block at a time
    (the pass runs once per fit); returns how many rows' B was not positive
    definite. Called through the Vecchia table, as :func:`_likelihood_block`."""
    d = X.shape[0]
    T = Y.shape[1]
    m = nbrs.shape[1]
    kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv, dKs, dKd = values_scratch(
        engine, packed, ops, op_float, params, theta_of_param, stack_depth, d, T, m)
    b = np.empty(m + 1)
    bad = 0
    for i in range(start, end):
        n_c = set_size(nbrs, i, m)
        gather_set(X, Y, nbrs, i, n_c, Xs, Ys)
        p = perm[i]
        for k in range(d):
            Xs[k, n_c] = X[k, p]
        for q in range(T):
            Ys[q, n_c] = Y[p, q]
        n_s = n_c + 1
        block_values(engine, Xs, n_s, packed, kdiag, Z, P, Kv, ops, op_float, params,
                     theta_of_param, V, G, D1, D2, Wk, A, dKs, dKd)
        for a in range(n_c):
            A[a, a] += diag_add[nbrs[i, a]]
        A[n_c, n_c] += diag_add[p]
        var = factor_block(A, n_s, Ys, T)
        if not var > 0.0:  # also NaN
            bad += 1
            for a in range(m):
                b_out[i, a] = np.nan
            v_out[i] = np.nan
            for q in range(T):
                r_out[i, q] = np.nan
            continue
        # b = L_cc^-T l, l = L[n_c, :n_c] = A[:n_c, n_c] (A[j, a] = L[a, j])
        for a in range(n_c - 1, -1, -1):
            s = A[a, n_c]
            for c in range(a + 1, n_c):
                s -= A[a, c] * b[c]
            b[a] = s / A[a, a]
        for a in range(n_c):
            b_out[i, a] = b[a]
        v_out[i] = var
        for q in range(T):
            r_out[i, q] = Ys[q, n_c]
    return bad


# ---------------------------------------------------------------- the table

#: The engine table's length; the workers' slots follow it.
_ENGINE_SLOTS = LEAF_SLOT + len(LEAF_ENTRIES)
_LIKELIHOOD_SLOT = _ENGINE_SLOTS
_PREDICT_SLOT = _ENGINE_SLOTS + 1
_WEIGHTS_SLOT = _ENGINE_SLOTS + 2


def vecchia_table(ops):
    """The table the passes take as ``engine``: engine_table(ops) and the
    addresses of the three block workers, each compiled (or loaded from the
    disk cache) on first use."""
    base = engine_table(ops)
    if base.size != _ENGINE_SLOTS:  # the layout this module was written for
        raise AssertionError(f"engine table of {base.size} slots, expected {_ENGINE_SLOTS}")
    workers = np.array([compiled_address(_likelihood_block, LIKELIHOOD_BLOCK_SIGNATURE),
                        compiled_address(_predict_block, PREDICT_BLOCK_SIGNATURE),
                        compiled_address(_weights_block, WEIGHTS_BLOCK_SIGNATURE)],
                       dtype=np.int64)
    return np.concatenate([base, workers])


@intrinsic
def call_likelihood_block(typingctx, engine, X, Y, diag_add, perm, nbrs, ops, op_float,
                          params, theta_of_param, stack_depth, n_theta, packed, start, end,
                          out):
    """:func:`_likelihood_block` through the Vecchia table ``engine``."""
    return table_call(engine, None, (X, Y, diag_add, perm, nbrs, ops, op_float, params,
                                     theta_of_param, stack_depth, n_theta, packed, start, end,
                                     out),
                      LIKELIHOOD_BLOCK_SIGNATURE, offset=_LIKELIHOOD_SLOT)


@intrinsic
def call_predict_block(typingctx, engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                       theta_of_param, stack_depth, packed, start, end, mean_out, var_out):
    """:func:`_predict_block` through the Vecchia table ``engine``."""
    return table_call(engine, None, (X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                                     theta_of_param, stack_depth, packed, start, end,
                                     mean_out, var_out),
                      PREDICT_BLOCK_SIGNATURE, offset=_PREDICT_SLOT)


@intrinsic
def call_weights_block(typingctx, engine, X, Y, diag_add, perm, nbrs, ops, op_float, params,
                       theta_of_param, stack_depth, packed, start, end, b_out, v_out, r_out):
    """:func:`_weights_block` through the Vecchia table ``engine``."""
    return table_call(engine, None, (X, Y, diag_add, perm, nbrs, ops, op_float, params,
                                     theta_of_param, stack_depth, packed, start, end, b_out,
                                     v_out, r_out),
                      WEIGHTS_BLOCK_SIGNATURE, offset=_WEIGHTS_SLOT)


if not JIT:  # plain Python (NUMBA_DISABLE_JIT=1): the same calls, by handle
    def call_likelihood_block(engine, *args):  # noqa: F811
        return python_table_call(engine, _LIKELIHOOD_SLOT, *args)

    def call_weights_block(engine, *args):  # noqa: F811
        return python_table_call(engine, _WEIGHTS_SLOT, *args)

    def call_predict_block(engine, *args):  # noqa: F811
        return python_table_call(engine, _PREDICT_SLOT, *args)

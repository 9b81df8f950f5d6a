"""Vecchia's parallel passes over position blocks of rows, and the wrappers
that the backend (:mod:`fastgp._backend.covariance`) calls (docs/design.md,
"Vecchia's approximation"):

- :func:`vecchia_partials`, :func:`vecchia_total`: the negative
  log-likelihood and its gradient (:func:`vecchia_pass`);
- :func:`vecchia_weight_rows`, :func:`vecchia_dual_from_rows`: the rows of
  the sparse inverse Cholesky factor U and A = U U^T Y
  (:func:`vecchia_weights_pass`, :func:`vecchia_dual`);
- :func:`vecchia_predict`: conditional means and variances of query points
  (:func:`vecchia_predict_pass`);
- :func:`position_blocks`: the blocks of rows every pass is cut into.

Each ``prange`` iteration of a pass runs one position block's worker
(:mod:`.vecchia_workers`) through the Vecchia table.

Determinism. The rows are cut into a fixed number of blocks
(:func:`position_blocks`, a function of N alone); each ``prange`` iteration
owns one block, forms its batches from its own rows, adds their terms in row
order into its own row of ``partial_out``, and the caller sums the rows in
block order, so the results are the same bits on any number of threads.

Failure. A block B (or, for prediction, B_nn) whose pivot is not positive
(or NaN) is counted in ``flags`` (one int64 per pass block) and contributes
nothing; the caller answers inf (never a NaN) where any count is nonzero.

Callers hold :func:`.config.parallel_region` around the wrappers, as
:mod:`fastgp._backend.covariance` does around every pass.
"""

import math

import numpy as np

from . import opcodes as op
from .config import jit, parallel_jit, prange
from .vecchia_block import set_size
from .vecchia_workers import (call_likelihood_block, call_predict_block, call_weights_block,
                              vecchia_table)

__all__ = ["VECCHIA_BLOCKS", "position_blocks", "is_stationary", "vecchia_pass",
           "vecchia_predict_pass", "vecchia_weights_pass", "vecchia_dual", "vecchia_partials",
           "vecchia_total", "vecchia_weight_rows", "vecchia_dual_from_rows", "vecchia_predict"]

#: Most position blocks of a pass (fixed: results do not depend on threads).
VECCHIA_BLOCKS = 256


def position_blocks(n):
    """Boundaries (n_blocks + 1,) int64 of the position blocks of a pass:
    n_blocks = min(n, VECCHIA_BLOCKS) nearly equal runs of positions, a
    function of n alone (never of the thread count)."""
    n_blocks = max(1, min(n, VECCHIA_BLOCKS))
    return ((np.arange(n_blocks + 1, dtype=np.int64) * n) // n_blocks).astype(np.int64)


def is_stationary(ops):
    """Whether the program ``ops`` has no leaf in ``NON_STATIONARY_LEAVES``,
    so that every entry is the kernel of the difference of its inputs and
    the packed tiles apply (:mod:`.vecchia_block`)."""
    codes = ops[:, op.COL_CODE]
    return not bool(np.isin(codes, np.asarray(op.NON_STATIONARY_LEAVES)).any())


@parallel_jit
def vecchia_pass(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                 stack_depth, n_theta, packed, bounds, partial_out, flags):
    """Vecchia's negative log-likelihood and its gradient, by position blocks.

    engine   :func:`.vecchia_workers.vecchia_table` of ``ops``
    X        (d, N) float64 C-contiguous: the inputs transposed (kernel_input)
    Y        (N, T) float64 C-contiguous: the targets, by sample
    diag_add (N,) float64: the nugget alpha of each sample
    perm     (N,) int64: row -> sample (the point of row i; the rows are
             the positions of the ordering, or any permutation of them: the
             NLL is a sum over rows)
    nbrs     (N, m) int64: row i = c(i), sample indices of earlier positions
             (nearest first or in any order), padded with -1 at the end
    ops .. theta_of_param, stack_depth: the KernelProgram arrays, params
             (n_params,) natural scale
    n_theta  free hyperparameters; 0 for the value alone (mode VALUES)
    packed   True: packed tiles of differences (stationary programs only:
             :func:`is_stationary`); False: column tiles (:mod:`.vecchia_block`)
    bounds   (n_blocks + 1,) int64 from :func:`position_blocks`
    partial_out (n_blocks, 1 + n_theta) float64, overwritten: row b holds
             block b's NLL (column 0) and dNLL/dtheta (columns 1 ..), over
             the points whose block was positive definite
    flags    (n_blocks,) int64, overwritten: the number of points of block b
             whose B was not positive definite (they add nothing)

    Consecutive rows of a block with the same |c| go in batches of up to
    LANES (:mod:`.vecchia_batch`); a block's results depend on its rows
    alone, never on the thread count. NLL = partial_out[:, 0].sum(),
    dNLL/dtheta = partial_out[:, 1:].sum(0), summed in block order by the
    caller; inf where flags.sum() > 0.
    """
    for b in prange(bounds.size - 1):
        flags[b] = call_likelihood_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float,
                                         params, theta_of_param, stack_depth, n_theta, packed,
                                         bounds[b], bounds[b + 1], partial_out[b])


@parallel_jit
def vecchia_predict_pass(engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                         theta_of_param, stack_depth, packed, bounds, mean_out, var_out,
                         flags):
    """Conditional mean and latent variance of query points given their
    nearest training points (docs/design.md, "Vecchia's approximation"):

        mean[c, t] = k_*n K~_nn^-1 y_nt,   var[c] = k_** - k_*n K~_nn^-1 k_n*

    with K~_nn = k(X_n, X_n) + diag(diag_add_n) (WhiteKernel on its diagonal),
    k_*n = k(x*_c, X_n) (no WhiteKernel: distinct points), and k_** =
    k(x*_c, x*_c) WITH the WhiteKernel term and without any nugget, as
    fastgp._backend.covariance.FastCovariance.diag (scikit-learn's ``kernel.diag``)
    gives it. The block is the neighbours then the query point, last; its
    factor's last pivot is the variance, left as computed (it may round
    below 0; the caller clips, as the regressor's predict does).

    X (d, N), Xq (d, Nq) float64 C-contiguous (transposed); Y (N, T);
    diag_add (N,); nbrs (Nq, m') int64 training indices, -1 padded at the
    end; bounds (n_blocks + 1,) int64 from :func:`position_blocks` (Nq);
    mean_out (Nq, T), var_out (Nq,) float64, overwritten (NaN where the
    neighbours' block was not positive definite); flags (n_blocks,) int64,
    overwritten: such points per block.
    """
    for b in prange(bounds.size - 1):
        flags[b] = call_predict_block(engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                                      theta_of_param, stack_depth, packed, bounds[b],
                                      bounds[b + 1], mean_out, var_out)


@parallel_jit
def vecchia_weights_pass(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params,
                         theta_of_param, stack_depth, packed, bounds, b_out, v_out, r_out,
                         flags):
    """The rows' factors of the sparse inverse Cholesky factor U of Vecchia's
    approximation, K~^-1 ~ U U^T (Katzfuss & Guinness 2021, sec. 2): for row
    i (the point p = perm[i] after its conditioning set c = nbrs[i]),

        b_i = B_cc^-1 k_cp,   v_i = k_pp - k_pc b_i,   r_it = y_pt - b_i^T y_ct,

    column i of U being [-b_i; 1] / sqrt(v_i) on s(i). The arguments as
    :func:`vecchia_pass`'s; b_out (N, m) (the first |c(i)| entries of row i
    written, in nbrs' order), v_out (N,), r_out (N, T) float64, overwritten
    (NaN where B was not positive definite); flags (n_blocks,) int64,
    overwritten: such rows per block. Row i is written by one block only."""
    for blk in prange(bounds.size - 1):
        flags[blk] = call_weights_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float,
                                        params, theta_of_param, stack_depth, packed,
                                        bounds[blk], bounds[blk + 1], b_out, v_out, r_out)


@jit
def vecchia_dual(perm, nbrs, b, v, r, out):
    """out (N, T) = U U^T y = U z, z_i = r_i / sqrt(v_i), from the rows of
    :func:`vecchia_weights_pass`: row i adds [-b_i; 1] r_i / v_i to the
    rows s(i) of out (zeroed first). Serial, rows in order: a fixed sum."""
    T = out.shape[1]
    m = nbrs.shape[1]
    for p in range(out.shape[0]):
        for q in range(T):
            out[p, q] = 0.0
    for i in range(perm.size):
        n_c = set_size(nbrs, i, m)
        inv = 1.0 / v[i]
        p = perm[i]
        for q in range(T):
            coef = r[i, q] * inv
            out[p, q] += coef
            for a in range(n_c):
                out[nbrs[i, a], q] -= b[i, a] * coef


# ---------------------------------------------------------------- wrappers


def _c_array(a, dtype):
    """``a`` as a writeable C-contiguous array of ``dtype`` (one Numba type
    per routine: see fastgp._backend.covariance.kernel_input)."""
    return np.require(np.asarray(a, dtype=dtype), dtype, ["C", "W"])


def _float_arguments(X, Y, diag_add):
    """X (d, N), Y (N, T) (a 1-D Y as one column) and diag_add broadcast to
    (N,), as the passes' float64 C arrays."""
    X = _c_array(X, np.float64)
    Y = _c_array(Y, np.float64)
    if Y.ndim == 1:
        Y = Y.reshape(-1, 1)
    n = X.shape[1]
    diag_add = _c_array(np.broadcast_to(np.asarray(diag_add, dtype=np.float64), (n,)),
                        np.float64)
    return X, Y, diag_add


def _rows_arguments(X, Y, diag_add, perm, nbrs):
    """The passes' row arrays as their one compiled type each."""
    X, Y, diag_add = _float_arguments(X, Y, diag_add)
    perm = _c_array(perm, np.int64)
    nbrs = _c_array(nbrs, np.int64)
    if nbrs.ndim != 2 or nbrs.shape[0] != perm.shape[0]:
        raise ValueError(f"nbrs must have shape ({perm.shape[0]}, m), not {nbrs.shape}")
    return X, Y, diag_add, perm, nbrs


def _block_bounds(n_rows, blocks):
    """The boundaries (last - first + 1,) int64 of the position blocks
    ``blocks`` = (first, last) of :func:`position_blocks` (n_rows); all of
    them where ``blocks`` is None."""
    bounds = position_blocks(n_rows)
    if blocks is not None:
        bounds = np.ascontiguousarray(bounds[blocks[0]:blocks[1] + 1])
    return bounds


def vecchia_partials(X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                     stack_depth, n_theta, want_grad=True, blocks=None, packed=None):
    """The position blocks' partial sums of :func:`vecchia_pass`.

    X (d, N) (kernel_input); Y (N,) or (N, T); diag_add (N,); perm (r,);
    nbrs (r, m) (-1 padded); the KernelProgram arrays and params (natural
    scale). want_grad False: the value alone (VALUES mode). blocks: (first,
    last), the range of :func:`position_blocks` (r)'s blocks to compute (None:
    all); the same block gives the same bits whatever range it is computed
    in. packed None: packed tiles where the program is stationary
    (:func:`is_stationary`).

    Returns (partial (last - first, 1 + n_theta or 1), flags (last - first,)
    int64): each block's NLL and gradient, and its rows whose B was not
    positive definite.
    """
    X, Y, diag_add, perm, nbrs = _rows_arguments(X, Y, diag_add, perm, nbrs)
    if packed is None:
        packed = is_stationary(ops)
    n_eval = int(n_theta) if want_grad else 0
    bounds = _block_bounds(perm.shape[0], blocks)
    partial = np.empty((bounds.size - 1, 1 + n_eval))
    flags = np.empty(bounds.size - 1, dtype=np.int64)
    vecchia_pass(vecchia_table(ops), X, Y, diag_add, perm, nbrs, ops, op_float,
                 _c_array(params, np.float64), theta_of_param, np.int64(stack_depth),
                 np.int64(n_eval), bool(packed), bounds, partial, flags)
    return partial, flags


def vecchia_total(partial, flags, n_theta, want_grad):
    """(nll, grad (n_theta,) or None, n_bad) from every block's partial sums
    (:func:`vecchia_partials`, in block order): nll = inf and grad = zeros
    where n_bad > 0 blocks B were not positive definite (the answer that
    makes a line search back off, as every objective's)."""
    n_bad = int(flags.sum())
    if n_bad:
        return math.inf, (np.zeros(n_theta) if want_grad else None), n_bad
    total = partial.sum(axis=0)
    return float(total[0]), (total[1:] if want_grad else None), 0


def vecchia_weight_rows(X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                        stack_depth, blocks=None, packed=None):
    """The rows (b, v, r) of the inverse factor (:func:`vecchia_weights_pass`)
    for the position blocks ``blocks`` = (first, last) (None: all), the
    arguments as :func:`vecchia_partials`'s: b (rows, m), v (rows,),
    r (rows, T) for the rows of those blocks, and n_bad."""
    X, Y, diag_add, perm, nbrs = _rows_arguments(X, Y, diag_add, perm, nbrs)
    if packed is None:
        packed = is_stationary(ops)
    bounds = _block_bounds(perm.shape[0], blocks)
    rows = slice(int(bounds[0]), int(bounds[-1]))
    b = np.empty(nbrs.shape)
    v = np.empty(perm.shape[0])
    r = np.empty((perm.shape[0], Y.shape[1]))
    flags = np.empty(bounds.size - 1, dtype=np.int64)
    vecchia_weights_pass(vecchia_table(ops), X, Y, diag_add, perm, nbrs, ops, op_float,
                         _c_array(params, np.float64), theta_of_param, np.int64(stack_depth),
                         bool(packed), bounds, b, v, r, flags)
    return b[rows], v[rows], r[rows], int(flags.sum())


def vecchia_dual_from_rows(perm, nbrs, b, v, r, n):
    """A = U U^T Y (n, T) from every row's (b, v, r) in row order
    (:func:`vecchia_dual`)."""
    out = np.empty((int(n), r.shape[1]))
    vecchia_dual(_c_array(perm, np.int64), _c_array(nbrs, np.int64), _c_array(b, np.float64),
                 _c_array(v, np.float64), _c_array(r, np.float64), out)
    return out


def vecchia_predict(X, X_query, Y, diag_add, nbrs, ops, op_float, params, theta_of_param,
                    stack_depth, packed=None):
    """Conditional means (Nq, T) and latent variances (Nq,) of the query
    points X_query (d, Nq) given their neighbours nbrs (Nq, m') among the
    training points X (d, N) (:func:`vecchia_predict_pass`). Returns
    (mean, var, n_bad); NaN rows where the neighbours' block was not
    positive definite."""
    X, Y, diag_add = _float_arguments(X, Y, diag_add)
    Xq = _c_array(X_query, np.float64)
    nbrs = _c_array(nbrs, np.int64)
    nq = Xq.shape[1]
    if nbrs.ndim != 2 or nbrs.shape[0] != nq:
        raise ValueError(f"nbrs must have shape ({nq}, m), not {nbrs.shape}")
    if packed is None:
        packed = is_stationary(ops)
    bounds = position_blocks(nq)
    mean = np.empty((nq, Y.shape[1]))
    var = np.empty(nq)
    flags = np.empty(bounds.size - 1, dtype=np.int64)
    vecchia_predict_pass(vecchia_table(ops), X, Xq, Y, diag_add, nbrs, ops, op_float,
                         _c_array(params, np.float64), theta_of_param, np.int64(stack_depth),
                         bool(packed), bounds, mean, var, flags)
    return mean, var, int(flags.sum())

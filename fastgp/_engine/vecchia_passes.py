"""Vecchia's nearest-neighbour approximation: its negative log-likelihood with
the exact gradient, its conditional predictions, and the maxmin ordering's
inner loops (docs/design.md, "Vecchia's approximation").

The likelihood (Vecchia 1988; Guinness 2018, 2021; Katzfuss & Guinness 2021).
Positions i = 0 .. N-1 of an ordering ``perm`` (position -> sample); c(i) the
at most m nearest samples among earlier positions; s(i) = c(i) then the
point p = perm[i] itself, LAST. With B = K~_ss (the kernel on s(i), the
nugget ``diag_add`` on its diagonal, WhiteKernel on its diagonal only) and
B = L L^T,

    v_i  = L_ll^2 = k_pp - k_pc B_cc^-1 k_cp          (the conditional variance)
    r_it = y_pt - k_pc B_cc^-1 y_ct                    (the conditional residual)
    NLL  = sum_i sum_t 1/2 [log(2 pi v_i) + r_it^2 / v_i].

Both come from one factor of B: the last pivot of the Cholesky factorisation
is v_i (the Schur complement of B_cc), and the forward substitution of y_s,
folded into the factorisation, leaves r_it in the last slot
(r = L_ll z_last, z = L^-1 y_s). No second factor of B_cc is needed.

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
  in packed ones (docs/benchmarks.md, "Vecchia's approximation").
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

Batches. The likelihood works on LANES = 8 points at a time with the same
|s|, in a compact layout whose innermost index is the point ("batches"
below): the small Cholesky factorisation, the substitutions and the weights
then run on 8 independent numbers per operation, as explicit vector code
(:func:`lanes_set` and the others), where one block's own loops are too
short to vectorise. A tile of packed entries then serves 64 entries of 8
blocks, and the interpreter writes the theta-derivatives straight into the
batch's per-tile storage (its G argument), so dK is never copied.

Compilation. The block workers (:func:`_likelihood_block`,
:func:`_predict_block`) are compiled once each for a fixed signature and
called from the parallel passes through the Vecchia table
(:func:`vecchia_table`: the engine table plus their addresses), as the passes
call the interpreter (docs/design.md, "Numba's cache"): linked into the
passes instead, they were optimised again there (cold compile 39 s against
20 s).

Determinism. The rows are cut into a fixed number of blocks
(:func:`position_blocks`, a function of N alone); each ``prange`` iteration
owns one block, forms its batches from its own rows, adds their terms in row
order into its own row of ``partial_out``, and the caller sums the rows in
block order, so the results are the same bits on any number of threads.

Failure. A block B (or, for prediction, B_nn) whose pivot is not positive
(or NaN) is counted in ``flags`` (one int64 per pass block) and contributes
nothing; the caller answers inf (never a NaN) where any count is nonzero.

Callers hold :func:`.config.parallel_region` around the wrappers, as
fastgp.covariance does around every pass.

The maxmin ordering's loops are :mod:`.maxmin`'s.
"""

import math

import numpy as np
from llvmlite import ir
from numba.core import cgutils, errors, types
from numba.extending import intrinsic

from . import opcodes as op
from .address_call import JIT, TABLE_TYPE, compiled_address, python_table_call, table_call
from .config import jit, parallel_jit, prange
from .interpreter import D_THETA, TILE, VALUES, allocate_scratch, call_eval_tile, engine_table
from .leaves import LEAF_ENTRIES, LEAF_SLOT

__all__ = ["VECCHIA_BLOCKS", "LANES", "position_blocks", "vecchia_pass",
           "vecchia_predict_pass", "vecchia_weights_pass", "vecchia_dual", "vecchia_partials",
           "vecchia_total", "vecchia_nll_grad", "vecchia_weight_rows", "vecchia_dual_from_rows",
           "vecchia_predict", "vecchia_dual_weights", "vecchia_table",
           "is_stationary", "lanes_set", "lanes_add", "lanes_sub", "lanes_diff", "lanes_dot_add",
           "PHASE_GATHER", "PHASE_KERNEL", "PHASE_FACTOR", "PHASE_ALL"]

#: Most position blocks of a pass (fixed: results do not depend on threads).
VECCHIA_BLOCKS = 256

#: ``last_phase`` of :func:`vecchia_pass`: how far each point's work goes.
#: Anything short of PHASE_ALL is for profiling only (the results are then
#: meaningless); the wrappers always pass PHASE_ALL.
PHASE_GATHER, PHASE_KERNEL, PHASE_FACTOR, PHASE_ALL = 0, 1, 2, 3

_LOG_2PI = math.log(2.0 * math.pi)


def position_blocks(n):
    """Boundaries (n_blocks + 1,) int64 of the position blocks of a pass:
    n_blocks = min(n, VECCHIA_BLOCKS) nearly equal runs of positions, a
    function of n alone (never of the thread count)."""
    n_blocks = max(1, min(n, VECCHIA_BLOCKS))
    return ((np.arange(n_blocks + 1, dtype=np.int64) * n) // n_blocks).astype(np.int64)


def is_stationary(ops):
    """Whether the program ``ops`` has no leaf in ``NON_STATIONARY_LEAVES``,
    so that every entry is the kernel of the difference of its inputs and
    the packed tiles apply (module docstring)."""
    codes = ops[:, op.COL_CODE]
    return not bool(np.isin(codes, np.asarray(op.NON_STATIONARY_LEAVES)).any())


# ---------------------------------------------------------------- the block


@jit(_nrt=False)
def _block_columns(engine, Xs, n_s, ops, op_float, params, theta_of_param, mode, n_rows,
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
def _block_packed(engine, Xs, n_s, Z, P, Kv, ops, op_float, params, theta_of_param, mode,
                  n_rows, V, G, D1, D2, Wk, A, dKs):
    """The block's strict lower triangle by packed tiles of differences
    (module docstring): entry e (column-major, as :func:`_block_columns`)
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
def _factor_block(A, n_s, Ys, T):
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
def _values_scratch(engine, packed, ops, op_float, params, theta_of_param, stack_depth, d, T,
                    m):
    """What the one-block-at-a-time workers (:func:`_predict_block`,
    :func:`_weights_block`) hold for blocks of up to m + 1 points, kernel
    values only (VALUES mode): (kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv,
    dKs, dKd). kdiag is k(x, x) (:func:`_kernel_diagonal`) where ``packed``,
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
        kdiag = _kernel_diagonal(engine, Z, ops, op_float, params, theta_of_param,
                                 np.int64(VALUES), V, G, D1, D2, Wk)
    return kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv, dKs, dKd


@jit(_nrt=False)
def _kernel_diagonal(engine, Z, ops, op_float, params, theta_of_param, mode, V, G, D1, D2,
                     Wk):
    """k(x, x) of a stationary program, the same for every x (module
    docstring): one tile of length 1 at the zero column Z (d, 1), diag_t = 0
    (WhiteKernel included). With D_THETA its theta-derivatives are left in
    G[:, 0]."""
    call_eval_tile(engine, Z, np.int64(0), np.int64(1), Z, np.int64(0), np.int64(0),
                   ops, op_float, params, theta_of_param, mode, V, G, D1, D2, Wk)
    return V[0, 0]


@jit(_nrt=False)
def _gather_set(X, Y, nbrs, row, n_c, Xs, Ys):
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
def _block_values(engine, Xs, n_s, packed, kdiag, Z, P, Kv, ops, op_float, params,
                  theta_of_param, V, G, D1, D2, Wk, A, dKs, dKd):
    """The block's kernel values (VALUES mode: no theta-derivatives),
    A[j, i] = k(x_i, x_j) for i >= j: by packed tiles (:func:`_block_packed`)
    with the diagonal kdiag (:func:`_values_scratch`) where ``packed``, else
    by column tiles (:func:`_block_columns`); the arrays as theirs."""
    mode = np.int64(VALUES)
    if packed:
        _block_packed(engine, Xs, n_s, Z, P, Kv, ops, op_float, params,
                      theta_of_param, mode, np.int64(0), V, G, D1, D2, Wk, A, dKs)
        for a in range(n_s):
            A[a, a] = kdiag
    else:
        _block_columns(engine, Xs, n_s, ops, op_float, params, theta_of_param, mode,
                       np.int64(0), V, G, D1, D2, Wk, A, dKs, dKd)


# ---------------------------------------------------------------- batches
#
# The likelihood pass works on batches of LANES points with the same |s|, in
# a compact layout whose innermost index is the point (the lane): flat
# arrays in which (j, i) of the batch's matrices is the LANES numbers at
# ((j (m + 1) + i) LANES), lane l at + l (Ab[j, i] = B_l[i, j], i >= j;
# Xb[k, a]; Yb[q, a]). Every step of the factorisation, the substitutions
# and the weights is then an operation on LANES independent numbers, one
# 512-bit vector, where one block's own loops (|s| <= 41, lengths 1 .. |s|)
# are too short and too dependent to vectorise: at |s| = 31 one block's
# factor took 5.2 us (docs/benchmarks.md, "Vecchia's approximation"). Numba runs LLVM without its
# SLP vectoriser, and the loop vectoriser leaves a loop of 8 with possible
# aliasing scalar, so the lane operations are explicit vector code
# (:func:`lanes_set`, :func:`lanes_add`, :func:`lanes_sub`): a loop over a
# strided run of lane vectors, the multiplier loaded once. The batch's
# kernel entries go through the interpreter LANES at a time as well
# (entry e of lane l is t = e LANES + l of the sequence), so a tile of TILE
# entries serves 64 entries of 8 blocks. Lanes past the batch's points
# repeat its first point and are never added.

#: Points per batch (the vector width of the compact layout: 8 float64).
LANES = 8

_LANE_VECTOR = ir.VectorType(ir.DoubleType(), LANES)
_SET, _ADD, _SUB = 0, 1, 2


def _lanes_signature(name, args, arrays):
    """``types.void(*args)`` of the lanes intrinsic ``name``, whose arguments
    at the positions ``arrays`` must be 1-D float64 C arrays and all others
    integers (offsets, strides, counts); TypingError otherwise."""
    array = types.Array(types.float64, 1, "C")
    for k, arg in enumerate(args):
        if not (arg == array if k in arrays else
                isinstance(types.unliteral(arg), types.Integer)):
            raise errors.TypingError(
                f"{name}: float64 1-D C arrays and integer offsets expected, got {args}")
    return types.void(*args)


def _lane_operands(context, builder, signature, args, arrays):
    """What a lanes intrinsic's codegen reads its arguments as: the data
    pointers of the array arguments at the positions ``arrays``, the other
    (integer) arguments as int64, each in argument order, and ``at(base,
    offset)``, the pointer to the LANES-vector at element ``offset`` of a data
    pointer."""
    vptr = _LANE_VECTOR.as_pointer()
    pointers = [context.make_array(signature.args[k])(context, builder, args[k]).data
                for k in arrays]
    integers = [context.cast(builder, args[k], signature.args[k], types.int64)
                for k in range(len(args)) if k not in arrays]

    def at(base, offset):
        return builder.bitcast(builder.gep(base, [offset], inbounds=True), vptr)

    return pointers, integers, at


def _lane_fma(builder):
    """LLVM's fused multiply-add of three LANES-vectors (``llvm.fma.v8f64``),
    declared in the builder's module."""
    return cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(_LANE_VECTOR, [_LANE_VECTOR] * 3),
        "llvm.fma.v%df64" % LANES)


def _lanes_intrinsic(kind, doc):
    """An intrinsic ``(dst, d0, ds, src, s0, ss, f, f0, count)`` on 1-D
    float64 C arrays and int64 offsets: for u < count, with D = dst[d0 + u ds
    : + LANES], S = src[s0 + u ss : + LANES], F = f[f0 : f0 + LANES] (read
    once, before the loop):  D = F S (SET), D = D + F S (ADD, one fused
    multiply-add), D = D - F S (SUB, fma(-F, S, D))."""
    name = ("lanes_set", "lanes_add", "lanes_sub")[kind]

    def typer(typingctx, dst, d0, ds, src, s0, ss, f, f0, count):
        sig = _lanes_signature(name, (dst, d0, ds, src, s0, ss, f, f0, count), (0, 3, 6))

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            (pd, ps, pf), (d0v, dsv, s0v, ssv, f0v, cnt), at = _lane_operands(
                context, builder, signature, args, (0, 3, 6))
            fv = builder.load(at(pf, f0v), align=8)
            if kind == _SUB:
                fv = builder.fneg(fv)
            fma = _lane_fma(builder)
            with cgutils.for_range(builder, cnt, intp=i64) as loop:
                u = loop.index
                dp = at(pd, builder.add(d0v, builder.mul(u, dsv)))
                sv = builder.load(at(ps, builder.add(s0v, builder.mul(u, ssv))), align=8)
                if kind == _SET:
                    result = builder.fmul(fv, sv)
                else:
                    result = builder.call(fma, [fv, sv, builder.load(dp, align=8)])
                builder.store(result, dp, align=8)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


lanes_set = _lanes_intrinsic(_SET, "D = F S over a strided run of lane vectors "
                                   "(:func:`_lanes_intrinsic`).")
lanes_add = _lanes_intrinsic(_ADD, "D += F S over a strided run of lane vectors.")
lanes_sub = _lanes_intrinsic(_SUB, "D -= F S over a strided run of lane vectors.")


@intrinsic
def lanes_diff(typingctx, dst, d0, ds, a, a0, as_, b, b0, count):
    """For u < count: dst[d0 + u ds : + LANES] = a[a0 + u as_ : + LANES] -
    b[b0 : b0 + LANES] (B read once, before the loop), on 1-D float64 C
    arrays with int64 offsets."""
    sig = _lanes_signature("lanes_diff", (dst, d0, ds, a, a0, as_, b, b0, count), (0, 3, 6))

    def codegen(context, builder, signature, args):
        (pd, pa, pb), (d0v, dsv, a0v, asv, b0v, cnt), at = _lane_operands(
            context, builder, signature, args, (0, 3, 6))
        bv = builder.load(at(pb, b0v), align=8)
        with cgutils.for_range(builder, cnt, intp=ir.IntType(64)) as loop:
            u = loop.index
            av = builder.load(at(pa, builder.add(a0v, builder.mul(u, asv))), align=8)
            builder.store(builder.fsub(av, bv),
                          at(pd, builder.add(d0v, builder.mul(u, dsv))), align=8)
        return context.get_dummy_value()

    return sig, codegen


#: Independent partial sums of :func:`lanes_dot_add` (hides the fma latency).
_DOT_PARTS = 4


@intrinsic
def lanes_dot_add(typingctx, acc, c0, a, a0, as_, b, b0, bs, count):
    """acc[c0 : c0 + LANES] += sum_u a[a0 + u as_ : + LANES] * b[b0 + u bs :
    + LANES] over u < count, lane by lane, on 1-D float64 C arrays with int64
    offsets. The sum runs in _DOT_PARTS = 4 partial sums (u mod 4, each in
    the order of u, by fused multiply-adds), added as (s0 + s1) + (s2 + s3)
    and then to acc: a fixed order, the same on every call and thread."""
    sig = _lanes_signature("lanes_dot_add", (acc, c0, a, a0, as_, b, b0, bs, count),
                           (0, 2, 5))

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        (pc, pa, pb), (c0v, a0v, asv, b0v, bsv, cnt), at = _lane_operands(
            context, builder, signature, args, (0, 2, 5))
        fma = _lane_fma(builder)
        zero = ir.Constant(_LANE_VECTOR, [0.0] * LANES)
        parts = [cgutils.alloca_once_value(builder, zero) for _ in range(_DOT_PARTS)]
        four = ir.Constant(i64, _DOT_PARTS)
        full = builder.sdiv(cnt, four)

        def term(u, part):
            av = builder.load(at(pa, builder.add(a0v, builder.mul(u, asv))), align=8)
            bv = builder.load(at(pb, builder.add(b0v, builder.mul(u, bsv))), align=8)
            builder.store(builder.call(fma, [av, bv, builder.load(part)]), part)

        with cgutils.for_range(builder, full, intp=i64) as loop:
            base = builder.mul(loop.index, four)
            for q in range(_DOT_PARTS):
                term(builder.add(base, ir.Constant(i64, q)), parts[q])
        rest = builder.sub(cnt, builder.mul(full, four))
        with cgutils.for_range(builder, rest, intp=i64) as loop:  # u = 4 full + q
            term(builder.add(builder.mul(full, four), loop.index), parts[0])
        total = builder.fadd(builder.fadd(builder.load(parts[0]), builder.load(parts[1])),
                             builder.fadd(builder.load(parts[2]), builder.load(parts[3])))
        cp = at(pc, c0v)
        builder.store(builder.fadd(builder.load(cp, align=8), total), cp, align=8)
        return context.get_dummy_value()

    return sig, codegen

if not JIT:  # plain Python (NUMBA_DISABLE_JIT=1): the same operations, by slices
    def _lanes_python(kind):
        def run(dst, d0, ds, src, s0, ss, f, f0, count):
            F = f[f0:f0 + LANES].copy()
            for u in range(count):
                D = dst[d0 + u * ds:d0 + u * ds + LANES]
                S = src[s0 + u * ss:s0 + u * ss + LANES]
                if kind == _SET:
                    D[:] = F * S
                elif kind == _ADD:
                    D += F * S
                else:
                    D -= F * S
        return run

    lanes_set, lanes_add, lanes_sub = (_lanes_python(k) for k in (_SET, _ADD, _SUB))

    def lanes_diff(dst, d0, ds, a, a0, as_, b, b0, count):  # noqa: F811
        B = b[b0:b0 + LANES].copy()
        for u in range(count):
            dst[d0 + u * ds:d0 + u * ds + LANES] = a[a0 + u * as_:a0 + u * as_ + LANES] - B

    def lanes_dot_add(acc, c0, a, a0, as_, b, b0, bs, count):  # noqa: F811
        parts = np.zeros((_DOT_PARTS, LANES))
        for u in range(count):
            q = u % _DOT_PARTS if u < count - count % _DOT_PARTS else 0
            parts[q] += a[a0 + u * as_:a0 + u * as_ + LANES] * b[b0 + u * bs:b0 + u * bs + LANES]
        acc[c0:c0 + LANES] += (parts[0] + parts[1]) + (parts[2] + parts[3])


@jit(_nrt=False)
def _set_size(nbrs, i, m):
    """|c(i)|: the entries of nbrs[i] before the first -1."""
    n_c = 0
    while n_c < m and nbrs[i, n_c] >= 0:
        n_c += 1
    return n_c


@jit(_nrt=False)
def _gather_batch(X, Y, diag_add, perm, nbrs, i0, n_lanes, n_c, mp1, T, Xb, Yb, Db):
    """The batch's points: lane l < n_lanes is row i0 + l (its conditioning
    set nbrs[i0 + l, :n_c], then perm[i0 + l] last); lanes from n_lanes on
    repeat lane 0. Writes Xb[k, a], Yb[q, a], Db[a] (the nugget) in the
    compact layout (section comment)."""
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


#: Lane entries (LANES numbers each) per interpreter tile.
_TILE_ENTRIES = TILE // LANES


@jit(_nrt=False)
def _batch_packed(engine, Xb, n_s, mp1, Z, P, ops, op_float, params, theta_of_param, mode,
                  V, Gt, D1, D2, Wk, Ab, ones, run):
    """The batch's strict lower triangles by packed tiles of differences
    (module docstring). Entry e (column-major: column j's rows j + 1 ..
    n_s - 1) of lane l is number e LANES + l of the sequence, k(x_i - x_j, 0);
    the sequence goes TILE at a time through the interpreter against the zero
    column Z (diag_t = -1), tile tau's theta-derivatives written by the
    interpreter straight into Gt[tau] (its G: (n_theta, TILE) C-contiguous),
    so dK is never copied: number f of the sequence is Gt[f // TILE, p,
    f % TILE]. The values go into Ab[j, i] (i > j). Each column's run of
    rows is packed and scattered by lane operations. P (d, TILE), run
    (4, _TILE_ENTRIES) int64 scratch; ones (LANES,) = 1."""
    d = Z.shape[0]
    none = np.int64(-1)
    zero = np.int64(0)
    t = 0  # lane entries in the current tile
    tau = 0
    n_runs = 0
    for j in range(n_s - 1):
        i = j + 1
        while i < n_s:
            c = min(n_s - i, _TILE_ENTRIES - t)
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
            if t == _TILE_ENTRIES or (i == n_s and j == n_s - 2):
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
def _batch_columns(engine, Xb, n_s, mp1, n_lanes, Xl, ops, op_float, params, theta_of_param,
                   mode, n_rows, V, G, D1, D2, Wk, Ab, Gt, dKd):
    """The batch's entries by column tiles (any program), lane by lane: lane
    l's points into Xl (d, m + 1), then column j's tile of rows j .. n_s - 1
    (diag_t = 0: WhiteKernel on the block's diagonal entry (j, j) only),
    written into Ab[j, i] (i >= j), dKd[p, j LANES + l] and, for the strict
    lower triangle's entry e, number f = e LANES + l of the sequence
    Gt[f // TILE, p, f % TILE] (as :func:`_batch_packed` leaves it). Lanes
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
def _factor_batch(Ab, n_s, mp1, Yb, T, inv, v, ok):
    """:func:`_factor_block` on every lane at once (right-looking Cholesky
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
def _weights_batch(Ab, n_s, mp1, Yb, T, v, ok, w, g, c1, c2, rr, Ws, Wd, ones):
    """:func:`_point_weights` on every lane: w[a] = (-b; 1), g[a] =
    (L_cc^-T sum_t r_t z_ct; 0), rr = sum_t r_t^2, and the trace weights
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


@parallel_jit
def vecchia_pass(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                 stack_depth, n_theta, packed, bounds, last_phase, partial_out, flags):
    """Vecchia's negative log-likelihood and its gradient, by position blocks.

    engine   :func:`vecchia_table` of ``ops``
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
             :func:`is_stationary`); False: column tiles (module docstring)
    bounds   (n_blocks + 1,) int64 from :func:`position_blocks`
    last_phase  PHASE_ALL (smaller values stop each batch's work early, for
             profiling only)
    partial_out (n_blocks, 1 + n_theta) float64, overwritten: row b holds
             block b's NLL (column 0) and dNLL/dtheta (columns 1 ..), over
             the points whose block was positive definite
    flags    (n_blocks,) int64, overwritten: the number of points of block b
             whose B was not positive definite (they add nothing)

    Consecutive rows of a block with the same |c| go in batches of up to
    LANES (the compact layout above); a block's results depend on its rows
    alone, never on the thread count. NLL = partial_out[:, 0].sum(),
    dNLL/dtheta = partial_out[:, 1:].sum(0), summed in block order by the
    caller; inf where flags.sum() > 0.
    """
    for b in prange(bounds.size - 1):
        flags[b] = _call_likelihood_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float,
                                          params, theta_of_param, stack_depth, n_theta, packed,
                                          bounds[b], bounds[b + 1], last_phase, partial_out[b])


@jit
def _likelihood_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params,
                      theta_of_param, stack_depth, n_theta, packed, start, end, last_phase,
                      out):
    """One position block of :func:`vecchia_pass`: rows [start, end), their
    NLL into out[0] and dNLL/dtheta into out[1:]; returns the number of rows
    whose block was not positive definite. Compiled once for
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
    run = np.empty((4, _TILE_ENTRIES), dtype=np.int64)
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
        kdiag = _kernel_diagonal(engine, Z, ops, op_float, params, theta_of_param, mode,
                                 V, G, D1, D2, Wk)
        for p in range(n_rows):
            for u in range(mp1 * LANES):
                dKd[p, u] = G[p, 0]
    nll = 0.0
    bad = 0
    i = start
    while i < end:
        n_c = _set_size(nbrs, i, m)
        n_lanes = 1
        while (n_lanes < LANES and i + n_lanes < end
               and _set_size(nbrs, i + n_lanes, m) == n_c):
            n_lanes += 1
        n_s = n_c + 1
        _gather_batch(X, Y, diag_add, perm, nbrs, i, n_lanes, n_c, mp1, T, Xb, Yb, Db)
        i += n_lanes
        if last_phase < PHASE_KERNEL:
            continue
        if packed:
            _batch_packed(engine, Xb, n_s, mp1, Z, P, ops, op_float, params,
                          theta_of_param, mode, V, Gt, D1, D2, Wk, Ab, ones, run)
            for a in range(n_s):
                aa = (a * mp1 + a) * LANES
                for l in range(LANES):
                    Ab[aa + l] = kdiag + Db[a * LANES + l]
        else:
            _batch_columns(engine, Xb, n_s, mp1, n_lanes, Xl, ops, op_float, params,
                           theta_of_param, mode, n_rows, V, G, D1, D2, Wk, Ab, Gt, dKd)
            for a in range(n_s):
                aa = (a * mp1 + a) * LANES
                for l in range(LANES):
                    Ab[aa + l] += Db[a * LANES + l]
        if last_phase < PHASE_FACTOR:
            continue
        _factor_batch(Ab, n_s, mp1, Yb, T, inv, v, ok)
        if last_phase < PHASE_ALL:
            continue
        for l in range(n_lanes):
            if ok[l]:
                nll += 0.5 * (T * (_LOG_2PI + math.log(v[l]))
                              + _residual_square(Yb, T, mp1, n_c, l) / v[l])
            else:
                bad += 1
        for l in range(n_lanes, LANES):
            ok[l] = False  # repeats of lane 0: never added
        _weights_batch(Ab, n_s, mp1, Yb, T, v, ok, w, g, c1, c2, rr, Ws, Wd, ones)
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


@jit(_nrt=False)
def _residual_square(Yb, T, mp1, n_c, l):
    """sum_t r_t^2 of lane l (the residuals are Yb[q, n_c])."""
    s = 0.0
    for q in range(T):
        r = Yb[(q * mp1 + n_c) * LANES + l]
        s += r * r
    return s


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
    fastgp.covariance.FastCovariance.diag (scikit-learn's ``kernel.diag``)
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
        flags[b] = _call_predict_block(engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                                       theta_of_param, stack_depth, packed, bounds[b],
                                       bounds[b + 1], mean_out, var_out)


@jit
def _predict_block(engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params, theta_of_param,
                   stack_depth, packed, start, end, mean_out, var_out):
    """The query points [start, end) of :func:`vecchia_predict_pass`; returns
    how many had a neighbours' block that was not positive definite. Called
    through the Vecchia table, as :func:`_likelihood_block`."""
    d = X.shape[0]
    T = Y.shape[1]
    m = nbrs.shape[1]
    kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv, dKs, dKd = _values_scratch(
        engine, packed, ops, op_float, params, theta_of_param, stack_depth, d, T, m)
    bad = 0
    for c in range(start, end):
        n_c = _set_size(nbrs, c, m)
        _gather_set(X, Y, nbrs, c, n_c, Xs, Ys)
        for k in range(d):
            Xs[k, n_c] = Xq[k, c]
        for q in range(T):
            Ys[q, n_c] = 0.0  # leaves -mean in the last slot
        n_s = n_c + 1
        _block_values(engine, Xs, n_s, packed, kdiag, Z, P, Kv, ops, op_float, params,
                      theta_of_param, V, G, D1, D2, Wk, A, dKs, dKd)
        for a in range(n_c):  # the nugget on the training diagonal only
            A[a, a] += diag_add[nbrs[c, a]]
        var = _factor_block(A, n_s, Ys, T)
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
        flags[blk] = _call_weights_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float,
                                         params, theta_of_param, stack_depth, packed,
                                         bounds[blk], bounds[blk + 1], b_out, v_out, r_out)


@jit
def _weights_block(engine, X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                   stack_depth, packed, start, end, b_out, v_out, r_out):
    """The rows [start, end) of :func:`vecchia_weights_pass`, one at a time
    (the pass runs once per fit); returns how many rows' B was not positive
    definite. Called through the Vecchia table, as :func:`_likelihood_block`."""
    d = X.shape[0]
    T = Y.shape[1]
    m = nbrs.shape[1]
    kdiag, V, G, D1, D2, Wk, Xs, Ys, A, P, Z, Kv, dKs, dKd = _values_scratch(
        engine, packed, ops, op_float, params, theta_of_param, stack_depth, d, T, m)
    b = np.empty(m + 1)
    bad = 0
    for i in range(start, end):
        n_c = _set_size(nbrs, i, m)
        _gather_set(X, Y, nbrs, i, n_c, Xs, Ys)
        p = perm[i]
        for k in range(d):
            Xs[k, n_c] = X[k, p]
        for q in range(T):
            Ys[q, n_c] = Y[p, q]
        n_s = n_c + 1
        _block_values(engine, Xs, n_s, packed, kdiag, Z, P, Kv, ops, op_float, params,
                      theta_of_param, V, G, D1, D2, Wk, A, dKs, dKd)
        for a in range(n_c):
            A[a, a] += diag_add[nbrs[i, a]]
        A[n_c, n_c] += diag_add[p]
        var = _factor_block(A, n_s, Ys, T)
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
        n_c = _set_size(nbrs, i, m)
        inv = 1.0 / v[i]
        p = perm[i]
        for q in range(T):
            coef = r[i, q] * inv
            out[p, q] += coef
            for a in range(n_c):
                out[nbrs[i, a], q] -= b[i, a] * coef


# ---------------------------------------------------------------- the table
#
# The block workers are compiled once each, for the fixed signatures below,
# and the passes call them through the Vecchia table: the engine table of the
# program (.interpreter.engine_table, whose slots the workers' own calls of
# the interpreter use) followed by the workers' two addresses. The argument
# types at each call are checked against the signature when the pass
# compiles (.address_call.table_call).

_F1 = types.Array(types.float64, 1, "C")
_F2 = types.Array(types.float64, 2, "C")
_I1 = types.Array(types.int64, 1, "C")
_I2 = types.Array(types.int64, 2, "C")

#: _likelihood_block(table, X, Y, diag_add, perm, nbrs, ops, op_float, params,
#: theta_of_param, stack_depth, n_theta, packed, start, end, last_phase, out)
LIKELIHOOD_BLOCK_SIGNATURE = types.int64(TABLE_TYPE, _F2, _F2, _F1, _I1, _I2, _I2, _F1, _F1,
                                         _I1, types.int64, types.int64, types.boolean,
                                         types.int64, types.int64, types.int64, _F1)
#: _weights_block(table, X, Y, diag_add, perm, nbrs, ops, op_float, params,
#: theta_of_param, stack_depth, packed, start, end, b_out, v_out, r_out)
WEIGHTS_BLOCK_SIGNATURE = types.int64(TABLE_TYPE, _F2, _F2, _F1, _I1, _I2, _I2, _F1, _F1, _I1,
                                      types.int64, types.boolean, types.int64, types.int64,
                                      _F2, _F1, _F2)
#: _predict_block(table, X, Xq, Y, diag_add, nbrs, ops, op_float, params,
#: theta_of_param, stack_depth, packed, start, end, mean_out, var_out)
PREDICT_BLOCK_SIGNATURE = types.int64(TABLE_TYPE, _F2, _F2, _F2, _F1, _I2, _I2, _F1, _F1, _I1,
                                      types.int64, types.boolean, types.int64, types.int64,
                                      _F2, _F1)

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
def _call_likelihood_block(typingctx, engine, X, Y, diag_add, perm, nbrs, ops, op_float,
                           params, theta_of_param, stack_depth, n_theta, packed, start, end,
                           last_phase, out):
    return table_call(engine, None, (X, Y, diag_add, perm, nbrs, ops, op_float, params,
                                     theta_of_param, stack_depth, n_theta, packed, start, end,
                                     last_phase, out),
                      LIKELIHOOD_BLOCK_SIGNATURE, offset=_LIKELIHOOD_SLOT)


@intrinsic
def _call_predict_block(typingctx, engine, X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                        theta_of_param, stack_depth, packed, start, end, mean_out, var_out):
    return table_call(engine, None, (X, Xq, Y, diag_add, nbrs, ops, op_float, params,
                                     theta_of_param, stack_depth, packed, start, end,
                                     mean_out, var_out),
                      PREDICT_BLOCK_SIGNATURE, offset=_PREDICT_SLOT)


@intrinsic
def _call_weights_block(typingctx, engine, X, Y, diag_add, perm, nbrs, ops, op_float, params,
                        theta_of_param, stack_depth, packed, start, end, b_out, v_out, r_out):
    return table_call(engine, None, (X, Y, diag_add, perm, nbrs, ops, op_float, params,
                                     theta_of_param, stack_depth, packed, start, end, b_out,
                                     v_out, r_out),
                      WEIGHTS_BLOCK_SIGNATURE, offset=_WEIGHTS_SLOT)


if not JIT:  # plain Python (NUMBA_DISABLE_JIT=1): the same calls, by handle
    def _call_likelihood_block(engine, *args):  # noqa: F811
        return python_table_call(engine, _LIKELIHOOD_SLOT, *args)

    def _call_weights_block(engine, *args):  # noqa: F811
        return python_table_call(engine, _WEIGHTS_SLOT, *args)

    def _call_predict_block(engine, *args):  # noqa: F811
        return python_table_call(engine, _PREDICT_SLOT, *args)


# ---------------------------------------------------------------- wrappers


def _c_array(a, dtype):
    """``a`` as a writeable C-contiguous array of ``dtype`` (one Numba type
    per routine: see fastgp.covariance.kernel_input)."""
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
                     stack_depth, n_theta, want_grad=True, blocks=None, packed=None,
                     last_phase=PHASE_ALL):
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
                 np.int64(n_eval), bool(packed), bounds, np.int64(last_phase), partial, flags)
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


def vecchia_nll_grad(X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                     stack_depth, n_theta, want_grad=True, packed=None,
                     last_phase=PHASE_ALL):
    """Vecchia's NLL and gradient (:func:`vecchia_pass`) over all blocks,
    summed in block order: (nll, grad (n_theta,) or None, n_bad), as
    :func:`vecchia_total`; the arguments as :func:`vecchia_partials`'s."""
    partial, flags = vecchia_partials(X, Y, diag_add, perm, nbrs, ops, op_float, params,
                                      theta_of_param, stack_depth, n_theta,
                                      want_grad=want_grad, packed=packed,
                                      last_phase=last_phase)
    return vecchia_total(partial, flags, n_theta, want_grad)


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


def vecchia_dual_weights(X, Y, diag_add, perm, nbrs, ops, op_float, params, theta_of_param,
                         stack_depth, packed=None):
    """A = U U^T Y (N, T), Vecchia's approximation of K~^-1 Y (the dual
    coefficients), from :func:`vecchia_weights_pass` and
    :func:`vecchia_dual`; the arguments as :func:`vecchia_nll_grad`'s.
    Returns (A, n_bad): A is None where n_bad > 0 rows' B was not positive
    definite."""
    b, v, r, n_bad = vecchia_weight_rows(X, Y, diag_add, perm, nbrs, ops, op_float, params,
                                         theta_of_param, stack_depth, packed=packed)
    if n_bad:
        return None, n_bad
    return vecchia_dual_from_rows(perm, nbrs, b, v, r, np.shape(X)[1]), 0


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

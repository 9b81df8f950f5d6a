"""The kernel interpreter: one stack machine that evaluates a lowered kernel
program for one *tile* of matrix entries, with the derivatives a *mode* asks
for (docs/design.md, "The engine").

A tile is up to ``TILE`` entries k(x_t, x'), x_t = X1[:, i0 + t] and
x' = X2[:, j] (the inputs transposed, (Q, n): :mod:`.leaves`), t = 0 .. n-1,
of one column j. Evaluating a tile per operation (rather than an entry per call)
amortises the opcode dispatch over ``TILE`` entries and leaves simple loops
that LLVM vectorises; this matters because the fill and the gradient passes
each touch N^2 / 2 entries and must stay small beside LAPACK's N^3 work.

Modes. ``mode`` is a bit set of the derivative blocks to carry beside the
values; it is a runtime integer, so every mode runs the one compiled
specialisation of :func:`eval_tile` (no compile per mode), compiled for
:data:`.signatures.EVAL_TILE_SIGNATURE` and called through the engine table
(:func:`engine_table`, :func:`call_eval_tile`). Callers still pass modes and
other constants as typed values (``np.int64(VALUES)``), not literals: a
jitted helper that forwards them is compiled once per literal it receives.

- ``VALUES`` (0): values only (the fill, the cross-covariance);
- ``D_THETA``: dk/dtheta, theta = log of the natural parameter, as
  scikit-learn's ``K_gradient`` (the regression gradient, Rasmussen &
  Williams 2006, eq. 5.9);
- ``D_X1``: dk/dX1[i0 + t, :] (the GPLVM's latent gradient, Lawrence 2005);
- ``D_X2``: dk/dX2[j, :] as well; implies ``D_X1``. Needed only by programs
  with a leaf in ``opcodes.NON_STATIONARY_LEAVES``: otherwise k depends on
  x - x' and dk/dx' = -dk/dx.

Any union is one interpretation: the GPLVM's fused pass asks for
``D_THETA | D_X1`` and gets both from the same leaf evaluations. A new kind
of derivative block is one more bit, carried by the same leaves and operator
rules.

Leaves (:func:`fastgp._engine.leaves.call_leaf`) write their value and every
requested derivative from shared subexpressions. Operators apply the sum,
product and power rules to each carried block:

    (a + b)' = a' + b',   (a b)' = a' b + a b',   (a^e)' = e a^(e-1) a'.

Scratch arrays (caller-owned, allocated by :func:`allocate_scratch`, reused
across tiles, one set per thread, never shared):

- ``V``  (stack_depth, TILE) float64: the value stack; the result is ``V[0]``.
- ``G``  (max(n_theta, 1), TILE) float64: ``G[p, t]`` = dk/dtheta_p for
  entry t (``D_THETA``). Not a stack: every free theta belongs to exactly one
  leaf, which *assigns* its rows, and operators only rescale the rows of their
  subtree's theta range (``COL_T0 .. COL_T1``), so ``G`` needs no zeroing
  between tiles. The result is ``G[:n_theta]``.
- ``D1`` (stack_depth, Q, TILE) float64: ``D1[s, k, t]`` = d(slot s) /
  dx_t,k (``D_X1``); the result is ``D1[0]``.
- ``D2`` (stack_depth, Q, TILE) float64: d(slot s) / dx'_k (``D_X2``).
- ``Wk`` (4, TILE) float64: per-entry work rows of the leaves and operators.

A caller that never asks for input derivatives allocates ``Q = 0``.

Everything the interpreter writes lies in these arrays, so the parallel
passes (:mod:`.passes`, :mod:`.latent_passes`) give each ``prange`` iteration
its own set and have no write races; the interpreter's arithmetic per entry
does not depend on the thread that runs it.

Reference counting. The interpreter, the leaves and the vectorised exp are
compiled with ``jit(_nrt=False)``: they allocate nothing and every array they
see is owned by a caller that outlives the call, so Numba's reference counts
are pure cost there. With them, every array argument of every helper call
costs an incref and a decref (two calls into Numba's runtime, ~4 ns each):
more than the arithmetic of the small leaves' tiles (a program of one
ConstantKernel took 2.4 x as long per tile with them).
"""

import functools

import numpy as np
from numba.extending import intrinsic

from . import opcodes as op
from .address_call import JIT, compiled_address, python_table_call, table_call
from .config import jit
from .leaves import LEAF_ENTRIES, LEAF_SLOT, call_leaf
from .signatures import EVAL_TILE_SIGNATURE, LEAF_SIGNATURE

__all__ = ["TILE", "VALUES", "D_THETA", "D_X1", "D_X2", "eval_tile",
           "allocate_scratch", "engine_table", "call_eval_tile"]

TILE = 512

VALUES = 0
D_THETA = 1
D_X1 = 2
D_X2 = 4


@jit(_nrt=False)
def eval_tile(engine, X1, i0, n, X2, j, diag_t, ops, op_float, params, theta_of_param,
              mode, V, G, D1, D2, Wk):
    """Evaluate the program for entries k(X1[:, i0 + t], X2[:, j]), t < n <= TILE.

    engine: :func:`engine_table` (the leaves are called through it).
    X1 (Q, n1), X2 (Q, n2) float64 C-contiguous: the inputs
    transposed (.leaves).  diag_t: the t at which the
    entry lies on the training diagonal (WhiteKernel is nonzero only there),
    or -1.  ops/op_float/theta_of_param: see fastgp._backend.lowering.KernelProgram;
    params (n_params,) natural scale.  mode: bits VALUES, D_THETA, D_X1,
    D_X2 (module docstring).  V, G, D1, D2, Wk: scratch from
    allocate_scratch (D1, D2 with Q = X1.shape[0] when mode asks for input
    derivatives); overwritten.
    Result: V[0, :n]; G[:n_theta, :n] if D_THETA; D1[0, :, :n] if D_X1 or
    D_X2; D2[0, :, :n] if D_X2. Returns the final stack depth (1).
    """
    want_theta = (mode & D_THETA) != 0
    want_x2 = (mode & D_X2) != 0
    want_x1 = want_x2 or (mode & D_X1) != 0
    d = X1.shape[0]
    sp = np.int64(0)  # typed from the start, as the leaves' signature has it
    for o in range(ops.shape[0]):
        code = ops[o, op.COL_CODE]
        if code < op.SUM:  # a leaf
            call_leaf(engine, code, X1, i0, n, X2, j, diag_t, ops, o, params,
                      theta_of_param, want_theta, want_x1, want_x2, V, sp, G, D1, D2,
                      Wk)
            sp += 1
        elif code == op.SUM:
            sp -= 1
            a = sp - 1
            for t in range(n):
                V[a, t] += V[sp, t]
            if want_x1:
                _add_blocks(n, d, D1, a, sp)
            if want_x2:
                _add_blocks(n, d, D2, a, sp)
        elif code == op.PRODUCT:
            # (ab)' = a'b + ab': the left subtree owns theta [T0, TM), the
            # right [TM, T1); each leaf assigned its own rows, so scale them
            # in place.
            sp -= 1
            a = sp - 1
            if want_theta:
                _scale_rows(n, G, ops[o, op.COL_T0], ops[o, op.COL_TM], V[sp])
                _scale_rows(n, G, ops[o, op.COL_TM], ops[o, op.COL_T1], V[a])
            if want_x1:
                _product_blocks(n, d, D1, V, a, sp)
            if want_x2:
                _product_blocks(n, d, D2, V, a, sp)
            for t in range(n):
                V[a, t] *= V[sp, t]
        elif code == op.POW:
            # (k^e)' = e k^(e-1) k'; Wk[0] holds e k^(e-1)
            e = op_float[o]
            a = sp - 1
            if want_theta or want_x1:
                for t in range(n):
                    Wk[0, t] = e * V[a, t] ** (e - 1.0)
            if want_theta:
                _scale_rows(n, G, ops[o, op.COL_T0], ops[o, op.COL_T1], Wk[0])
            if want_x1:
                _scale_block(n, d, D1, a, Wk)
            if want_x2:
                _scale_block(n, d, D2, a, Wk)
            for t in range(n):
                V[a, t] = V[a, t] ** e
    return sp


@jit(_nrt=False)
def _add_blocks(n, d, D, a, b):
    """D[a, k, t] += D[b, k, t] (the sum rule on one derivative block)."""
    for k in range(d):
        for t in range(n):
            D[a, k, t] += D[b, k, t]


@jit(_nrt=False)
def _product_blocks(n, d, D, V, a, b):
    """D[a, k, t] = D[a, k, t] V[b, t] + V[a, t] D[b, k, t]: the product rule
    on one derivative block of the product of slots a and b."""
    for k in range(d):
        for t in range(n):
            D[a, k, t] = D[a, k, t] * V[b, t] + V[a, t] * D[b, k, t]


@jit(_nrt=False)
def _scale_rows(n, G, r0, r1, factor):
    """G[r, t] *= factor[t] for r0 <= r < r1 (a subtree's theta range)."""
    for r in range(r0, r1):
        for t in range(n):
            G[r, t] *= factor[t]


@jit(_nrt=False)
def _scale_block(n, d, D, a, Wk):
    """D[a, k, t] *= Wk[0, t] (the power rule on one derivative block)."""
    for k in range(d):
        for t in range(n):
            D[a, k, t] *= Wk[0, t]


@jit
def allocate_scratch(stack_depth, n_theta, n_dims):
    """Scratch arrays (V, G, D1, D2, Wk) for one thread (module docstring);
    ``n_dims`` = Q for input derivatives, 0 for none."""
    depth = max(stack_depth, 1)
    V = np.empty((depth, TILE))
    G = np.empty((max(n_theta, 1), TILE))
    D1 = np.empty((depth, n_dims, TILE))
    D2 = np.empty((depth, n_dims, TILE))
    Wk = np.empty((4, TILE))
    return V, G, D1, D2, Wk


#: The engine table's slot of the interpreter (the leaves follow: .leaves).
INTERPRETER_SLOT = 0


def engine_table(ops=None):
    """The engine table (int64 array) for the program ``ops`` (a
    KernelProgram's ``ops``; None: every leaf): the address of
    :func:`eval_tile` at ``INTERPRETER_SLOT`` and, for each leaf opcode in
    ``ops``, of its entry at ``LEAF_SLOT + code``, each compiled once for its
    fixed signature (.signatures), or loaded from the disk cache, on first
    use. Other leaves' slots hold 0 and are not compiled: a fresh install's
    first fit compiles only the leaves its kernel has.

    Every pass takes the table as its first argument ``engine`` and calls
    the interpreter through it (:func:`call_eval_tile`), which calls the
    leaves through it: no routine links, and compiles again, the code of
    another (.address_call). Pass a pass the table of the very ``ops`` it
    evaluates: a leaf outside them has no address. A new array per call, so
    that no caller can change another's (a few microseconds: every pass call
    makes one)."""
    if ops is None:
        codes = tuple(range(len(LEAF_ENTRIES)))
    else:
        opcodes = ops[:, op.COL_CODE]
        codes = tuple(np.unique(opcodes[opcodes < op.SUM]).tolist())
    return _engine_table_of(codes).copy()


@functools.lru_cache(maxsize=None)
def _engine_table_of(codes):
    """The engine table holding the leaf opcodes ``codes`` (a sorted tuple)."""
    table = np.zeros(LEAF_SLOT + len(LEAF_ENTRIES), dtype=np.int64)
    table[INTERPRETER_SLOT] = compiled_address(eval_tile, EVAL_TILE_SIGNATURE)
    for code in codes:
        table[LEAF_SLOT + code] = compiled_address(LEAF_ENTRIES[code], LEAF_SIGNATURE)
    return table


@intrinsic
def call_eval_tile(typingctx, engine, X1, i0, n, X2, j, diag_t, ops, op_float,
                   params, theta_of_param, mode, V, G, D1, D2, Wk):
    """``eval_tile(engine, X1, ..., Wk)`` through the engine table
    (:func:`engine_table`): how every pass calls the interpreter. Arguments
    must have the types of :data:`.signatures.EVAL_TILE_SIGNATURE` (checked
    when the caller compiles)."""
    return table_call(engine, None, (X1, i0, n, X2, j, diag_t, ops, op_float, params,
                                     theta_of_param, mode, V, G, D1, D2, Wk),
                      EVAL_TILE_SIGNATURE, offset=INTERPRETER_SLOT)


if not JIT:  # plain Python (NUMBA_DISABLE_JIT=1): the same call, by handle
    def call_eval_tile(engine, *args):  # noqa: F811
        return python_table_call(engine, INTERPRETER_SLOT, *args)

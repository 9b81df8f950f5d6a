"""The backend: the one door between fastgp's objectives and its jitted passes.

Every covariance computation an objective or an estimator needs goes through
the methods of this module's classes, and nothing outside this module (and
:mod:`fastgp._backend.lowering`) calls into :mod:`fastgp._engine`:

================================  =============================================
``fill_lower``                    tril(K) + diag(alpha) into the N x N workspace
``grad_trace``                    sum_ij W_ij dK_ij/dtheta (R&W 2006, eq. 5.9)
``cross``                         k(X, X*) for prediction
``prior_cov``                     k(X*, X*) for the joint predictive covariance
``diag``                          k(x*, x*) for the predictive variance
``matmat``                        (K + diag(alpha)) V for a block of vectors V
``dmatmat``                       dK/dtheta_p V for every hyperparameter p
``grad_bilinear``                 tr(P^T dK/dtheta_p Q) (+ s tr(S^T dK_p S))
``cross_matmat``                  k(X*, X) V for prediction without k(X, X*)
``grad_latent`` (latent only)     sum_j W_nj dk(x_n, x_j)/dx_n, with the
                                  theta trace fused into the same pass
``diag_with_grad`` (latent only)  k(x*, x*) and its input derivative
``grad_cross_weighted`` (latent)  sum_i Omega_ic dk(x_i, x*_c)/dx*_c
================================  =============================================

:class:`FastCovariance` runs a lowered :class:`~fastgp._backend.lowering.KernelProgram`
through the parallel Numba passes of :mod:`fastgp._engine.passes`: no N x N
temporaries, the gradient fused into one pass over K^-1's lower triangle.
:class:`LatentCovariance` adds the input derivatives the GPLVM needs
(:mod:`fastgp._engine.latent_passes`) and owns their per-block scratch.

:class:`KernelObjectCovariance` calls the scikit-learn kernel object itself,
for kernels that cannot be lowered (a user's own subclass, PairwiseKernel,
Matern with another nu, CompoundKernel, kernels on non-vector inputs). It
gives the same numbers at the price of scikit-learn's memory: the gradient
needs the (N, N, n_theta) tensor and a full N x N W beside the workspace.

The product methods (``matmat`` to ``cross_matmat``) store no N x N array
on the fast path (:mod:`fastgp._engine.product_passes`): they serve the
matrix-free solver and the Laplace classifier's Newton steps.

The regression backends share the first five methods, so the objective and
prediction do not care which one they hold. Every parallel pass runs inside
:func:`fastgp._engine.config.parallel_region` (under its lock: Numba's
workqueue is not thread-safe; with Numba's threads started as it says).
"""

import numpy as np

from .._engine import latent_passes as latent_jitted
from .._engine import opcodes as op
from .._engine import passes as jitted
from .._engine import product_passes as product_jitted
from .._engine import vecchia_passes as vecchia_jitted
from .._engine.config import parallel_region
from .._engine.interpreter import engine_table
from .._user_warnings import warn_user
from ..exceptions import SlowKernelWarning
from .lowering import fast_path_summary, lower_kernel

__all__ = ["make_covariance", "warn_slow_kernel", "FastCovariance", "LatentCovariance",
           "KernelObjectCovariance", "has_non_stationary_leaf",
           "latent_blocks"]

#: Largest number of column blocks of the latent gradient pass (each block
#: keeps an N x Q partial sum).
MAX_LATENT_BLOCKS = 64

_OPERATORS = (op.SUM, op.PRODUCT, op.POW)


def make_covariance(kernel, X, warn=True):
    """The backend for ``kernel`` on training inputs ``X``.

    X : ndarray of shape (n_samples, n_features) float64 for the fast path;
        anything the kernel accepts otherwise.
    warn : bool
        Whether to emit :class:`SlowKernelWarning` when the kernel is not on
        the fast path (estimators warn once per fit, not on every predict).
    """
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64:
        program = lower_kernel(kernel, X.shape[1])
        if program is not None:
            return FastCovariance(kernel, program, X)
    if warn:
        warn_slow_kernel(kernel)
    return KernelObjectCovariance(kernel, X)


def warn_slow_kernel(kernel):
    """The :class:`~fastgp.exceptions.SlowKernelWarning` for ``kernel``, which
    is not on the fast path: what it costs and what the fast path covers."""
    warn_user(
        f"{kernel!r} is not on fastgp's fast path; fastgp calls the kernel "
        "object itself, which costs scikit-learn's memory for the gradient: "
        "an (n_samples, n_samples, n_hyperparameters) tensor plus two "
        "n_samples x n_samples matrices beside the workspace. The fast path "
        f"covers {fast_path_summary()}; see docs/adding_a_kernel.md.",
        SlowKernelWarning,
    )


def kernel_input(X):
    """Inputs X (n, d) as the jitted passes take them: transposed, (d, n),
    float64, C-contiguous, writeable. Each input dimension's values are then
    consecutive, so that the passes' loops over a tile of points read
    consecutive numbers and vectorise (docs/design.md, "Inputs in column
    order"); an F-contiguous X is not copied (its transpose is the result).

    Numba compiles (and caches) one specialisation per argument type, and a
    read-only array (a joblib memmap, ``writeable=False``, a broadcast view)
    or another memory layout is a different type: predicting on one compiled
    fill_cross_cov and eval_tile again, ~25 s on the 2-core CI machine. A
    (d, n) C-contiguous array is typed the same for every d (an (n, d)
    F-contiguous one would not be: NumPy flags (n, 1) as C-contiguous too).
    Copying an (n, d) input costs O(n d) and keeps one compiled
    specialisation per routine.
    """
    return np.require(np.asarray(X, dtype=np.float64).T, dtype=np.float64,
                      requirements=["C_CONTIGUOUS", "WRITEABLE"])


def _kernel_at(kernel, theta):
    """``kernel`` itself where ``theta`` is its own (no exp/log round trip to
    move the last bit), else a clone with ``theta``."""
    theta = np.asarray(theta, dtype=np.float64)
    return kernel if np.array_equal(theta, kernel.theta) else kernel.clone_with_theta(theta)


class FastCovariance:
    """Fast path: a lowered kernel program over training inputs X (n, d).

    ``X_T`` (d, n) holds the inputs as the passes read them
    (:func:`kernel_input`); ``X`` is its transpose, a view of the same
    memory, and setting ``X`` replaces ``X_T``.
    """

    is_fast = True

    def __init__(self, kernel, program, X):
        self.kernel = kernel
        self.program = program
        self.X = X
        self.bounds = jitted.column_blocks(self.X.shape[0])
        self._pairs = None  # the symmetric product's schedule, made on first use

    @property
    def X(self):
        """The training inputs (n, d), a view of ``X_T``; None when unset."""
        return None if self.X_T is None else self.X_T.T

    @X.setter
    def X(self, X):
        self.X_T = None if X is None else kernel_input(X)

    @property
    def n_theta(self):
        return self.program.n_theta

    @property
    def n_samples(self):
        return self.X_T.shape[1]

    def fill_lower(self, theta, diag_add, K_out):
        """Write tril(k(X, X)) + diag(diag_add) at ``theta`` into K_out
        (n, n) F-contiguous; the strict upper triangle is not touched."""
        p = self.program
        with parallel_region():
            jitted.fill_cov_lower(self.X_T, p.ops, p.op_float, p.params(theta),
                                  p.theta_of_param, p.stack_depth, diag_add,
                                  self.bounds, K_out)

    def grad_trace(self, theta, Kinv_lower, A):
        """sum_ij W_ij dK_ij/dtheta (n_theta,) with W = T K^-1 - A A^T; reads
        only the lower triangle of Kinv_lower (n, n) F-contiguous."""
        p = self.program
        partial = np.empty((self.bounds.size - 1, p.n_theta))
        with parallel_region():
            jitted.grad_trace_lower(self.X_T, p.ops, p.op_float, p.params(theta),
                                    p.theta_of_param, p.stack_depth, p.n_theta,
                                    Kinv_lower, np.ascontiguousarray(A),
                                    self.bounds, partial)
        return partial.sum(axis=0)

    def cross(self, theta, X_query):
        """k(X, X_query) as an (n, m) F-contiguous array (no white noise)."""
        p = self.program
        Xq = kernel_input(X_query)
        out = np.empty((self.X.shape[0], Xq.shape[1]), order="F")
        with parallel_region():
            jitted.fill_cross_cov(self.X_T, Xq, p.ops, p.op_float, p.params(theta),
                                  p.theta_of_param, p.stack_depth, out)
        return out

    def prior_cov(self, theta, X_query):
        """k(X_query, X_query) (m, m), white noise on the diagonal included,
        as scikit-learn's ``kernel(X)``."""
        p = self.program
        Xq = kernel_input(X_query)
        m = Xq.shape[1]
        out = np.empty((m, m), order="F")
        with parallel_region():
            jitted.fill_cov_lower(Xq, p.ops, p.op_float, p.params(theta),
                                  p.theta_of_param, p.stack_depth, np.zeros(m),
                                  jitted.column_blocks(m), out)
        lower = np.tril_indices(m, -1)
        out[lower[1], lower[0]] = out[lower]
        return out

    def diag(self, theta, X_query):
        """k(x*, x*) (m,) for each row of X_query, white noise included (the
        kernel object's ``diag``: O(m), nothing to gain from a pass)."""
        return _kernel_at(self.kernel, theta).diag(X_query)

    def _product(self, theta, X_query_T, on_diagonal, n_theta, V, row_offset=0):
        """The product pass: ``out[p] = k(X, X_query)^T V`` (n_theta = 0,
        p = 0) or ``dk/dtheta_p (X, X_query)^T V``; out (max(n_theta, 1), m, t).
        X_query_T (d, m) as :func:`kernel_input` gives it. on_diagonal:
        X_query is X[row_offset:row_offset + m]."""
        p = self.program
        V2 = _vector_block(V, self.X.shape[0])
        out = np.empty((max(n_theta, 1), X_query_T.shape[1], V2.shape[1]))
        with parallel_region():
            product_jitted.kernel_matmat(engine_table(p.ops), self.X_T, X_query_T,
                                         on_diagonal, row_offset, p.ops, p.op_float,
                                         p.params(theta), p.theta_of_param,
                                         p.stack_depth, n_theta, V2, out)
        return out

    def rows_product(self, theta, start, stop, n_theta, V):
        """Rows [start, stop) of K V (n_theta = 0; (1, stop - start, t), the
        white noise on the diagonal included, no diag_add) or of dK/dtheta_p V
        for every p ((n_theta, stop - start, t)); V (n, t). The same bits as
        those rows of ``dmatmat``: each output row is one pass iteration's, in
        a fixed order (docs/design.md, "Products on a cluster"). ``matmat``
        sums in another order (each lower-triangle entry once) and agrees to
        rounding; its rows on a cluster come from
        :meth:`symmetric_rows_product`."""
        return self._product(theta, kernel_input(self.X[start:stop]), True, n_theta, V,
                             row_offset=start)

    def bilinear_partials(self, theta, P, Q, first, last, S=None, s_scale=1.0):
        """The partial sums of ``grad_bilinear`` over the column blocks
        [first, last) of ``self.bounds``: (last - first, n_theta), one row per
        block; ``grad_bilinear`` is the sum of all blocks' rows in block order.
        P, Q (n, t); S (n, k) or None."""
        pr = self.program
        n = self.X.shape[0]
        S_T = np.empty((0, n)) if S is None else _vector_block(S, n, transposed=True)
        partial = np.empty((last - first, pr.n_theta))
        with parallel_region():
            product_jitted.grad_bilinear_lower(
                engine_table(pr.ops), self.X_T, pr.ops, pr.op_float, pr.params(theta),
                pr.theta_of_param, pr.stack_depth, pr.n_theta,
                _vector_block(P, n, transposed=True), _vector_block(Q, n, transposed=True),
                S_T, float(s_scale), self.bounds[first:last + 1], partial)
        return partial

    def matmat(self, theta, V, diag_add=None):
        """(K + diag(diag_add)) V, K = k(X, X) with the white-noise diagonal
        (what ``fill_lower`` writes). V (n,) or (n, t); result has V's shape.
        Each entry of K's lower triangle is evaluated once
        (:func:`fastgp._engine.product_passes.kernel_matmat_symmetric`)."""
        p = self.program
        n = self.X_T.shape[1]
        V2 = _vector_block(V, n)
        out_T = np.empty((V2.shape[1], n))
        with parallel_region():
            product_jitted.kernel_matmat_symmetric(
                engine_table(p.ops), self.X_T, *self.pair_schedule(), p.ops, p.op_float,
                p.params(theta), p.theta_of_param, p.stack_depth,
                np.ascontiguousarray(V2.T), out_T)
        return _finish_matmat(np.ascontiguousarray(out_T.T), V, diag_add)

    def pair_schedule(self):
        """(bounds (B + 1,), rounds) of the symmetric K V
        (:func:`fastgp._engine.product_passes.pair_schedule`; made once)."""
        if self._pairs is None:
            self._pairs = product_jitted.pair_schedule(self.X_T.shape[1])
        return self._pairs

    def symmetric_rows_product(self, theta, first_block, last_block, V):
        """The rows of K V (no diag_add) in the blocks [first_block,
        last_block) of :meth:`pair_schedule`, with ``matmat``'s bits, computed
        alone (a cluster worker's share: docs/design.md, "Products on a
        cluster"); (rows, t) for V (n, t)."""
        p = self.program
        n = self.X_T.shape[1]
        V2 = _vector_block(V, n)
        bounds, rounds = self.pair_schedule()
        out_T = np.empty((V2.shape[1], n))
        with parallel_region():
            product_jitted.kernel_matmat_symmetric_rows(
                engine_table(p.ops), self.X_T, bounds, rounds, int(first_block),
                int(last_block), p.ops, p.op_float, p.params(theta), p.theta_of_param,
                p.stack_depth, np.ascontiguousarray(V2.T), out_T)
        return np.ascontiguousarray(out_T[:, bounds[first_block]:bounds[last_block]].T)

    def dmatmat(self, theta, V):
        """dK/dtheta_p V for every p: (n_theta, n, t), or (n_theta, n) for a
        vector V (n,); theta on the log scale, as ``kernel.theta``."""
        out = self._product(theta, self.X_T, True, self.n_theta, V)
        return out[:, :, 0] if np.ndim(V) == 1 else out

    def grad_bilinear(self, theta, P, Q, S=None, s_scale=1.0):
        """tr(P^T dK/dtheta_p Q) + s_scale tr(S^T dK/dtheta_p S) for every p,
        (n_theta,); P, Q (n, t), S (n, k) or None (no second term; an
        F-contiguous S is read without a copy). One pass over the lower
        triangle; a column of S costs half a column pair of P and Q."""
        return self.bilinear_partials(theta, P, Q, 0, self.bounds.size - 1, S,
                                      s_scale).sum(axis=0)

    def cross_matmat(self, theta, X_query, V):
        """k(X_query, X) V (m, t), or (m,) for a vector V (n,); no white
        noise, as ``cross``; no (n, m) array."""
        out = self._product(theta, kernel_input(X_query), False, 0, V)[0]
        return out[:, 0] if np.ndim(V) == 1 else out

    # ---------------------------------------------- Vecchia's approximation
    def _vecchia_program(self, theta):
        p = self.program
        return p.ops, p.op_float, p.params(theta), p.theta_of_param, p.stack_depth

    @staticmethod
    def vecchia_blocks(n_rows):
        """How many position blocks Vecchia's passes cut n_rows rows into (a
        function of n_rows alone)."""
        return vecchia_jitted.position_blocks(int(n_rows)).size - 1

    def vecchia_partials(self, theta, Y, diag_add, points, neighbours, want_grad=True,
                         blocks=None):
        """The partial sums of Vecchia's negative log-likelihood and its
        theta-gradient per position block, over the rows (points[i] after its
        conditioning set neighbours[i]) of these training inputs
        (docs/design.md, "Vecchia's approximation";
        :func:`fastgp._engine.vecchia_passes.vecchia_partials`).

        Y (n, T); diag_add (n,); points (r,) int64; neighbours (r, m) int64,
        -1 padded; blocks (first, last) of :meth:`vecchia_blocks` (r) or None
        for all. Returns (partial (blocks, 1 + n_theta or 1), flags
        (blocks,) int64): a block's bits whichever range it is computed in."""
        with parallel_region():
            return vecchia_jitted.vecchia_partials(
                self.X_T, Y, diag_add, points, neighbours, *self._vecchia_program(theta),
                self.program.n_theta, want_grad=want_grad, blocks=blocks)

    def vecchia_total(self, partial, flags, want_grad=True):
        """(nll, grad or None, n_bad) from every block's partial sums and
        flags (:meth:`vecchia_partials`, concatenated in block order)."""
        return vecchia_jitted.vecchia_total(partial, flags, self.program.n_theta, want_grad)

    def vecchia_weight_rows(self, theta, Y, diag_add, points, neighbours, blocks=None):
        """The rows (b, v, r) of Vecchia's sparse inverse Cholesky factor for
        the position blocks ``blocks`` (None: all), and n_bad
        (:func:`fastgp._engine.vecchia_passes.vecchia_weight_rows`)."""
        with parallel_region():
            return vecchia_jitted.vecchia_weight_rows(
                self.X_T, Y, diag_add, points, neighbours, *self._vecchia_program(theta),
                blocks=blocks)

    @staticmethod
    def vecchia_dual(points, neighbours, b, v, r, n_samples):
        """Vecchia's K~^-1 Y (n_samples, T) from every row's (b, v, r), in
        row order (one serial pass)."""
        return vecchia_jitted.vecchia_dual_from_rows(points, neighbours, b, v, r, n_samples)

    def vecchia_predict(self, theta, X_query, Y, diag_add, neighbours):
        """The conditional mean (m, T) and latent variance (m,) of each query
        point given its training neighbours (m, m') int64 (-1 padded), and
        n_bad (NaN rows where a block was not positive definite)."""
        with parallel_region():
            return vecchia_jitted.vecchia_predict(
                self.X_T, kernel_input(X_query), Y, diag_add, neighbours,
                *self._vecchia_program(theta))


def _vector_block(V, n, transposed=False):
    """V (n,) or (n, t) as a C-contiguous float64 (n, t) block, or, if
    ``transposed``, its transpose as a C-contiguous (t, n) block (not a copy
    where V is F-contiguous)."""
    V = np.asarray(V, dtype=np.float64)
    if V.ndim not in (1, 2) or V.shape[0] != n:
        raise ValueError(f"expected an array of shape ({n},) or ({n}, t), got {V.shape}")
    V = V.reshape(n, -1)
    return np.ascontiguousarray(V.T if transposed else V)


def _finish_matmat(KV, V, diag_add):
    """Add diag(diag_add) V to the product KV (n, t) and give it V's shape."""
    if diag_add is not None:
        KV += np.asarray(diag_add, dtype=np.float64)[:, None] * np.reshape(V, (KV.shape[0], -1))
    return KV[:, 0] if np.ndim(V) == 1 else KV


def has_non_stationary_leaf(program):
    """Whether some leaf of ``program`` has dk/dx' != -dk/dx (the dot
    product), so that the latent passes need the second input derivative."""
    codes = program.ops[:, op.COL_CODE]
    return any(int(c) in latent_jitted.NON_STATIONARY_LEAVES for c in codes
               if c not in _OPERATORS)


def latent_blocks(n, n_dims):
    """Column-block boundaries (n_blocks + 1,) int64 for the latent pass.

    Equal-area blocks of the lower triangle (a subset of
    :func:`fastgp._engine.passes.column_blocks`' boundaries), at most
    ``MAX_LATENT_BLOCKS`` of them and few enough that the per-block N x Q
    partial sums stay small beside the N x N workspace:
    n_blocks x n_dims <= max(4 n_dims, n / 16). The count depends on n and
    n_dims only, never on the thread count, so the gradient's bits do not either.
    """
    fine = jitted.column_blocks(n)
    n_fine = fine.size - 1
    want = max(1, min(MAX_LATENT_BLOCKS, n_fine, max(4, n // (16 * max(n_dims, 1)))))
    step = -(-n_fine // want)  # ceil
    bounds = fine[::step]
    if bounds[-1] != n:
        bounds = np.append(bounds, n)
    return np.ascontiguousarray(bounds, dtype=np.int64)


class LatentCovariance(FastCovariance):
    """The fast path with derivatives with respect to the inputs (the GPLVM's
    latent points), besides the four regression methods.

    Parameters
    ----------
    kernel : sklearn kernel
    program : KernelProgram
        ``kernel`` lowered for ``X.shape[1]`` inputs (every leaf has input
        derivatives).
    X : ndarray of shape (n_samples, n_components)
        Kept by reference where it is float64, F-contiguous and writeable (an
        optimiser that moves the latent points writes into this array and the
        next call reads them), copied otherwise (as FastCovariance does).

    Attributes
    ----------
    bounds_latent : ndarray (n_blocks + 1,) int64
        :func:`latent_blocks` of the latent pass.
    want_d2 : bool
        Whether the kernel has a non-stationary leaf (second input derivative
        needed).

    Besides the N x N workspace the latent pass keeps per-block partial sums,
    ``n_blocks x n_samples x n_components`` floats, allocated once here.
    """

    def __init__(self, kernel, program, X):
        super().__init__(kernel, program, X)
        self.want_d2 = has_non_stationary_leaf(program)
        n, n_dims = self.X.shape
        self.bounds_latent = latent_blocks(n, n_dims)
        n_blocks = self.bounds_latent.size - 1
        self._theta_partial = np.zeros((n_blocks, program.n_theta))
        self._x_partial = np.zeros((n_blocks, n, n_dims))

    @property
    def n_blocks(self):
        return self.bounds_latent.size - 1

    def grad_latent(self, theta, Kinv_lower, A, with_theta=True):
        """The traces of W against the input and hyperparameter derivatives
        of K, in one pass over the lower triangle; W = T K^-1 - A A^T.

        Kinv_lower : ndarray (n, n) F-contiguous, K^-1's lower triangle (read)
        A : ndarray (n, T), K^-1 Y
        with_theta : bool
            Reduce the theta trace in the same pass (True) or skip it (False:
            ``grad_trace`` gives the same numbers in a second pass).

        Returns (trace_x (n, n_components), trace_theta (n_theta,) or None);
        dL/dx_n = trace_x[n] / 2 (Lawrence 2005, sec. 3) and
        dL/dtheta = trace_theta / 2 (R&W 2006, eq. 5.9).
        """
        p = self.program
        A_T = np.ascontiguousarray(A.T)
        with parallel_region():
            latent_jitted.grad_latent_lower(
                engine_table(p.ops), self.X_T, p.ops, p.op_float, p.params(theta),
                p.theta_of_param, p.stack_depth, p.n_theta, bool(with_theta),
                self.want_d2, Kinv_lower, A_T, self.bounds_latent, self._theta_partial,
                self._x_partial)
        trace_theta = self._theta_partial.sum(axis=0) if with_theta else None
        return self._x_partial.sum(axis=0), trace_theta

    def diag_with_grad(self, theta, X_query):
        """(k(x*, x*) (m,), dk(x*, x*)/dx* (m, n_components)) for each row x*
        of X_query (m, n_components); white noise included."""
        p = self.program
        Xq = kernel_input(X_query)
        m = Xq.shape[1]
        kdiag = np.empty(m)
        dkdiag = np.empty((m, self.X.shape[1]))
        latent_jitted.diag_with_dx(engine_table(p.ops), Xq, p.ops, p.op_float,
                                   p.params(theta), p.stack_depth, self.want_d2, kdiag, dkdiag)
        return kdiag, dkdiag

    def grad_cross_weighted(self, theta, X_query, weights):
        """sum_i weights[i, c] dk(x_i, x*_c)/dx*_c (m, n_components) for each
        row x*_c of X_query (m, n_components), x_i the training inputs;
        weights (n, m) F-contiguous (read only)."""
        p = self.program
        Xq = kernel_input(X_query)
        out = np.empty((Xq.shape[1], self.X.shape[1]))
        with parallel_region():
            latent_jitted.grad_cross_weighted(engine_table(p.ops), self.X_T, Xq, p.ops,
                                              p.op_float, p.params(theta), p.stack_depth,
                                              self.want_d2, weights, out)
        return out


class KernelObjectCovariance:
    """General path: evaluates the scikit-learn kernel object."""

    is_fast = False

    def __init__(self, kernel, X):
        self.kernel = kernel
        self.X = X

    @property
    def n_theta(self):
        return self.kernel.n_dims

    def _at(self, theta):
        return self.kernel.clone_with_theta(theta)

    def diag(self, theta, X_query):
        return _kernel_at(self.kernel, theta).diag(X_query)

    def fill_lower(self, theta, diag_add, K_out):
        K_out[...] = self._at(theta)(self.X)
        K_out[np.diag_indices_from(K_out)] += diag_add

    def grad_trace(self, theta, Kinv_lower, A):
        W = np.tril(Kinv_lower)
        W += np.tril(W, -1).T
        W *= A.shape[1]
        W -= A @ A.T
        return np.einsum("ij,ijp->p", W, self._gradient_tensor(theta))

    def cross(self, theta, X_query):
        return np.asfortranarray(self._at(theta)(self.X, X_query))

    def prior_cov(self, theta, X_query):
        return self._at(theta)(X_query)

    def _gradient_tensor(self, theta):
        """scikit-learn's K_gradient (n, n, n_theta): the memory this path costs."""
        n = len(self.X)
        _, K_gradient = self._at(theta)(self.X, eval_gradient=True)
        return K_gradient.reshape(n, n, -1)

    def matmat(self, theta, V, diag_add=None):
        KV = self._at(theta)(self.X) @ np.asarray(V, dtype=np.float64).reshape(len(V), -1)
        return _finish_matmat(KV, V, diag_add)

    def dmatmat(self, theta, V):
        return np.einsum("ijp,j...->pi...", self._gradient_tensor(theta),
                         np.asarray(V, dtype=np.float64))

    def grad_bilinear(self, theta, P, Q, S=None, s_scale=1.0):
        dK = self._gradient_tensor(theta)
        out = np.einsum("iq,ijp,jq->p", np.asarray(P, dtype=np.float64).reshape(len(P), -1),
                        dK, np.asarray(Q, dtype=np.float64).reshape(len(Q), -1))
        if S is not None:
            S = np.asarray(S, dtype=np.float64)
            out += s_scale * np.einsum("iq,ijp,jq->p", S, dK, S)
        return out

    def cross_matmat(self, theta, X_query, V):
        return self._at(theta)(X_query, self.X) @ np.asarray(V, dtype=np.float64)

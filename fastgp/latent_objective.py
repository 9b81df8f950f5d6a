"""The GPLVM's two objectives, in fastgp's one-buffer style.

:class:`LatentNegLogMarginalLikelihood` is the training objective of the GP
latent variable model (Lawrence 2005): the negative log marginal likelihood of
data Y (N x D) given latent points X (N x Q) and kernel hyperparameters theta,

    L(X, theta) = 1/2 tr(Y^T K^-1 Y) + D/2 log|K| + N D/2 log(2 pi),
    K = k(X, X; theta) + diag(alpha),

as a function of z = [X.ravel(), theta], with its gradient

    dL/dtheta_p = 1/2 sum_ij W_ij dK_ij/dtheta_p                (R&W 2006, eq. 5.9)
    dL/dx_n     = sum_j W_nj dk(x_n, x_j)/dx_n                   (Lawrence 2005, sec. 3)
    W = D K^-1 - A A^T,  A = K^-1 Y.

It is the regression objective (:class:`fastgp.objective.NegLogMarginalLikelihood`,
T = D outputs) on a latent-point buffer that the optimiser moves: the same
fill, the same in-place dpotrf/dpotrs/dpotri in one N x N workspace, then one
fused parallel pass (:func:`fastgp._engine.latent_passes.grad_latent_lower`) that reduces W
against the hyperparameter and the latent derivatives of K at once. Besides the
workspace it holds O(N (Q + D)) floats and per-block partial sums of at most
``n_blocks x N x Q`` floats, with ``n_blocks x Q <= max(4 Q, N / 16)``.

:class:`PredictiveNegLogDensity` places new data in a fitted latent space (what
GPy calls ``infer_newX``): for a new row y* and a candidate latent point x*,
the negative log density of y* under the fitted GP's predictive distribution,
training posterior fixed (Rasmussen & Williams 2006, eq. 2.25 and 2.26, with
the noise of a new observation included):

    m(x*)  = k(X, x*)^T A                          (D,)
    s2(x*) = k(x*, x*) - k(X, x*)^T K^-1 k(X, x*)  (scalar, shared by the D outputs)
    f(x*)  = D/2 log(2 pi s2) + |y* - m|^2 / (2 s2)

and its gradient in x*, for many rows at once, each row independent of the
others.
"""

import math

import numpy as np
from scipy.linalg import lapack

from ._engine import latent_passes as _latent
from ._engine import opcodes as op
from ._engine.passes import column_blocks
from ._engine.config import PARALLEL_LOCK
from .covariance import FastCovariance
from .lowering import fast_path_summary, lower_kernel
from .objective import NegLogMarginalLikelihood, guarded_value, guarded_value_and_grad

__all__ = [
    "latent_fit_bytes",
    "lower_latent_kernel",
    "latent_blocks",
    "LatentNegLogMarginalLikelihood",
    "PredictiveNegLogDensity",
]

#: Largest number of column blocks of the latent gradient pass (each block
#: keeps an N x Q partial sum).
MAX_LATENT_BLOCKS = 64

_LOG_2PI = math.log(2.0 * math.pi)

_OPERATORS = (op.SUM, op.PRODUCT, op.POW)


def lower_latent_kernel(kernel, n_components):
    """Lower ``kernel`` for Q = ``n_components`` latent dimensions and check
    that every leaf has input derivatives (:mod:`fastgp._engine.latent_passes`).

    Returns
    -------
    program : KernelProgram
    has_non_stationary : bool
        Whether some leaf has dk/dx' != -dk/dx (the dot product).

    Raises
    ------
    ValueError
        If the kernel is not on fastgp's fast path, or one of its leaves has no
        input derivative, or its length scales do not match ``n_components``.
    """
    program = lower_kernel(kernel, n_components)
    if program is None:
        raise ValueError(
            f"GPLVM needs a kernel on fastgp's fast path, and {kernel!r} is not: "
            f"build it from {fast_path_summary()}."
        )
    codes = program.ops[:, op.COL_CODE]
    leaves = [int(c) for c in codes if c not in _OPERATORS]
    unsupported = sorted(set(leaves) - set(_latent.SUPPORTED_LEAVES))
    if unsupported:
        raise ValueError(
            f"GPLVM cannot differentiate {kernel!r} with respect to the latent "
            f"points: opcode(s) {unsupported} have no input derivative in "
            f"fastgp._engine.leaves. Use {fast_path_summary()}."
        )
    has_non_stationary = any(c in _latent.NON_STATIONARY_LEAVES for c in leaves)
    return program, has_non_stationary


def latent_fit_bytes(n_samples, n_features, n_components):
    """Peak extra bytes of a GPLVM fit: the N x N workspace, the per-block
    N x Q partial sums of the latent pass, O(N (D + Q)) vectors (the data's
    copies, A, the SVD of the PCA start, the optimiser's vectors and L-BFGS's
    ten correction pairs over N Q + P unknowns), and 8 MiB of fixed cost
    (measured: a fit at N = 2,000, D = 12 peaked 9 MiB above its workspace,
    bench/bench_gplvm_memory.py)."""
    n, d, q = int(n_samples), int(n_features), int(n_components)
    n_blocks = latent_blocks(n, q).size - 1
    return 8 * 2**20 + 8 * (n * n + n_blocks * n * q + n * (6 * d + 30 * q + 4))


def latent_blocks(n, n_dims):
    """Column-block boundaries (n_blocks + 1,) int64 for the latent pass.

    Equal-area blocks of the lower triangle (a subset of
    :func:`fastgp._engine.passes.column_blocks`' boundaries), at most
    ``MAX_LATENT_BLOCKS`` of them and few enough that the per-block N x Q
    partial sums stay small beside the N x N workspace:
    n_blocks x n_dims <= max(4 n_dims, n / 16). The count depends on n and
    n_dims only, never on the thread count, so the gradient's bits do not either.
    """
    fine = column_blocks(n)
    n_fine = fine.size - 1
    want = max(1, min(MAX_LATENT_BLOCKS, n_fine, max(4, n // (16 * max(n_dims, 1)))))
    step = -(-n_fine // want)  # ceil
    bounds = fine[::step]
    if bounds[-1] != n:
        bounds = np.append(bounds, n)
    return np.ascontiguousarray(bounds, dtype=np.int64)


class LatentNegLogMarginalLikelihood:
    """``f(z) -> (L, dL/dz)`` with ``z = [X.ravel(), theta]``, for
    ``scipy.optimize.minimize(jac=True)``.

    Parameters
    ----------
    kernel : sklearn kernel on the fast path, lowered for ``n_components`` inputs
    Y : ndarray of shape (n_samples, n_features)
        Data, already centred (and scaled) as the model wants.
    n_components : int
        Latent dimension Q.
    diag_add : float or ndarray of shape (n_samples,)
        Added to K's diagonal (jitter).
    workspace : fastgp.objective.Workspace
        Holds the N x N buffer; overwritten by every call.
    fused : bool, default=True
        Reduce the hyperparameter and latent gradients in one pass over the
        triangle (True) or in two (the regression pass, then the latent one);
        the two give the same numbers, the option exists to measure them.

    Where K is not positive definite or a value is not finite the call
    returns ``(inf, zeros)``, which makes the line search back off.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_components)
        The latent-point buffer the covariance reads; every call overwrites it.
    n_evaluations : int
    """

    def __init__(self, kernel, Y, n_components, diag_add, workspace, fused=True):
        Y = np.asarray(Y, dtype=np.float64)
        n = Y.shape[0]
        self.n_components = int(n_components)
        self.program, self.want_d2 = lower_latent_kernel(kernel, self.n_components)
        self.X = np.zeros((n, self.n_components))
        self.covariance = FastCovariance(kernel, self.program, self.X)
        if self.covariance.X is not self.X:  # the covariance must read our buffer
            raise AssertionError("FastCovariance copied the latent buffer")
        self.nlml = NegLogMarginalLikelihood(self.covariance, Y, diag_add, workspace)
        self.fused = bool(fused)
        self.bounds = latent_blocks(n, self.n_components)
        n_blocks = self.bounds.size - 1
        self._theta_partial = np.zeros((n_blocks, self.program.n_theta))
        self._x_partial = np.zeros((n_blocks, n, self.n_components))
        self.n_evaluations = 0

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_theta(self):
        return self.program.n_theta

    @property
    def workspace(self):
        return self.nlml.workspace

    def pack(self, X, theta):
        """z (n_samples * n_components + n_theta,) from X and theta."""
        return np.concatenate([np.asarray(X, dtype=np.float64).ravel(),
                               np.asarray(theta, dtype=np.float64)])

    def unpack(self, z):
        """(X (n_samples, n_components), theta (n_theta,)) views of z."""
        z = np.asarray(z, dtype=np.float64)
        n_x = self.X.size
        if z.shape != (n_x + self.n_theta,):
            raise ValueError(f"z has shape {z.shape}; expected ({n_x + self.n_theta},)")
        return z[:n_x].reshape(self.X.shape), z[n_x:]

    def factor(self, z):
        """Move the latent points to z's and fill and factor K (see
        NegLogMarginalLikelihood.factor): returns (L, A, value)."""
        X, theta = self.unpack(z)
        self.X[...] = X
        return self.nlml.factor(theta)

    def factor_with_jitter(self, z):
        """:meth:`factor` for the model that is kept, with jitter added where
        K is not numerically positive definite
        (NegLogMarginalLikelihood.factor_with_jitter): returns
        (L, A, value, jitter)."""
        X, theta = self.unpack(z)
        self.X[...] = X
        return self.nlml.factor_with_jitter(theta)

    def value(self, z):
        """L(z) alone (no dpotri, no gradient pass); inf if K is not PD."""
        self.n_evaluations += 1
        return guarded_value(self.factor, z)

    def __call__(self, z):
        """(L(z), dL/dz (z.size,)); (inf, zeros) if K is not PD."""
        self.n_evaluations += 1
        return guarded_value_and_grad(self.factor, self._packed_gradient, z)

    def _packed_gradient(self, z, Kinv_lower, A):
        grad_x, grad_theta = self.gradient(z[self.X.size:], Kinv_lower, A)
        return np.concatenate([grad_x.ravel(), grad_theta])

    def gradient(self, theta, Kinv_lower, A):
        """(dL/dX (n_samples, n_components), dL/dtheta (n_theta,)) from K^-1's
        lower triangle (n, n) F-contiguous and A = K^-1 Y, at the latent
        points in ``self.X``."""
        p = self.program
        params = p.params(theta)
        A_T = np.ascontiguousarray(A.T)
        with PARALLEL_LOCK:
            _latent.grad_latent_lower(
                self.X, p.ops, p.op_float, params, p.theta_of_param,
                p.stack_depth, p.n_theta, self.fused, self.want_d2, Kinv_lower, A_T,
                self.bounds, self._theta_partial, self._x_partial)
        if self.fused:
            grad_theta = 0.5 * self._theta_partial.sum(axis=0)
        else:
            grad_theta = 0.5 * self.covariance.grad_trace(theta, Kinv_lower, A)
        grad_x = 0.5 * self._x_partial.sum(axis=0)
        return grad_x, grad_theta


class PredictiveNegLogDensity:
    """Row-wise ``f(X*) -> (f (m,), df/dX* (m, Q))`` for new data rows Y*
    (module docstring), given a fitted model's latent points, kernel, Cholesky
    factor and A = K^-1 Y.

    Parameters
    ----------
    kernel : sklearn kernel on the fast path (the fitted one)
    X_train : ndarray of shape (n_samples, n_components)
    L : ndarray of shape (n_samples, n_samples), F-contiguous
        Lower Cholesky factor of the training K (read only).
    A : ndarray of shape (n_samples, n_features)
    Y_new : ndarray of shape (n_new, n_features)
        The new rows, in the model's (centred, scaled) coordinates.
    chunk_bytes : int
        Evaluations work through the rows in chunks whose (n_samples, chunk)
        blocks take at most this many bytes each (four are alive at once).

    Each row's value and gradient depend on that row alone, so a row's
    optimisation does not depend on which other rows are evaluated with it.
    """

    def __init__(self, kernel, X_train, L, A, Y_new, chunk_bytes=16 * 2**20):
        X_train = np.ascontiguousarray(X_train, dtype=np.float64)
        self.n_components = X_train.shape[1]
        self.program, self.want_d2 = lower_latent_kernel(kernel, self.n_components)
        self.params = self.program.params(kernel.theta)
        self.theta = np.asarray(kernel.theta, dtype=np.float64)
        self.covariance = FastCovariance(kernel, self.program, X_train)
        self.L = L
        self.A = np.ascontiguousarray(A, dtype=np.float64)
        self.Y_new = np.ascontiguousarray(Y_new, dtype=np.float64)
        self.chunk = max(1, int(chunk_bytes // (8 * max(X_train.shape[0], 1))))

    def __call__(self, X_query, rows):
        """Values (m,) and gradients (m, Q) of the rows ``rows`` (m,) of Y_new
        at latent points X_query (m, Q)."""
        X_query = np.ascontiguousarray(X_query, dtype=np.float64)
        rows = np.asarray(rows)
        values = np.empty(len(rows))
        grads = np.empty(X_query.shape)
        for start in range(0, len(rows), self.chunk):
            stop = min(len(rows), start + self.chunk)
            values[start:stop], grads[start:stop] = self._evaluate(
                X_query[start:stop], self.Y_new[rows[start:stop]])
        return values, grads

    def _evaluate(self, Xq, Yq):
        p = self.program
        m = Xq.shape[0]
        D = Yq.shape[1]
        Kt = self.covariance.cross(self.theta, Xq)  # (n, m) F
        mean = Kt.T @ self.A  # (m, D)
        U = np.array(Kt, order="F", copy=True)
        U, info = lapack.dpotrs(self.L, U, lower=1, overwrite_b=1)  # K^-1 k*
        if info != 0:
            raise ValueError(f"dpotrs: illegal argument {-info}")
        kdiag = np.empty(m)
        dkdiag = np.empty((m, self.n_components))
        _latent.diag_with_dx(Xq, p.ops, p.op_float, self.params, p.stack_depth,
                             self.want_d2, kdiag, dkdiag)
        s2 = kdiag - np.einsum("ij,ij->j", Kt, U)
        # rounding can leave a noise-free variance at or below zero
        s2 = np.maximum(s2, 1e-12 * np.maximum(kdiag, 1e-300))
        resid = Yq - mean
        rr = np.einsum("ij,ij->i", resid, resid)
        values = 0.5 * D * (_LOG_2PI + np.log(s2)) + 0.5 * rr / s2
        # df/dx* = sum_i dk(x_i, x*)/dx* Omega_i + coef dk(x*, x*)/dx*, with
        # Omega_i = -(A_i . r)/s2 - 2 coef (K^-1 k*)_i, coef = df/ds2.
        coef = 0.5 * D / s2 - 0.5 * rr / (s2 * s2)
        Omega = (resid @ self.A.T).T  # (n, m), F-contiguous without a copy
        Omega *= -1.0 / s2
        Omega -= 2.0 * coef * U
        grads = np.empty((m, self.n_components))
        with PARALLEL_LOCK:
            _latent.grad_cross_weighted(self.covariance.X, Xq, p.ops, p.op_float,
                                        self.params, p.stack_depth, self.want_d2,
                                        Omega, grads)
        grads += coef[:, None] * dkdiag
        return values, grads

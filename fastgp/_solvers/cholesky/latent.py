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

It is the regression objective (:class:`fastgp._solvers.cholesky.objective.NegLogMarginalLikelihood`,
T = D outputs) on a latent-point buffer that the optimiser moves: the same
fill, the same in-place dpotrf/dpotrs/dpotri in one N x N workspace, then one
fused parallel pass (the backend's
:meth:`~fastgp._backend.covariance.LatentCovariance.grad_latent`) that reduces W
against the hyperparameter and the latent derivatives of K at once. Besides the
workspace it holds O(N (Q + D)) floats and the backend's per-block partial sums
of at most ``n_blocks x N x Q`` floats, with ``n_blocks x Q <= max(4 Q, N / 16)``.

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

This module owns the mathematics of the two objectives; the covariance passes
are the backend's (:class:`fastgp._backend.covariance.LatentCovariance`) and the
linear algebra is :mod:`fastgp._linalg.lapack`'s.
"""

import math

import numpy as np

from ..._backend.covariance import LatentCovariance
from ..._linalg.lapack import cho_solve_in_place
from ..._backend.lowering import fast_path_summary, lower_kernel
from ..chunks import query_chunks
from .objective import BufferObjective, NegLogMarginalLikelihood

__all__ = [
    "lower_latent_kernel",
    "LatentNegLogMarginalLikelihood",
    "PredictiveNegLogDensity",
]

_LOG_2PI = math.log(2.0 * math.pi)


def lower_latent_kernel(kernel, n_components):
    """Lower ``kernel`` for Q = ``n_components`` latent dimensions (every leaf
    of the fast path has input derivatives: fastgp._engine.leaves).

    Returns
    -------
    program : KernelProgram

    Raises
    ------
    ValueError
        If the kernel is not on fastgp's fast path, or its length scales do
        not match ``n_components``.
    """
    program = lower_kernel(kernel, n_components)
    if program is None:
        raise ValueError(
            f"GPLVM needs a kernel on fastgp's fast path, and {kernel!r} is not: "
            f"build it from {fast_path_summary()}."
        )
    return program


class LatentNegLogMarginalLikelihood(BufferObjective):
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
    workspace : fastgp._solvers.cholesky.workspace.Workspace
        Holds the N x N buffer; overwritten by every call.

    Where K is not positive definite or a value is not finite the call
    returns ``(inf, zeros)``, which makes the line search back off.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_components)
        The latent-point buffer the covariance reads; every call overwrites it.
    n_evaluations : int
    """

    def __init__(self, kernel, Y, n_components, diag_add, workspace):
        Y = np.asarray(Y, dtype=np.float64)
        n = Y.shape[0]
        self.n_components = int(n_components)
        self.program = lower_latent_kernel(kernel, self.n_components)
        self.X = np.zeros((n, self.n_components), order="F")  # covariance.kernel_input's layout
        self.covariance = LatentCovariance(kernel, self.program, self.X)
        if not np.shares_memory(self.covariance.X_T, self.X):  # it must read our buffer
            raise AssertionError("LatentCovariance copied the latent buffer")
        self.nlml = NegLogMarginalLikelihood(self.covariance, Y, diag_add, workspace)
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

    def _gradient(self, z, Kinv_lower, A):
        grad_x, grad_theta = self.gradient(z[self.X.size:], Kinv_lower, A)
        return np.concatenate([grad_x.ravel(), grad_theta])

    def gradient(self, theta, Kinv_lower, A):
        """(dL/dX (n_samples, n_components), dL/dtheta (n_theta,)) from K^-1's
        lower triangle (n, n) F-contiguous and A = K^-1 Y, at the latent
        points in ``self.X``: both from one fused pass over the triangle."""
        trace_x, trace_theta = self.covariance.grad_latent(theta, Kinv_lower, A)
        return 0.5 * trace_x, 0.5 * trace_theta


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
        self.program = lower_latent_kernel(kernel, self.n_components)
        self.theta = np.asarray(kernel.theta, dtype=np.float64)
        self.covariance = LatentCovariance(kernel, self.program, X_train)
        self.L = L
        self.A = np.ascontiguousarray(A, dtype=np.float64)
        self.Y_new = np.ascontiguousarray(Y_new, dtype=np.float64)
        self.n_train = X_train.shape[0]
        self.chunk_bytes = int(chunk_bytes)

    def __call__(self, X_query, rows):
        """Values (m,) and gradients (m, Q) of the rows ``rows`` (m,) of Y_new
        at latent points X_query (m, Q)."""
        X_query = np.ascontiguousarray(X_query, dtype=np.float64)
        rows = np.asarray(rows)
        values = np.empty(len(rows))
        grads = np.empty(X_query.shape)
        for chunk in query_chunks(len(rows), self.n_train, self.chunk_bytes):
            values[chunk], grads[chunk] = self._evaluate(X_query[chunk],
                                                         self.Y_new[rows[chunk]])
        return values, grads

    def _evaluate(self, Xq, Yq):
        D = Yq.shape[1]
        Kt = self.covariance.cross(self.theta, Xq)  # (n, m) F
        mean = Kt.T @ self.A  # (m, D)
        U = cho_solve_in_place(self.L, np.array(Kt, order="F", copy=True))  # K^-1 k*
        kdiag, dkdiag = self.covariance.diag_with_grad(self.theta, Xq)
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
        grads = self.covariance.grad_cross_weighted(self.theta, Xq, Omega)
        grads += coef[:, None] * dkdiag
        return values, grads

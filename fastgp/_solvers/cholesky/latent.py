"""The GPLVM's objective on the CPU, in fastgp's one-buffer style.

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
:meth:`~fastgp._backend.latent.LatentCovariance.grad_latent`) that reduces W
against the hyperparameter and the latent derivatives of K at once. Besides the
workspace it holds O(N (Q + D)) floats and the backend's per-block partial sums
of at most ``n_blocks x N x Q`` floats, with ``n_blocks x Q <= max(4 Q, N / 16)``.

:func:`predictive_density` places new data in a model fitted on the CPU:
the predictive density of :mod:`fastgp._solvers.latent_density` (shared by
every exact solver) with this path's backend and LAPACK solves.

This module owns the mathematics of the training objective; the covariance passes
are the backend's (:class:`fastgp._backend.latent.LatentCovariance`) and the
linear algebra is :mod:`fastgp._linalg.lapack`'s.
"""

import numpy as np

from ..._backend.latent import LatentCovariance
from ..._linalg.lapack import cho_solve_in_place
from ..latent_density import (LatentLayout, LatentPoints, PredictiveNegLogDensity,
                              lower_latent_kernel)
from .objective import BufferObjective, NegLogMarginalLikelihood

__all__ = ["LatentNegLogMarginalLikelihood", "predictive_density"]



class LatentNegLogMarginalLikelihood(LatentLayout, BufferObjective):
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
    workspace : fastgp._solvers.workspace.Workspace
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
        self.points = LatentPoints(n, self.n_components, self.program.n_theta)

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


def predictive_density(kernel, X_train, L, A, Y_new, chunk_bytes=16 * 2**20):
    """The :class:`~fastgp._solvers.latent_density.PredictiveNegLogDensity` of
    new rows Y_new (n_new, D) under a model fitted on the CPU: its latent
    points X_train (n, Q), host factor L (n, n) and A (n, D)."""
    X_train = np.ascontiguousarray(X_train, dtype=np.float64)
    program = lower_latent_kernel(kernel, X_train.shape[1])
    return PredictiveNegLogDensity(
        LatentCovariance(kernel, program, X_train), kernel.theta, L, A, Y_new,
        lambda factor, block: cho_solve_in_place(factor, np.array(block, order="F",
                                                                  copy=True)),
        chunk_bytes=chunk_bytes)

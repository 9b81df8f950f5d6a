"""The negative log marginal likelihood and its gradient, in one N x N buffer.

For K = k(X, X; theta) + diag(alpha) and targets Y (N, T), docs/design.md and
Rasmussen & Williams (2006) eq. 2.30 and 5.9 give

    L        = 1/2 tr(Y^T K^-1 Y) + T/2 log|K| + N T/2 log(2 pi)
    dL/dth_p = 1/2 sum_ij W_ij dK_ij/dth_p,   W = T K^-1 - A A^T,  A = K^-1 Y.

One evaluation with gradient: fill K's lower triangle into the workspace,
dpotrf in place (the factor L), A = K^-1 Y by dpotrs, log|K| from diag(L),
dpotri in place (K^-1's lower triangle), then one fused pass that forms W entry
by entry and reduces it against dK recomputed on the fly. The workspace
(:class:`fastgp._fit.session.Workspace`) is allocated once and reused by every call.

This module owns the regression objective's mathematics and the guarded
evaluation (inf where K is not positive definite) that the GPLVM's objective
shares; the covariance passes are the backend's (:mod:`fastgp._backend.covariance`)
and the linear algebra :mod:`fastgp._linalg.lapack`'s.
"""

import math

import numpy as np

from ..._linalg.blas_pool import release_blas_workers
from ..._linalg.lapack import (
    NotPositiveDefiniteError,
    cho_inverse_in_place,
    cho_solve_factor,
    cholesky_in_place,
    cholesky_with_jitter,
    exact_sum,
    log_det_from_factor,
)
__all__ = ["NegLogMarginalLikelihood", "guarded_value", "guarded_value_and_grad"]

_LOG_2PI = math.log(2.0 * math.pi)


def guarded_value(factor, params):
    """``factor(params)[2]``, or inf where K is not positive definite or the
    value is not finite (the answer that makes a line search back off)."""
    try:
        _, _, value = factor(params)
    except NotPositiveDefiniteError:
        return math.inf
    return value if math.isfinite(value) else math.inf


def guarded_value_and_grad(factor, gradient, params):
    """One evaluation of an objective in the workspace: ``factor(params)`` ->
    (L, A, value), dpotri in place, ``gradient(params, Kinv_lower, A)``.
    Returns (value, grad), or (inf, zeros) where K is not positive definite
    or anything is not finite. Shared by the regression and GPLVM objectives.
    """
    params = np.asarray(params, dtype=np.float64)
    failed = (math.inf, np.zeros(params.shape))
    try:
        B, A, value = factor(params)
    except NotPositiveDefiniteError:
        return failed
    if not math.isfinite(value):
        return failed
    cho_inverse_in_place(B)
    # the last LAPACK call of the evaluation: OpenBLAS's workers would spin
    # through the Numba pass that follows (fastgp._linalg.blas_pool)
    release_blas_workers()
    grad = gradient(params, B, A)
    if not np.all(np.isfinite(grad)):
        return failed
    return value, grad


class NegLogMarginalLikelihood:
    """``f(theta) -> (L, dL/dtheta)`` for ``scipy.optimize.minimize(jac=True)``.

    Parameters
    ----------
    covariance : FastCovariance or KernelObjectCovariance
        Fills K and reduces the gradient trace (fastgp._backend.covariance).
    Y : ndarray of shape (n_samples, n_targets)
        Targets, already normalised if the estimator normalises.
    diag_add : ndarray of shape (n_samples,)
        Added to K's diagonal (scikit-learn's ``alpha``).
    workspace : fastgp._fit.session.Workspace
        Holds the N x N buffer; overwritten by every call.

    Where K is not positive definite (dpotrf fails) or a value is not finite,
    the call returns ``(inf, zeros)``, the answer that makes L-BFGS-B's line
    search back off, as scikit-learn's ``-inf`` log marginal likelihood does.
    """

    def __init__(self, covariance, Y, diag_add, workspace):
        self.covariance = covariance
        self.Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).reshape(len(Y), -1))
        self.diag_add = np.ascontiguousarray(
            np.broadcast_to(np.asarray(diag_add, dtype=np.float64), (len(self.Y),))
        )
        self.workspace = workspace
        self.n_evaluations = 0

    @property
    def n_samples(self):
        return self.Y.shape[0]

    def factor(self, theta):
        """Fill and factor K at ``theta`` in the workspace.

        Returns (L, A, value): L is the workspace buffer holding the lower
        Cholesky factor (strict upper triangle: stale), A = K^-1 Y (n, T),
        value = L(theta). Raises NotPositiveDefiniteError.
        """
        B = self.workspace.buffer()
        self.covariance.fill_lower(theta, self.diag_add, B)
        cholesky_in_place(B)
        A, value = self._solve(B)
        return B, A, value

    def factor_with_jitter(self, theta, max_relative_jitter=1e-6):
        """:meth:`factor` for the model that is kept: where K is not
        numerically positive definite, jitter is added to its diagonal in
        growing steps (:func:`fastgp._linalg.lapack.cholesky_with_jitter`).

        Returns (L, A, value, jitter), all four at K + diag(diag_add) +
        jitter I, so that a model built from them is consistent. Raises
        NotPositiveDefiniteError (even the bound failed) or
        NonFiniteMatrixError (K holds NaN or infinity).
        """
        B = self.workspace.buffer()

        def fill(buffer, jitter):
            diag = self.diag_add if jitter == 0.0 else self.diag_add + jitter
            self.covariance.fill_lower(theta, diag, buffer)

        jitter = cholesky_with_jitter(fill, B, max_relative_jitter=max_relative_jitter)
        A, value = self._solve(B)
        return B, A, value, jitter

    def _solve(self, L):
        """A = K^-1 Y and L(theta) from the factor (eq. 2.30)."""
        A = cho_solve_factor(L, self.Y)
        n, T = self.Y.shape
        # math.fsum, not einsum: NumPy's SIMD reductions round differently
        # with the arrays' memory alignment, and the fit's bits must not
        # depend on where an allocator put them (docs/reliability.md)
        value = (0.5 * exact_sum((self.Y * A).ravel())
                 + 0.5 * T * log_det_from_factor(L) + 0.5 * n * T * _LOG_2PI)
        return A, value

    def value(self, theta):
        """L(theta) alone (no dpotri, no gradient pass); inf if not PD."""
        self.n_evaluations += 1
        return guarded_value(self.factor, theta)

    def __call__(self, theta):
        """(L(theta), dL/dtheta (n_theta,)); (inf, zeros) if K is not PD."""
        self.n_evaluations += 1
        return guarded_value_and_grad(self.factor, self._gradient, theta)

    def _gradient(self, theta, Kinv_lower, A):
        return 0.5 * self.covariance.grad_trace(theta, Kinv_lower, A)

"""The negative log marginal likelihood and its gradient, in one N x N buffer.

For K = k(X, X; theta) + diag(alpha) and targets Y (N, T), docs/design.md and
Rasmussen & Williams (2006) eq. 2.30 and 5.9 give

    L        = 1/2 tr(Y^T K^-1 Y) + T/2 log|K| + N T/2 log(2 pi)
    dL/dth_p = 1/2 sum_ij W_ij dK_ij/dth_p,   W = T K^-1 - A A^T,  A = K^-1 Y.

One evaluation with gradient: fill K's lower triangle into the workspace,
dpotrf in place (the factor L), A = K^-1 Y by dpotrs, log|K| from diag(L),
dpotri in place (K^-1's lower triangle), then one fused pass that forms W entry
by entry and reduces it against dK recomputed on the fly. The workspace
(:class:`~fastgp._solvers.workspace.Workspace`) is allocated once and
reused by every call.

With a mean (docs/design.md, "A mean estimated with the covariance";
:mod:`fastgp._solvers.mean`) the targets enter through the whitened
[L^-1 Y, L^-1 Q] (one triangular solve), the GLS is a QR of L^-1 Q, and
A = L^-T (L^-1 E) is the residuals' E = Y - Q beta; the profile
likelihood's gradient is then the pass as it stands. The restricted one
(REML) subtracts F F^T, F = L^-T U (U the QR's orthonormal factor, so
F F^T = K^-1 Q C^-1 Q^T K^-1), from the inverse's lower triangle in place
(:func:`fastgp._linalg.lapack.subtract_outer_lower`, column tiles: no N x N
temporary), so that the same pass reads W = T P - A A^T, P = K^-1 - F F^T.

This module owns the regression objective's mathematics and the evaluation
in the buffer that the GPLVM's objective shares (:class:`BufferObjective`);
the guard that answers inf where K is not
positive definite is every objective's (:mod:`fastgp._solvers.base`), the
covariance passes are the backend's (:mod:`fastgp._backend.covariance`) and
the linear algebra :mod:`fastgp._linalg.lapack`'s.
"""

import math

import numpy as np

from ..._linalg.lapack import (
    cho_inverse_in_place,
    cho_solve_factor,
    cholesky_in_place,
    cholesky_with_jitter,
    exact_sum,
    log_det_from_factor,
    release_blas_before_pass,
    solve_lower_in_place,
    solve_lower_transposed_in_place,
    subtract_outer_lower,
)
from ..base import GuardedObjective, PointFailed, regression_targets
from ..workspace import Workspace

__all__ = ["BufferObjective", "NegLogMarginalLikelihood"]

_LOG_2PI = math.log(2.0 * math.pi)


class BufferObjective(GuardedObjective):
    """What every objective that works in the one N x N buffer does with its
    ``factor(point)`` -> (B holding L, A, value) and ``_gradient(point,
    Kinv_lower, A)``: the value alone, or the value and gradient through
    dpotri in place (the regression's and the GPLVM's objectives); the guard
    is :class:`~fastgp._solvers.base.GuardedObjective`'s."""

    def value_at(self, point):
        """The value alone (no dpotri, no gradient pass)."""
        return self.factor(point)[2]

    def value_and_grad_at(self, point):
        B, A, value = self.factor(point)
        if not math.isfinite(value):
            raise PointFailed  # before the inverse
        cho_inverse_in_place(B)
        release_blas_before_pass()  # the last LAPACK call before the gradient pass
        return value, self._gradient(point, B, A)


class NegLogMarginalLikelihood(BufferObjective):
    """``f(theta) -> (L, dL/dtheta)`` for ``scipy.optimize.minimize(jac=True)``.

    Parameters
    ----------
    covariance : FastCovariance or KernelObjectCovariance
        Fills K and reduces the gradient trace (fastgp._backend.covariance).
    Y : ndarray of shape (n_samples, n_targets)
        Targets, already normalised if the estimator normalises.
    diag_add : ndarray of shape (n_samples,)
        Added to K's diagonal (scikit-learn's ``alpha``).
    workspace : fastgp._solvers.workspace.Workspace
        Holds the N x N buffer; overwritten by every call.
    mean : fastgp._solvers.mean.MeanTerm or None
        A mean whose coefficients are profiled out (module docstring).

    Where K is not positive definite (dpotrf fails) or a value is not finite,
    the call returns ``(inf, zeros)``, the answer that makes L-BFGS-B's line
    search back off, as scikit-learn's ``-inf`` log marginal likelihood does.
    """

    def __init__(self, covariance, Y, diag_add, workspace, mean=None):
        self.covariance = covariance
        self.Y, self.diag_add = regression_targets(Y, diag_add)
        self.workspace = workspace
        self.mean = mean
        self._gls = None  # the mean's GLS at the last factor, and L^-1 Q there
        self._whitened_basis = None
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
        """A = K^-1 Y and L(theta) from the factor (eq. 2.30); with a mean,
        A = K^-1 E and the profile or restricted likelihood (module
        docstring)."""
        if self.mean is not None:
            return self._solve_with_mean(L)
        A = cho_solve_factor(L, self.Y)
        n, T = self.Y.shape
        # math.fsum, not einsum: NumPy's SIMD reductions round differently
        # with the arrays' memory alignment, and the fit's bits must not
        # depend on where an allocator put them (docs/reliability.md)
        value = (0.5 * exact_sum((self.Y * A).ravel())
                 + 0.5 * T * log_det_from_factor(L) + 0.5 * n * T * _LOG_2PI)
        return A, value

    def _solve_with_mean(self, L):
        n, T = self.Y.shape
        Z = solve_lower_in_place(L, np.asfortranarray(np.hstack([self.Y, self.mean.Q])))
        gls = self.mean.whitened(Z[:, T:], Z[:, :T])
        self._gls, self._whitened_basis = gls, Z[:, T:]
        A = solve_lower_transposed_in_place(L, np.array(gls.residual, order="F"))
        value = (0.5 * exact_sum((gls.residual * gls.residual).ravel())
                 + 0.5 * T * log_det_from_factor(L) + 0.5 * n * T * _LOG_2PI
                 + self.mean.restricted_value(gls, T))
        return np.ascontiguousarray(A), value

    def value_and_grad_at(self, point):
        if self.mean is None or not self.mean.restricted:
            return super().value_and_grad_at(point)
        B, A, value = self.factor(point)
        if not math.isfinite(value):
            raise PointFailed  # before the inverse
        # F = K^-1 Q R^-1 from the factor, before the inverse overwrites it
        F = self._gls.scaled(solve_lower_transposed_in_place(B, self._whitened_basis))
        self._whitened_basis = None  # overwritten by K^-1 Q
        cho_inverse_in_place(B)
        subtract_outer_lower(B, F)  # the lower triangle of P = K^-1 - F F^T
        release_blas_before_pass()  # the last LAPACK call before the gradient pass
        return value, self._gradient(point, B, A)

    def kept_mean(self, L):
        """The mean's coefficients at the last factor L (the kept model's),
        with K^-1 Q = L^-T (L^-1 Q); None without a mean."""
        if self.mean is None:
            return None
        return self.mean.kept(self._gls, solve_lower_transposed_in_place(
            L, np.asfortranarray(self._whitened_basis)))

    def for_worker(self):
        """A copy for one optimiser run elsewhere (a joblib task): the same
        read-only inputs, a workspace of its own that has not allocated, and
        its own count of evaluations."""
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.workspace = Workspace(self.n_samples)
        copy.n_evaluations = 0
        return copy

    def _gradient(self, theta, Kinv_lower, A):
        return 0.5 * self.covariance.grad_trace(theta, Kinv_lower, A)

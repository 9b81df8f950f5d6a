"""Posterior predictive moments on the matrix-free path: no factor of K~,
only products with it and batched CG solves (docs/design.md, "The
matrix-free path").

For query points X* (m, d), A = K~^-1 Y (n, T) from the fit and
k* = k(X, X*) (n, m):

    mean = k(X*, X) A                       backend ``cross_matmat``, O(n m T)
    V    = K~^-1 k*                         batched preconditioned CG
    var  = diag k(X*, X*) - colsum(k* * V)  (m,)
    cov  = k(X*, X*) - k*^T V               (m, m), symmetrised

The variance works through the query points in chunks, each one batched CG
with one column per query point, so its extra memory is O(n x chunk).

The solves for V run to ``PREDICTION_TOL_FACTOR`` x the fit's ``cg_tol``
(:func:`prediction_tol`). The variance is a difference, k** - k*^T K~^-1 k*,
whose two terms cancel down to the order of the noise: with a white-noise
variance 1e-4 beside a signal variance 1.5, a solve's error of
||e||_K~^2 = r^T K~^-1 r (CG's iterates make the variance's error this
quadratic form of the residual r: Hestenes & Stiefel 1952; Strakos & Tichy
2002) is comparable to the variance at a relative residual of 1e-4,
while the mean, k*^T A, carries A's error only to first order and against
y's scale. Measured at N = 10,000 on bench's 10-D ARD problem near its
optimum: the predictive standard deviation was 45 % off at a relative residual
of 1e-4, 0.7 % at 1e-6 (docs/benchmarks.md, "Which solver when") and 0.009 % at 1e-8.
"""

import numpy as np

from ..chunks import CHUNK_BYTES, query_chunks

__all__ = ["predict_mean_var_iterative", "predict_mean_cov_iterative", "prediction_tol",
           "PREDICTION_TOL_FACTOR"]

#: The prediction's CG solves run to this fraction of the fit's ``cg_tol``
#: (module docstring).
PREDICTION_TOL_FACTOR = 1e-2

#: Arrays of (n, chunk) that batched CG holds at once (solution, residual,
#: preconditioned residual, direction, product, and the right-hand side).
_CG_ARRAYS = 8


def prediction_tol(cg_tol):
    """Relative residual of the prediction's solves, given the fit's."""
    return PREDICTION_TOL_FACTOR * float(cg_tol)


def predict_mean_var_iterative(system, A, X_query, want_var):
    """Mean (m, T), latent variance (m,) or None, and the largest relative
    CG residual reached (0.0 without variance), solving to
    :func:`prediction_tol`.

    system : fastgp._solvers.iterative.system.KernelSystem at the fitted theta
    A : ndarray (n, T), K~^-1 Y; X_query : ndarray (m, d) float64
    """
    covariance, theta = system.covariance, system.theta
    mean = np.asarray(covariance.cross_matmat(theta, X_query, A)).reshape(len(X_query), -1)
    if not want_var:
        return mean, None, 0.0
    m = len(X_query)
    var = np.empty(m)
    worst = 0.0
    for chunk in query_chunks(m, len(A), CHUNK_BYTES // _CG_ARRAYS):
        Kt = covariance.cross(theta, X_query[chunk])       # (n, c)
        solved = system.solve(Kt, tol=prediction_tol(system.options.cg_tol))
        worst = max(worst, solved.max_residual)
        var[chunk] = covariance.diag(theta, X_query[chunk]) - np.einsum("ij,ij->j", Kt,
                                                                        solved.X)
    return mean, var, worst


def predict_mean_cov_iterative(system, A, X_query):
    """Mean (m, T), covariance (m, m) and the largest relative CG residual,
    solving to :func:`prediction_tol`."""
    covariance, theta = system.covariance, system.theta
    mean = np.asarray(covariance.cross_matmat(theta, X_query, A)).reshape(len(X_query), -1)
    Kt = covariance.cross(theta, X_query)
    solved = system.solve(Kt, tol=prediction_tol(system.options.cg_tol))
    cov = covariance.prior_cov(theta, X_query)
    reduction = Kt.T @ solved.X
    cov -= 0.5 * (reduction + reduction.T)   # K~^-1 is symmetric; CG's V is not exactly
    return mean, cov, solved.max_residual

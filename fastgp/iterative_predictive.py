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
"""

import numpy as np

from .predictive import CHUNK_BYTES, chunk_rows

__all__ = ["predict_mean_var_iterative", "predict_mean_cov_iterative"]

#: Arrays of (n, chunk) that batched CG holds at once (solution, residual,
#: preconditioned residual, direction, product, and the right-hand side).
_CG_ARRAYS = 8


def predict_mean_var_iterative(system, A, X_query, want_var):
    """Mean (m, T), latent variance (m,) or None, and the largest relative
    CG residual reached (0.0 without variance).

    system : fastgp.kernel_system.KernelSystem at the fitted theta
    A : ndarray (n, T), K~^-1 Y; X_query : ndarray (m, d) float64
    """
    covariance, theta = system.covariance, system.theta
    mean = np.asarray(covariance.cross_matmat(theta, X_query, A)).reshape(len(X_query), -1)
    if not want_var:
        return mean, None, 0.0
    m = len(X_query)
    var = np.empty(m)
    worst = 0.0
    step = chunk_rows(len(A), CHUNK_BYTES // _CG_ARRAYS)
    for start in range(0, m, step):
        stop = min(m, start + step)
        Kt = covariance.cross(theta, X_query[start:stop])       # (n, c)
        solved = system.solve(Kt)
        worst = max(worst, solved.max_residual)
        var[start:stop] = (covariance.diag(theta, X_query[start:stop])
                           - np.einsum("ij,ij->j", Kt, solved.X))
    return mean, var, worst


def predict_mean_cov_iterative(system, A, X_query):
    """Mean (m, T), covariance (m, m) and the largest relative CG residual."""
    covariance, theta = system.covariance, system.theta
    mean = np.asarray(covariance.cross_matmat(theta, X_query, A)).reshape(len(X_query), -1)
    Kt = covariance.cross(theta, X_query)
    solved = system.solve(Kt)
    cov = covariance.prior_cov(theta, X_query)
    reduction = Kt.T @ solved.X
    cov -= 0.5 * (reduction + reduction.T)   # K~^-1 is symmetric; CG's V is not exactly
    return mean, cov, solved.max_residual

"""Posterior predictive moments from a Cholesky factor, in chunks: the one
place they are computed from a factor, through the backend
(fastgp._backend.covariance) and fastgp._linalg.lapack: the Cholesky path's
predictions (the regressor's predict, the GPLVM's inverse_transform) and
Vecchia's joint predictions, which factor the kernel on the query points'
neighbours.

Rasmussen & Williams (2006), Algorithm 2.1, lines 4 to 6, for query points
X* (m, d), training factor L (K = L L^T) and A = K^-1 Y:

    mean = K(X*, X) A                      (m, T)
    V    = L^-1 K(X, X*)                   (n, m)
    var  = diag k(X*, X*) - colsum(V * V)  (m,)
    cov  = k(X*, X*) - V^T V               (m, m)

Mean and variance work through the query points in chunks so that their extra
memory is O(n x chunk), not O(n x m). The covariance needs V for all m points
(n x m) beside the (m x m) result.

The factor may lie in host memory (LAPACK's solve) or in a device's (the
GPU path passes its own ``solve_lower``, its array module ``xp`` and
``to_host``; the covariance's blocks then lie there too): the arithmetic is
written once.
"""

import numpy as np

from .._linalg.lapack import solve_lower_in_place
from .chunks import query_chunks

__all__ = ["predict_mean_var", "predict_mean_cov"]

def predict_mean_var(covariance, theta, L, A, X_query, want_var,
                     solve_lower=solve_lower_in_place, xp=np, to_host=np.asarray):
    """Mean (m, T) and, if ``want_var``, latent variance (m,) at X_query
    (NumPy arrays).

    covariance : FastCovariance or KernelObjectCovariance over the training X
        (its ``diag`` includes white noise, as scikit-learn's ``kernel.diag``),
        or a device's, whose ``cross`` blocks lie where L does
    L : (n, n) F-ordered lower Cholesky factor; A : (n, T) in L's memory
    solve_lower : ``solve_lower(L, V)`` -> L^-1 V, overwriting V
    """
    m = len(X_query)
    mean = np.empty((m, A.shape[1]))
    var = np.empty(m) if want_var else None
    for chunk in query_chunks(m, L.shape[0]):
        Kt = covariance.cross(theta, X_query[chunk])  # (n, c) F-order
        mean[chunk] = to_host(Kt.T @ A)
        if want_var:
            V = solve_lower(L, Kt)
            var[chunk] = (covariance.diag(theta, X_query[chunk])
                          - to_host(xp.einsum("ij,ij->j", V, V)))
    return mean, var


def predict_mean_cov(covariance, theta, L, A, X_query, solve_lower=solve_lower_in_place,
                     to_host=np.asarray):
    """Mean (m, T) and covariance (m, m) at X_query (see module docstring;
    the arguments as :func:`predict_mean_var`'s)."""
    Kt = covariance.cross(theta, X_query)
    mean = to_host(Kt.T @ A)
    V = solve_lower(L, Kt)
    cov = covariance.prior_cov(theta, X_query)
    cov -= to_host(V.T @ V)
    return mean, cov

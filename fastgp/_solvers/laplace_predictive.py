"""Predictions of the binary Laplace classifier (Rasmussen & Williams 2006,
Alg. 3.2): the latent function's moments at query points, the predictive
probability of the positive class, and the class decision that is exactly
the probabilities' argmax (docs/gpc.md, "Predictions").

Functions: :func:`latent_moments` (lines 4-6, in chunks),
:func:`positive_class_probability` (line 7) and
:func:`positive_class_decision` (predict).
"""

import numpy as np
from scipy.special import erf

from .._linalg.lapack import solve_lower_in_place
from .chunks import query_chunks

__all__ = ["latent_moments", "positive_class_probability", "positive_class_decision",
           "MIXTURE_LAMBDAS", "MIXTURE_COEFFICIENTS", "DECISION_BAND"]

#: Williams & Barber (1998), Appendix A: the logistic function as a mixture
#: sigma(z) ~ sum_i c_i Phi(sqrt(2) lambda_i z) of probit functions. The
#: coefficients are scikit-learn's, as it prints them (least squares at
#: z = 0, 0.6, 2, 3.5, 4.5 and infinity, rounded to 8 decimals), so that the
#: probabilities equal scikit-learn's to rounding: the unrounded least-squares
#: coefficients differ from these by up to 5e-7, which moves a probability by
#: up to about 1e-8. With these, the mixture is 0.5 sum(c) = 0.5 - 5.0e-9 at
#: z = 0 and sum(c) = 1 - 1.0e-8 at infinity, so probabilities stay in [0, 1).
MIXTURE_LAMBDAS = np.array([0.41, 0.4, 0.37, 0.44, 0.39])
MIXTURE_COEFFICIENTS = np.array(
    [-1854.8214151, 3516.89893646, 221.29346712, 128.12323805, -2010.49422654])

#: The probability of the positive class exceeds 0.5 for every latent mean
#: above DECISION_BAND x sqrt(1 + var) (and is below 0.5 for every mean at or
#: below 0), at any variance var >= 0: the mixture's 0.5 crossing lies at
#: 2.0e-8 x sqrt(1 + var) or below (from var = 0 to 1e14; it grows as
#: sqrt(var)), and this band is 50 times that. Only a query point whose mean
#: falls inside the band needs its variance to be decided.
DECISION_BAND = 1e-6


def _chunk_moments(covariance, theta, L, W_sr, g, X_chunk, var_needed):
    """The latent mean (c,) at one chunk of query points and, where
    ``var_needed(mean)`` says so, the variance (c,) (else None); the same
    arithmetic, in the same chunks, for every caller, so that the values
    are the same bits whichever method asks (Alg. 3.2 lines 4-6):

        mean = k*^T g,  v = L \\ (W^1/2 k*),  var = k(x*, x*) - v^T v.
    """
    Kt = covariance.cross(theta, X_chunk)  # (n, c) F-order
    mean = Kt.T @ g
    if not var_needed(mean):
        return mean, None
    Kt *= W_sr[:, None]
    V = solve_lower_in_place(L, Kt)
    return mean, covariance.diag(theta, X_chunk) - np.einsum("ij,ij->j", V, V)


def latent_moments(covariance, theta, L, W_sr, g, X_query, want_var):
    """Latent mean (m,) and, if ``want_var``, variance (m,) at X_query
    (Alg. 3.2 lines 4-6). The mean alone is one product pass of the backend
    (``cross_matmat``, O(n + m) memory); with the variance, the query points
    are taken in chunks (:func:`fastgp._solvers.chunks.query_chunks`) so
    that the extra memory is O(n x chunk).

    covariance : backend over the training X; L : (n, n) F-contiguous lower
    factor of B; W_sr, g = y - pi : (n,).
    """
    if not want_var:  # one pass, no (n, chunk) block
        return covariance.cross_matmat(theta, X_query, g), None
    m = len(X_query)
    mean = np.empty(m)
    var = np.empty(m)
    for chunk in query_chunks(m, L.shape[0]):
        mean[chunk], var[chunk] = _chunk_moments(covariance, theta, L, W_sr, g,
                                                 X_query[chunk], lambda _: True)
    return mean, var


def positive_class_probability(mean, var):
    """The predictive probability of the positive class (Alg. 3.2 line 7),
    integral sigma(z) N(z | mean, var) dz, with sigma replaced by the probit
    mixture above: each term integrates in closed form,

        integral Phi(sqrt(2) lambda z) N(z | mu, v) dz
            = Phi(sqrt(2) lambda mu / sqrt(1 + 2 lambda^2 v)),

    summed as scikit-learn sums them (the terms' odd parts, then
    0.5 sum(c)); finite at var = 0, where scikit-learn's form divides 0 by 0.

    mean, var : (m,) float64; returns (m,).
    """
    mean = np.asarray(mean, dtype=np.float64)[None, :]
    var = np.asarray(var, dtype=np.float64)[None, :]
    lam = MIXTURE_LAMBDAS[:, None]
    c = MIXTURE_COEFFICIENTS[:, None]
    odd = 0.5 * erf(lam * mean / np.sqrt(1.0 + 2.0 * lam**2 * var))
    return (c * odd).sum(axis=0) + 0.5 * MIXTURE_COEFFICIENTS.sum()


def positive_class_decision(covariance, theta, L, W_sr, g, X_query):
    """Whether predict_proba's row [1 - p, p] at each query point has its
    ``np.argmax`` (the first at a tie) at the positive class, i.e. p > 1 - p,
    without the variance where the latent mean decides it.

    A mean at or below 0 gives p < 0.5, a mean above ``DECISION_BAND x
    sqrt(1 + k(x*, x*))`` gives p > 0.5 (the variance is at most the prior's
    k(x*, x*)); a chunk with a mean between them gets its variance and p, the
    same bits as :func:`latent_moments` and :func:`positive_class_probability`
    give for predict_proba (the same chunks, the same arithmetic).

    Returns (positive (m,) bool, mean (m,), var (k,) of the points whose
    variance was computed, for the caller's finiteness check).
    """
    m = len(X_query)
    positive = np.empty(m, dtype=bool)
    mean = np.empty(m)
    variances = []
    for chunk in query_chunks(m, L.shape[0]):
        X_chunk = X_query[chunk]

        def undecided(chunk_mean):
            prior_var = np.maximum(covariance.diag(theta, X_chunk), 0.0)
            band = DECISION_BAND * np.sqrt(1.0 + prior_var)
            return bool(np.any((chunk_mean > 0) & (chunk_mean <= band)))

        mean[chunk], var = _chunk_moments(covariance, theta, L, W_sr, g, X_chunk,
                                          undecided)
        if var is None:
            positive[chunk] = mean[chunk] > 0
        else:
            p = positive_class_probability(mean[chunk], var)
            positive[chunk] = (1.0 - p) < p
            variances.append(var)
    return positive, mean, np.concatenate(variances) if variances else np.empty(0)

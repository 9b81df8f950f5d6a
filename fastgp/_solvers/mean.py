"""A mean estimated with the covariance: the basis functions, and the
generalised least squares that every regression solver's objective shares
(docs/design.md, "A mean estimated with the covariance"; Rasmussen &
Williams 2006, sec. 2.7).

For targets Y (N, T), a basis H (N, p) and K = k(X, X) + diag(alpha),

    C    = H^T K^-1 H                                    (p, p)
    beta = C^-1 H^T K^-1 Y                               (p, T), R&W eq. 2.42's beta-bar
    E    = Y - H beta                                    the residuals
    profile:     L_P(theta) = L(theta; E)                the solver's NLML of E
    restricted:  L_R(theta) = L_P(theta) + T/2 log|C| - T p/2 log(2 pi)

L_R is R&W's eq. 2.45 (a vague prior on beta), which is the likelihood of
N - p error contrasts (Patterson & Thompson 1971; Harville 1977) up to
-T/2 log|H^T H|, a constant of the basis left out. beta is optimal at every
theta, so the gradient of either is the solver's gradient with beta held
fixed (the envelope theorem); L_R adds T/2 d log|C| = -T/2 tr(F^T dK F),
F = K^-1 H C^-1/2.

The basis is orthonormalised once (:class:`MeanTerm`: H Pi = Q R0, a QR with
column pivoting, which is also the rank check), so the objectives work with
Q, whose C_Q = Q^T K^-1 Q has a condition number at most K's whatever the
basis' scaling. At one theta a solver hands either the whitened basis and
targets (W Q, W Y with W^T W = K^-1: the Cholesky path's L^-1, Vecchia's
U^T), solved by a QR (:meth:`MeanTerm.whitened`), or K^-1 Q and K^-1 Y (the
matrix-free path's CG), solved by a Cholesky factor of C_Q with a rank check
(:meth:`MeanTerm.solved`); the fitted coefficients are taken back to H's
coordinates once (:meth:`MeanTerm.kept`).

This module holds no solver's code: each objective calls it where its
targets enter (the evaluation and the kept model), and prediction adds the
mean's terms around any solver's predictions (:func:`predict_moments`).
"""

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.linalg import LinAlgError, cholesky, qr, solve_triangular

from .base import PointFailed

__all__ = ["MEANS", "MEAN_METHODS", "MeanBasis", "MeanTerm", "Gls", "FittedMean",
           "mean_term", "predict_moments"]

#: The ``mean`` values a user names (a callable is the third kind).
MEANS = ("constant", "linear")
#: The ways the coefficients are estimated with the covariance.
MEAN_METHODS = ("profile", "reml")

_LOG_2PI = math.log(2.0 * math.pi)


class MeanBasis:
    """The basis functions the estimator's ``mean`` names: ``"constant"``
    (one column of ones), ``"linear"`` (ones, then the inputs' columns) or a
    callable ``H(X) -> (n, p)``.

    Calling it on inputs X (n, d) returns H (n, p) float64, C-contiguous,
    checked: two dimensions (a vector is one column), one row per input,
    finite; a ValueError otherwise, naming what to do.
    """

    def __init__(self, spec):
        self.spec = spec

    @property
    def has_intercept(self):
        """Whether column 0 is the constant 1 (the named bases)."""
        return self.spec in MEANS

    def names(self, p):
        """The columns' names in messages (p,) of str."""
        if self.spec == "constant":
            return ["the intercept"]
        if self.spec == "linear":
            return ["the intercept"] + [f"X[:, {j}]" for j in range(p - 1)]
        return [f"column {j} of mean(X)" for j in range(p)]

    def __call__(self, X, where="the training inputs"):
        n = _count(X)
        if self.spec == "constant":
            return np.ones((n, 1))
        if self.spec == "linear":
            if not (isinstance(X, np.ndarray) and X.ndim == 2
                    and np.issubdtype(X.dtype, np.number)):
                raise ValueError(
                    'mean="linear" needs numeric inputs X of shape (n_samples, '
                    "n_features): it fits a constant plus one coefficient per input "
                    "column. Pass mean as a callable H(X) -> (n, p) for other inputs.")
            return np.ascontiguousarray(
                np.column_stack([np.ones(n), np.asarray(X, dtype=np.float64)]))
        H = np.asarray(self.spec(X), dtype=np.float64)
        if H.ndim == 1:
            H = H.reshape(-1, 1)
        if H.ndim != 2:
            raise ValueError(
                f"mean(X) returned an array of shape {H.shape} on {where}; it must "
                "return the basis H of shape (n_samples, n_basis): one row per input, "
                "one column per coefficient.")
        if H.shape[0] != n:
            raise ValueError(
                f"mean(X) returned {H.shape[0]} rows for the {n} points of {where}; it "
                "must return one row of the basis per input point (shape (n_samples, "
                "n_basis)).")
        bad = ~np.all(np.isfinite(H), axis=0)
        if np.any(bad):
            names = ", ".join(np.array(self.names(H.shape[1]), dtype=object)[bad])
            rows = int(np.sum(~np.all(np.isfinite(H), axis=1)))
            raise ValueError(
                f"mean(X) returned NaN or infinity on {where} ({rows} of {n} rows), in "
                f"{names}. The basis must be finite at every input: check the callable "
                "(a log or a division at these inputs?), or drop those points.")
        return np.ascontiguousarray(H)


def _count(X):
    return X.shape[0] if hasattr(X, "shape") else len(X)


def _pivoted_qr(H):
    """(norms (p,), Qs (n, p), Rs (p, p), pivots (p,)): the QR with column
    pivoting of H with its columns scaled to unit norm, H[:, pivots] / norms[pivots]
    = Qs Rs (LAPACK's dgeqp3 through SciPy); None for Qs, Rs and pivots
    where a column is zero."""
    norms = np.sqrt(np.einsum("ij,ij->j", H, H))
    if np.any(norms == 0.0):
        return norms, None, None, None
    Qs, Rs, pivots = qr(H / norms, mode="economic", pivoting=True)
    return norms, Qs, Rs, np.asarray(pivots, dtype=np.int64)


def _rank_deficiency(H, names, norms, Rs, pivots):
    """None where H (n, p) has full column rank (:func:`_pivoted_qr`'s
    factors: no pivot below max(n, p) eps of the first, numpy's matrix_rank
    tolerance), else the ValueError's text, naming each column that is a
    linear combination of others and those others with their coefficients."""
    n, p = H.shape
    zero = norms == 0.0
    if np.any(zero):
        return (f"{', '.join(np.array(names, dtype=object)[zero])} is zero at every "
                "training input")
    diagonal = np.abs(np.diagonal(Rs))
    rank = int(np.sum(diagonal > max(n, p) * np.finfo(np.float64).eps * diagonal[0]))
    if rank == p:
        return None
    parts = []
    for k in range(rank, p):
        coef = solve_triangular(Rs[:rank, :rank], Rs[:rank, k])
        coef *= norms[pivots[k]] / norms[pivots[:rank]]
        terms = [f"{c:.4g} x {names[pivots[j]]}" for j, c in enumerate(coef)
                 if abs(c) > 1e-8 * np.max(np.abs(coef))]
        parts.append(f"{names[pivots[k]]} = {' + '.join(terms) or '0'}")
    return "; ".join(parts)


class MeanTerm:
    """The mean as an objective sees it: the training basis H (n, p), its
    orthonormal Q (n, p) F-contiguous with H[:, pivots] = Q R0, and the
    method; the GLS at one theta (:meth:`whitened`, :meth:`solved`), the
    restricted likelihood's extra term (:meth:`restricted_value`) and the
    kept coefficients (:meth:`kept`). Built by :func:`mean_term`, which
    checks the basis; holds no fitted state.

    Attributes
    ----------
    basis : MeanBasis
    method : "profile" or "reml"
    H : (n, p) float64, the basis at the training inputs
    Q : (n, p) float64 F-contiguous, orthonormal columns
    R0 : (p, p) upper triangular; pivots : (p,) int64
    log_det_basis : float, 2 sum log|R0_ii|: log|C| = log|Q^T K^-1 Q| + it
    """

    def __init__(self, basis, H, method):
        n, p = H.shape
        names = basis.names(p)
        if p >= n:
            raise ValueError(
                f"The mean's basis has p = {p} columns for N = {n} training samples: "
                "generalised least squares needs fewer coefficients than samples "
                f"(p < N{', and REML N - p error contrasts' if method == 'reml' else ''}). "
                "Use a smaller basis (mean=\"constant\", or fewer columns in mean(X)) or "
                "more samples.")
        norms, Qs, Rs, pivots = _pivoted_qr(H)
        problem = _rank_deficiency(H, names, norms, Rs, pivots)
        if problem is not None:
            raise ValueError(
                "The mean's basis is rank-deficient at the training inputs, so its "
                f"coefficients are not identified: {problem}. Drop the dependent "
                "column (a constant or duplicated column of X with mean=\"linear\", "
                "or a repeated column of mean(X)), e.g. pass mean as a callable that "
                "leaves it out.")
        self.basis = basis
        self.method = method
        self.H = H
        self.Q = np.asfortranarray(Qs)
        self.pivots = pivots
        self.R0 = Rs * norms[self.pivots]
        self.log_det_basis = 2.0 * math.fsum(np.log(np.abs(np.diagonal(self.R0))).tolist())

    @property
    def p(self):
        return self.Q.shape[1]

    @property
    def restricted(self):
        return self.method == "reml"

    # ------------------------------------------------------ at one theta
    def whitened(self, Zq, Zy):
        """The GLS from the whitened basis Zq = W Q (n, p) and targets
        Zy = W Y (n, T), W^T W = K^-1: a QR of Zq (no normal equations).
        Raises PointFailed where Zq is numerically rank-deficient (K is then
        not numerically positive definite)."""
        U, R = np.linalg.qr(Zq)
        _check_triangle(R)
        beta = solve_triangular(R, U.T @ Zy)
        return Gls(beta=beta, R=R, residual=Zy - Zq @ beta)

    def solved(self, G, A_y, Y):
        """The GLS from G = K^-1 Q (n, p) and A_y = K^-1 Y (n, T): the
        Cholesky factor of C_Q = Q^T G with a rank check (PointFailed where
        it is not numerically positive definite). ``residual`` is then
        K^-1 E = A_y - G beta, the residuals' dual coefficients."""
        C = self.Q.T @ G
        C = 0.5 * (C + C.T)
        try:
            R = cholesky(C, lower=False)
        except LinAlgError:
            raise PointFailed from None
        _check_triangle(R)
        beta = solve_triangular(R, solve_triangular(R, self.Q.T @ A_y, trans="T"))
        return Gls(beta=beta, R=R, residual=A_y - G @ beta)

    def restricted_value(self, gls, n_targets):
        """What the restricted likelihood adds to the solver's NLML of the
        residuals (module docstring): T/2 log|C| - T p/2 log(2 pi); 0.0 for
        the profile likelihood."""
        if not self.restricted:
            return 0.0
        return 0.5 * n_targets * (gls.log_det + self.log_det_basis - self.p * _LOG_2PI)

    # ---------------------------------------------------------- the fit
    def kept(self, gls, G):
        """The :class:`FittedMean` from the GLS at the kept point and
        G = K^-1 Q (n, p) there, in H's coordinates: with H Pi = Q R0,
        beta_H = Pi R0^-1 beta_Q, Cov = Pi R0^-1 C_Q^-1 R0^-T Pi^T,
        K^-1 H = G R0 Pi^T."""
        inverse = np.argsort(self.pivots)
        M = solve_triangular(self.R0, solve_triangular(gls.R, np.eye(self.p)))  # R0^-1 R^-1
        beta = solve_triangular(self.R0, gls.beta)[inverse]
        cov = (M @ M.T)[np.ix_(inverse, inverse)]
        return FittedMean(term=self, beta=beta, cov=0.5 * (cov + cov.T),
                          G=np.ascontiguousarray((G @ self.R0)[:, inverse]))


def _check_triangle(R):
    """PointFailed unless the triangular factor R (p, p) has a diagonal
    clear of rounding (p eps max |R_ii|): C = R^T R numerically singular."""
    diagonal = np.abs(np.diagonal(R))
    if not (np.all(np.isfinite(R)) and
            np.min(diagonal) > R.shape[0] * np.finfo(np.float64).eps * np.max(diagonal)):
        raise PointFailed


@dataclass
class Gls:
    """The generalised least squares at one theta, in Q's coordinates.

    beta : (p, T); R : (p, p) upper triangular with C_Q = R^T R;
    residual : (n, T), the whitened residuals W E (:meth:`MeanTerm.whitened`)
        or their dual coefficients K^-1 E (:meth:`MeanTerm.solved`)
    """

    beta: np.ndarray
    R: np.ndarray
    residual: np.ndarray

    @property
    def log_det(self):
        """log|C_Q| = 2 sum log|R_ii|."""
        return 2.0 * math.fsum(np.log(np.abs(np.diagonal(self.R))).tolist())

    def scaled(self, M):
        """M R^-1 for M (n, p), F-contiguous: with M = K^-1 Q it is F, and
        F F^T = K^-1 Q C_Q^-1 Q^T K^-1, the restricted likelihood's rank-p
        correction of K^-1 (module docstring)."""
        return np.asfortranarray(solve_triangular(self.R, M.T, trans="T").T)


@dataclass
class FittedMean:
    """A fitted model's mean (on the targets as the fit saw them, normalised
    where ``normalize_y``).

    term : MeanTerm; beta : (p, T) coefficients of H; cov : (p, p),
    C^-1 = (H^T K^-1 H)^-1; G : (n, p), K^-1 H (the solver's K^-1)
    """

    term: Any
    beta: np.ndarray
    cov: np.ndarray
    G: np.ndarray

    def residuals(self, Y):
        """Y - H beta (n, T)."""
        return Y - self.term.H @ self.beta

    def coefficients(self, y_mean, y_std, vector_targets):
        """(mean_coef_, mean_coef_cov_) on the targets' scale: beta and Cov
        times the normalisation's scale (Cov times its square, one (p, p)
        per target); with a named basis the normalisation's shift goes into
        the intercept, so that H(x) mean_coef_ is the prior mean.
        ``vector_targets``: y was one column given as a vector (mean_coef_
        (p,) then, else (p, T)); mean_coef_cov_ is (p, p) for one target,
        (p, p, T) for several."""
        y_std = np.broadcast_to(np.asarray(y_std, dtype=np.float64), (self.beta.shape[1],))
        y_mean = np.broadcast_to(np.asarray(y_mean, dtype=np.float64), (self.beta.shape[1],))
        coef = self.beta * y_std
        if self.term.basis.has_intercept:
            coef[0] += y_mean
        cov = self.cov[:, :, None] * y_std**2
        return (coef[:, 0] if vector_targets else coef,
                cov[:, :, 0] if cov.shape[2] == 1 else cov)


def mean_term(spec, method, X):
    """The :class:`MeanTerm` of the estimator's ``mean`` on training inputs
    X, or None for ``mean=None``; a ValueError for a basis that is not
    finite, has p >= N columns or is rank-deficient."""
    if spec is None:
        return None
    basis = MeanBasis(spec)
    return MeanTerm(basis, basis(X), method)


def predict_moments(solver, fitted, X_query, want):
    """The latent predictive mean (m, T) and variance (m,) or covariance
    (m, m) at X_query (``want`` as :meth:`Solver.predict`), with the fitted
    mean where there is one (``fitted.mean``), else the solver's own.

    With a mean (R&W 2006, eq. 2.41-2.42, beta at its GLS value): the solver
    predicts from the residuals E = Y - H beta (its A = K^-1 E) and, as
    p more targets, from H itself (A = K^-1 H), in one call, so that
    mean[:, T:] = K*^T K^-1 H (each solver's own approximation of it:
    Vecchia's on each point's neighbours); then, with h* = H(x*),

        mean = h* beta + k*^T K^-1 E,   R = h* - K*^T K^-1 H   (m, p)
        var += diag(R Cov R^T),          cov += R Cov R^T.
    """
    if fitted.mean is None:
        return solver.predict(fitted, X_query, want)
    mean_fit = fitted.mean
    T, p = fitted.A.shape[1], mean_fit.beta.shape[0]
    Hq = mean_fit.term.basis(X_query, where="the query points")
    if Hq.shape[1] != p:
        raise ValueError(
            f"mean(X) returned {Hq.shape[1]} columns at the query points and {p} at the "
            "training inputs; it must return the same basis functions wherever it is "
            "called.")
    augmented = replace(fitted, Y=np.hstack([mean_fit.residuals(fitted.Y), mean_fit.term.H]),
                        A=np.hstack([fitted.A, mean_fit.G]), mean=None)
    mean, spread = solver.predict(augmented, X_query, want)
    R = Hq - mean[:, T:]
    latent = Hq @ mean_fit.beta + mean[:, :T]
    if want == "var":
        spread = spread + np.einsum("ij,jk,ik->i", R, mean_fit.cov, R)
    elif want == "cov":
        spread = spread + R @ mean_fit.cov @ R.T
    return latent, spread

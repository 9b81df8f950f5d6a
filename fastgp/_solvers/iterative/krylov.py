"""Batched preconditioned conjugate gradients and the Lanczos quadrature of
their coefficients: the Krylov part of the matrix-free path.

:func:`batched_cg` solves A X = B for c right-hand sides at once, A symmetric
positive definite given only as a product ``matmat(V) = A V``, with a
preconditioner ``precondition(R) = M^-1 R`` (Hestenes & Stiefel 1952; Saad
2003, Alg. 9.1, one set of scalars per column). Each iteration costs one
product with the columns still running; a column stops when its relative
residual ||b - A x|| / ||b|| is at most ``tol``.

The CG scalars of a column are those of the Lanczos process on M^-1/2 A M^-1/2
started from M^-1/2 b (Saad 2003, sec. 6.7.3): with alpha_j the step lengths
and beta_j the direction updates, the tridiagonal T has

    T_00 = 1 / alpha_0,   T_jj = 1 / alpha_j + beta_{j-1} / alpha_{j-1},
    T_{j,j+1} = T_{j+1,j} = sqrt(beta_j) / alpha_j,

and for w = M^-1/2 b, w^T f(M^-1/2 A M^-1/2) w ~ (b^T M^-1 b) e_1^T f(T) e_1,
Gauss quadrature exact for polynomials of degree < 2m after m steps
(:func:`lanczos_quadrature`; Ubaru, Chen & Saad 2017; Gardner et al. 2018,
sec. 4). The same iterations so give K^-1 z and the log-determinant estimate.
"""

from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh_tridiagonal

from ...exceptions import NotPositiveDefiniteError

__all__ = ["CGResult", "IndefiniteOperatorError", "batched_cg", "lanczos_tridiagonal",
           "lanczos_quadrature"]


class IndefiniteOperatorError(NotPositiveDefiniteError):
    """CG or the Lanczos quadrature met a curvature <= 0: the matrix is not
    (numerically) positive definite. A :class:`fastgp.exceptions.NotPositiveDefiniteError`,
    so the objectives answer inf as they do when dpotrf fails."""

    def __init__(self, message):
        self.order = None
        np.linalg.LinAlgError.__init__(self, message)


@dataclass
class CGResult:
    """What :func:`batched_cg` found.

    X : ndarray (n, c) float64, the solutions
    iterations : ndarray (c,) int, CG steps per column
    residual : ndarray (c,) float64, relative residual ||b - A x|| / ||b||
        reached per column (CG's recurrence; 0 for a zero column)
    tol : float, the tolerance asked for
    alphas, betas : ndarray (n_steps, c) float64, the CG scalars per step
        (valid for the first ``iterations[q]`` rows of column q)
    initial_norm : ndarray (c,), b^T M^-1 b per column
    """

    X: np.ndarray
    iterations: np.ndarray
    residual: np.ndarray
    tol: float
    alphas: np.ndarray
    betas: np.ndarray
    initial_norm: np.ndarray

    @property
    def converged(self):
        return bool(np.all(self.residual <= self.tol))

    @property
    def n_iterations(self):
        return int(self.iterations.max(initial=0))

    @property
    def max_residual(self):
        return float(self.residual.max(initial=0.0))


def batched_cg(matmat, B, precondition, tol, max_iter):
    """Solve A X = B, column by column, with preconditioned CG.

    Parameters
    ----------
    matmat : callable (V (n, c') float64) -> A V (n, c')
        A symmetric positive definite.
    B : ndarray (n, c) float64, right-hand sides (not overwritten)
    precondition : callable (R (n, c')) -> M^-1 R (n, c'), M SPD
    tol : float, relative residual at which a column stops
    max_iter : int, largest number of steps

    Returns
    -------
    CGResult

    Raises
    ------
    IndefiniteOperatorError
        A direction with p^T A p <= 0 or not finite: A is not (numerically)
        positive definite.
    """
    B = np.asarray(B, dtype=np.float64).reshape(len(B), -1)
    n, c = B.shape
    X = np.zeros((n, c))
    R = B.copy()
    Z = precondition(R)
    P = Z.copy()
    rz = np.einsum("ij,ij->j", R, Z)
    b_norm = np.linalg.norm(B, axis=0)
    zero = b_norm == 0.0
    residual = np.where(zero, 0.0, 1.0)
    iterations = np.zeros(c, dtype=np.int64)
    alphas = np.zeros((max_iter, c))
    betas = np.zeros((max_iter, c))
    initial_norm = rz.copy()
    active = residual > tol
    for step in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        P_a = P[:, idx]
        AP = matmat(P_a)
        pAp = np.einsum("ij,ij->j", P_a, AP)
        if not np.all(np.isfinite(pAp)) or np.any(pAp <= 0.0):
            raise IndefiniteOperatorError(
                "conjugate gradients met a direction p with p^T A p <= 0")
        alpha = rz[idx] / pAp
        X[:, idx] += alpha * P_a
        R_a = R[:, idx] - alpha * AP
        R[:, idx] = R_a
        residual[idx] = np.linalg.norm(R_a, axis=0) / b_norm[idx]
        Z_a = precondition(R_a)
        rz_new = np.einsum("ij,ij->j", R_a, Z_a)
        beta = rz_new / rz[idx]
        P[:, idx] = Z_a + beta * P_a
        rz[idx] = rz_new
        alphas[step, idx] = alpha
        betas[step, idx] = beta
        iterations[idx] += 1
        active[idx] = residual[idx] > tol
    n_steps = int(iterations.max(initial=0))
    return CGResult(X=X, iterations=iterations, residual=residual, tol=float(tol),
                    alphas=alphas[:n_steps], betas=betas[:n_steps],
                    initial_norm=initial_norm)


def lanczos_tridiagonal(alphas, betas):
    """The Lanczos tridiagonal of one column's m CG steps (module docstring).

    alphas, betas : ndarray (m,) float64, that column's CG scalars
    Returns (diagonal (m,), off-diagonal (m - 1,)).
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    betas = np.asarray(betas, dtype=np.float64)
    diagonal = 1.0 / alphas
    diagonal[1:] += betas[:-1] / alphas[:-1]
    off = np.sqrt(betas[:-1]) / alphas[:-1]
    return diagonal, off


def lanczos_quadrature(result, columns, function=np.log):
    """Per column q of ``columns``: (b_q^T M^-1 b_q) e_1^T f(T_q) e_1, the
    Gauss quadrature of b_q^T M^-1/2 f(M^-1/2 A M^-1/2) M^-1/2 b_q.

    result : CGResult; columns : sequence of int
    function : callable on the eigenvalues of T (default: log)
    Returns ndarray (len(columns),) float64; raises IndefiniteOperatorError
    where T has an eigenvalue <= 0 and f is the log.
    """
    out = np.zeros(len(columns))
    for i, q in enumerate(columns):
        m = int(result.iterations[q])
        if m == 0:
            continue
        diagonal, off = lanczos_tridiagonal(result.alphas[:m, q], result.betas[:m, q])
        if m == 1:  # SciPy 1.10's "stev" refuses an empty off-diagonal
            eigenvalues, vectors = diagonal, np.ones((1, 1))
        else:
            # "stev" (implicit QL): SciPy's default "stemr" fails to converge
            # on some of these tridiagonals in SciPy 1.10 (LAPACK info 22)
            eigenvalues, vectors = eigh_tridiagonal(diagonal, off, lapack_driver="stev")
        if function is np.log and eigenvalues[0] <= 0.0:
            raise IndefiniteOperatorError("a Lanczos tridiagonal is not positive definite")
        out[i] = result.initial_norm[q] * float(vectors[0] ** 2 @ function(eigenvalues))
    return out

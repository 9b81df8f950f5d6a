"""The preconditioner of the matrix-free path: a partial pivoted Cholesky of
the kernel, computed from kernel columns on the fly, plus a diagonal.

For the model matrix K~ = k(X, X; theta) + diag(alpha) (white noise included)
the preconditioner is (docs/design.md, "The matrix-free path")

    P = L_k L_k^T + D,    D = diag(K~) - diag(L_k L_k^T)

L_k (n, k) is the rank-k partial pivoted Cholesky factor of the noise-free
kernel k(X, X) (Harbrecht, Peters & Schneider 2012; Gardner et al. 2018,
sec. 4): each step takes the point with the largest remaining diagonal, asks
the backend for one kernel column (``cross`` on a single point) and removes
it, so the factor costs k columns, O(n k) memory and O(n k^2) flops. D holds
what the factor leaves of K~'s diagonal: the white noise and ``alpha`` plus
the kernel's remaining diagonal, so diag(P) = diag(K~) and D >= the noise.

With the Woodbury identity and C = I_k + L_k^T D^-1 L_k (k x k):

    P^-1 V = D^-1 V - D^-1 L_k C^-1 L_k^T D^-1 V           O(n k) per column
    log|P| = sum_i log D_i + log|C|                         exact

Probes z = L_k e + D^1/2 g with e ~ N(0, I_k), g ~ N(0, I_n) have covariance
P (Gardner et al. 2018; Wenger et al. 2022), so the stochastic Lanczos
quadrature of :mod:`fastgp._solvers.iterative.krylov` estimates log|P^-1 K~| and log|K~| =
log|P| + that; the better P matches K~, the smaller the variance.
"""

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cholesky, solve_triangular

from ..._linalg.lapack import solve_right_lower_transposed

__all__ = ["PivotedCholeskyPreconditioner", "pivoted_cholesky", "build_preconditioner"]

#: A pivot whose remaining noise-free diagonal is at most this fraction of the
#: kernel's largest diagonal ends the factor early: the kernel is explained
#: to rounding (a low-rank kernel, or a length scale far beyond the data).
PIVOT_RELATIVE_FLOOR = 1e-10

#: D is kept at least this fraction of K~'s largest diagonal, so that P
#: stays positive definite where the noise is below rounding.
DIAGONAL_RELATIVE_FLOOR = 1e-14

#: Rows per chunk of C = I + L^T D^-1 L's sum.
_GRAM_ROWS = 4096


def pivoted_cholesky(column, diagonal, rank):
    """Partial pivoted Cholesky of a positive semi-definite matrix K, from
    its columns computed on demand.

    Parameters
    ----------
    column : callable (j) -> ndarray (n,)
        Column j of the noise-free kernel K (its entry j is K_jj).
    diagonal : ndarray (n,) float64
        Pivot scores: the diagonal of the kernel (a WhiteKernel's constant
        noise may be included, a per-sample alpha must not), so that points
        are taken in the order of their remaining noise-free variance and
        the factor stops only where every point is explained to rounding.
        With a per-sample alpha in the scores the next pivot would be the
        noisiest point, whose noise-free remainder can fall below the floor
        while others' have not (Harbrecht, Peters and Schneider 2012 pivot
        on the diagonal of the matrix being factored).
    rank : int
        Largest number of columns.

    Returns
    -------
    L : ndarray (n, r) float64, F-contiguous, r <= rank
        K ~ L L^T, exact on the r pivots' rows and columns.
    """
    n = diagonal.shape[0]
    rank = int(min(rank, n))
    L = np.zeros((n, rank), order="F")
    remaining = np.array(diagonal, dtype=np.float64)  # the scores minus diag(L L^T)
    largest_kernel = 0.0
    for m in range(rank):
        j = int(np.argmax(remaining))
        col = np.asarray(column(j), dtype=np.float64)
        largest_kernel = max(largest_kernel, col[j])
        pivot = col[j] - L[j, :m] @ L[j, :m]   # the noise-free remaining diagonal
        if not pivot > PIVOT_RELATIVE_FLOOR * largest_kernel:
            return np.asfortranarray(L[:, :m])
        L[:, m] = (col - L[:, :m] @ L[j, :m]) / np.sqrt(pivot)
        remaining -= L[:, m] ** 2
        remaining[j] = -np.inf  # never pivot twice on one point
    return L


@dataclass
class PivotedCholeskyPreconditioner:
    """P = L L^T + diag(D) and what the matrix-free path does with it.

    Parameters
    ----------
    L : ndarray (n, k) float64
        Partial pivoted Cholesky factor of the noise-free kernel.
    D : ndarray (n,) float64, > 0
        The diagonal: diag(K~) - diag(L L^T).
    """

    L: np.ndarray
    D: np.ndarray

    def __post_init__(self):
        # C = I + L^T D^-1 L (k x k) = C_L C_L^T; D^-1 L is not kept (k columns
        # of memory). C_L^-1 is kept too, so that each solve is four matrix
        # products in NumPy: SciPy's dpotrs inside conjugate gradients took
        # about 13 ms a call (its OpenBLAS restarting its threads after each
        # product pass), 0.4 s of one 10-D ARD loss+gradient at N = 10,000
        C = np.eye(self.rank)
        for start in range(0, self.n_samples, _GRAM_ROWS):  # no (n, k) temporary
            rows = slice(start, start + _GRAM_ROWS)
            C += self.L[rows].T @ (self.L[rows] / self.D[rows, None])
        self.log_det = float(np.sum(np.log(self.D)))
        self._C_L = self._C_L_inv = None
        if self.rank:
            self._C_L = cholesky(C, lower=True)
            self._C_L_inv = solve_triangular(self._C_L, np.eye(self.rank), lower=True)
            self.log_det += 2.0 * float(np.sum(np.log(np.diag(self._C_L))))

    @property
    def rank(self):
        return self.L.shape[1]

    @property
    def n_samples(self):
        return self.L.shape[0]

    def solve(self, V):
        """P^-1 V for V (n,) or (n, c) float64 (Woodbury); a new array."""
        self._check_not_spent()
        V = np.asarray(V, dtype=np.float64)
        column = V.ndim == 1
        V2 = V.reshape(len(V), -1)
        out = V2 / self.D[:, None]
        if self.rank:
            # C^-1 = C_L^-T C_L^-1
            inner = self._C_L_inv @ (self.L.T @ out)
            correction = self.L @ (self._C_L_inv.T @ inner)     # (n, c)
            correction /= self.D[:, None]
            out -= correction
        return out[:, 0] if column else out

    def into_trace_factor(self):
        """Overwrite L with S = D^-1 L C_L^-T, C = C_L C_L^T (the Cholesky
        factor of C), and return it: (n, k) float64, L's memory. Since
        P^-1 = D^-1 - D^-1 L C^-1 L^T D^-1 and C^-1 = C_L^-T C_L^-1, for any
        symmetric M

            tr(P^-1 M) = sum_i M_ii / D_i - tr(S^T M S),

        a symmetric form that the gradient's bilinear pass takes at half
        the cost of a pair (``FastCovariance.grad_bilinear``'s S), with no
        (n, k) array beside L. The preconditioner is spent: ``solve`` and
        ``probes`` raise afterwards."""
        self._check_not_spent()
        self._spent = True
        S = self.L
        S /= self.D[:, None]
        if self.rank:  # S <- S C_L^-T (BLAS dtrsm from the right, in place)
            S = solve_right_lower_transposed(self._C_L, S)
        self.L = S
        return S

    def _check_not_spent(self):
        if getattr(self, "_spent", False):
            raise RuntimeError("this preconditioner's factor was overwritten by "
                               "into_trace_factor()")

    def probes(self, E, G):
        """Probes with covariance P: L E[:k] + D^1/2 G.

        E : ndarray (k_max, t) standard normal draws, k_max >= k
        G : ndarray (n, t) standard normal draws
        Returns (n, t) float64.
        """
        self._check_not_spent()
        return self.L @ E[: self.rank] + np.sqrt(self.D)[:, None] * G


def build_preconditioner(covariance, theta, diag_add, rank):
    """The preconditioner of K~ = k(X, X; theta) + diag(diag_add).

    covariance : FastCovariance (needs ``cross`` and ``diag`` on its X)
    theta : ndarray (n_theta,) log-space hyperparameters
    diag_add : ndarray (n,) the estimator's alpha
    rank : int, the largest rank k (0: P = diag(K~), Jacobi)

    Returns :class:`PivotedCholeskyPreconditioner`.
    """
    X = covariance.X
    kernel_diagonal = covariance.diag(theta, X)    # white noise included
    diagonal = kernel_diagonal + diag_add

    def column(j):
        return covariance.cross(theta, X[j:j + 1])[:, 0]   # no white noise

    L = (pivoted_cholesky(column, kernel_diagonal, rank) if rank > 0
         else np.zeros((len(X), 0)))
    D = diagonal - np.einsum("ik,ik->i", L, L)
    D = np.maximum(D, DIAGONAL_RELATIVE_FLOOR * float(np.max(diagonal)))
    return PivotedCholeskyPreconditioner(L=L, D=D)

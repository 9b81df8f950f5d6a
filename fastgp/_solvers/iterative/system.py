"""The linear system of the matrix-free path at one theta: K~ = k(X, X;
theta) + diag(alpha), its preconditioner, and batched CG solves with it.

Shared by the iterative objective (:mod:`fastgp._solvers.iterative.objective`) and
iterative prediction (:mod:`fastgp._solvers.iterative.predict`). K~ is never
stored: every product goes through the backend's ``matmat`` (tile by tile on
the fast path; docs/design.md, "The matrix-free path").
"""

from dataclasses import dataclass

import numpy as np

from ..._linalg.lapack import release_blas_before_pass
from .distributed import for_fit
from .krylov import batched_cg
from .preconditioner import build_preconditioner

__all__ = ["SolverOptions", "KernelSystem"]


@dataclass(frozen=True)
class SolverOptions:
    """The matrix-free path's settings (the estimator's parameters).

    cg_tol : float, relative residual ||b - K~ x|| / ||b|| at which CG stops
    max_cg_iter : int, most CG iterations per solve
    n_probes : int, probe vectors t of the stochastic estimates
    preconditioner_rank : int, largest rank k of the pivoted Cholesky
    """

    cg_tol: float = 1e-4
    max_cg_iter: int = 1000
    n_probes: int = 16
    preconditioner_rank: int = 100


class KernelSystem:
    """K~ at one theta, with its preconditioner built on construction.

    Parameters
    ----------
    covariance : FastCovariance
        Backend over the training inputs (``matmat``, ``cross``, ``diag``);
        on the fast path it is wrapped for joblib's workers
        (:func:`fastgp._solvers.iterative.distributed.for_fit`) unless it already is
        (the objective wraps it once per fit, so that its inputs travel once).
    theta : ndarray (n_theta,) log-space hyperparameters
    diag_add : ndarray (n,) float64, the estimator's alpha
    options : SolverOptions
    """

    def __init__(self, covariance, theta, diag_add, options):
        self.covariance = for_fit(covariance)
        self.theta = np.asarray(theta, dtype=np.float64)
        self.diag_add = diag_add
        self.options = options
        self.preconditioner = build_preconditioner(covariance, self.theta, diag_add,
                                                   options.preconditioner_rank)

    def matmat(self, V):
        """K~ V for V (n, c) float64. OpenBLAS's workers, left spinning by the
        preconditioner's products, are sent to sleep first: the Numba pass
        needs their cores (fastgp._linalg.lapack.release_blas_before_pass; at
        N = 5,000, 10-D ARD, one product inside CG took 0.129 s with them
        spinning, 0.073 s alone)."""
        release_blas_before_pass()
        return self.covariance.matmat(self.theta, np.ascontiguousarray(V),
                                      diag_add=self.diag_add)

    def solve(self, B, tol=None, max_iter=None):
        """Batched preconditioned CG for K~ X = B (n, c); a CGResult. ``tol``
        and ``max_iter`` default to the options'. Raises
        NotPositiveDefiniteError where K~ is not positive definite."""
        return batched_cg(self.matmat, B, self.preconditioner.solve,
                          self.options.cg_tol if tol is None else tol,
                          self.options.max_cg_iter if max_iter is None else int(max_iter))

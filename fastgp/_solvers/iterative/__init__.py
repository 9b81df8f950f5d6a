"""The matrix-free path (docs/design.md, "The matrix-free path"): nothing
N x N is stored; every N^2 term is a product of the kernel with a few
vectors, computed tile by tile.

=====================  ========================================================
``preconditioner.py``  the rank-k partial pivoted Cholesky, its Woodbury solve,
                       exact log-determinant and probes
``krylov.py``          batched preconditioned CG and the Lanczos quadrature of
                       its coefficients
``system.py``          K~ at one theta: its preconditioner and CG solves with it
``diagonal.py``        the derivatives of the kernel's diagonal (the gradient's
                       exact trace)
``objective.py``       the estimated NLML and gradient, and the fit's last step
``predict.py``         mean, variance and covariance from CG solves
``distributed.py``     the products as joblib tasks on a cluster's workers
=====================  ========================================================
"""

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..._backend.covariance import make_covariance
from ..._user_warnings import warn_user
from ...memory import estimates
from ..base import Draws, Solver, require_fast_path
from .objective import IterativeNegLogMarginalLikelihood, final_model
from .predict import (PREDICTION_TOL_FACTOR, predict_mean_cov_iterative,
                      predict_mean_var_iterative, prediction_tol)
from .system import KernelSystem, SolverOptions

__all__ = ["IterativeSolver"]


class IterativeSolver(Solver):
    """The matrix-free regression: batched preconditioned CG, the
    log-determinant by stochastic Lanczos quadrature and the gradient by
    probe vectors; no N x N array (L_ is None).

    options : SolverOptions (the estimator's cg_tol, max_cg_iter, n_probes,
        preconditioner_rank)
    """

    name = "iterative"

    def __init__(self, options):
        self.options = options

    @classmethod
    def from_params(cls, params):
        return cls(SolverOptions(cg_tol=float(params["cg_tol"]),
                                 max_cg_iter=int(params["max_cg_iter"]),
                                 n_probes=int(params["n_probes"]),
                                 preconditioner_rank=int(params["preconditioner_rank"])))

    @classmethod
    def accept(cls, covariance, kernel):
        require_fast_path(covariance, kernel, 'solver="iterative"',
                          "the matrix-free path computes kernel products tile by tile "
                          "from the lowered kernel", 'solver="cholesky"')

    # ---------------------------------------------------------------- fit
    def fit_bytes(self, problem):
        return estimates.iterative_fit_bytes(problem.n_samples, problem.n_features,
                                             problem.n_targets, self.options.n_probes,
                                             self.options.preconditioner_rank)

    def remedies(self, problem):
        return ["fit on fewer samples (a random subset, or average neighbouring points)",
                "use a machine with more memory"]

    def draw(self, rng):
        # the probes' draws: one integer from the fit's RandomState, before
        # the restarts' starts are drawn
        return Draws(seed=int(rng.randint(np.iinfo(np.int32).max)))

    def objective(self, covariance, Y, diag_add, draws, verbose=False, mean=None, kept=None):
        return IterativeNegLogMarginalLikelihood(covariance, Y, diag_add, self.options,
                                                 draws.seed, verbose=verbose, mean=mean)

    def final(self, objective, theta, messages):
        return final_model(objective, theta, messages)

    def after_fit(self, objective):
        self._warn_unconverged(objective.n_unconverged, objective.worst_residual,
                               f"{objective.n_unconverged} of the fit's "
                               f"{objective.n_solves} solves")

    # ----------------------------------------------------- outside a fit
    def evaluation_bytes(self, problem, eval_gradient):
        return self.fit_bytes(problem)

    def after_evaluation(self, objective):
        self._warn_unconverged(objective.n_unconverged, objective.worst_residual,
                               "log_marginal_likelihood(theta)")

    def predict(self, fitted, X_query, want):
        system = self._system(fitted)
        A = fitted.A
        if want == "cov":
            mean, cov, residual = self.outside_fit(len(A), predict_mean_cov_iterative, system,
                                                A, X_query)
            self._warn_prediction_residual(residual)
            return mean, cov
        mean, var, residual = self.outside_fit(len(A), predict_mean_var_iterative, system, A,
                                            X_query, want_var=want == "var")
        self._warn_prediction_residual(residual)
        return mean, var

    def predict_cov_bytes(self, n_train, n_query, n_targets, n_features):
        return estimates.iterative_predict_cov_bytes(n_train, n_query, n_targets,
                                                     self.options.preconditioner_rank,
                                                     self.options.max_cg_iter)

    # ------------------------------------------------------------ helpers
    def _system(self, fitted):
        """The fitted K~ and its preconditioner, kept in ``fitted.cache``;
        rebuilt after ``kernel_``, ``alpha`` or the options changed, or after
        unpickling."""
        theta = fitted.kernel.theta
        system = fitted.cache.get("state")
        if (not isinstance(system, KernelSystem) or not np.array_equal(system.theta, theta)
                or not np.array_equal(system.diag_add, fitted.diag_add)
                or system.options != self.options):
            covariance = make_covariance(fitted.kernel, fitted.X, warn=False)
            system = KernelSystem(covariance, theta, fitted.diag_add, self.options)
            fitted.cache["state"] = system
        return system

    def _warn_unconverged(self, n_unconverged, worst_residual, where):
        if n_unconverged:
            warn_user(
                f"Conjugate gradients stopped short of cg_tol={self.options.cg_tol:g} "
                f"after max_cg_iter={self.options.max_cg_iter} iterations in {where}: the "
                f"largest relative residual reached was {worst_residual:.3g}. Increase "
                "max_cg_iter or preconditioner_rank, or loosen cg_tol.",
                ConvergenceWarning)

    def _warn_prediction_residual(self, residual):
        tol = prediction_tol(self.options.cg_tol)
        if residual > tol:
            self._warn_unconverged(
                1, residual, f"the prediction's solve (which runs to "
                f"{PREDICTION_TOL_FACTOR:g} x cg_tol = {tol:g})")

"""The exact path in one N x N buffer of host memory (docs/design.md, "The
one-buffer plan"): the solver of the regression, the GPLVM and the Laplace
classifier on the CPU.

=========================  ====================================================
``objective.py``           the regression's negative log marginal likelihood
                           and gradient
``latent.py``              the GPLVM's objective and the predictive density of
                           new rows
``laplace.py``             the Laplace classifier's approximate likelihood
                           (its predictions: ``_solvers/laplace_predictive.py``)
=========================  ====================================================
"""

from ...memory import estimates
from ..._backend.covariance import make_covariance, warn_slow_kernel
from ..base import MemoryNeed, Solver
from ..kept_factor import final_factor
from .laplace import LaplaceObjective
from .latent import LatentNegLogMarginalLikelihood, predictive_density
from .objective import NegLogMarginalLikelihood
from ..predictive import predict_mean_cov, predict_mean_var
from ..workspace import Workspace

__all__ = ["CholeskySolver"]


class CholeskySolver(Solver):
    """The exact path in one N x N buffer of host memory: dpotrf, dpotrs,
    dpotri and one fused gradient pass per evaluation; the factor kept as
    ``L_``. Serves the regressor, the GPLVM and the Laplace classifier."""

    name = "cholesky"
    restarts_in_workers = True

    @classmethod
    def from_params(cls, params):
        """Built from the estimator's ``get_params()``: the Cholesky path has
        no parameter of its own."""
        return cls()

    @classmethod
    def accept(cls, covariance, kernel):
        if not covariance.is_fast:
            warn_slow_kernel(kernel)

    def fit_bytes(self, problem):
        return estimates.fit_bytes(problem.n_samples, problem.n_features,
                                   problem.n_targets, problem.n_theta, fast=problem.fast)

    def remedies(self, problem):
        return (["fit on fewer samples (a random subset, or average neighbouring points)",
                 "use a machine with more memory"]
                + ([] if problem.fast else
                   ["use a kernel on fastgp's fast path, whose gradient needs no "
                    "(N, N, n_hyperparameters) tensor"]))

    def objective(self, covariance, Y, diag_add, draws, verbose=False, mean=None, kept=None):
        return NegLogMarginalLikelihood(covariance, Y, diag_add, Workspace(len(Y)),
                                        mean=mean)

    def final(self, objective, theta, messages):
        return final_factor(objective, theta, messages)

    def evaluation_bytes(self, problem, eval_gradient):
        return estimates.log_marginal_likelihood_bytes(
            problem.n_samples, problem.n_targets, problem.n_theta, eval_gradient,
            fast=problem.fast)

    def predict(self, fitted, X_query, want):
        if want == "cov":
            covariance = make_covariance(fitted.kernel, fitted.X, warn=False)
            return self.outside_fit(len(fitted.A), predict_mean_cov, covariance,
                                    fitted.kernel.theta, fitted.L, fitted.A, X_query)
        return self.predict_from_factor(fitted.kernel, fitted.X, fitted.L, fitted.A, X_query,
                                        want_var=want == "var")

    def predict_cov_bytes(self, n_train, n_query, n_targets, n_features):
        return estimates.predict_cov_bytes(n_train, n_query, n_targets)

    # ------------------------------------------------ the other estimators
    def latent_objective(self, kernel, Y, n_components, diag_add):
        return LatentNegLogMarginalLikelihood(kernel, Y, n_components, diag_add,
                                              Workspace(len(Y)))

    def latent_fit_memory(self, n_samples, n_features, n_components, objective):
        return MemoryNeed(host=estimates.gplvm_fit_bytes(
            n_samples, n_features, n_components, objective.covariance.n_blocks))

    def latent_density(self, kernel, X_train, L, A, Y_new):
        return predictive_density(kernel, X_train, L, A, Y_new)

    def predict_from_factor(self, kernel, X_train, L, A, X_query, want_var):
        covariance = make_covariance(kernel, X_train, warn=False)
        return self.outside_fit(len(A), predict_mean_var, covariance, kernel.theta, L, A,
                                X_query, want_var=want_var)

    def laplace_objective(self, covariance, y, max_iter, warm_start, f_cached=None):
        return LaplaceObjective(covariance, y, Workspace(len(y)), max_iter=max_iter,
                                warm_start=warm_start, f_cached=f_cached)

"""The exact path in one N x N buffer (docs/design.md, "The one-buffer plan"):
the regression's solver, and the one-buffer objectives of the GPLVM and the
Laplace classifier.

===================  ==========================================================
``workspace.py``     the one N x N buffer a fit reuses
``objective.py``     the regression's negative log marginal likelihood and gradient
``latent.py``        the GPLVM's objective and the predictive density of new rows
``laplace.py``       the Laplace classifier's approximate likelihood and predictions
``final.py``         the factor of the model a fit keeps, with jitter
===================  ==========================================================
"""

from ...memory import estimates
from ..._backend.covariance import make_covariance, warn_slow_kernel
from ..base import Solver, on_idle_cores
from .final import final_factor
from .objective import NegLogMarginalLikelihood
from ..predictive import predict_mean_cov, predict_mean_var
from .workspace import Workspace

__all__ = ["CholeskySolver"]


class CholeskySolver(Solver):
    """The exact regression in one N x N buffer: dpotrf, dpotrs, dpotri and
    one fused gradient pass per evaluation; the factor kept as ``L_``."""

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

    def objective(self, covariance, Y, diag_add, seed, verbose=False):
        return NegLogMarginalLikelihood(covariance, Y, diag_add, Workspace(len(Y)))

    def final(self, objective, theta, messages):
        return final_factor(objective, theta, messages)

    def evaluation_bytes(self, problem, eval_gradient):
        return estimates.log_marginal_likelihood_bytes(
            problem.n_samples, problem.n_targets, problem.n_theta, eval_gradient,
            fast=problem.fast)

    def predict(self, fitted, X_query, want):
        covariance = make_covariance(fitted.kernel, fitted.X, warn=False)
        theta = fitted.kernel.theta
        if want == "cov":
            return on_idle_cores(len(fitted.A), predict_mean_cov, covariance, theta,
                                 fitted.L, fitted.A, X_query)
        return on_idle_cores(len(fitted.A), predict_mean_var, covariance, theta, fitted.L,
                             fitted.A, X_query, want_var=want == "var")

    def predict_cov_bytes(self, n_train, n_query, n_targets):
        return estimates.predict_cov_bytes(n_train, n_query, n_targets)

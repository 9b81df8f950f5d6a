"""fastgp's matrix-free solver: the objective an optimiser step calls with
``solver="iterative"``.

``loss_grad`` is :class:`fastgp._solvers.iterative.objective.IterativeNegLogMarginalLikelihood`
with the estimator's default options (CG tolerance, probes, preconditioner
rank) and probes seeded once, exactly what
``GaussianProcessRegressor(solver="iterative").fit`` evaluates per L-BFGS-B
step; ``fit`` is that estimator. Its values are stochastic estimates of the
others' (docs/design.md, "The matrix-free path").
"""


from .._problems import ALPHA
from ._base import LBFGSBCounter, fit_estimator
from .fastgp_engine import FastGP

__all__ = ["FastGPIterative"]


class FastGPIterative(FastGP):
    name = "fastgp-iterative"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        from fastgp._solvers.iterative.system import SolverOptions
        from fastgp.memory import iterative_fit_bytes

        options = SolverOptions()
        return 1.5 * iterative_fit_bytes(n, n_features, 1, options.n_probes,
                                         options.preconditioner_rank) + 64e6

    def prepare(self, problem):
        from fastgp._backend.covariance import make_covariance
        from fastgp._solvers.iterative.objective import IterativeNegLogMarginalLikelihood
        from fastgp._solvers.iterative.system import SolverOptions

        self.problem = problem
        covariance = make_covariance(problem.kernel, problem.X)
        if not covariance.is_fast:
            raise RuntimeError(f"{problem.kernel} is not on fastgp's fast path")
        self.objective = IterativeNegLogMarginalLikelihood(
            covariance, problem.Y, ALPHA, SolverOptions(), seed=0)

    def fit(self, max_iter=None):
        from fastgp import GaussianProcessRegressor

        self.objective = None
        counter = LBFGSBCounter(max_iter)
        gpr = GaussianProcessRegressor(self.problem.kernel, alpha=ALPHA, optimizer=counter,
                                       solver="iterative", random_state=0)
        return fit_estimator(gpr, counter, self.problem.X, self.problem.Y)

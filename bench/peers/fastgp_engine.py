"""fastgp: the one-buffer objective an optimiser step calls.

``loss_grad`` is :class:`fastgp._solvers.cholesky.objective.NegLogMarginalLikelihood` with one
:class:`~fastgp._solvers.workspace.Workspace` reused across calls, exactly what
:meth:`fastgp.GaussianProcessRegressor.fit` evaluates per L-BFGS-B step;
``fit`` is the estimator itself (its final factorisation and kept ``L_``
included).
"""


from .._problems import ALPHA
from ._base import Adapter, LBFGSBCounter, fit_estimator

__all__ = ["FastGP"]


class FastGP(Adapter):
    name = "fastgp"
    package = "fastgp"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 1.05 + 64e6

    @staticmethod
    def between_calls():
        """In a fit, each evaluation starts where the previous one ended: with
        OpenBLAS's workers asleep (the objective puts them to sleep after its
        last LAPACK call). In the interleaved rounds it would start right
        after the floor's dpotri, with the workers still spinning through its
        Numba fill, about 50 ms at N = 5,000 (docs/benchmarks.md, "The exact
        path against the LAPACK floor and the peers")."""
        from fastgp._linalg.blas_pool import release_blas_workers

        release_blas_workers()

    def prepare(self, problem):
        from fastgp._backend.covariance import make_covariance
        from fastgp._solvers.workspace import Workspace
        from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

        self.problem = problem
        covariance = make_covariance(problem.kernel, problem.X)
        if not covariance.is_fast:
            raise RuntimeError(f"{problem.kernel} is not on fastgp's fast path")
        self.objective = NegLogMarginalLikelihood(covariance, problem.Y, ALPHA,
                                                  Workspace(problem.n))

    def loss_grad(self, theta):
        return self.objective(theta)

    def loss(self, theta):
        return self.objective.value(theta)

    def fit(self, max_iter=None):
        from fastgp import GaussianProcessRegressor

        self.objective = None  # the estimator allocates its own workspace
        counter = LBFGSBCounter(max_iter)
        gpr = GaussianProcessRegressor(self.problem.kernel, alpha=ALPHA, optimizer=counter)
        return fit_estimator(gpr, counter, self.problem.X, self.problem.Y)

"""scikit-learn's GaussianProcessRegressor: ``log_marginal_likelihood(theta,
eval_gradient=True)``, the call its fit makes per optimiser step (the
(n, n, n_theta) gradient tensor, K^-1 and alpha alpha^T all in memory)."""


from .._problems import ALPHA
from ._base import Adapter, LBFGSBCounter, fit_estimator

__all__ = ["Sklearn"]


class Sklearn(Adapter):
    name = "sklearn"
    package = "sklearn"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        # K, L, K^-1, alpha alpha^T, the gradient tensor and its temporaries
        # (products and sums stack copies: about twice n_theta), and, for
        # per-dimension length scales, the (n, n, d) squared differences twice
        ard = 2 * n_features if n_features > 1 else 0
        return 8.0 * n * n * (4 + 2 * n_theta + ard) + 100e6

    def prepare(self, problem):
        from sklearn.base import clone
        from sklearn.gaussian_process import GaussianProcessRegressor

        self.problem = problem
        # the attributes log_marginal_likelihood reads, set without fit() so
        # that no factor of a previous fit sits in memory during the call
        gpr = GaussianProcessRegressor(problem.kernel, alpha=ALPHA, optimizer=None)
        gpr.kernel_ = clone(problem.kernel)
        gpr.X_train_ = problem.X
        gpr.y_train_ = problem.Y
        self.gpr = gpr

    def loss_grad(self, theta):
        value, grad = self.gpr.log_marginal_likelihood(theta, eval_gradient=True,
                                                       clone_kernel=False)
        return -value, -grad

    def loss(self, theta):
        return -self.gpr.log_marginal_likelihood(theta, clone_kernel=False)

    def fit(self, max_iter=None):
        from sklearn.gaussian_process import GaussianProcessRegressor

        self.gpr = None
        counter = LBFGSBCounter(max_iter)
        gpr = GaussianProcessRegressor(self.problem.kernel, alpha=ALPHA, optimizer=counter)
        return fit_estimator(gpr, counter, self.problem.X, self.problem.Y)

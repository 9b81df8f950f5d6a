"""Binary Gaussian-process classification (the ``gpc`` problem): fastgp's
GaussianProcessClassifier against scikit-learn's.

Both evaluate the Laplace approximation's log marginal likelihood
(Rasmussen & Williams 2006, eq. 3.32, Newton's mode by Alg. 3.1) and its
gradient (Alg. 5.1) through the estimator's public
``log_marginal_likelihood(theta, eval_gradient=True)``: the call an
optimiser step makes. The model is fitted once with ``optimizer=None`` in
``prepare``, so its kept N x N factor is part of the memory figure, as it is
of a fit. ``fit`` runs the estimator itself with the shared L-BFGS-B driver
(:class:`~bench.peers._base.LBFGSBCounter`) as its callable optimizer.
"""


from ._base import Adapter, LBFGSBCounter, fit_estimator

__all__ = ["FastGPClassifier", "SklearnClassifier"]


class _ClassifierAdapter(Adapter):
    problems = {"gpc"}

    @staticmethod
    def _estimator_class():
        raise NotImplementedError

    def prepare(self, problem):
        self.problem = problem
        Estimator = self._estimator_class()
        self.model = Estimator(problem.kernel, optimizer=None).fit(problem.X, problem.Y)

    def loss_grad(self, theta):
        value, grad = self.model.log_marginal_likelihood(theta, eval_gradient=True)
        return -value, -grad

    def loss(self, theta):
        return -self.model.log_marginal_likelihood(theta)

    def fit(self, max_iter=None):
        self.model = None  # the fit keeps its own factor
        counter = LBFGSBCounter(max_iter)
        Estimator = self._estimator_class()
        return fit_estimator(Estimator(self.problem.kernel, optimizer=counter), counter,
                             self.problem.X, self.problem.Y)


class FastGPClassifier(_ClassifierAdapter):
    name = "fastgp-gpc"
    package = "fastgp"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        # the fitted model's kept factor and the call's own N x N buffer
        return 8.0 * n * n * 2.1 + 64e6

    @staticmethod
    def _estimator_class():
        from fastgp import GaussianProcessClassifier

        return GaussianProcessClassifier


class SklearnClassifier(_ClassifierAdapter):
    name = "sklearn-gpc"
    package = "sklearn"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        # the kept factor, then per call K, L, R, C, their products and the
        # (n, n, n_theta) gradient tensor with its temporaries: about 12 x 8 n^2
        # for three hyperparameters
        return 8.0 * n * n * (6 + 2 * n_theta) + 100e6

    @staticmethod
    def _estimator_class():
        from sklearn.gaussian_process import GaussianProcessClassifier

        return GaussianProcessClassifier

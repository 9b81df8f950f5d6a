"""GPy: ``GPy.models.GPRegression`` with an RBF (ARD for the 10-D problem)
or Matern32 kernel; the noise is the Gaussian likelihood's variance.

GPy's parameters are natural-scale (its optimiser sees them through a
softplus); they are set here to exp(theta) and GPy's log-likelihood gradient
is mapped to log space by the chain rule, d/dtheta = p d/dp. GPy adds 1e-8 to
the diagonal beside the noise (scikit-learn and fastgp add 1e-10), so its
values differ from the others' in about the eighth digit.
"""

import numpy as np

from ._base import Adapter

__all__ = ["GPyRegression", "gpy_kernel"]


def gpy_kernel(problem_name, n_features):
    """The GPy kernel of ``problem_name`` at scikit-learn's start (all 1.0
    except the Seattle start; variances and length scales set later)."""
    import GPy

    if problem_name == "seattle":
        return GPy.kern.Matern32(input_dim=n_features)
    ard = problem_name in ("ard10", "gplvm")
    return GPy.kern.RBF(input_dim=n_features, ARD=ard)


class GPyRegression(Adapter):
    name = "gpy"
    package = "GPy"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        ard = 2 if n_features > 1 else 0
        return 8.0 * n * n * (10 + ard) + 200e6

    def prepare(self, problem):
        import GPy

        self.problem = problem
        Y = problem.Y.reshape(problem.n, -1)
        self.model = GPy.models.GPRegression(problem.X, Y,
                                             kernel=gpy_kernel(problem.name, problem.n_features))
        self._set(problem.theta0)

    def _set(self, theta):
        # param order: kernel variance, length scale(s), likelihood variance:
        # scikit-learn's order for C * k + WhiteKernel
        self.params = np.exp(np.asarray(theta, dtype=np.float64))
        self.model[:] = self.params

    def loss_grad(self, theta):
        self._set(theta)
        return -float(self.model.log_likelihood()), -self.model.gradient * self.params

    def loss(self, theta):
        self._set(theta)
        return -float(self.model.log_likelihood())

"""GPLVM adapters (Lawrence 2005): the free variables are the latent points
X (n, Q) and the kernel's log-space theta, concatenated as
``z = [X.ravel(), theta]``; the loss is the negative log marginal likelihood
of all D columns of Y, 0.5 tr(Y^T K^-1 Y) + D/2 log|K| + n D/2 log 2 pi.

- :class:`JaxGPLVM`: ``jax.value_and_grad`` of the Cholesky loss over z.
- :class:`GPyGPLVM`: ``GPy.models.GPLVM`` with an ARD RBF kernel, X started
  at the same PCA points.
- :class:`FastGPLVM`: fastgp's GPLVM objective; where it is
  missing the comparison lists the row as skipped.
"""

import numpy as np

from .._problems import ALPHA, make_problem
from ._base import Adapter
from .fastgp_engine import FastGP
from .gpy_gpr import gpy_kernel
from .jax_gpr import enable_x64, jax_nlml

__all__ = ["JaxGPLVM", "GPyGPLVM", "FastGPLVM"]


class _GPLVMAdapter(Adapter):
    problems = {"gplvm"}

    def start(self):
        return np.concatenate([self.problem.X.ravel(), self.problem.theta0])

    def bounds(self):
        n_latent = self.problem.X.size
        latent = np.tile([-np.inf, np.inf], (n_latent, 1))
        return np.vstack([latent, self.problem.bounds])

    def _split(self, z):
        z = np.asarray(z, dtype=np.float64)
        n_latent = self.problem.X.size
        return z[:n_latent].reshape(self.problem.X.shape), z[n_latent:]


class JaxGPLVM(_GPLVMAdapter):
    name = "jax-gplvm"
    package = "jax"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 10 + 300e6

    def _compile(self, n, n_components, n_outputs, n_theta):
        jax = enable_x64()
        import jax.numpy as jnp

        n_latent = n * n_components

        def f(z, Y):
            X = z[:n_latent].reshape(n, n_components)
            return jax_nlml(z[n_latent:], X, Y, "rbf")

        shapes = (jax.ShapeDtypeStruct((n_latent + n_theta,), jnp.float64),
                  jax.ShapeDtypeStruct((n, n_outputs), jnp.float64))
        self._vg = jax.jit(jax.value_and_grad(f)).lower(*shapes).compile()
        self._v = jax.jit(f).lower(*shapes).compile()

    def warm_up(self, problem_name, n):
        p = make_problem(problem_name, 16)  # shapes only
        self._compile(n, p.X.shape[1], p.Y.shape[1], p.theta0.size)

    def prepare(self, problem):
        import jax.numpy as jnp

        self.problem = problem
        if getattr(self, "_vg", None) is None:
            self._compile(problem.n, problem.X.shape[1], problem.Y.shape[1],
                          problem.theta0.size)
        self.Y = jnp.asarray(problem.Y)

    def loss_grad(self, z):
        value, grad = self._vg(np.asarray(z, dtype=np.float64), self.Y)
        return float(value), np.asarray(grad)

    def loss(self, z):
        return float(self._v(np.asarray(z, dtype=np.float64), self.Y))


class GPyGPLVM(_GPLVMAdapter):
    name = "gpy-gplvm"
    package = "GPy"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 12 + 200e6

    def prepare(self, problem):
        import GPy

        self.problem = problem
        self.model = GPy.models.GPLVM(problem.Y, problem.X.shape[1], X=problem.X.copy(),
                                      kernel=gpy_kernel("gplvm", problem.X.shape[1]))
        self._set(self.start())

    def _set(self, z):
        # GPy's parameter order: latent X (C order), kernel variance, length
        # scales, likelihood variance
        X, theta = self._split(z)
        self.params = np.exp(theta)
        self.model[:] = np.concatenate([X.ravel(), self.params])

    def loss_grad(self, z):
        self._set(z)
        g = -np.array(self.model.gradient, dtype=np.float64)
        n_latent = self.problem.X.size
        g[n_latent:] *= self.params
        return -float(self.model.log_likelihood()), g

    def loss(self, z):
        self._set(z)
        return -float(self.model.log_likelihood())


class FastGPLVM(_GPLVMAdapter):
    """fastgp's GPLVM objective over z = [X.ravel(), theta]:
    :class:`fastgp._solvers.cholesky.latent.LatentNegLogMarginalLikelihood` with one
    workspace reused across calls, what ``fastgp.GPLVM.fit`` evaluates per
    optimiser step. Reported unavailable where that module is missing."""

    name = "fastgp-gplvm"
    package = "fastgp"
    between_calls = staticmethod(FastGP.between_calls)

    @classmethod
    def unavailable(cls):
        try:
            from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood  # noqa: F401
        except ImportError as exc:
            return f"fastgp's GPLVM objective is not available ({exc})"[:200]
        return None

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 1.05 + 64e6

    def prepare(self, problem):
        from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood
        from fastgp._solvers.workspace import Workspace

        self.problem = problem
        self.objective = LatentNegLogMarginalLikelihood(
            problem.kernel, problem.Y, problem.X.shape[1], ALPHA, Workspace(problem.n))

    def loss_grad(self, z):
        return self.objective(z)

    def loss(self, z):
        return self.objective.value(z)

"""JAX: ``jax.value_and_grad`` of a Cholesky-based negative log marginal
likelihood, jitted, float64 (``jax_enable_x64``), CPU. This is how a JAX user
writes an exact GP (tinygp's solver does the same): reverse mode keeps the
forward pass's N x N intermediates (K, its factor, the triangular solves)
alive for the backward pass.
"""

import math

import numpy as np

from .._problems import ALPHA
from ._base import Adapter

__all__ = ["JaxCholesky", "jax_kernel_matrix", "enable_x64"]

_LOG_2PI = math.log(2.0 * math.pi)


def enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    return jax


def jax_kernel_matrix(theta, X, family):
    """k(X, X) + (noise + ALPHA) I for theta = [log c, log l (1 or d), log
    noise] (scikit-learn's order for C * k + WhiteKernel); ``family`` is
    "rbf" or "matern15"."""
    import jax.numpy as jnp

    c = jnp.exp(theta[0])
    ls = jnp.exp(theta[1:-1])
    noise = jnp.exp(theta[-1])
    Z = X / ls
    diff = Z[:, None, :] - Z[None, :, :]
    r2 = jnp.sum(diff * diff, axis=-1)
    if family == "rbf":
        K = c * jnp.exp(-0.5 * r2)
    else:  # Matern nu = 3/2; sqrt at r = 0 has no gradient: guard it
        r = jnp.sqrt(jnp.where(r2 > 0, r2, 1.0)) * (r2 > 0)
        s = math.sqrt(3.0) * r
        K = c * (1.0 + s) * jnp.exp(-s)
    return K + (noise + ALPHA) * jnp.eye(X.shape[0], dtype=X.dtype)


def _family(problem_name):
    return "matern15" if problem_name == "seattle" else "rbf"


def jax_nlml(theta, X, Y, family):
    """0.5 tr(Y^T K^-1 Y) + T/2 log|K| + n T/2 log 2 pi by Cholesky."""
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    K = jax_kernel_matrix(theta, X, family)
    L = jnp.linalg.cholesky(K)
    Y2 = Y.reshape(Y.shape[0], -1)
    A = cho_solve((L, True), Y2)
    n, T = Y2.shape
    return (0.5 * jnp.sum(Y2 * A) + T * jnp.sum(jnp.log(jnp.diagonal(L)))
            + 0.5 * n * T * _LOG_2PI)


class JaxCholesky(Adapter):
    name = "jax"
    package = "jax"

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 10 + 300e6

    def _compile(self, problem_name, n, n_features, n_outputs):
        jax = enable_x64()
        import functools

        import jax.numpy as jnp

        f = functools.partial(jax_nlml, family=_family(problem_name))
        shapes = (jax.ShapeDtypeStruct((self._n_theta(problem_name, n_features),), jnp.float64),
                  jax.ShapeDtypeStruct((n, n_features), jnp.float64),
                  jax.ShapeDtypeStruct((n,) if n_outputs == 1 else (n, n_outputs),
                                       jnp.float64))
        # ahead-of-time compilation at the real shapes, before any data exists
        self._vg = jax.jit(jax.value_and_grad(f)).lower(*shapes).compile()
        self._v = jax.jit(f).lower(*shapes).compile()

    @staticmethod
    def _n_theta(problem_name, n_features):
        return 2 + (n_features if problem_name in ("ard10", "gplvm") else 1)

    def warm_up(self, problem_name, n):
        from .._problems import PROBLEMS

        self._compile(problem_name, n, PROBLEMS[problem_name]["n_features"], 1)

    def prepare(self, problem):
        import jax.numpy as jnp

        self.problem = problem
        if getattr(self, "_vg", None) is None:
            self._compile(problem.name, problem.n, problem.n_features, problem.n_outputs)
        self.X = jnp.asarray(problem.X)
        self.Y = jnp.asarray(problem.Y)

    def loss_grad(self, theta):
        value, grad = self._vg(np.asarray(theta, dtype=np.float64), self.X, self.Y)
        return float(value), np.asarray(grad)

    def loss(self, theta):
        return float(self._v(np.asarray(theta, dtype=np.float64), self.X, self.Y))

"""The general path: the scikit-learn kernel object itself, for kernels that
cannot be lowered (a user's own subclass, PairwiseKernel, Matern with
another nu, CompoundKernel, kernels on non-vector inputs). It gives the
fast path's numbers at the price of scikit-learn's memory: the gradient
needs the (N, N, n_theta) tensor and a full N x N W beside the workspace.
"""

import numpy as np

from .products import finish_matmat

__all__ = ["KernelObjectCovariance", "kernel_at"]


def kernel_at(kernel, theta):
    """``kernel`` itself where ``theta`` is its own (no exp/log round trip to
    move the last bit), else a clone with ``theta``."""
    theta = np.asarray(theta, dtype=np.float64)
    return kernel if np.array_equal(theta, kernel.theta) else kernel.clone_with_theta(theta)


class KernelObjectCovariance:
    """General path: evaluates the scikit-learn kernel object."""

    is_fast = False

    def __init__(self, kernel, X):
        self.kernel = kernel
        self.X = X

    @property
    def n_theta(self):
        return self.kernel.n_dims

    def _at(self, theta):
        return self.kernel.clone_with_theta(theta)

    def diag(self, theta, X_query):
        return kernel_at(self.kernel, theta).diag(X_query)

    def fill_lower(self, theta, diag_add, K_out):
        K_out[...] = self._at(theta)(self.X)
        K_out[np.diag_indices_from(K_out)] += diag_add

    def grad_trace(self, theta, Kinv_lower, A):
        W = np.tril(Kinv_lower)
        W += np.tril(W, -1).T
        W *= A.shape[1]
        W -= A @ A.T
        return np.einsum("ij,ijp->p", W, self._gradient_tensor(theta))

    def cross(self, theta, X_query):
        return np.asfortranarray(self._at(theta)(self.X, X_query))

    def prior_cov(self, theta, X_query):
        return self._at(theta)(X_query)

    def _gradient_tensor(self, theta):
        """scikit-learn's K_gradient (n, n, n_theta): the memory this path costs."""
        n = len(self.X)
        _, K_gradient = self._at(theta)(self.X, eval_gradient=True)
        return K_gradient.reshape(n, n, -1)

    def matmat(self, theta, V, diag_add=None):
        KV = self._at(theta)(self.X) @ np.asarray(V, dtype=np.float64).reshape(len(V), -1)
        return finish_matmat(KV, V, diag_add)

    def dmatmat(self, theta, V):
        return np.einsum("ijp,j...->pi...", self._gradient_tensor(theta),
                         np.asarray(V, dtype=np.float64))

    def grad_bilinear(self, theta, P, Q, S=None, s_scale=1.0):
        dK = self._gradient_tensor(theta)
        out = np.einsum("iq,ijp,jq->p", np.asarray(P, dtype=np.float64).reshape(len(P), -1),
                        dK, np.asarray(Q, dtype=np.float64).reshape(len(Q), -1))
        if S is not None:
            S = np.asarray(S, dtype=np.float64)
            out += s_scale * np.einsum("iq,ijp,jq->p", S, dK, S)
        return out

    def cross_matmat(self, theta, X_query, V):
        return self._at(theta)(X_query, self.X) @ np.asarray(V, dtype=np.float64)

"""Covariance backends: who fills K, its cross-covariance and the gradient trace.

:class:`FastCovariance` runs a lowered :class:`~fastgp.lowering.KernelProgram`
through the parallel Numba passes of :mod:`fastgp._engine.passes`: no N x N
temporaries, the gradient fused into one pass over K^-1's lower triangle.

:class:`KernelObjectCovariance` calls the scikit-learn kernel object itself,
for kernels that cannot be lowered (a user's own subclass, PairwiseKernel,
Matern with another nu, CompoundKernel, kernels on non-vector inputs). It
gives the same numbers at the price of scikit-learn's memory: the gradient
needs the (N, N, n_theta) tensor and a full N x N W beside the workspace.

Both expose the same four methods, so the objective and prediction do not care
which one they hold.
"""

import warnings

import numpy as np

from ._engine import passes as jitted
from ._engine.config import PARALLEL_LOCK
from .lowering import fast_path_summary, lower_kernel

__all__ = ["make_covariance", "FastCovariance", "KernelObjectCovariance",
           "SlowKernelWarning"]


class SlowKernelWarning(UserWarning):
    """The kernel is evaluated through its Python object, not fastgp's fast path."""


def make_covariance(kernel, X, warn=True):
    """The backend for ``kernel`` on training inputs ``X``.

    X : ndarray of shape (n_samples, n_features) float64 for the fast path;
        anything the kernel accepts otherwise.
    warn : bool
        Whether to emit :class:`SlowKernelWarning` when the kernel is not on
        the fast path (estimators warn once per fit, not on every predict).
    """
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64:
        program = lower_kernel(kernel, X.shape[1])
        if program is not None:
            return FastCovariance(kernel, program, X)
    if warn:
        warnings.warn(
            f"{kernel!r} is not on fastgp's fast path; fastgp calls the kernel "
            "object itself, which costs scikit-learn's memory for the gradient: "
            "an (n_samples, n_samples, n_hyperparameters) tensor plus two "
            "n_samples x n_samples matrices beside the workspace. The fast path "
            f"covers {fast_path_summary()}; see docs/adding_a_kernel.md.",
            SlowKernelWarning,
            stacklevel=3,
        )
    return KernelObjectCovariance(kernel, X)


def _kernel_input(X):
    """``X`` as the jitted passes take it: float64, C-contiguous, writeable.

    Numba compiles (and caches) one specialisation per argument type, and a
    read-only array (a joblib memmap, ``writeable=False``, a broadcast view)
    is a different type: predicting on one compiled fill_cross_cov and
    eval_tile again, ~25 s on the 2-core CI machine. Copying an (n, d) input
    costs O(n d) and keeps one compiled specialisation per routine.
    """
    return np.require(X, dtype=np.float64, requirements=["C_CONTIGUOUS", "WRITEABLE"])


class FastCovariance:
    """Fast path: a lowered kernel program over training inputs X (n, d)."""

    is_fast = True

    def __init__(self, kernel, program, X):
        self.kernel = kernel
        self.program = program
        self.X = _kernel_input(X)
        self.bounds = jitted.column_blocks(self.X.shape[0])

    @property
    def n_theta(self):
        return self.program.n_theta

    def fill_lower(self, theta, diag_add, K_out):
        """Write tril(k(X, X)) + diag(diag_add) at ``theta`` into K_out
        (n, n) F-contiguous; the strict upper triangle is not touched."""
        p = self.program
        with PARALLEL_LOCK:
            jitted.fill_cov_lower(self.X, p.ops, p.op_float, p.params(theta),
                                  p.theta_of_param, p.stack_depth, diag_add,
                                  self.bounds, K_out)

    def grad_trace(self, theta, Kinv_lower, A):
        """sum_ij W_ij dK_ij/dtheta (n_theta,) with W = T K^-1 - A A^T; reads
        only the lower triangle of Kinv_lower (n, n) F-contiguous."""
        p = self.program
        partial = np.empty((self.bounds.size - 1, p.n_theta))
        with PARALLEL_LOCK:
            jitted.grad_trace_lower(self.X, p.ops, p.op_float, p.params(theta),
                                    p.theta_of_param, p.stack_depth, p.n_theta,
                                    Kinv_lower, np.ascontiguousarray(A),
                                    self.bounds, partial)
        return partial.sum(axis=0)

    def cross(self, theta, X_query):
        """k(X, X_query) as an (n, m) F-contiguous array (no white noise)."""
        p = self.program
        Xq = _kernel_input(X_query)
        out = np.empty((self.X.shape[0], Xq.shape[0]), order="F")
        with PARALLEL_LOCK:
            jitted.fill_cross_cov(self.X, Xq, p.ops, p.op_float, p.params(theta),
                                  p.theta_of_param, p.stack_depth, out)
        return out

    def prior_cov(self, theta, X_query):
        """k(X_query, X_query) (m, m), white noise on the diagonal included,
        as scikit-learn's ``kernel(X)``."""
        p = self.program
        Xq = _kernel_input(X_query)
        m = Xq.shape[0]
        out = np.empty((m, m), order="F")
        with PARALLEL_LOCK:
            jitted.fill_cov_lower(Xq, p.ops, p.op_float, p.params(theta),
                                  p.theta_of_param, p.stack_depth, np.zeros(m),
                                  jitted.column_blocks(m), out)
        lower = np.tril_indices(m, -1)
        out[lower[1], lower[0]] = out[lower]
        return out


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

    def fill_lower(self, theta, diag_add, K_out):
        K_out[...] = self._at(theta)(self.X)
        K_out[np.diag_indices_from(K_out)] += diag_add

    def grad_trace(self, theta, Kinv_lower, A):
        n = Kinv_lower.shape[0]
        W = np.tril(Kinv_lower)
        W += np.tril(W, -1).T
        W *= A.shape[1]
        W -= A @ A.T
        _, K_gradient = self._at(theta)(self.X, eval_gradient=True)
        return np.einsum("ij,ijp->p", W, K_gradient.reshape(n, n, -1))

    def cross(self, theta, X_query):
        return np.asfortranarray(self._at(theta)(self.X, X_query))

    def prior_cov(self, theta, X_query):
        return self._at(theta)(X_query)

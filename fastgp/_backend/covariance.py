"""The backend: the one door between fastgp's objectives and its jitted passes,
split by family (docs/design.md, "The package"). Nothing outside
``fastgp/_backend`` calls into :mod:`fastgp._engine`.

This module holds the dense family, what the one-buffer plan reads, and the
choice of backend (:func:`make_covariance`):

================================  =============================================
``fill_lower``                    tril(K) + diag(alpha) into the N x N workspace
``grad_trace``                    sum_ij W_ij dK_ij/dtheta (R&W 2006, eq. 5.9)
``cross``                         k(X, X*) for prediction
``prior_cov``                     k(X*, X*) for the joint predictive covariance
``diag``                          k(x*, x*) for the predictive variance
================================  =============================================

:class:`FastCovariance` runs a lowered :class:`~fastgp._backend.lowering.KernelProgram`
(``program.args(theta)`` is what every pass takes) through the parallel
Numba passes of :mod:`fastgp._engine.passes`: no N x N temporaries, the
gradient fused into one pass over K^-1's lower triangle. It also has the
products with vectors (:mod:`fastgp._backend.products`) and Vecchia's blocks
(:mod:`fastgp._backend.vecchia_blocks`); the GPLVM's input derivatives are
:class:`fastgp._backend.latent.LatentCovariance`'s, a device's buffer is
:mod:`fastgp._backend.device_covariance`'s, and a kernel that cannot be
lowered runs through :class:`fastgp._backend.kernel_object.KernelObjectCovariance`,
which answers the same dense and product methods at scikit-learn's memory.

Every parallel pass runs inside :func:`fastgp._engine.config.parallel_region`
(under its lock: Numba's workqueue is not thread-safe; with Numba's threads
started as it says).
"""

import numpy as np

from .._engine import passes as jitted
from .._engine.config import parallel_region
from .._user_warnings import warn_user
from ..exceptions import SlowKernelWarning
from .inputs import kernel_input
from .kernel_object import KernelObjectCovariance, kernel_at
from .lowering import fast_path_summary, lower_kernel
from .products import ProductMethods
from .vecchia_blocks import VecchiaMethods

__all__ = ["make_covariance", "warn_slow_kernel", "kernel_input", "FastCovariance",
           "KernelObjectCovariance"]


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
        warn_slow_kernel(kernel)
    return KernelObjectCovariance(kernel, X)


def warn_slow_kernel(kernel):
    """The :class:`~fastgp.exceptions.SlowKernelWarning` for ``kernel``, which
    is not on the fast path: what it costs and what the fast path covers."""
    warn_user(
        f"{kernel!r} is not on fastgp's fast path; fastgp calls the kernel "
        "object itself, which costs scikit-learn's memory for the gradient: "
        "an (n_samples, n_samples, n_hyperparameters) tensor plus two "
        "n_samples x n_samples matrices beside the workspace. The fast path "
        f"covers {fast_path_summary()}; see docs/adding_a_kernel.md.",
        SlowKernelWarning,
    )


class FastCovariance(ProductMethods, VecchiaMethods):
    """Fast path: a lowered kernel program over training inputs X (n, d).

    ``X_T`` (d, n) holds the inputs as the passes read them
    (:func:`kernel_input`); ``X`` is its transpose, a view of the same
    memory, and setting ``X`` replaces ``X_T``.
    """

    is_fast = True

    def __init__(self, kernel, program, X):
        self.kernel = kernel
        self.program = program
        self.X = X
        self.bounds = jitted.column_blocks(self.X.shape[0])
        self._pairs = None  # the symmetric product's schedule, made on first use

    @property
    def X(self):
        """The training inputs (n, d), a view of ``X_T``; None when unset."""
        return None if self.X_T is None else self.X_T.T

    @X.setter
    def X(self, X):
        self.X_T = None if X is None else kernel_input(X)

    @property
    def n_theta(self):
        return self.program.n_theta

    @property
    def n_samples(self):
        return self.X_T.shape[1]

    def fill_lower(self, theta, diag_add, K_out):
        """Write tril(k(X, X)) + diag(diag_add) at ``theta`` into K_out
        (n, n) F-contiguous; the strict upper triangle is not touched."""
        p = self.program
        with parallel_region():
            jitted.fill_cov_lower(self.X_T, *p.args(theta), diag_add,
                                  self.bounds, K_out)

    def grad_trace(self, theta, Kinv_lower, A):
        """sum_ij W_ij dK_ij/dtheta (n_theta,) with W = T K^-1 - A A^T; reads
        only the lower triangle of Kinv_lower (n, n) F-contiguous."""
        p = self.program
        partial = np.empty((self.bounds.size - 1, p.n_theta))
        with parallel_region():
            jitted.grad_trace_lower(self.X_T, *p.args(theta), p.n_theta,
                                    Kinv_lower, np.ascontiguousarray(A),
                                    self.bounds, partial)
        return partial.sum(axis=0)

    def cross(self, theta, X_query):
        """k(X, X_query) as an (n, m) F-contiguous array (no white noise)."""
        p = self.program
        Xq = kernel_input(X_query)
        out = np.empty((self.X.shape[0], Xq.shape[1]), order="F")
        with parallel_region():
            jitted.fill_cross_cov(self.X_T, Xq, *p.args(theta), out)
        return out

    def prior_cov(self, theta, X_query):
        """k(X_query, X_query) (m, m), white noise on the diagonal included,
        as scikit-learn's ``kernel(X)``."""
        p = self.program
        Xq = kernel_input(X_query)
        m = Xq.shape[1]
        out = np.empty((m, m), order="F")
        with parallel_region():
            jitted.fill_cov_lower(Xq, *p.args(theta), np.zeros(m),
                                  jitted.column_blocks(m), out)
        lower = np.tril_indices(m, -1)
        out[lower[1], lower[0]] = out[lower]
        return out

    def diag(self, theta, X_query):
        """k(x*, x*) (m,) for each row of X_query, white noise included (the
        kernel object's ``diag``: O(m), nothing to gain from a pass)."""
        return kernel_at(self.kernel, theta).diag(X_query)

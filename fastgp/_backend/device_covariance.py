"""The backend on a GPU: the covariance computations of the one-buffer path
for a buffer in device memory (docs/design.md, "The GPU path"), the door to
the engine's CUDA passes (:mod:`fastgp._engine.cuda_passes`) as
:mod:`fastgp._backend.covariance` is to its CPU passes.

:class:`DeviceCovariance` holds a lowered kernel program and the training
inputs transposed in device memory, and offers what the device objectives
and predictions need, with the CPU backend's meanings:

=========================  ====================================================
``fill_lower``             tril(K) + diag(alpha) into the N x N device buffer
``grad_trace``             sum_ij W_ij dK_ij/dtheta over the lower triangle
``grad_latent``            the GPLVM's traces of W against dK/dX and dK/dtheta
``cross``                  k(X, X*) (n, m) on the device, for prediction
``grad_cross_weighted``    sum_i w_ic dk(x_i, x*_c)/dx*_c (the GPLVM's transform)
``prior_cov``, ``diag``    k(X*, X*) and its diagonal, on the host (O(m^2), O(m))
=========================  ====================================================

Arrays are the device's (:attr:`xp`, CuPy on a GPU, NumPy under numba-cuda's
simulator); the reductions come back to the host as NumPy arrays, summed there
in a fixed order (per-column partial sums from the passes).
"""

import numpy as np

from .._engine import cuda_passes as passes
from .covariance import kernel_input, make_covariance
from .latent import LatentCovariance
from .lowering import lower_kernel

__all__ = ["DeviceCovariance", "SIMULATED", "kernel_context"]

#: Whether the passes run in numba-cuda's simulator (host arrays, no GPU).
SIMULATED = passes.SIMULATED


def kernel_context(index):
    """The context in which the passes launch on GPU ``index``."""
    return passes.device_context(index)


class DeviceCovariance:
    """A kernel on the fast path over training inputs X, in a device's memory.

    Parameters
    ----------
    kernel : scikit-learn kernel on the fast path
    X : ndarray (n, d) float64, host memory (copied to the device once)
    xp : the device's array module (cupy, or numpy under the simulator)
    program : KernelProgram or None (None: lowered here)
    threads : int, threads per block of the passes (a power of two)

    Attributes
    ----------
    X_T : device array (d, n), C-contiguous: the inputs as the passes read them
    """

    is_fast = True

    def __init__(self, kernel, X, xp, program=None, threads=passes.THREADS):
        self.kernel = kernel
        X = np.asarray(X, dtype=np.float64)
        self.program = lower_kernel(kernel, X.shape[1]) if program is None else program
        if self.program is None:
            raise ValueError(f"{kernel!r} is not on fastgp's fast path")
        self.xp = xp
        self.threads = int(threads)
        self.n_samples, self.n_features = X.shape
        self.X_T = xp.asarray(kernel_input(X))
        self._host = make_covariance(kernel, X, warn=False)
        self._host_latent = None  # made on first use (diag_with_grad)

    @property
    def n_theta(self):
        return self.program.n_theta

    def move_inputs(self, X):
        """Replace the training inputs' values (same shape): the GPLVM's
        latent points, which every evaluation moves."""
        self.X_T[...] = self.xp.asarray(kernel_input(X))
        self._host.X = np.asarray(X, dtype=np.float64)
        self._host_latent = None

    def _program_args(self, theta):
        xp, p = self.xp, self.program
        return (xp.array(p.ops), xp.array(p.op_float), xp.array(p.params(theta)),
                xp.array(p.theta_of_param))

    def _sizes(self, n_dims):
        return self.program.stack_depth, self.program.n_theta, n_dims

    def _run(self, kind, X1_T, n_columns, diag_add, M, A_T, n_theta_out, n_dims_out, theta):
        xp = self.xp
        theta_out = xp.zeros((n_columns, max(n_theta_out, 1)))
        x_out = xp.zeros((n_columns, max(n_dims_out, 1)))
        passes.launch(kind, self._sizes(X1_T.shape[0]), n_columns,
                      (X1_T, self.X_T, *self._program_args(theta), diag_add, M, A_T,
                       theta_out, x_out), threads=self.threads)
        return theta_out, x_out

    def _no_vector(self):
        return self.xp.zeros(1)

    def _no_targets(self):
        return self.xp.zeros((1, self.n_samples))

    def fill_lower(self, theta, diag_add, B):
        """Write tril(k(X, X)) + diag(diag_add) at ``theta`` into the device
        buffer B (n, n) F-ordered; the strict upper triangle is not touched.
        diag_add: (n,) device array."""
        self._run(passes.FILL, self.X_T, self.n_samples, diag_add, B, self._no_targets(),
                  0, 0, theta)

    def grad_trace(self, theta, Kinv_lower, A):
        """sum_ij W_ij dK_ij/dtheta (n_theta,) on the host, W = T K^-1 - A A^T;
        reads only the lower triangle of the device buffer Kinv_lower; A (n, T)
        a device array."""
        A_T = self.xp.ascontiguousarray(A.T)
        theta_out, _ = self._run(passes.GRAD, self.X_T, self.n_samples, self._no_vector(),
                                 Kinv_lower, A_T, self.n_theta, 0, theta)
        return _to_host(theta_out)[:, :self.n_theta].sum(axis=0)

    def grad_latent(self, theta, Kinv, A):
        """The GPLVM's traces (trace_x (n, Q), trace_theta (n_theta,)) on the
        host, with the CPU backend's meaning (dL/dx = trace_x / 2,
        dL/dtheta = trace_theta / 2), from the device buffer Kinv whose lower
        triangle holds K^-1: mirrored into its upper triangle first (the
        pass reads whole columns), which the buffer's contract allows."""
        passes.mirror_lower(Kinv, threads=self.threads)
        A_T = self.xp.ascontiguousarray(A.T)
        Q = self.n_features
        theta_out, x_out = self._run(passes.GRAD_FULL, self.X_T, self.n_samples,
                                     self._no_vector(), Kinv, A_T, self.n_theta, Q, theta)
        trace_theta = _to_host(theta_out)[:, :self.n_theta].sum(axis=0)
        # the pass sums W_nj dk(x_n, x_j)/dx_n over all j; the CPU's trace
        # counts each lower-triangle entry twice
        return 2.0 * _to_host(x_out)[:, :Q], trace_theta

    def cross(self, theta, X_query):
        """k(X, X_query) as an (n, m) F-ordered device array (no white noise)."""
        Xq_T = self.xp.asarray(kernel_input(X_query))
        m = Xq_T.shape[1]
        out = self.xp.empty((self.n_samples, m), order="F")
        self._run(passes.CROSS, Xq_T, m, self._no_vector(), out, self._no_targets(), 0, 0,
                  theta)
        return out

    def grad_cross_weighted(self, theta, X_query, weights):
        """sum_i weights[i, c] dk(x_i, x*_c)/dx*_c (m, Q) on the host;
        weights (n, m) F-ordered device array."""
        Xq_T = self.xp.asarray(kernel_input(X_query))
        m = Xq_T.shape[1]
        _, x_out = self._run(passes.GRAD_CROSS, Xq_T, m, self._no_vector(), weights,
                             self._no_targets(), 0, self.n_features, theta)
        return _to_host(x_out)[:, :self.n_features]

    # -------------------------------------- O(m) and O(m^2) on the host
    def prior_cov(self, theta, X_query):
        """k(X*, X*) (m, m) on the host, white noise on the diagonal (the
        joint predictive covariance's prior, as the CPU backend's)."""
        return self._host.prior_cov(theta, X_query)

    def diag(self, theta, X_query):
        """k(x*, x*) (m,) on the host, white noise included (the kernel's)."""
        return self._host.diag(theta, X_query)

    def diag_with_grad(self, theta, X_query):
        """(k(x*, x*) (m,), dk(x*, x*)/dx* (m, Q)) on the host."""
        if self._host_latent is None:
            self._host_latent = LatentCovariance(self.kernel, self.program,
                                                 np.asfortranarray(self._host.X))
        return self._host_latent.diag_with_grad(theta, X_query)


def _to_host(array):
    """A NumPy copy of a device array (itself under the simulator)."""
    get = getattr(array, "get", None)
    return get() if get is not None else np.asarray(array)

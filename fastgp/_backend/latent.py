"""The GPLVM's backend: the fast path with derivatives with respect to the
inputs (the latent points), through :mod:`fastgp._engine.latent_passes`
(docs/design.md, "The one-buffer plan"; Lawrence 2005, sec. 3).

================================  =============================================
``grad_latent``                   sum_j W_nj dk(x_n, x_j)/dx_n, with the
                                  theta trace fused into the same pass
``diag_with_grad``                k(x*, x*) and its input derivative
``grad_cross_weighted``           sum_i Omega_ic dk(x_i, x*_c)/dx*_c
================================  =============================================
"""

import numpy as np

from .._engine import latent_passes as latent_jitted
from .._engine import opcodes as op
from .._engine import passes as jitted
from .._engine.config import parallel_region
from .._engine.interpreter import engine_table
from .covariance import FastCovariance
from .inputs import kernel_input

__all__ = ["LatentCovariance", "has_non_stationary_leaf", "latent_blocks", "MAX_LATENT_BLOCKS"]

#: Largest number of column blocks of the latent gradient pass (each block
#: keeps an N x Q partial sum).
MAX_LATENT_BLOCKS = 64

_OPERATORS = (op.SUM, op.PRODUCT, op.POW)


def has_non_stationary_leaf(program):
    """Whether some leaf of ``program`` has dk/dx' != -dk/dx (the dot
    product), so that the latent passes need the second input derivative."""
    codes = program.ops[:, op.COL_CODE]
    return any(int(c) in latent_jitted.NON_STATIONARY_LEAVES for c in codes
               if c not in _OPERATORS)


def latent_blocks(n, n_dims):
    """Column-block boundaries (n_blocks + 1,) int64 for the latent pass.

    Equal-area blocks of the lower triangle (a subset of
    :func:`fastgp._engine.passes.column_blocks`' boundaries), at most
    ``MAX_LATENT_BLOCKS`` of them and few enough that the per-block N x Q
    partial sums stay small beside the N x N workspace:
    n_blocks x n_dims <= max(4 n_dims, n / 16). The count depends on n and
    n_dims only, never on the thread count, so the gradient's bits do not either.
    """
    fine = jitted.column_blocks(n)
    n_fine = fine.size - 1
    want = max(1, min(MAX_LATENT_BLOCKS, n_fine, max(4, n // (16 * max(n_dims, 1)))))
    step = -(-n_fine // want)  # ceil
    bounds = fine[::step]
    if bounds[-1] != n:
        bounds = np.append(bounds, n)
    return np.ascontiguousarray(bounds, dtype=np.int64)


class LatentCovariance(FastCovariance):
    """The fast path with derivatives with respect to the inputs (the GPLVM's
    latent points), besides the four regression methods.

    Parameters
    ----------
    kernel : sklearn kernel
    program : KernelProgram
        ``kernel`` lowered for ``X.shape[1]`` inputs (every leaf has input
        derivatives).
    X : ndarray of shape (n_samples, n_components)
        Kept by reference where it is float64, F-contiguous and writeable (an
        optimiser that moves the latent points writes into this array and the
        next call reads them), copied otherwise (as FastCovariance does).

    Attributes
    ----------
    bounds_latent : ndarray (n_blocks + 1,) int64
        :func:`latent_blocks` of the latent pass.
    want_d2 : bool
        Whether the kernel has a non-stationary leaf (second input derivative
        needed).

    Besides the N x N workspace the latent pass keeps per-block partial sums,
    ``n_blocks x n_samples x n_components`` floats, allocated once here.
    """

    def __init__(self, kernel, program, X):
        super().__init__(kernel, program, X)
        self.want_d2 = has_non_stationary_leaf(program)
        n, n_dims = self.X.shape
        self.bounds_latent = latent_blocks(n, n_dims)
        n_blocks = self.bounds_latent.size - 1
        self._theta_partial = np.zeros((n_blocks, program.n_theta))
        self._x_partial = np.zeros((n_blocks, n, n_dims))

    @property
    def n_blocks(self):
        return self.bounds_latent.size - 1

    def grad_latent(self, theta, Kinv_lower, A, with_theta=True):
        """The traces of W against the input and hyperparameter derivatives
        of K, in one pass over the lower triangle; W = T K^-1 - A A^T.

        Kinv_lower : ndarray (n, n) F-contiguous, K^-1's lower triangle (read)
        A : ndarray (n, T), K^-1 Y
        with_theta : bool
            Reduce the theta trace in the same pass (True) or skip it (False:
            ``grad_trace`` gives the same numbers in a second pass).

        Returns (trace_x (n, n_components), trace_theta (n_theta,) or None);
        dL/dx_n = trace_x[n] / 2 (Lawrence 2005, sec. 3) and
        dL/dtheta = trace_theta / 2 (R&W 2006, eq. 5.9).
        """
        p = self.program
        A_T = np.ascontiguousarray(A.T)
        with parallel_region():
            latent_jitted.grad_latent_lower(
                engine_table(p.ops), self.X_T, *p.args(theta), p.n_theta, bool(with_theta),
                self.want_d2, Kinv_lower, A_T, self.bounds_latent, self._theta_partial,
                self._x_partial)
        trace_theta = self._theta_partial.sum(axis=0) if with_theta else None
        return self._x_partial.sum(axis=0), trace_theta

    def diag_with_grad(self, theta, X_query):
        """(k(x*, x*) (m,), dk(x*, x*)/dx* (m, n_components)) for each row x*
        of X_query (m, n_components); white noise included."""
        p = self.program
        Xq = kernel_input(X_query)
        m = Xq.shape[1]
        kdiag = np.empty(m)
        dkdiag = np.empty((m, self.X.shape[1]))
        latent_jitted.diag_with_dx(engine_table(p.ops), Xq, p.ops, p.op_float,
                                   p.params(theta), p.stack_depth, self.want_d2, kdiag, dkdiag)
        return kdiag, dkdiag

    def grad_cross_weighted(self, theta, X_query, weights):
        """sum_i weights[i, c] dk(x_i, x*_c)/dx*_c (m, n_components) for each
        row x*_c of X_query (m, n_components), x_i the training inputs;
        weights (n, m) F-contiguous (read only)."""
        p = self.program
        Xq = kernel_input(X_query)
        out = np.empty((Xq.shape[1], self.X.shape[1]))
        with parallel_region():
            latent_jitted.grad_cross_weighted(engine_table(p.ops), self.X_T, Xq, p.ops,
                                              p.op_float, p.params(theta), p.stack_depth,
                                              self.want_d2, weights, out)
        return out

"""The GPLVM's parts that every exact solver shares: the kernel lowered for
the latent points, the layout of the optimiser's vector z = [X.ravel(),
theta], and the predictive density that places new data rows
(:class:`PredictiveNegLogDensity`, GPy's ``infer_newX``), written once for
a kept factor in host or in device memory.

For a new row y* and a candidate latent point x*, the negative log density of
y* under the fitted GP's predictive distribution, training posterior fixed
(Rasmussen & Williams 2006, eq. 2.25 and 2.26, with the noise of a new
observation included):

    m(x*)  = k(X, x*)^T A                          (D,)
    s2(x*) = k(x*, x*) - k(X, x*)^T K^-1 k(X, x*)  (scalar, shared by the D outputs)
    f(x*)  = D/2 log(2 pi s2) + |y* - m|^2 / (2 s2)

and its gradient in x*, for many rows at once, each row independent of the
others.
"""

import math

import numpy as np

from .._backend.lowering import fast_path_summary, lower_kernel
from .chunks import query_chunks

__all__ = ["lower_latent_kernel", "LatentPoints", "LatentLayout", "PredictiveNegLogDensity"]

_LOG_2PI = math.log(2.0 * math.pi)


def lower_latent_kernel(kernel, n_components):
    """Lower ``kernel`` for Q = ``n_components`` latent dimensions (every leaf
    of the fast path has input derivatives: fastgp._engine.leaves).

    Returns
    -------
    program : KernelProgram

    Raises
    ------
    ValueError
        If the kernel is not on fastgp's fast path, or its length scales do
        not match ``n_components``.
    """
    program = lower_kernel(kernel, n_components)
    if program is None:
        raise ValueError(
            f"GPLVM needs a kernel on fastgp's fast path, and {kernel!r} is not: "
            f"build it from {fast_path_summary()}."
        )
    return program


class LatentPoints:
    """The optimiser's vector z = [X.ravel(), theta] of a GPLVM fit with
    ``n_samples`` latent points of ``n_components`` dimensions and
    ``n_theta`` free hyperparameters."""

    def __init__(self, n_samples, n_components, n_theta):
        self.shape = (int(n_samples), int(n_components))
        self.n_theta = int(n_theta)

    @property
    def size(self):
        """Entries of X."""
        return self.shape[0] * self.shape[1]

    def pack(self, X, theta):
        """z (n_samples * n_components + n_theta,) from X and theta."""
        return np.concatenate([np.asarray(X, dtype=np.float64).ravel(),
                               np.asarray(theta, dtype=np.float64)])

    def unpack(self, z):
        """(X (n_samples, n_components), theta (n_theta,)) views of z."""
        z = np.asarray(z, dtype=np.float64)
        if z.shape != (self.size + self.n_theta,):
            raise ValueError(f"z has shape {z.shape}; expected ({self.size + self.n_theta},)")
        return z[:self.size].reshape(self.shape), z[self.size:]


class LatentLayout:
    """What every exact solver's GPLVM objective offers over z (a mixin):
    ``n_samples``, ``n_theta``, ``workspace``, ``pack`` and ``unpack``, from
    its ``points`` (:class:`LatentPoints`), ``X`` (n, Q) and ``nlml`` (the
    regression objective on the latent points)."""

    @property
    def n_samples(self):
        return self.X.shape[0]

    @property
    def n_theta(self):
        return self.points.n_theta

    @property
    def workspace(self):
        return self.nlml.workspace

    def pack(self, X, theta):
        """z (n_samples * n_components + n_theta,) from X and theta."""
        return self.points.pack(X, theta)

    def unpack(self, z):
        """(X (n_samples, n_components), theta (n_theta,)) views of z."""
        return self.points.unpack(z)


class PredictiveNegLogDensity:
    """Row-wise ``f(X*) -> (f (m,), df/dX* (m, Q))`` for new data rows Y*
    (module docstring), given a fitted model's latent points, kernel, Cholesky
    factor and A = K^-1 Y.

    Parameters
    ----------
    covariance : the backend over the training latent points (``cross``,
        ``diag_with_grad``, ``grad_cross_weighted``): the CPU's
        LatentCovariance, or a device's, whose arrays lie where L does
    theta : ndarray (n_theta,), the fitted kernel's
    L : (n_samples, n_samples) F-ordered array, the lower Cholesky factor of
        the training K (read only), where the covariance's arrays lie
    A : ndarray of shape (n_samples, n_features), host memory
    Y_new : ndarray of shape (n_new, n_features)
        The new rows, in the model's (centred, scaled) coordinates.
    solve : ``solve(L, B)`` -> K^-1 B for a block B (n, m) of ``cross``'s
        kind (B is not changed)
    xp : the array module of ``L`` and ``cross``'s blocks (numpy, or cupy)
    to_host : a block of ``xp`` as a NumPy array
    chunk_bytes : int
        Evaluations work through the rows in chunks whose (n_samples, chunk)
        blocks take at most this many bytes each (four are alive at once).

    Each row's value and gradient depend on that row alone, so a row's
    optimisation does not depend on which other rows are evaluated with it.
    """

    def __init__(self, covariance, theta, L, A, Y_new, solve, xp=np,
                 to_host=np.asarray, chunk_bytes=16 * 2**20):
        self.covariance = covariance
        self.theta = np.asarray(theta, dtype=np.float64)
        self.L = L
        self.solve = solve
        self.xp = xp
        self.to_host = to_host
        self.A = xp.asarray(np.ascontiguousarray(A, dtype=np.float64))
        self.Y_new = np.ascontiguousarray(Y_new, dtype=np.float64)
        self.n_train = np.shape(A)[0]
        self.chunk_bytes = int(chunk_bytes)

    def __call__(self, X_query, rows):
        """Values (m,) and gradients (m, Q) of the rows ``rows`` (m,) of Y_new
        at latent points X_query (m, Q)."""
        X_query = np.ascontiguousarray(X_query, dtype=np.float64)
        rows = np.asarray(rows)
        values = np.empty(len(rows))
        grads = np.empty(X_query.shape)
        for chunk in query_chunks(len(rows), self.n_train, self.chunk_bytes):
            values[chunk], grads[chunk] = self._evaluate(X_query[chunk],
                                                         self.Y_new[rows[chunk]])
        return values, grads

    def _evaluate(self, Xq, Yq):
        xp, host = self.xp, self.to_host
        D = Yq.shape[1]
        Kt = self.covariance.cross(self.theta, Xq)  # (n, m) F
        mean = host(Kt.T @ self.A)  # (m, D)
        U = self.solve(self.L, Kt)  # K^-1 k*
        kdiag, dkdiag = self.covariance.diag_with_grad(self.theta, Xq)
        s2 = kdiag - host(xp.einsum("ij,ij->j", Kt, U))
        # rounding can leave a noise-free variance at or below zero
        s2 = np.maximum(s2, 1e-12 * np.maximum(kdiag, 1e-300))
        resid = Yq - mean
        rr = np.einsum("ij,ij->i", resid, resid)
        values = 0.5 * D * (_LOG_2PI + np.log(s2)) + 0.5 * rr / s2
        # df/dx* = sum_i dk(x_i, x*)/dx* Omega_i + coef dk(x*, x*)/dx*, with
        # Omega_i = -(A_i . r)/s2 - 2 coef (K^-1 k*)_i, coef = df/ds2.
        coef = 0.5 * D / s2 - 0.5 * rr / (s2 * s2)
        Omega = (xp.asarray(resid) @ self.A.T).T  # (n, m), F-contiguous without a copy
        Omega *= xp.asarray(-1.0 / s2)
        Omega -= xp.asarray(2.0 * coef) * U
        grads = self.covariance.grad_cross_weighted(self.theta, Xq, Omega)
        grads += coef[:, None] * dkdiag
        return values, grads

"""The negative log marginal likelihood and its gradient in one N x N buffer
in a GPU's memory (docs/design.md, "The GPU path"): the regression's, and
the GPLVM's over its latent points.

The plan is the CPU's (Rasmussen & Williams 2006, eq. 2.30 and 5.9; Lawrence
2005, sec. 3 for the latent points), on the device:

1. fill K's lower triangle into the buffer (the backend's CUDA pass);
2. factor it in place (cuSOLVER's dpotrf, :mod:`fastgp._linalg.device_blocked`);
3. A = K^-1 Y by two triangular solves; the value on the host from A,
   Y and the factor's diagonal, summed as on the CPU (exactly rounded);
4. invert in place (the blocked inverse: cuSOLVER's own refuses past
   N = 46,341);
5. one fused pass forms W = T K^-1 - A A^T entry by entry and reduces it
   against dK/dtheta (and dk/dx for the GPLVM) recomputed on the fly.

The buffer is allocated once per fit and reused by every evaluation; dK and
W are never stored.
"""

import math

import numpy as np

from ..._linalg.device_blocked import (cho_inverse_in_place, cho_solve,
                                       cholesky_in_place, factor_diagonal)
from ..._linalg.lapack import cholesky_with_jitter, exact_sum, log_det_from_diagonal
from ..base import GuardedObjective, PointFailed, regression_targets
from ..latent_density import LatentLayout, LatentPoints
from .workspace import DeviceFactor

__all__ = ["DeviceNegLogMarginalLikelihood", "DeviceLatentObjective"]

_LOG_2PI = math.log(2.0 * math.pi)


class DeviceNegLogMarginalLikelihood(GuardedObjective):
    """``f(theta) -> (L, dL/dtheta)`` with K's buffer in device memory.

    Parameters
    ----------
    device : fastgp._solvers.cuda.device.Device
    covariance : fastgp._backend.device_covariance.DeviceCovariance
    Y : ndarray (n, T), host; diag_add : ndarray (n,), alpha, host
    workspace : fastgp._solvers.cuda.workspace.DeviceWorkspace
        Holds the N x N device buffer; overwritten by every call.
    block : int, the blocked inverse's block order

    Where K is not positive definite or a value is not finite the call
    returns ``(inf, zeros)`` (GuardedObjective).
    """

    def __init__(self, device, covariance, Y, diag_add, workspace, block):
        self.device = device
        self.covariance = covariance
        self.Y, self.diag_add = regression_targets(Y, diag_add)
        xp = device.xp
        self._Y = xp.array(self.Y)  # copies: the device's own, writeable
        self._diag = xp.array(self.diag_add)
        self.workspace = workspace
        self.block = int(block)
        self._A = None  # K^-1 Y on the device, from the last factor

    @property
    def n_samples(self):
        return self.Y.shape[0]

    def factor(self, theta):
        """Fill and factor K at theta in the buffer: (L buffer, A (n, T)
        host, value). Raises NotPositiveDefiniteError."""
        B = self.workspace.buffer()
        self.covariance.fill_lower(theta, self._diag, B)
        cholesky_in_place(self.device.tiles, B)
        A, value = self._solve(B)
        return B, A, value

    def factor_with_jitter(self, theta, max_relative_jitter=1e-6):
        """:meth:`factor` with the CPU's jitter ladder where K is not
        numerically positive definite: (L, A, value, jitter)."""
        B = self.workspace.buffer()
        xp = self.device.xp

        def fill(buffer, jitter):
            diag = self._diag if jitter == 0.0 else self._diag + xp.float64(jitter)
            self.covariance.fill_lower(theta, diag, buffer)

        jitter = cholesky_with_jitter(fill, B, max_relative_jitter=max_relative_jitter,
                                      buffer=DeviceFactor(self.device))
        A, value = self._solve(B)
        return B, A, value, jitter

    def _solve(self, L):
        """A = K^-1 Y (host) and L(theta) (eq. 2.30), the sums on the host as
        the CPU path takes them; A stays on the device for the gradient."""
        tiles = self.device.tiles
        self._A = cho_solve(tiles, L, self._Y)
        A = self.device.to_host(self._A)
        n, T = self.Y.shape
        value = (0.5 * exact_sum((self.Y * A).ravel())
                 + 0.5 * T * log_det_from_diagonal(np.asarray(factor_diagonal(tiles, L)))
                 + 0.5 * n * T * _LOG_2PI)
        return A, value

    def value_at(self, theta):
        return self.factor(theta)[2]

    def inverse(self, theta):
        """(K^-1's lower triangle in the buffer, A on the device, value):
        the factor, then the blocked inverse in place."""
        B, _, value = self.factor(theta)
        if not math.isfinite(value):
            raise PointFailed  # before the inverse
        cho_inverse_in_place(self.device.tiles, B, block=self.block)
        return B, self._A, value

    def value_and_grad_at(self, theta):
        B, A, value = self.inverse(theta)
        return value, 0.5 * self.covariance.grad_trace(theta, B, A)


class DeviceLatentObjective(LatentLayout, GuardedObjective):
    """The GPLVM's ``f(z) -> (L, dL/dz)``, z = [X.ravel(), theta], with K's
    buffer in device memory (the CPU's LatentNegLogMarginalLikelihood on the
    device: the same value and gradient).

    Parameters
    ----------
    device : fastgp._solvers.cuda.device.Device
    covariance : DeviceCovariance over the starting latent points (moved by
        every call)
    Y : ndarray (n, D), the centred data; diag_add : float or (n,), alpha
    workspace : DeviceWorkspace; block : int

    Attributes
    ----------
    X : ndarray (n, Q), host: the latent points of the last call
    """

    def __init__(self, device, covariance, Y, diag_add, workspace, block):
        n, Q = covariance.n_samples, covariance.n_features
        self.covariance = covariance
        self.nlml = DeviceNegLogMarginalLikelihood(device, covariance, Y, diag_add,
                                                   workspace, block)
        self.points = LatentPoints(n, Q, covariance.n_theta)
        self.X = np.zeros((n, Q))

    def _move(self, z):
        X, theta = self.unpack(z)
        self.X[...] = X
        self.covariance.move_inputs(self.X)
        return theta

    def factor(self, z):
        return self.nlml.factor(self._move(z))

    def factor_with_jitter(self, z):
        return self.nlml.factor_with_jitter(self._move(z))

    def value_at(self, z):
        return self.factor(z)[2]

    def value_and_grad_at(self, z):
        theta = self._move(z)
        B, A, value = self.nlml.inverse(theta)
        trace_x, trace_theta = self.covariance.grad_latent(theta, B, A)
        return value, np.concatenate([0.5 * trace_x.ravel(), 0.5 * trace_theta])

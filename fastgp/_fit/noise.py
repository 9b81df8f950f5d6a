"""The warning of a kernel without a noise term fitted to noisy targets.

A Gaussian process whose kernel has no noise term (no WhiteKernel, and an
``alpha`` that is only a numerical nugget) must pass through every target.
Fitted to noisy targets it can do so only with length scales short enough
that neighbouring training points are almost uncorrelated: the likelihood
then treats the noise as signal, and predictions between the points revert
to the mean (scikit-learn's default kernel, ``C() * RBF()``, is such a kernel;
Rasmussen & Williams 2006, section 2.2, eq. 2.21: without the noise term the
posterior mean interpolates the targets). The optimiser gives no sign of it
where the length scale stops just inside its bound. So after a fit the
regressor asks the fitted kernel how correlated a training point typically
is with its nearest neighbour, and says once, with the remedy, where it is
below an RBF's correlation at one length scale, exp(-1/2): where the
length scales fall below the inputs' nearest-neighbour spacing. A kernel
whose short-range part is a small share of its variance beside smooth
parts (Rasmussen & Williams' correlated noise beside the Mauna Loa trend)
keeps neighbours correlated, and is not warned of.
"""

import math

import numpy as np
from scipy.spatial import cKDTree
from sklearn.gaussian_process.kernels import Exponentiation, KernelOperator, WhiteKernel

from .._solvers.vecchia.scaling import length_scales
from .._user_warnings import warn_user

__all__ = ["NUGGET_SHARE", "SPACING_SAMPLE", "UNCORRELATED", "neighbour_pairs",
           "warn_noise_free_fit"]

#: An ``alpha`` up to this share of the kernel's variance is a numerical
#: nugget, not a noise model (scikit-learn's default alpha, 1e-10, against a
#: variance of order 1).
NUGGET_SHARE = 1e-6

#: The typical neighbour is the median over at most this many training
#: points, evenly spaced through X: a median to a few percent, for a tree
#: query and a kernel call of milliseconds.
SPACING_SAMPLE = 500

#: Neighbours correlated less than this are almost independent under the
#: kernel: an RBF's correlation at one length scale.
UNCORRELATED = math.exp(-0.5)


def _has_white_noise(kernel):
    """Whether a WhiteKernel is anywhere in ``kernel``'s tree."""
    if isinstance(kernel, WhiteKernel):
        return True
    if isinstance(kernel, KernelOperator):
        return _has_white_noise(kernel.k1) or _has_white_noise(kernel.k2)
    if isinstance(kernel, Exponentiation):
        return _has_white_noise(kernel.kernel)
    return False


def neighbour_pairs(X_scaled):
    """(points, neighbours): int64 indices of at most :data:`SPACING_SAMPLE`
    rows evenly spaced through ``X_scaled`` (n, d) float64 and of each one's
    nearest distinct other row (duplicated inputs have none and are left
    out); empty where no row has one or a coordinate is not finite (inputs
    near the float64 limit over a short length scale)."""
    n = len(X_scaled)
    none = np.empty(0, dtype=np.int64)
    if n < 2 or not np.all(np.isfinite(X_scaled)):
        return none, none
    points = np.unique(np.linspace(0, n - 1, min(n, SPACING_SAMPLE)).astype(np.int64))
    distances, nearest = cKDTree(X_scaled).query(X_scaled[points], k=2)
    distinct = distances[:, 1] > 0.0
    return points[distinct], nearest[distinct, 1].astype(np.int64)


def _neighbour_correlation(kernel, X):
    """The median, over :func:`neighbour_pairs` (found in X divided by the
    kernel's length scales), of the kernel's correlation between a training
    point and its nearest neighbour; None where there are no pairs or the
    kernel's variance there is not positive."""
    points, neighbours = neighbour_pairs(X / length_scales(kernel, X.shape[1]))
    if points.size == 0:
        return None
    a, b = X[points], X[neighbours]
    cross = np.diag(kernel(a, b))
    variance = kernel.diag(a) * kernel.diag(b)
    if not np.all(variance > 0.0):
        return None
    return float(np.median(cross / np.sqrt(variance)))


def warn_noise_free_fit(kernel, X, diag_add):
    """One UserWarning where a kernel without noise was fitted to targets it
    had to interpolate (module docstring).

    Parameters
    ----------
    kernel : the fitted kernel (``kernel_``)
    X : ndarray (n, d) float64, the training inputs (anything else, such as
        a kernel's non-vector inputs, is not checked)
    diag_add : ndarray (n,) float64, ``alpha`` per sample

    The warning comes where the kernel holds no WhiteKernel, ``alpha`` is
    at most :data:`NUGGET_SHARE` of the kernel's variance, and a training
    point's correlation with its nearest neighbour is typically below
    :data:`UNCORRELATED`.
    """
    if (not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.float64
            or len(X) < 2 or _has_white_noise(kernel)):
        return
    with np.errstate(all="ignore"):
        variance = float(np.max(kernel.diag(X[:1])))
        if not np.max(diag_add, initial=0.0) <= NUGGET_SHARE * variance:
            return
        correlation = _neighbour_correlation(kernel, X)
    if correlation is None or not correlation < UNCORRELATED:
        return
    warn_user(
        f"The fitted kernel, {kernel}, has no noise term (no WhiteKernel, and alpha at "
        f"most {np.max(diag_add, initial=0.0):.3g}), and its length scales are shorter "
        f"than the spacing of the training inputs: a point's correlation with its "
        f"nearest neighbour is typically {correlation:.2g} under it, where an RBF "
        "kernel's at one length scale is 0.61. A Gaussian process without noise must "
        "pass through every target, so on noisy targets it fits the noise, and its "
        "predictions between the training points fall back to the mean. If the targets "
        "are noisy, add a WhiteKernel to the kernel (kernel + WhiteKernel(), which learns "
        "the noise level), or set alpha to the noise variance.", UserWarning)

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
regressor compares the fitted length scales with the inputs' typical
nearest-neighbour spacing and says once, with the remedy, where the spacing
is longer.
"""

import numpy as np
from scipy.spatial import cKDTree
from sklearn.gaussian_process.kernels import Exponentiation, KernelOperator, WhiteKernel

from .._solvers.vecchia.scaling import length_scales
from .._user_warnings import warn_user

__all__ = ["NUGGET_SHARE", "SPACING_SAMPLE", "warn_noise_free_fit"]

#: An ``alpha`` up to this share of the kernel's variance is a numerical
#: nugget, not a noise model (scikit-learn's default alpha, 1e-10, against a
#: variance of order 1).
NUGGET_SHARE = 1e-6

#: The nearest-neighbour spacing is the median over at most this many
#: training points (evenly spaced through X) of the distance to the nearest
#: other point: a median to a few percent, for a tree query of milliseconds.
SPACING_SAMPLE = 2000


def _has_white_noise(kernel):
    """Whether a WhiteKernel is anywhere in ``kernel``'s tree."""
    if isinstance(kernel, WhiteKernel):
        return True
    if isinstance(kernel, KernelOperator):
        return _has_white_noise(kernel.k1) or _has_white_noise(kernel.k2)
    if isinstance(kernel, Exponentiation):
        return _has_white_noise(kernel.kernel)
    return False


def _has_length_scale(kernel):
    """Whether a leaf of ``kernel`` has a length scale over distances (a
    periodic kernel's is relative to its period, and does not count)."""
    if isinstance(kernel, KernelOperator):
        return _has_length_scale(kernel.k1) or _has_length_scale(kernel.k2)
    if isinstance(kernel, Exponentiation):
        return _has_length_scale(kernel.kernel)
    return (getattr(kernel, "length_scale", None) is not None
            and getattr(kernel, "periodicity", None) is None)


def neighbour_spacing(X_scaled):
    """The median distance from a training point to its nearest distinct
    other point, over at most :data:`SPACING_SAMPLE` points evenly spaced
    through ``X_scaled`` (n, d) float64; None where no point has a distinct
    neighbour or a coordinate is not finite (inputs near the float64 limit
    over a short length scale)."""
    n = len(X_scaled)
    if n < 2 or not np.all(np.isfinite(X_scaled)):
        return None
    sample = X_scaled[np.linspace(0, n - 1, min(n, SPACING_SAMPLE)).astype(np.int64)]
    distances, _ = cKDTree(X_scaled).query(sample, k=2)
    nearest = distances[:, 1]
    nearest = nearest[nearest > 0.0]  # duplicated inputs have no spacing
    return float(np.median(nearest)) if nearest.size else None


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
    at most :data:`NUGGET_SHARE` of the kernel's variance, and the inputs'
    nearest-neighbour spacing, measured in the fitted length scales
    (per dimension the shortest of the kernel's leaves'), is above 1.
    """
    if (not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.float64
            or _has_white_noise(kernel) or not _has_length_scale(kernel)):
        return
    variance = float(np.max(kernel.diag(X[:1])))
    if not np.max(diag_add, initial=0.0) <= NUGGET_SHARE * variance:
        return
    scales = length_scales(kernel, X.shape[1])
    spacing = neighbour_spacing(X / scales)
    if spacing is None or spacing <= 1.0:
        return
    warn_user(
        f"The fitted kernel, {kernel}, has no noise term (no WhiteKernel, and alpha at "
        f"most {np.max(diag_add, initial=0.0):.3g}), and its length scales are shorter "
        f"than the spacing of the training inputs: a point's nearest neighbour is "
        f"typically {spacing:.3g} length scales away, where the kernel leaves them almost "
        "uncorrelated. A Gaussian process without noise must pass through every target, "
        "so on noisy targets it fits the noise, and its predictions between the training "
        "points fall back to the mean. If the targets are noisy, add a WhiteKernel to "
        "the kernel (kernel + WhiteKernel(), which learns the noise level), or set alpha "
        "to the noise variance.", UserWarning)

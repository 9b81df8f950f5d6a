"""The space in which Vecchia's ordering and neighbours are found: the inputs
divided by the kernel's length scales (scaled Vecchia; Katzfuss, Guinness &
Lawrence 2022). With per-dimension length scales l_k, the points nearest in
correlation are the nearest in x_k / l_k, not in x; a dimension the kernel
barely uses (a long l_k) then hardly separates points, and the neighbours
are found among the dimensions that matter. This is what makes the
approximation accurate for many input dimensions and little noise.

Where a kernel has several leaves with length scales (a sum or product of
stationary kernels), each dimension takes the shortest of them: the
component that varies fastest along a dimension sets which points are near
along it. A kernel without length scales (a dot product, a constant) leaves
the inputs as they are.
"""

import numpy as np
from sklearn.gaussian_process.kernels import Exponentiation, KernelOperator

__all__ = ["length_scales", "scaled_inputs", "RELAYOUT_FACTOR", "stale"]

#: The ordering and neighbours are found again when the length scales'
#: ratios to each other change by more than this factor since they were
#: found (a common factor changes neither: distances scale alike).
RELAYOUT_FACTOR = 1.5


def _leaves(kernel):
    if isinstance(kernel, KernelOperator):
        return _leaves(kernel.k1) + _leaves(kernel.k2)
    if isinstance(kernel, Exponentiation):
        return _leaves(kernel.kernel)
    return [kernel]


def length_scales(kernel, n_features):
    """Per-dimension length scales (n_features,) float64 of ``kernel`` at its
    current hyperparameters: the elementwise shortest of its leaves' (module
    docstring), ones where no leaf has any."""
    scales = np.full(n_features, np.inf)
    for leaf in _leaves(kernel):
        value = getattr(leaf, "length_scale", None)
        if value is None or getattr(leaf, "periodicity", None) is not None:
            continue  # a periodic kernel's length scale is not a distance's
        scales = np.minimum(scales, np.broadcast_to(np.asarray(value, dtype=np.float64),
                                                    (n_features,)))
    scales[~np.isfinite(scales)] = 1.0
    return scales


def scaled_inputs(X, scales):
    """X (n, d) divided by the length scales (d,): a new float64 array."""
    return np.asarray(X, dtype=np.float64) / scales


def stale(old, new):
    """Whether neighbours found at length scales ``old`` (d,) should be found
    again at ``new``: the ratio of two dimensions' length scales moved by
    more than :data:`RELAYOUT_FACTOR` (a common factor changes nothing)."""
    change = np.log(new) - np.log(old)
    return bool(np.ptp(change) > np.log(RELAYOUT_FACTOR)) if change.size else False

"""The derivatives of a kernel's diagonal k(x_i, x_i) with respect to its
log-space hyperparameters, from the scikit-learn kernel object: what the
matrix-free path's gradient needs for tr(D^-1 dK/dtheta), the exact part of
its trace (docs/design.md, "The matrix-free path").

A stationary kernel's diagonal is the same at every point, so one call on
one point gives it all; otherwise the kernel's own gradient is taken on
chunks of points and its diagonal kept, O(n chunk n_theta) work and
O(chunk^2 n_theta) memory.
"""

import numpy as np

__all__ = ["diagonal_gradient"]

#: Points per kernel-object call for non-stationary kernels.
CHUNK = 128


def diagonal_gradient(kernel, theta, X):
    """d k(x_i, x_i) / d theta_p for every row x_i of X.

    kernel : scikit-learn kernel; theta : ndarray (n_theta,) log-space
    X : ndarray (n, d) float64
    Returns ndarray (n, n_theta) float64 (a read-only broadcast view for a
    stationary kernel).
    """
    k = kernel.clone_with_theta(np.asarray(theta, dtype=np.float64))
    n, n_theta = len(X), k.n_dims
    if k.is_stationary():
        _, G = k(X[:1], eval_gradient=True)
        return np.broadcast_to(G[0, 0], (n, n_theta))
    out = np.empty((n, n_theta))
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        _, G = k(X[start:stop], eval_gradient=True)
        index = np.arange(stop - start)
        out[start:stop] = G[index, index]
    return out

"""Predictions of a fitted Vecchia model (docs/design.md, "Vecchia's
approximation", Prediction): each query point conditioned on its m' nearest
training points, found in the inputs scaled by the fitted length scales,

    mean* = k_*n K~_nn^-1 y_n,   var* = k_** - k_*n K~_nn^-1 k_n*,

one small block per query point (the backend's ``vecchia_predict``). A joint
prediction (the covariance, and so ``sample_y``) conditions all the query
points on the union U of their neighbour sets at once: the exact GP on U,
from one dense factor of K~_UU, as many points as :data:`JOINT_MAX_POINTS`.
"""

import numpy as np
from scipy.spatial import cKDTree

from ..._backend.covariance import make_covariance
from ..._linalg.lapack import cho_solve_factor, cholesky_in_place
from ...exceptions import NotPositiveDefiniteError
from ..predictive import predict_mean_cov
from .scaling import length_scales, scaled_inputs

__all__ = ["predict_vecchia", "joint_neighbourhood", "JOINT_MAX_POINTS"]

#: Most training points a joint prediction conditions on (the union of the
#: query points' neighbour sets): its factor is 8 |U|^2 bytes, 800 MB here.
JOINT_MAX_POINTS = 10_000


def _state(fitted):
    """The fitted model's scaled inputs and their tree, rebuilt where the
    kernel's length scales are not those the state was made at."""
    state = fitted.cache.get("state")
    scales = length_scales(fitted.kernel, fitted.X.shape[1])
    if state is None or not np.array_equal(state.scales, scales):
        from .objective import VecchiaState

        state = VecchiaState(scales, scaled_inputs(fitted.X, scales),
                             layout=getattr(state, "layout", None))
        fitted.cache["state"] = state
    if state.tree is None:
        state.tree = cKDTree(state.X_scaled)
    return state


def query_neighbours(fitted, X_query, n_neighbors):
    """(m, m') int64: each query point's nearest training points, in the
    scaled space of the fitted length scales."""
    state = _state(fitted)
    k = min(int(n_neighbors), len(fitted.X))
    _, idx = state.tree.query(scaled_inputs(X_query, state.scales), k=k, workers=-1)
    return np.ascontiguousarray(np.asarray(idx, dtype=np.int64).reshape(len(X_query), k))


def predict_vecchia(fitted, X_query, n_neighbors, want):
    """The latent mean (m, T) and variance (m,) (``want`` "var"; None for
    "mean") of a fitted model's predictions at X_query (m, d); raises
    numpy.linalg.LinAlgError where a query point's block is not positive
    definite."""
    covariance = make_covariance(fitted.kernel, fitted.X, warn=False)
    nbrs = query_neighbours(fitted, X_query, n_neighbors)
    mean, var, n_bad = covariance.vecchia_predict(fitted.kernel.theta, X_query, fitted.Y,
                                                  fitted.diag_add, nbrs)
    if n_bad:
        raise np.linalg.LinAlgError(
            f"The kernel's covariance of {n_bad} of the {len(X_query)} query points with "
            f"their nearest training points is not positive definite (duplicated "
            "training inputs without noise?). Increase alpha or the noise level's lower "
            "bound, or predict with more distinct neighbours (n_neighbors_predict).")
    return mean, (var if want == "var" else None)


def joint_neighbourhood(fitted, X_query, n_neighbors):
    """The sorted union U (u,) int64 of the query points' neighbour sets."""
    return np.unique(query_neighbours(fitted, X_query, n_neighbors))


def predict_joint(fitted, X_query, n_neighbors):
    """Mean (m, T) and covariance (m, m) of the query points conditioned
    jointly on the union U of their neighbours (module docstring); raises
    ValueError where U has more than :data:`JOINT_MAX_POINTS` points."""
    union = joint_neighbourhood(fitted, X_query, n_neighbors)
    if union.size > JOINT_MAX_POINTS:
        raise ValueError(
            f"A joint prediction of these {len(X_query):,} query points conditions on the "
            f"{union.size:,} training points that are their nearest "
            f"{int(n_neighbors)} neighbours, more than the {JOINT_MAX_POINTS:,} the "
            'Vecchia solver factors at once. Ask for fewer query points at once (a joint '
            "covariance over fewer points, or predict(X, return_std=True) for the "
            "marginal variances), lower n_neighbors_predict, or use solver=\"cholesky\" "
            "if its buffer fits.")
    covariance = make_covariance(fitted.kernel, fitted.X[union], warn=False)
    theta = fitted.kernel.theta
    B = np.empty((union.size, union.size), order="F")
    covariance.fill_lower(theta, fitted.diag_add[union], B)
    try:
        cholesky_in_place(B)
    except NotPositiveDefiniteError as exc:
        raise np.linalg.LinAlgError(
            "The kernel's covariance of the query points' nearest training points is not "
            "positive definite (duplicated training inputs without noise?). Increase "
            "alpha or the noise level's lower bound.", str(exc)) from exc
    A = cho_solve_factor(B, fitted.Y[union])
    return predict_mean_cov(covariance, theta, B, A, X_query)

"""Ordered nearest-neighbour conditioning sets for Vecchia's approximation
(Vecchia 1988; Guinness 2018, sec. 4; Katzfuss & Guinness 2021, sec. 3), all
through scipy.spatial.cKDTree (no spatial tree of fastgp's own).

:func:`ordered_neighbours` finds, for each position i of an ordering, the
min(m, i) nearest points among the positions before i, exactly (equal to the
brute-force search up to exact distance ties). The scheme: positions below
``brute_below`` by brute force; then the positions in [s, g s) (g =
``growth``, s growing geometrically) are queried against a tree built on
positions [0, g s) for q > m neighbours, of which the earlier ones are kept
in distance order. A query point at position i in [s, g s) has i / (g s) >=
1 / g of the tree's points before it, so q about g m (plus a margin) finds m
earlier ones for nearly every point; the few that find fewer are queried
again with 2q, and so on (at worst q reaches the tree's size, which is
exact). cKDTree returns its k nearest sorted by distance, so the first m
earlier points among them are the m nearest earlier points.

Costs (measured figures in docs/benchmarks.md, "Past one buffer: Vecchia against GPBoost"):
one tree build per step (sum of sizes about N g / (g - 1)) and N queries of about
g m (1 + margin) neighbours, in chunks of ``chunk`` query points so that the (chunk, q)
arrays stay small; ``workers=-1`` spreads each query over every core.
"""

import math

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["ordered_neighbours", "query_neighbours", "SpatialLayout", "GROWTH", "BRUTE_BELOW",
           "QUERY_MARGIN"]

#: Each step's positions [s, GROWTH s) query a tree on [0, GROWTH s).
GROWTH = 1.5
#: Positions below this are searched by brute force (O(BRUTE_BELOW^2) memory).
BRUTE_BELOW = 512
#: First query size q = ceil(GROWTH m (1 + QUERY_MARGIN)) + 4.
QUERY_MARGIN = 0.1
#: Query points per cKDTree.query call.
CHUNK = 1 << 16


def _as_points(X):
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), not {X.shape}")
    return X


def _brute_prefix(Xp, n0, m, out):
    """out[i, :min(m, i)] = positions of the nearest earlier points, i < n0
    (nearest first; ties to the earlier position)."""
    P = Xp[:n0]
    D = ((P[:, None, :] - P[None, :, :]) ** 2).sum(-1)
    D[np.triu_indices(n0)] = np.inf  # j >= i is not earlier
    k = min(m, max(n0 - 1, 0))
    if k == 0:
        return
    nearest = np.argsort(D, axis=1, kind="stable")[:, :k]
    valid = np.arange(k)[None, :] < np.arange(n0)[:, None]  # row i has i earlier points
    out[:n0, :k] = np.where(valid, nearest, -1)


def ordered_neighbours(X, perm, m, growth=GROWTH, brute_below=BRUTE_BELOW,
                       query_margin=QUERY_MARGIN, chunk=CHUNK):
    """The m nearest earlier points of every position of an ordering.

    Parameters
    ----------
    X : array of shape (N, d)
        The points (Euclidean distance; scale the columns first for
        length-scale-aware neighbours, Katzfuss, Guinness & Lawrence 2022).
    perm : array of shape (N,), int
        The ordering: position -> sample index.
    m : int
        Largest conditioning set.

    Returns
    -------
    nbrs : ndarray of shape (N, m), int64
        Row i: the sample indices of the min(m, i) points nearest X[perm[i]]
        among X[perm[:i]], nearest first, padded with -1 at the end.
    """
    X = _as_points(X)
    perm = np.asarray(perm, dtype=np.int64)
    n = X.shape[0]
    if perm.shape != (n,):
        raise ValueError(f"perm must have shape ({n},), not {perm.shape}")
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be at least 1, not {m}")
    growth = float(growth)
    if not growth > 1.0:
        raise ValueError(f"growth must exceed 1, not {growth}")
    Xp = np.ascontiguousarray(X[perm])
    out = np.full((n, m), -1, dtype=np.int64)  # positions first, samples at the end
    n0 = min(n, max(int(brute_below), m + 1))
    _brute_prefix(Xp, n0, m, out)
    q_first = int(math.ceil(growth * m * (1.0 + query_margin))) + 4
    s = n0
    while s < n:
        e = min(n, max(s + 1, int(math.ceil(s * growth))))
        tree = cKDTree(Xp[:e])
        for c0 in range(s, e, chunk):
            pending = np.arange(c0, min(e, c0 + chunk), dtype=np.int64)
            q = min(e, q_first)
            while pending.size:
                _, idx = tree.query(Xp[pending], k=q, workers=-1)
                idx = idx.reshape(pending.size, q)
                earlier = idx < pending[:, None]  # a missing neighbour is e: never earlier
                count = np.cumsum(earlier, axis=1)
                take = earlier & (count <= m)
                r, c = np.nonzero(take)
                out[pending[r], count[r, c] - 1] = idx[r, c]
                # every earlier point is at least min(m, i) = m here (i >= n0 > m)
                done = (count[:, -1] >= m) | (q >= e)
                pending = pending[~done]
                q = min(e, 2 * q)
        s = e
    return _relabelled(out, perm, out=out)


def query_neighbours(X_train, X_query, m):
    """The m nearest training points of each query point, for prediction.

    X_train (N, d), X_query (Nq, d). Returns (Nq, m) int64 training indices,
    nearest first; padded with -1 where m > N.
    """
    X_train = _as_points(X_train)
    X_query = _as_points(X_query)
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be at least 1, not {m}")
    k = min(m, X_train.shape[0])
    out = np.full((X_query.shape[0], m), -1, dtype=np.int64)
    if k == 0 or X_query.shape[0] == 0:
        return out
    tree = cKDTree(X_train)
    for c0 in range(0, X_query.shape[0], CHUNK):
        c1 = min(X_query.shape[0], c0 + CHUNK)
        _, idx = tree.query(X_query[c0:c1], k=k, workers=-1)
        out[c0:c1, :k] = idx.reshape(c1 - c0, k)
    return out


def _relabelled(index, table, rows=None, out=None, chunk=CHUNK):
    """``table[index]`` with -1 kept, of ``index`` (N, m) int64 (its rows
    taken in the order ``rows`` when given), written to ``out`` (which may
    be ``index`` itself when ``rows`` is None) or a new (N, m) array: by
    chunks of rows, so that the temporaries are (chunk, m), not N x m
    (four of those were a third of the peak memory of a fit at N = 10^6)."""
    n = index.shape[0] if rows is None else rows.size
    out = np.empty((n,) + index.shape[1:], dtype=np.int64) if out is None else out
    for r0 in range(0, n, chunk):
        r1 = min(n, r0 + chunk)
        block = index[r0:r1] if rows is None else index[rows[r0:r1]]
        missing = block < 0
        values = table[np.maximum(block, 0)]
        values[missing] = -1
        out[r0:r1] = values
    return out


class SpatialLayout:
    """Vecchia's rows relabelled for memory locality (computed once per fit).

    The likelihood is a sum over rows (a point and its conditioning set), so
    neither the samples' labels nor the rows' order matter to its value, but
    both matter to its speed: each row reads its |s| points' inputs, targets
    and nuggets, and with the samples in the user's order and the rows in
    maxmin order every one of those reads misses the cache (at N = 10^6,
    m = 30 the gather took 2.4 us of a row's 8 us). Here the samples are
    relabelled in the leaf order of a k-d tree (``cKDTree.indices``: points
    in one leaf, and leaves of one subtree, are near each other in space) and
    the rows sorted by their point's new label, so that consecutive rows'
    neighbours are near each other in memory too (the gather: 0.37 us).

    Attributes
    ----------
    sigma : (N,) int64
        new label -> sample: per-sample arrays are ``a[sigma]`` (:meth:`take`).
    point : (N,) int64
        the point of each row, in new labels (sorted: row r's point is r).
    nbrs : (N, m) int64
        each row's conditioning set in new labels, -1 padded as before.
    rows : (N,) int64
        row -> position of the ordering it came from.
    """

    def __init__(self, X, perm, nbrs):
        X = _as_points(X)
        perm = np.asarray(perm, dtype=np.int64)
        nbrs = np.asarray(nbrs, dtype=np.int64)
        n = X.shape[0]
        self.sigma = np.asarray(cKDTree(X).indices, dtype=np.int64)
        rank = np.empty(n, dtype=np.int64)
        rank[self.sigma] = np.arange(n, dtype=np.int64)
        new_point = rank[perm]
        self.rows = np.argsort(new_point, kind="stable").astype(np.int64)
        self.point = np.ascontiguousarray(new_point[self.rows])
        self.nbrs = _relabelled(nbrs, rank, rows=self.rows)

    def take(self, a):
        """A per-sample array (N, ...) in the new labels: ``a[sigma]``."""
        return np.ascontiguousarray(np.asarray(a)[self.sigma])

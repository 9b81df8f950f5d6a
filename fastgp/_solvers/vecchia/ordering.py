"""Orderings for Vecchia's approximation: maxmin (Guinness 2018) and random.

Maxmin: first the point nearest the inputs' mean, then repeatedly the point
whose distance to the points already chosen is largest (ties: the lowest
index). Guinness (2018, sec. 3 and 5) found it far more accurate than
coordinate or random orderings at the same m; Schaefer, Katzfuss & Owhadi
(2021) explain why (the ordering is a multiresolution, and the inverse
Cholesky factor of the kernel matrix decays fast in it).

Exact (``n <= exact_below``): O(N^2 d) with a running min-distance array,
in Numba (:func:`fastgp._engine.maxmin.maxmin_exact`).

Approximate (larger N), O(N log N) in expectation, all spatial queries by
scipy.spatial.cKDTree:

1. Nested random subsets S_0 = all points, S_{l+1} a random subset of S_l of
   size |S_l| / ``subset_factor`` (the first point kept in every one), down
   to one of at most ``base_size`` points, which is ordered exactly. The
   subsets are drawn with weights inversely proportional to the local
   density (:func:`_log_sparsity`; Efraimidis & Spirakis 2006's weighted
   sampling without replacement), so that they are near uniform in space,
   as maxmin's coarse levels are. Drawn uniformly, a subset misses an
   isolated point half the time, and the point then comes after the whole
   prefix instead of among the first: on 20,000 points drawn from a
   Student t (3 degrees of freedom) a point came 151 x farther from its
   predecessors than an earlier one had, against 1.2 with the weights.
2. Going back up, level l takes as its prefix the first
   |order_{l+1}| / ``keep_fraction`` points of the order of S_{l+1} (the
   rest of S_{l+1} returns to the pool: the tail of a random subset's
   maxmin order is its closest pairs, far finer than the level's spacing,
   and keeping it made later points up to 100 x farther from their
   predecessors than earlier ones), and continues it over the remaining
   points R of S_l by the exact maxmin rule *given the prefix*: each point
   of R starts with key_0 = its squared distance to the prefix (a cKDTree
   query), and a max-heap repeatedly takes the largest key; the chosen
   point p lowers the key of every unchosen q with |p - q|^2 < key(q).
   Since p is taken at a key no larger than key_0(p) and every unchosen q
   then has key(q) <= key(p) and key(q) <= key_0(q), only pairs with
   |p - q|^2 < min(key_0(p), key_0(q)) can carry an update; they are found
   by fixed-radius cKDTree pair searches (:func:`_update_pairs`). So the heap
   phase is exactly maxmin given its prefix
   (:func:`fastgp._engine.maxmin.maxmin_heap`).

The only approximation is the prefix: the head of the order of a random
subset twice (``subset_factor``) as dense as the level, instead of the head
of the level's own order. A point's update pairs number about
``subset_factor`` x ``keep_fraction`` (the points nearer than the nearest
prefix point), so the work is O(N subset_factor keep_fraction log N), and
the deviation from exact maxmin falls as ``keep_fraction`` grows. For data
of very uneven density the pairs are more (the prefix is uniform in space,
so a dense region's points are many per prefix point): 23 s against 13 s at
N = 10^6 for a Student t against uniform points. Measured by each point's
distance rho to its predecessors (the tests' ``maxmin_deviation``,
tests/_vecchia_reference.py), at N = 20,000 points in 2-D against the exact
ordering (the tests check looser bounds on a smaller sample): with
the defaults, uniform, Gaussian, clustered or Student t, no point was more
than 1.6 x farther from its predecessors than an earlier point had been
(exact: at most 1), and each position's distance to its predecessors was
within [0.77, 1.5] x the exact ordering's at the same position.
"""

import math

import numpy as np
from scipy.spatial import cKDTree
from sklearn.utils import check_random_state

from ..._backend import points as vp

__all__ = ["maxmin_order", "random_order", "EXACT_BELOW", "BASE_SIZE", "SUBSET_FACTOR",
           "KEEP_FRACTION", "DENSITY_FRACTION"]

#: Orderings of at most this many points are exact (O(N^2): 1.3 s at 20,000).
EXACT_BELOW = 20_000
#: The approximate ordering's innermost subset, ordered exactly.
BASE_SIZE = 4096
#: Each nested subset is this many times smaller than the last.
SUBSET_FACTOR = 2
#: Of a subset's order, the first 1 / KEEP_FRACTION is the next level's prefix.
KEEP_FRACTION = 8
#: The subsets sample points with weight r^d, r the distance to the second
#: nearest point of a random DENSITY_FRACTION of the points (0: uniformly).
DENSITY_FRACTION = 1 / 32
#: ... and r the distance to its (_DENSITY_NEIGHBOURS + 1)-th nearest point of R
_DENSITY_NEIGHBOURS = 3
#: The quantile of the keys that sets each round's radius in _update_pairs.
_PAIR_QUANTILE = 0.75


def _as_points(X):
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X must be 2-D (n_samples, n_features), n_samples >= 1, "
                         f"not {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinity")
    return X


def _transposed(X):
    """(d, n) float64 C-contiguous, writeable (the jitted routines' type)."""
    return np.require(X.T, np.float64, ["C", "W"])


def random_order(n, random_state=None):
    """A uniformly random ordering of n points: (n,) int64, position ->
    sample, deterministic for an int ``random_state`` (scikit-learn's
    conventions)."""
    return check_random_state(random_state).permutation(int(n)).astype(np.int64)


def maxmin_order(X, random_state=None, exact_below=EXACT_BELOW, base_size=BASE_SIZE,
                 subset_factor=SUBSET_FACTOR, keep_fraction=KEEP_FRACTION,
                 density_fraction=DENSITY_FRACTION):
    """The maxmin ordering of the rows of X (N, d): (N,) int64, position ->
    sample (module docstring). Exact where N <= ``exact_below`` (then
    ``random_state`` is unused); otherwise approximate (nested subsets down
    to ``base_size`` points), deterministic for an int ``random_state``."""
    X = _as_points(X)
    n = X.shape[0]
    first = int(np.argmin(((X - X.mean(axis=0)) ** 2).sum(axis=1)))
    if n <= exact_below:
        return _exact(X, first)
    if subset_factor < 2 or keep_fraction < 1 or base_size < 1:
        raise ValueError("subset_factor must be at least 2, keep_fraction and base_size "
                         "at least 1")
    rng = check_random_state(random_state)
    log_weight = (_log_sparsity(X, rng, density_fraction) if density_fraction
                  else np.zeros(n))
    levels = [np.arange(n, dtype=np.int64)]
    while levels[-1].size > base_size:
        current = levels[-1]
        size = int(math.ceil(current.size / subset_factor))
        others = current[current != first]
        # weighted sampling without replacement (Efraimidis & Spirakis 2006):
        # the size - 1 largest log(u) / w, w = the points' weights
        u = rng.uniform(size=others.size)
        keys = np.log(u) * np.exp(-log_weight[others])
        chosen = np.argpartition(-keys, size - 2)[:size - 1] if size > 1 else []
        levels.append(np.sort(np.concatenate([[first], others[chosen]])).astype(np.int64))
    base = levels[-1]
    order = base[_exact(X[base], int(np.searchsorted(base, first)))]
    for level in reversed(levels[:-1]):
        prefix = order[:int(math.ceil(order.size / keep_fraction))]
        order = _continue(X, level, prefix)
    return order


def _log_sparsity(X, rng, fraction):
    """d log r for every point, r its distance to the second nearest point of
    a random subset R of about ``fraction`` N points (d = X.shape[1]): the
    log of a weight roughly inverse to the local density at R's scale, so
    that the nested subsets are near uniform in space, as maxmin's coarse
    levels are, rather than in density; an isolated point (an outlier) is
    then kept in nearly every subset instead of in half of them. (A query
    against the small tree of R costs a fraction of a k-nearest query of all
    points: 0.6 s against 6.3 s at N = 10^6.) Distances of 0 (duplicates)
    get the smallest positive distance's weight."""
    n = X.shape[0]
    size = min(n, max(64, int(fraction * n)))
    if size < 3:
        return np.zeros(n)
    R = X[rng.choice(n, size, replace=False)]
    k = min(size - 1, _DENSITY_NEIGHBOURS)
    dist, _ = cKDTree(R).query(X, k=k + 1, workers=-1)
    r = dist[:, k]
    positive = r[r > 0]
    r = np.maximum(r, positive.min() if positive.size else 1.0)
    return X.shape[1] * np.log(r)


def _exact(X, first):
    order = np.empty(X.shape[0], dtype=np.int64)
    vp.maxmin_exact(_transposed(X), np.int64(first), order)
    return order


def _continue(X, level, prefix):
    """The exact maxmin continuation of ``prefix`` over the other points of
    ``level`` (sorted sample indices): the prefix, then the rest in heap
    order (module docstring, step 2)."""
    rest = np.setdiff1d(level, prefix, assume_unique=True)  # sorted: ties by index
    if rest.size == 0:
        return prefix
    XP = X[prefix]
    XR = X[rest]
    XR_T = _transposed(XR)
    _, nearest = cKDTree(XP).query(XR, k=1, workers=-1)
    key = np.empty(rest.size)
    vp.sqdist_pairs(XR_T, np.arange(rest.size, dtype=np.int64), _transposed(XP),
                    np.asarray(nearest, dtype=np.int64), key)
    ptr, nbr = _update_pairs(XR, key)
    local = np.empty(rest.size, dtype=np.int64)
    vp.maxmin_heap(XR_T, key, ptr, nbr, local)
    return np.concatenate([prefix, rest[local]])


def _update_pairs(P, key, quantile=None):
    """CSR lists (ptr (n + 1,), nbr) of the pairs of points of P (n, d) whose
    squared distance is below min(key[p], key[q]) (with a relative slack of
    1e-12), in both directions: the only pairs along which the heap phase
    can lower a key (module docstring, step 2).

    All by fixed-radius cKDTree searches (``query_pairs``, a dual-tree
    search in C that returns an array, about ten times as fast per pair as
    k-nearest queries): the pairs within r = sqrt of the ``quantile`` of the
    keys cover every pair whose smaller key is at most r^2; the pairs whose
    both keys exceed r^2 are found the same way among those points alone,
    recursively (each round keeps the 1 - quantile largest keys)."""
    if quantile is None:
        quantile = _PAIR_QUANTILE
    n = P.shape[0]
    P_T = _transposed(P)
    rows, cols = [], []
    ids = np.arange(n, dtype=np.int64)
    while ids.size > 1:
        k = key[ids]
        r2 = float(np.quantile(k, quantile)) if ids.size > 64 else float(k.max())
        pairs = cKDTree(P[ids]).query_pairs(math.sqrt(r2) * (1.0 + 1e-9),
                                            output_type="ndarray")
        if pairs.size:
            a = ids[pairs[:, 0]]
            b = ids[pairs[:, 1]]
            keep = np.empty(a.size, dtype=np.bool_)
            vp.filter_update_pairs(P_T, key, a, b, r2, keep)
            rows.append(a[keep])
            cols.append(b[keep])
        ids = ids[k > r2]
    a = np.concatenate(rows + [np.empty(0, np.int64)]).astype(np.int64)
    b = np.concatenate(cols + [np.empty(0, np.int64)]).astype(np.int64)
    ptr = np.empty(n + 1, dtype=np.int64)
    nbr = vp.symmetric_lists(n, a, b, ptr)
    return ptr, nbr

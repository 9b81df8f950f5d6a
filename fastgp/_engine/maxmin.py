"""The loops of the maxmin ordering of Vecchia's approximation (Guinness
2018, sec. 3; the orderings themselves: fastgp/_solvers/vecchia/ordering.py).

:func:`maxmin_exact` is the O(N^2) maxmin ordering with a running
min-distance array; :func:`maxmin_heap` is the inner loop of the approximate
one: a max-heap of min-distances that a newly chosen point updates only over
precomputed pair lists (:func:`filter_update_pairs`, :func:`symmetric_lists`).
Every distance is :func:`sqdist`'s, so that equal pairs give equal bits
wherever they are compared.
"""

import numpy as np

from .config import jit

__all__ = ["sqdist", "sqdist_pairs", "maxmin_exact", "maxmin_heap", "filter_update_pairs",
           "symmetric_lists"]


@jit
def sqdist(X1, p, X2, q):
    """Squared Euclidean distance between columns X1[:, p] and X2[:, q]
    ((d, n1), (d, n2) float64), the dimensions summed in order: every maxmin
    routine and key computation uses this one, so that equal pairs give
    equal bits wherever they are compared."""
    s = 0.0
    for k in range(X1.shape[0]):
        diff = X1[k, p] - X2[k, q]
        s += diff * diff
    return s


@jit
def sqdist_pairs(X1, i1, X2, i2, out):
    """out[u] = sqdist(X1, i1[u], X2, i2[u]) for every u (int64 index arrays)."""
    for u in range(i1.size):
        out[u] = sqdist(X1, i1[u], X2, i2[u])


@jit
def maxmin_exact(X, first, order):
    """Exact maxmin ordering (Guinness 2018, sec. 3): order[0] = first, then
    repeatedly the point whose (squared) distance to the chosen set is
    largest, ties to the lowest index. O(n^2 d) time, O(n) memory: a running
    min-distance array updated by each newly chosen point (chosen points
    hold -1, which no distance lowers). The update runs dimension by
    dimension over all points (the loops vectorise); its sums are
    :func:`sqdist`'s, in the same order.

    X (d, n) float64 C-contiguous; first int64; order (n,) int64, overwritten.
    """
    d = X.shape[0]
    n = X.shape[1]
    dist = np.full(n, np.inf)
    s = np.empty(n)
    p = first
    for step in range(n):
        order[step] = p
        dist[p] = -1.0
        for q in range(n):
            s[q] = 0.0
        for k in range(d):
            xk = X[k, p]
            row = X[k]
            for q in range(n):
                diff = row[q] - xk
                s[q] += diff * diff
        for q in range(n):
            if s[q] < dist[q]:
                dist[q] = s[q]
        best = 0
        best_value = dist[0]
        for q in range(1, n):
            if dist[q] > best_value:
                best_value = dist[q]
                best = q
        p = best


@jit
def _heap_before(key, a, b):
    """Whether heap entry a comes before b: larger key first, ties to the
    lower index (the maxmin ordering's rule)."""
    return key[a] > key[b] or (key[a] == key[b] and a < b)


@jit
def _sift_down(heap, pos, key, size, k):
    """Move heap[k] down to its place (its key decreased)."""
    item = heap[k]
    while True:
        child = 2 * k + 1
        if child >= size:
            break
        if child + 1 < size and _heap_before(key, heap[child + 1], heap[child]):
            child += 1
        if not _heap_before(key, heap[child], item):
            break
        heap[k] = heap[child]
        pos[heap[k]] = k
        k = child
    heap[k] = item
    pos[item] = k


@jit
def maxmin_heap(X, key, ptr, nbr, order):
    """The heap phase of the approximate maxmin ordering
    (fastgp/_solvers/vecchia/ordering.py): points 0 .. n-1 of X (d, n), each
    with key[p] = its squared distance to the points ordered before them all
    (the prefix), are ordered by repeatedly taking the largest key (ties to
    the lowest index), and each chosen point p lowers the keys of the points
    of its list nbr[ptr[p]:ptr[p + 1]] (indices into X) to their squared
    distance to p where that is smaller. With every list holding the points
    within sqrt(key[p]) of p (as its key stood before this phase), the keys
    stay the exact squared distances to the chosen set: the phase is then
    the exact maxmin continuation of the prefix.

    X (d, n) float64 C-contiguous; key (n,) float64, overwritten; ptr (n + 1,)
    int64, nbr int64 (CSR); order (n,) int64, overwritten. An indexed binary
    max-heap: O((n + nnz) log n).
    """
    n = X.shape[1]
    heap = np.arange(n)
    pos = np.arange(n)
    for k in range(n // 2 - 1, -1, -1):
        _sift_down(heap, pos, key, n, k)
    chosen = np.zeros(n, dtype=np.bool_)
    size = n
    for step in range(n):
        p = heap[0]
        order[step] = p
        chosen[p] = True
        size -= 1
        if size > 0:
            heap[0] = heap[size]
            pos[heap[0]] = 0
            _sift_down(heap, pos, key, size, 0)
        for u in range(ptr[p], ptr[p + 1]):
            q = nbr[u]
            if chosen[q]:
                continue
            s = sqdist(X, p, X, q)
            if s < key[q]:
                key[q] = s
                _sift_down(heap, pos, key, size, pos[q])


@jit
def filter_update_pairs(X, key, a, b, r2, keep):
    """keep[u] = whether the pair (a[u], b[u]) of columns of X (d, n) can
    carry a key update in :func:`maxmin_heap`: its squared distance is below
    min(key[a], key[b]) (with a relative slack of 1e-12, so that no pair is
    lost to rounding; an extra pair costs a comparison, never a wrong key)
    and that smaller key is at most r2 (the others belong to a later round
    of fastgp/_solvers/vecchia/ordering.py's search). Returns the count."""
    count = 0
    for u in range(a.size):
        ka = key[a[u]]
        kb = key[b[u]]
        lim = ka if ka < kb else kb
        ok = lim <= r2 and sqdist(X, a[u], X, b[u]) < lim * (1.0 + 1e-12)
        keep[u] = ok
        if ok:
            count += 1
    return count


@jit
def symmetric_lists(n, a, b, ptr):
    """CSR lists of the undirected pairs (a[u], b[u]) in both directions:
    ptr (n + 1,) int64 overwritten; returns nbr (2 a.size,) int64, each
    point's partners in the order of the pairs (a counting sort: O(n + pairs))."""
    for p in range(n + 1):
        ptr[p] = 0
    for u in range(a.size):
        ptr[a[u] + 1] += 1
        ptr[b[u] + 1] += 1
    for p in range(n):
        ptr[p + 1] += ptr[p]
    fill = ptr[:n].copy()
    nbr = np.empty(2 * a.size, dtype=np.int64)
    for u in range(a.size):
        nbr[fill[a[u]]] = b[u]
        fill[a[u]] += 1
        nbr[fill[b[u]]] = a[u]
        fill[b[u]] += 1
    return nbr

"""A dense NumPy and scikit-learn reference for Vecchia's approximation, for
the tests (docs/design.md, "Vecchia's approximation"): no Numba, no fastgp
engine, nothing clever.

- :func:`vecchia_nll_grad_dense`: the negative log-likelihood
  -sum_i log p(y_i | y_c(i)) as a difference of two dense Gaussian log
  densities per position, log p(y_i | y_c) = log N(y_s; 0, B) - log N(y_c;
  0, B_cc) (Vecchia 1988), each with numpy.linalg on the block, kernel values
  from the scikit-learn kernel object (``kernel(Xs)``, so WhiteKernel sits on
  the block's diagonal only) plus the nugget; the gradient by the trace
  identity (Rasmussen & Williams 2006, eq. 5.9) on each block,
  d(-log N(Y; 0, B)) = 1/2 tr((T B^-1 - A A^T) dB), A = B^-1 Y, with dB the
  kernel's ``K_gradient``.
- :func:`vecchia_predict_dense`: conditional mean and latent variance given
  neighbour sets.
- :func:`brute_ordered_neighbours`, :func:`brute_maxmin`: O(N^2) references
  for the neighbour search and the exact maxmin ordering.
- :func:`min_distances`, :func:`maxmin_deviation`: how far an ordering is
  from a maxmin one (the measure of fastgp/_solvers/vecchia/ordering.py's
  docstring), from
  fastgp's exact neighbour search (cKDTree).
"""

import numpy as np

from fastgp._solvers.vecchia.neighbours import ordered_neighbours

__all__ = ["vecchia_nll_grad_dense", "vecchia_predict_dense", "brute_ordered_neighbours",
           "brute_maxmin", "gaussian_nll_grad", "min_distances", "maxmin_deviation"]


def gaussian_nll_grad(B, dB, Y):
    """-log N(Y; 0, B) summed over the T columns of Y (n, T), and its
    gradient (P,) for dB (n, n, P) = dB/dtheta."""
    n, T = Y.shape
    if n == 0:
        return 0.0, np.zeros(dB.shape[2])
    L = np.linalg.cholesky(B)
    A = np.linalg.solve(B, Y)
    logdet = 2.0 * np.sum(np.log(np.diag(L)))
    value = 0.5 * np.sum(Y * A) + 0.5 * T * logdet + 0.5 * n * T * np.log(2.0 * np.pi)
    W = T * np.linalg.inv(B) - A @ A.T
    grad = 0.5 * np.einsum("ij,ijp->p", W, dB)
    return value, grad


def vecchia_nll_grad_dense(kernel, X, Y, diag_add, perm, nbrs):
    """Vecchia's NLL and its gradient (kernel.n_dims,), densely.

    kernel: a scikit-learn kernel; X (N, d); Y (N,) or (N, T); diag_add
    scalar or (N,); perm (N,) position -> sample; nbrs (N, m) sample indices
    of each position's conditioning set, -1 padded.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    alpha = np.broadcast_to(np.asarray(diag_add, dtype=np.float64), (len(X),))
    value = 0.0
    grad = np.zeros(kernel.n_dims)
    for i, p in enumerate(perm):
        c = [int(j) for j in nbrs[i] if j >= 0]
        s = c + [int(p)]
        K, dK = kernel(X[s], eval_gradient=True)
        B = K + np.diag(alpha[s])
        v1, g1 = gaussian_nll_grad(B, dK, Y[s])
        nc = len(c)
        v0, g0 = gaussian_nll_grad(B[:nc, :nc], dK[:nc, :nc], Y[c])
        value += v1 - v0
        grad += g1 - g0
    return value, grad


def vecchia_predict_dense(kernel, X, Y, diag_add, X_query, nbrs):
    """Mean (Nq, T) and latent variance (Nq,) at X_query given its neighbours
    nbrs (Nq, m) (training indices, -1 padded): mean = k_*n K~_nn^-1 y_n,
    var = k_** - k_*n K~_nn^-1 k_n*, with K~_nn = kernel(X_n) + diag(alpha_n),
    k_*n = kernel(x*, X_n) (no WhiteKernel) and k_** = kernel.diag(x*)
    (WhiteKernel included: scikit-learn's and fastgp's predict)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    Xq = np.asarray(X_query, dtype=np.float64)
    alpha = np.broadcast_to(np.asarray(diag_add, dtype=np.float64), (len(X),))
    mean = np.empty((len(Xq), Y.shape[1]))
    var = np.empty(len(Xq))
    for c in range(len(Xq)):
        n = [int(j) for j in nbrs[c] if j >= 0]
        Knn = kernel(X[n]) + np.diag(alpha[n])
        ks = kernel(Xq[c:c + 1], X[n])[0]
        sol = np.linalg.solve(Knn, np.column_stack([Y[n], ks]))
        mean[c] = ks @ sol[:, :-1]
        var[c] = kernel.diag(Xq[c:c + 1])[0] - ks @ sol[:, -1]
    return mean, var


def brute_ordered_neighbours(X, perm, m):
    """For each position i, the min(m, i) nearest samples among positions < i,
    nearest first (ties: the earlier position), as (N, m) int64 sample
    indices, -1 padded. O(N^2) memory and time."""
    X = np.asarray(X, dtype=np.float64)
    Xp = X[perm]
    n = len(Xp)
    out = np.full((n, m), -1, dtype=np.int64)
    D = ((Xp[:, None, :] - Xp[None, :, :]) ** 2).sum(-1)
    for i in range(1, n):
        order = np.argsort(D[i, :i], kind="stable")[:m]
        out[i, :order.size] = np.asarray(perm)[order]
    return out


def brute_maxmin(X):
    """Exact maxmin ordering (Guinness 2018): first the point nearest the
    mean of X, then repeatedly the point farthest from the chosen ones (ties:
    the lowest index). O(N^2) time, plain NumPy."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    first = int(np.argmin(((X - X.mean(axis=0)) ** 2).sum(1)))
    order = np.empty(n, dtype=np.int64)
    dist = np.full(n, np.inf)
    p = first
    for step in range(n):
        order[step] = p
        dist[p] = -1.0
        alive = dist >= 0
        dist[alive] = np.minimum(dist[alive], ((X[alive] - X[p]) ** 2).sum(1))
        p = int(np.argmax(dist))
    return order


def min_distances(X, order):
    """rho (N,): rho[i] = distance of X[order[i]] to X[order[:i]] (rho[0] =
    inf), exactly (cKDTree, ``neighbours.ordered_neighbours`` with m = 1),
    for X (N, d). For an exact maxmin ordering rho is non-increasing."""
    X = np.asarray(X, dtype=np.float64)
    nearest = ordered_neighbours(X, order, 1)[:, 0]
    rho = np.full(X.shape[0], np.inf)
    rho[1:] = np.sqrt(((X[order[1:]] - X[nearest[1:]]) ** 2).sum(axis=1))
    return rho


def maxmin_deviation(X, order, reference_order=None):
    """How far ``order`` is from a maxmin ordering of X (N, d).

    Returns a dict:
    - ``rise``: max over i of rho[i] / min(rho[1:i]) (at most 1 for exact maxmin,
      whose rho never increases; a value r means some point lies r times
      farther from its predecessors than an earlier point did);
    - ``rise_q999``: that ratio's 99.9th percentile over i;
    - with ``reference_order`` (the exact ordering): ``ratio_max``,
      ``ratio_min``, ``ratio_q001``, ``ratio_q999``, the extremes and
      quantiles of rho[i] / rho_exact[i] over positions i >= 1.
    """
    rho = min_distances(X, order)
    running = np.minimum.accumulate(rho[1:])
    rise = rho[2:] / running[:-1] if rho.size > 2 else np.ones(1)
    out = {"rise": float(rise.max()), "rise_q999": float(np.quantile(rise, 0.999))}
    if reference_order is not None:
        ratio = rho[1:] / min_distances(X, reference_order)[1:]
        out.update(ratio_max=float(ratio.max()), ratio_min=float(ratio.min()),
                   ratio_q001=float(np.quantile(ratio, 0.001)),
                   ratio_q999=float(np.quantile(ratio, 0.999)))
    return out

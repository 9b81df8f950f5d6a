"""Row-wise BFGS: many small independent minimisations at once.

GPLVM.transform places each new data row by minimising its own function of a
Q-dimensional latent point. The rows do not interact, but evaluating them
together is what makes an evaluation cheap (one cross-covariance block, one
triangular solve with many right-hand sides). One joint L-BFGS over all rows
would couple them through a shared line search and stopping rule, so a row's
answer would depend on which other rows came with it; here every row keeps its
own inverse-Hessian approximation (Q x Q), its own backtracking line search and
its own stopping test (Nocedal & Wright 2006, Alg. 6.1 with the initial
scaling of eq. 6.20 and Armijo backtracking, Alg. 3.1). Only the evaluations
are batched, so each row's iterates are those it would have alone.
"""

import numpy as np

__all__ = ["minimize_rows"]

_ARMIJO = 1e-4
_MAX_HALVINGS = 40


def minimize_rows(fun, X0, step0, max_iter=200, gtol=1e-6, ftol=1e-12):
    """Minimise f_c(x_c) independently for every row c of X0.

    Parameters
    ----------
    fun : callable (X (m, Q), rows (m,) int) -> (f (m,), grad (m, Q))
        Values and gradients of the listed rows' functions at the given
        points; rows are indices into X0.
    X0 : ndarray of shape (n_rows, Q)
        Starting points.
    step0 : float
        Length of each row's first step (along its steepest descent).
    max_iter : int
        BFGS iterations per row.
    gtol : float
        A row stops when max |grad| <= gtol * max(1, |f|).
    ftol : float
        A row stops when an accepted step lowers f by at most
        ftol * max(1, |f|).

    Returns
    -------
    X : ndarray of shape (n_rows, Q)
        The last accepted point of every row.
    f : ndarray of shape (n_rows,)
    n_iter : ndarray of shape (n_rows,) int
    """
    X = np.array(X0, dtype=np.float64, copy=True)
    m, Q = X.shape
    rows = np.arange(m)
    f, g = fun(X, rows)
    H = np.zeros((m, Q, Q))
    scale = step0 / np.maximum(np.linalg.norm(g, axis=1), 1e-300)
    H[:] = np.eye(Q)
    H *= scale[:, None, None]
    updated = np.zeros(m, dtype=bool)  # has H been rescaled by eq. 6.20?
    n_iter = np.zeros(m, dtype=np.int64)
    active = np.isfinite(f) & ~_small(g, f, gtol)
    for _ in range(max_iter):
        idx = rows[active]
        if idx.size == 0:
            break
        p = -np.einsum("cij,cj->ci", H[idx], g[idx])
        slope = np.einsum("ci,ci->c", p, g[idx])
        bad = ~(slope < 0.0)  # lost descent: restart from steepest descent
        if np.any(bad):
            b = idx[bad]
            s = step0 / np.maximum(np.linalg.norm(g[b], axis=1), 1e-300)
            H[b] = np.eye(Q) * s[:, None, None]
            updated[b] = False
            p[bad] = -g[b] * s[:, None]
            slope[bad] = np.einsum("ci,ci->c", p[bad], g[b])
        # Armijo backtracking, row by row (only unfinished rows are evaluated)
        t = np.ones(idx.size)
        X_new, f_new, g_new = X[idx].copy(), f[idx].copy(), g[idx].copy()
        accepted = np.zeros(idx.size, dtype=bool)
        pending = np.arange(idx.size)
        for _ in range(_MAX_HALVINGS):
            trial = X[idx[pending]] + t[pending, None] * p[pending]
            ft, gt = fun(trial, idx[pending])
            ok = np.isfinite(ft) & (ft <= f[idx[pending]] + _ARMIJO * t[pending] * slope[pending])
            ok &= np.all(np.isfinite(gt), axis=1)
            good = pending[ok]
            X_new[good], f_new[good], g_new[good] = trial[ok], ft[ok], gt[ok]
            accepted[good] = True
            pending = pending[~ok]
            if pending.size == 0:
                break
            t[pending] *= 0.5
        n_iter[idx] += 1
        # rows whose line search failed are at a point the search cannot improve
        active[idx[~accepted]] = False
        acc = idx[accepted]
        s_vec = X_new[accepted] - X[acc]
        y_vec = g_new[accepted] - g[acc]
        decrease = f[acc] - f_new[accepted]
        X[acc], f[acc], g[acc] = X_new[accepted], f_new[accepted], g_new[accepted]
        _bfgs_update(H, updated, acc, s_vec, y_vec)
        done = _small(g[acc], f[acc], gtol) | (decrease <= ftol * np.maximum(1.0, np.abs(f[acc])))
        active[acc[done]] = False
    return X, f, n_iter


def _small(g, f, gtol):
    return np.max(np.abs(g), axis=1) <= gtol * np.maximum(1.0, np.abs(f))


def _bfgs_update(H, updated, rows, s, y):
    """Nocedal & Wright (2006) eq. 6.17 for the listed rows, skipped where
    the curvature s.y is not positive; before the first update, H is scaled
    by s.y / y.y (eq. 6.20)."""
    sy = np.einsum("ci,ci->c", s, y)
    yy = np.einsum("ci,ci->c", y, y)
    ok = sy > 1e-12 * np.linalg.norm(s, axis=1) * np.sqrt(yy)
    if not np.any(ok):
        return
    rows, s, y, sy, yy = rows[ok], s[ok], y[ok], sy[ok], yy[ok]
    Q = s.shape[1]
    first = ~updated[rows]
    if np.any(first):
        H[rows[first]] = np.eye(Q) * (sy[first] / yy[first])[:, None, None]
        updated[rows[first]] = True
    rho = 1.0 / sy
    Hr = H[rows]
    eye = np.eye(Q)
    left = eye - rho[:, None, None] * np.einsum("ci,cj->cij", s, y)
    Hr = np.einsum("cij,cjk,clk->cil", left, Hr, left)
    Hr += rho[:, None, None] * np.einsum("ci,cj->cij", s, s)
    H[rows] = Hr

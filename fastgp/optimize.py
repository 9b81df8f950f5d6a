"""The optimisers: every minimisation fastgp runs.

Two kinds, one module:

- :func:`minimize_theta` (and :func:`minimize_with_restarts` around it)
  minimises one ``(value, gradient) = f(theta)`` objective with SciPy: the
  regression's hyperparameters, and the GPLVM's latent points and
  hyperparameters together. Drivers below.
- :func:`minimize_rows` minimises many small independent functions at once,
  one BFGS per row, for GPLVM.transform (section "Row-wise BFGS" below).

Drivers
-------
``"fmin_l_bfgs_b"`` is SciPy's L-BFGS-B within the kernel's log-space bounds
(scikit-learn's default); ``"CG"`` is SciPy's nonlinear conjugate gradients,
unbounded in log space; a callable follows scikit-learn's contract
``optimizer(obj_func, initial_theta, bounds) -> (theta_opt, func_min)`` with
``obj_func(theta, eval_gradient=True)``.

Every driver's objective is wrapped by :class:`BestPoint`, which remembers the
best finite point evaluated. The fit keeps that point when the optimiser ends
elsewhere (an abnormal termination, a non-finite final value), so a run never
leaves the estimator worse than the best point it saw.

Trouble is reported, not raised (docs/reliability.md): a run that stops without
converging (scipy's status, such as ``ABNORMAL_TERMINATION_IN_LNSRCH`` or the
iteration limit), a start at which the objective or its gradient is not
finite (L-BFGS-B would call the zero gradient that the objective answers there
"converged"), and a ``KeyboardInterrupt`` each end the run at the best finite
point with a :class:`~sklearn.exceptions.ConvergenceWarning` saying what
happened. An interrupt is re-raised only if no finite point was seen, and the
result says it was interrupted so that the caller skips further restarts.

Row-wise BFGS
-------------
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

import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

from ._user_warnings import warn_user

__all__ = ["BestPoint", "OptimizationResult", "minimize_theta", "minimize_with_restarts",
           "minimize_rows"]


class BestPoint:
    """Wraps ``objective(theta) -> (value, grad)``; records the best finite
    value seen, the number of calls, and reports each call to ``callback``."""

    def __init__(self, objective, callback=None):
        self.objective = objective
        self.callback = callback
        self.theta = None
        self.value = math.inf
        self.grad = None
        self.n_calls = 0

    def __call__(self, theta):
        theta = np.array(theta, dtype=np.float64)
        value, grad = self.objective(theta)
        self.n_calls += 1
        if math.isfinite(value) and value < self.value:
            self.theta, self.value, self.grad = theta, float(value), np.array(grad)
        return value, grad


@dataclass
class OptimizationResult:
    """Outcome of one optimiser run: the best finite point it evaluated."""

    theta: np.ndarray
    value: float
    grad: np.ndarray
    n_evaluations: int
    n_iterations: int
    message: str
    interrupted: bool = False


class _IterationLog:
    """SciPy ``callback`` that counts iterations and reports progress."""

    def __init__(self, tracker, report):
        self.tracker = tracker
        self.report = report
        self.n = 0

    def __call__(self, *args, **kwargs):
        self.n += 1
        if self.report is not None and self.tracker.grad is not None:
            self.report(self.n, self.tracker.value, float(np.linalg.norm(self.tracker.grad)))


def minimize_theta(objective, theta0, bounds, optimizer, report=None, max_iter=None,
                   tol=None):
    """Minimise ``objective`` from ``theta0``.

    Parameters
    ----------
    objective : callable theta -> (value, grad)
    theta0 : ndarray of shape (n_theta,)
    bounds : ndarray of shape (n_theta, 2), log space
    optimizer : "fmin_l_bfgs_b", "CG" or callable (scikit-learn's contract)
    report : callable (iteration, value, grad_norm) or None
        Called once per optimiser iteration (named drivers only).
    max_iter : int or None
        Iteration limit of the named drivers (None: SciPy's default).
    tol : float or None
        ``scipy.optimize.minimize``'s ``tol`` for the named drivers.

    Returns
    -------
    OptimizationResult with the best finite point evaluated; ``value`` is
    ``inf`` if no evaluated point had a finite objective (``theta`` is then
    ``theta0``). ``interrupted`` is True if a KeyboardInterrupt ended the run.

    Raises
    ------
    KeyboardInterrupt
        Only if the interrupt came before any finite point was evaluated.
    """
    tracker = BestPoint(objective)
    log = _IterationLog(tracker, report)
    theta0 = np.asarray(theta0, dtype=np.float64)
    options = {} if max_iter is None else {"maxiter": int(max_iter)}
    message, status, interrupted = "", 0, False
    try:
        if optimizer in ("fmin_l_bfgs_b", "CG"):
            method = "L-BFGS-B" if optimizer == "fmin_l_bfgs_b" else "CG"
            res = scipy.optimize.minimize(
                tracker, theta0, method=method, jac=True, callback=log, options=options,
                bounds=bounds if method == "L-BFGS-B" else None, tol=tol)
            message, status = str(res.message), int(res.status)
        elif callable(optimizer):
            _run_callable(optimizer, tracker, theta0, bounds)
        else:
            raise ValueError(f"Unknown optimizer {optimizer}.")
    except KeyboardInterrupt:
        if tracker.theta is None:
            raise
        interrupted = True
        message = "interrupted (KeyboardInterrupt)"
    _warn_trouble(optimizer, tracker, log.n, message, status, interrupted)
    if tracker.theta is None:
        return OptimizationResult(theta0, math.inf, np.zeros_like(theta0),
                                  tracker.n_calls, log.n, message, interrupted)
    return OptimizationResult(tracker.theta, tracker.value, tracker.grad,
                              tracker.n_calls, log.n, message, interrupted)


def minimize_with_restarts(objective, theta0, bounds, optimizer, n_restarts, rng,
                           report=None):
    """The best of one :func:`minimize_theta` run from ``theta0`` and
    ``n_restarts`` more from log-uniform random starts within ``bounds``
    (scikit-learn's restarts: ``rng.uniform`` over the log-space bounds, the
    same draws for the same ``random_state``).

    An interrupted run ends the restarts; a KeyboardInterrupt in a restart
    before it evaluated a finite point keeps the earlier runs' best (with a
    ConvergenceWarning) and is re-raised only if no run had a finite point.

    Returns
    -------
    OptimizationResult
        The run with the smallest value (``value`` is inf if none was finite).

    Raises
    ------
    ValueError
        ``n_restarts > 0`` with a bound that is not finite.
    """
    bounds = np.asarray(bounds, dtype=np.float64)
    if n_restarts > 0 and not np.isfinite(bounds).all():
        raise ValueError(
            "Multiple optimizer restarts (n_restarts_optimizer>0) "
            "requires that all bounds are finite."
        )
    runs = [minimize_theta(objective, theta0, bounds, optimizer, report)]
    for _ in range(n_restarts):
        if runs[-1].interrupted:
            break
        theta_initial = rng.uniform(bounds[:, 0], bounds[:, 1])
        try:
            runs.append(minimize_theta(objective, theta_initial, bounds, optimizer, report))
        except KeyboardInterrupt:
            # nothing finite in this restart, but earlier runs had a point
            if not any(math.isfinite(run.value) for run in runs):
                raise
            warn_user(
                "The fit was interrupted (KeyboardInterrupt) during optimizer "
                f"restart {len(runs)}: it keeps the best point of the "
                f"{len(runs)} runs before.", ConvergenceWarning)
            break
    return min(runs, key=lambda run: run.value)


def _run_callable(optimizer, tracker, theta0, bounds):
    """scikit-learn's contract: ``optimizer(obj_func, theta0, bounds)``."""
    def obj_func(theta, eval_gradient=True):
        value, grad = tracker(theta)
        return (value, grad) if eval_gradient else value

    theta_opt, func_min = optimizer(obj_func, theta0, bounds=bounds)
    theta_opt = np.asarray(theta_opt, dtype=np.float64)
    if math.isfinite(func_min) and func_min <= tracker.value:
        # trust the user's optimiser: its answer may not have been evaluated
        tracker.theta, tracker.value = theta_opt, float(func_min)


def _warn_trouble(optimizer, tracker, n_iterations, message, status, interrupted):
    """One ConvergenceWarning saying what went wrong, if anything did."""
    name = {"fmin_l_bfgs_b": "L-BFGS-B", "CG": "CG"}.get(optimizer, "The optimizer") \
        if isinstance(optimizer, str) else "The optimizer"
    if tracker.theta is None:
        text = (f"{name} found no point at which the negative log marginal likelihood "
                f"and its gradient are finite ({tracker.n_calls} evaluated, starting "
                "point included; the kernel matrix may not be positive definite there, "
                "or the gradient overflows): the initial hyperparameters are kept. "
                "Consider another starting point, tighter bounds, a larger noise "
                "level (alpha, or a WhiteKernel's lower bound), or rescaling the data.")
    elif interrupted:
        text = (f"{name} was interrupted (KeyboardInterrupt) after {n_iterations} "
                f"iterations and {tracker.n_calls} evaluations: the fit keeps the best "
                f"point evaluated so far (negative log marginal likelihood "
                f"{tracker.value:.6g}).")
    elif status != 0:
        text = (f"{name} stopped without converging ({message}; {n_iterations} "
                "iterations): the fit keeps the best point it evaluated. Consider more "
                "iterations, a larger noise level (alpha, or a WhiteKernel's lower "
                "bound), or rescaling the data.")
    else:
        return
    warn_user(text, ConvergenceWarning)


# ---------------------------------------------------------------- row-wise BFGS
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

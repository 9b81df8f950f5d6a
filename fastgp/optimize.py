"""Drivers that minimise a ``(value, gradient) = f(theta)`` objective.

``"fmin_l_bfgs_b"`` is SciPy's L-BFGS-B within the kernel's log-space bounds
(scikit-learn's default); ``"CG"`` is SciPy's nonlinear conjugate gradients,
unbounded in log space; a callable follows scikit-learn's contract
``optimizer(obj_func, initial_theta, bounds) -> (theta_opt, func_min)`` with
``obj_func(theta, eval_gradient=True)``.

Every driver's objective is wrapped by :class:`BestPoint`, which remembers the
best finite point evaluated. The fit keeps that point when the optimiser ends
elsewhere (an abnormal termination, a non-finite final value), so a run never
leaves the estimator worse than the best point it saw.

Trouble is reported, not raised (issue 6): a run that stops without
converging (scipy's status, such as ``ABNORMAL_TERMINATION_IN_LNSRCH`` or the
iteration limit), a start at which the objective or its gradient is not
finite (L-BFGS-B would call the zero gradient that the objective answers there
"converged"), and a ``KeyboardInterrupt`` each end the run at the best finite
point with a :class:`~sklearn.exceptions.ConvergenceWarning` saying what
happened. An interrupt is re-raised only if no finite point was seen, and the
result says it was interrupted so that the caller skips further restarts.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

__all__ = ["BestPoint", "OptimizationResult", "minimize_theta"]


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
    warnings.warn(text, ConvergenceWarning, stacklevel=4)

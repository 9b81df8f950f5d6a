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


def minimize_theta(objective, theta0, bounds, optimizer, report=None):
    """Minimise ``objective`` from ``theta0``.

    Parameters
    ----------
    objective : callable theta -> (value, grad)
    theta0 : ndarray of shape (n_theta,)
    bounds : ndarray of shape (n_theta, 2), log space
    optimizer : "fmin_l_bfgs_b", "CG" or callable (scikit-learn's contract)
    report : callable (iteration, value, grad_norm) or None
        Called once per optimiser iteration (named drivers only).

    Returns
    -------
    OptimizationResult with the best finite point evaluated; ``value`` is
    ``inf`` if no evaluated point had a finite objective.
    """
    tracker = BestPoint(objective)
    log = _IterationLog(tracker, report)
    theta0 = np.asarray(theta0, dtype=np.float64)
    message = ""
    if optimizer == "fmin_l_bfgs_b":
        res = scipy.optimize.minimize(tracker, theta0, method="L-BFGS-B", jac=True,
                                      bounds=bounds, callback=log)
        message = str(res.message)
        if res.status != 0:
            warnings.warn(
                f"L-BFGS-B stopped without converging ({message}, "
                f"{res.nit} iterations): the fit keeps the best point it "
                "evaluated. Consider more iterations or rescaling the data.",
                ConvergenceWarning,
                stacklevel=3,
            )
    elif optimizer == "CG":
        res = scipy.optimize.minimize(tracker, theta0, method="CG", jac=True,
                                      callback=log)
        message = str(res.message)
        if res.status != 0:
            warnings.warn(
                f"CG stopped without converging ({message}, {res.nit} "
                "iterations): the fit keeps the best point it evaluated.",
                ConvergenceWarning,
                stacklevel=3,
            )
    elif callable(optimizer):
        def obj_func(theta, eval_gradient=True):
            value, grad = tracker(theta)
            return (value, grad) if eval_gradient else value

        theta_opt, func_min = optimizer(obj_func, theta0, bounds=bounds)
        theta_opt = np.asarray(theta_opt, dtype=np.float64)
        if math.isfinite(func_min) and func_min <= tracker.value:
            # trust the user's optimiser: its answer may not have been evaluated
            tracker.theta, tracker.value = theta_opt, float(func_min)
    else:
        raise ValueError(f"Unknown optimizer {optimizer}.")
    if tracker.theta is None:
        return OptimizationResult(theta0, math.inf, np.zeros_like(theta0),
                                  tracker.n_calls, log.n, message)
    return OptimizationResult(tracker.theta, tracker.value, tracker.grad,
                              tracker.n_calls, log.n, message)

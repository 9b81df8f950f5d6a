"""The optimisers: every minimisation fastgp runs.

- :func:`minimize_theta` (and :func:`minimize_with_restarts` around it)
  minimises one ``(value, gradient) = f(theta)`` objective with SciPy: the
  regression's hyperparameters, and the GPLVM's latent points and
  hyperparameters together. Drivers below.
- :func:`fastgp._optimize.rows.minimize_rows` (its own module) minimises
  many small independent functions at once, one BFGS per row, for
  GPLVM.transform.

Drivers
-------
``"fmin_l_bfgs_b"`` is SciPy's L-BFGS-B within the kernel's log-space bounds
(scikit-learn's default); ``"CG"`` is SciPy's nonlinear conjugate gradients on
a smooth map of the box onto R^n (:class:`BoxMap`), so it stays within the
bounds too; a callable follows scikit-learn's contract
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
happened. An interrupt that comes after a finite point was seen is handed to
the caller in the result (``interrupt``): the caller skips further restarts,
keeps the point (a fitted, usable estimator) and then re-raises it, so that
loops, notebooks and cross-validation stop as they do with scikit-learn.

A time limit (``deadline``, set by an estimator's ``max_time``) ends a run the
same way: the evaluation that would start after the deadline is not made
(:class:`TimeLimitReached`), the run keeps its best point with a
ConvergenceWarning, and the restarts not yet begun are skipped. The first
evaluation of a fit always runs, so a time-limited fit has a point.
"""

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.special
from sklearn.exceptions import ConvergenceWarning

from .._user_warnings import warn_user

__all__ = ["BestPoint", "BoxMap", "OptimizationResult", "TimeLimitReached",
           "minimize_theta", "minimize_with_restarts", "restart_starts", "best_run"]

#: The clock of every deadline (seconds; ``time.monotonic``'s, the same clock
#: in every process of one machine).
clock = time.monotonic


class TimeLimitReached(BaseException):
    """Raised by :class:`BestPoint` instead of an evaluation that would start
    after the run's deadline; caught by :func:`minimize_theta`. A
    BaseException, as KeyboardInterrupt is, so that a user's optimizer
    (scikit-learn's callable contract) that catches ``Exception`` does not
    swallow it."""


class BestPoint:
    """Wraps ``objective(theta) -> (value, grad)``; records the best finite
    value seen, the number of calls, and whether any call was not finite.

    deadline : float or None
        On :data:`clock`: a call that would start after it raises
        :class:`TimeLimitReached` instead, once a finite point was seen.
    """

    def __init__(self, objective, callback=None, deadline=None):
        self.objective = objective
        self.callback = callback
        self.deadline = deadline
        self.theta = None
        self.value = math.inf
        self.grad = None
        self.n_calls = 0
        self.n_non_finite = 0

    def __call__(self, theta):
        if (self.deadline is not None and self.theta is not None
                and clock() >= self.deadline):
            raise TimeLimitReached
        theta = np.array(theta, dtype=np.float64)
        value, grad = self.objective(theta)
        self.n_calls += 1
        if not math.isfinite(value):
            self.n_non_finite += 1
        elif value < self.value:
            self.theta, self.value, self.grad = theta, float(value), np.array(grad)
        return value, grad


@dataclass
class OptimizationResult:
    """Outcome of one optimiser run: the best finite point it evaluated.

    ``interrupt`` is the KeyboardInterrupt that ended the run (None if none
    did); the caller keeps the point and then re-raises it. ``timed_out``:
    the run's deadline ended it.
    """

    theta: np.ndarray
    value: float
    grad: np.ndarray
    n_evaluations: int
    n_iterations: int
    message: str
    interrupt: BaseException = None
    timed_out: bool = False

    @property
    def interrupted(self):
        return self.interrupt is not None


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


class BoxMap:
    """A smooth map of R^n onto the open box of ``bounds``, for optimisers
    that know no bounds (CG): per coordinate,

    - both bounds finite: theta = lo + (hi - lo) sigmoid(u);
    - only ``lo`` finite: theta = lo + softplus(u), softplus(u) = log(1 + e^u);
    - only ``hi`` finite: theta = hi - softplus(-u);
    - neither: theta = u.

    Equal finite bounds pin the coordinate: theta = lo whatever u, with a
    zero derivative.

    Each is monotone with a positive derivative, so a stationary point in u
    is one in theta, and the optimiser cannot leave the box; near a bound the
    derivative vanishes, so a run whose optimum lies on a bound stops close to
    it, as L-BFGS-B's projected gradient would. The chain rule gives the
    gradient in u: g_u = g_theta * dtheta/du.
    """

    #: A start on (or beyond) a bound is moved this fraction of the box's
    #: width (or this distance, for a one-sided bound) inside, where the
    #: map's inverse is finite.
    INSIDE = 1e-8

    def __init__(self, bounds):
        bounds = np.asarray(bounds, dtype=np.float64).reshape(-1, 2)
        self.lo, self.hi = bounds[:, 0], bounds[:, 1]
        finite_lo, finite_hi = np.isfinite(self.lo), np.isfinite(self.hi)
        self.both = finite_lo & finite_hi
        self.lower = finite_lo & ~finite_hi
        self.upper = ~finite_lo & finite_hi
        self.width = np.where(self.both, self.hi - self.lo, 1.0)

    def theta(self, u):
        """theta(u) and dtheta/du, arrays of u's shape."""
        theta, slope = np.array(u, dtype=np.float64), np.ones(len(u))
        b, lo, up = self.both, self.lower, self.upper
        s = scipy.special.expit(u[b])
        theta[b] = self.lo[b] + self.width[b] * s
        slope[b] = self.width[b] * s * (1.0 - s)
        theta[lo] = self.lo[lo] + np.logaddexp(0.0, u[lo])
        slope[lo] = scipy.special.expit(u[lo])
        theta[up] = self.hi[up] - np.logaddexp(0.0, -u[up])
        slope[up] = scipy.special.expit(-u[up])
        return theta, slope

    def u(self, theta):
        """The inverse map, with a start on a bound moved :data:`INSIDE`."""
        u = np.array(theta, dtype=np.float64)
        b, lo, up = self.both, self.lower, self.upper
        # a box of width 0 (equal bounds: the value is pinned) maps to u = 0
        fraction = np.divide(u[b] - self.lo[b], self.width[b],
                             out=np.full(int(b.sum()), 0.5), where=self.width[b] > 0)
        fraction = np.clip(fraction, self.INSIDE, 1 - self.INSIDE)
        u[b] = scipy.special.logit(fraction)
        u[lo] = _inverse_softplus(np.maximum(u[lo] - self.lo[lo], self.INSIDE))
        u[up] = -_inverse_softplus(np.maximum(self.hi[up] - u[up], self.INSIDE))
        return u

    def wrap(self, objective):
        """``objective`` (of theta) as a function of u, with its gradient."""
        def in_u(u):
            theta, slope = self.theta(u)
            value, grad = objective(theta)
            return value, np.asarray(grad) * slope
        return in_u


def _inverse_softplus(d):
    """u with log(1 + e^u) = d > 0, without overflow: d + log(1 - e^-d)."""
    return d + np.log(-np.expm1(-d))


#: CG's stopping rule when the caller gives no ``tol``: the largest gradient
#: component (in the map's coordinates u) at most this; and its iteration
#: limit per free coordinate when the caller gives none. SciPy's default
#: gtol, 1e-5, ends GP fits in "precision loss" after half again as many
#: evaluations with the same likelihood to 1e-4 (bench/bench_optimizers.py:
#: N = 500 on sin(3x), 67 evaluations against 84, L-BFGS-B 27).
CG_GTOL = 1e-4
CG_MAXITER_PER_DIM = 200

#: How many times a run that "converged" at its start after a non-finite trial
#: step (see :func:`minimize_theta`) is retried, each with a first step 10x
#: shorter.
STEP_RETRIES = 4


def minimize_theta(objective, theta0, bounds, optimizer, report=None, max_iter=None,
                   tol=None, limit_remedy=None, deadline=None, max_time=None):
    """Minimise ``objective`` from ``theta0``.

    Parameters
    ----------
    objective : callable theta -> (value, grad)
    theta0 : ndarray of shape (n_theta,)
    bounds : ndarray of shape (n_theta, 2), log space
    optimizer : "fmin_l_bfgs_b", "CG" or callable (scikit-learn's contract)
        "CG" runs SciPy's nonlinear conjugate gradients on the coordinates of
        :class:`BoxMap`, so theta stays inside ``bounds``.
    report : IterationReport-like or None
        Called ``report(iteration, value, grad_norm)`` once per optimiser
        iteration (named drivers only).
    max_iter : int or None
        Iteration limit of the named drivers (None: SciPy's default for
        L-BFGS-B, ``CG_MAXITER_PER_DIM`` per coordinate for CG).
    tol : float or None
        ``scipy.optimize.minimize``'s ``tol`` for the named drivers (None:
        SciPy's default for L-BFGS-B, :data:`CG_GTOL` for CG).
    limit_remedy : str or None
        What the caller's user can do when the iteration limit ends the run
        ("raise max_iter or loosen tol"), named in the warning.
    deadline : float or None
        On :data:`clock`: no evaluation starts after it, once the run has a
        finite point (module docstring); the run then ends with
        ``timed_out``.
    max_time : float or None
        The user's time limit in seconds, named in the warning of a run that
        the deadline ended.

    Returns
    -------
    OptimizationResult with the best finite point evaluated; ``value`` is
    ``inf`` if no evaluated point had a finite objective (``theta`` is then
    ``theta0``). ``interrupt`` holds the KeyboardInterrupt that ended the run.

    Raises
    ------
    KeyboardInterrupt
        Only if the interrupt came before any finite point was evaluated.

    Notes
    -----
    L-BFGS-B's first trial step has length one in theta. Where that lands in
    a region whose objective is not finite (K not positive definite: a tiny
    noise lower bound, duplicated inputs) the objective answers ``(inf, 0)``
    and SciPy may report convergence at the start. Such a run (SciPy says
    converged, a non-finite point was evaluated, and the best point's
    projected gradient is not small) is run again from its best point with a
    first step 10x shorter, up to :data:`STEP_RETRIES` times, and warned
    about if it still does not move.
    """
    tracker = BestPoint(objective, deadline=deadline)
    log = _IterationLog(tracker, report)
    theta0 = np.asarray(theta0, dtype=np.float64)
    bounds = np.asarray(bounds, dtype=np.float64).reshape(-1, 2)
    message, status, interrupt, stuck, timed_out = "", 0, None, False, False
    try:
        if optimizer == "fmin_l_bfgs_b":
            message, status, stuck = _run_lbfgsb(tracker, log, theta0, bounds,
                                                  max_iter, tol)
        elif optimizer == "CG":
            message, status = _run_cg(tracker, log, theta0, bounds, max_iter, tol)
        elif callable(optimizer):
            _run_callable(optimizer, tracker, theta0, bounds)
        else:
            raise ValueError(f"Unknown optimizer {optimizer}.")
    except KeyboardInterrupt as exc:
        if tracker.theta is None:
            raise
        interrupt = exc
        message = "interrupted (KeyboardInterrupt)"
    except TimeLimitReached:
        timed_out, message = True, "time limit (max_time) reached"
    _warn_trouble(optimizer, tracker, log.n, message, status, interrupt, stuck,
                  limit_remedy, max_time if timed_out else None)
    if tracker.theta is None:
        return OptimizationResult(theta0, math.inf, np.zeros_like(theta0),
                                  tracker.n_calls, log.n, message, interrupt, timed_out)
    return OptimizationResult(tracker.theta, tracker.value, tracker.grad,
                              tracker.n_calls, log.n, message, interrupt, timed_out)


def _run_lbfgsb(tracker, log, theta0, bounds, max_iter, tol):
    """SciPy's L-BFGS-B, retried with a shorter first step where it stopped
    at its start after a non-finite trial (:func:`minimize_theta`'s Notes).
    Returns (message, status, still_stuck)."""
    options = {} if max_iter is None else {"maxiter": int(max_iter)}
    start, scale = theta0, 1.0
    for attempt in range(STEP_RETRIES + 1):
        non_finite_before = tracker.n_non_finite
        # in u = (theta - start) / scale the first step (length one in u) is
        # ``scale`` long in theta; bounds scale with it, infinite ones stay
        if attempt == 0:
            res = scipy.optimize.minimize(
                tracker, theta0, method="L-BFGS-B", jac=True, callback=log,
                options=options, tol=tol, bounds=bounds)
        else:
            res = scipy.optimize.minimize(
                _scaled(tracker, start, scale, bounds), np.zeros_like(start),
                method="L-BFGS-B", jac=True, callback=log, options=options, tol=tol,
                bounds=(bounds - start[:, None]) / scale)
        stuck = (int(res.status) == 0 and tracker.n_non_finite > non_finite_before
                 and tracker.theta is not None
                 and _projected_gradient_is_large(tracker, bounds))
        if not stuck:
            return str(res.message), int(res.status), False
        start, scale = tracker.theta, scale * 0.1
    return str(res.message), int(res.status), True


def _scaled(tracker, start, scale, bounds):
    """``tracker`` in u = (theta - start) / scale (theta clipped into the
    bounds against rounding)."""
    def in_u(u):
        theta = np.clip(start + scale * u, bounds[:, 0], bounds[:, 1])
        value, grad = tracker(theta)
        return value, np.asarray(grad) * scale
    return in_u


def _projected_gradient_is_large(tracker, bounds):
    """Whether the best point's gradient, projected on the box (components
    pushing against an active bound dropped), exceeds 1e-3 max(1, |f|): too
    large for a converged run."""
    theta, grad = tracker.theta, np.array(tracker.grad, dtype=np.float64)
    at_lower = (theta <= bounds[:, 0]) & (grad > 0)
    at_upper = (theta >= bounds[:, 1]) & (grad < 0)
    grad[at_lower | at_upper] = 0.0
    if not np.all(np.isfinite(grad)):
        return True
    return float(np.max(np.abs(grad), initial=0.0)) > 1e-3 * max(1.0, abs(tracker.value))


#: Without a caller's ``tol``, CG also stops when the objective fell by at most
#: ``CG_FTOL * max(1, |f|)`` per iteration over the last ``CG_WINDOW``
#: iterations, L-BFGS-B's relative-reduction test (its factr * eps is 2.2e-9
#: per iteration) taken over a window because CG's single steps along a long
#: valley can be small while it still progresses. On the Mauna Loa kernel (11
#: hyperparameters, N = 500) CG took 2,024 iterations to meet the gradient
#: test alone; this stops it after 747, with the log marginal likelihood
#: 0.0014 from L-BFGS-B's (python -m fastgp --optimizer CG --n-samples 500).
CG_FTOL = 1e-8
CG_WINDOW = 10


class _SlowProgress(StopIteration):
    """Raised from CG's callback when :data:`CG_FTOL` is met."""


def _run_cg(tracker, log, theta0, bounds, max_iter, tol):
    """SciPy's CG on :class:`BoxMap`'s coordinates; (message, status)."""
    box = BoxMap(bounds)
    maxiter = CG_MAXITER_PER_DIM * max(1, theta0.size) if max_iter is None else max_iter
    history = []

    def callback(intermediate_result):
        log()
        if tol is not None:
            return
        history.append(tracker.value)
        if len(history) > CG_WINDOW:
            decrease = history[-CG_WINDOW - 1] - history[-1]
            if decrease <= CG_WINDOW * CG_FTOL * max(1.0, abs(history[-1])):
                raise _SlowProgress

    slow = (f"CONVERGENCE: relative reduction of f over {CG_WINDOW} iterations "
            f"<= {CG_WINDOW} x {CG_FTOL:g}")
    try:
        res = scipy.optimize.minimize(
            box.wrap(tracker), box.u(theta0), method="CG", jac=True, callback=callback,
            options={"maxiter": int(maxiter), "gtol": CG_GTOL if tol is None else tol})
    except _SlowProgress:  # SciPy < 1.11 lets a callback's StopIteration through
        return slow, 0
    if len(history) > CG_WINDOW and int(res.status) == 99:  # our StopIteration
        return slow, 0
    return str(res.message), int(res.status)


def minimize_with_restarts(objective, theta0, bounds, optimizer, n_restarts, rng,
                           report=None, limit_remedy=None, max_iter=None, tol=None,
                           deadline=None, max_time=None):
    """The best of one :func:`minimize_theta` run from ``theta0`` and
    ``n_restarts`` more from log-uniform random starts within ``bounds``
    (scikit-learn's restarts: ``rng.uniform`` over the log-space bounds, the
    same draws for the same ``random_state``).

    An interrupted run ends the restarts: the result is the best run so far,
    with the ``interrupt`` for the caller to re-raise after keeping its point.
    A KeyboardInterrupt in a restart before it evaluated a finite point is
    re-raised here only if no run had a finite point.

    ``report``, if given, also has ``run_started(index, n_runs)`` and
    ``run_kept(index, n_runs, value)`` called when there are restarts.
    ``max_iter``, ``tol``, ``limit_remedy``, ``deadline`` and ``max_time``
    are every run's (:func:`minimize_theta`); a run that the deadline ended,
    or a deadline past before a run begins, ends the restarts.

    Returns
    -------
    OptimizationResult
        The run with the smallest value (``value`` is inf if none was finite).

    Raises
    ------
    ValueError
        ``n_restarts > 0`` with a bound that is not finite.
    """
    starts = restart_starts(theta0, bounds, n_restarts, rng)
    bounds = np.asarray(bounds, dtype=np.float64)
    n_runs = n_restarts + 1
    headers = report is not None and n_runs > 1
    runs, interrupt = [], None
    for index, start in enumerate(starts):
        if index > 0 and (runs[-1].timed_out or _past(deadline)):
            warn_user(
                f"The fit's time limit (max_time={max_time:g} s) was reached before "
                f"optimizer restart {index} of {n_restarts}: it keeps the best point of "
                f"the {index} runs before.", ConvergenceWarning)
            break
        if headers:
            report.run_started(index, n_runs)
        try:
            runs.append(minimize_theta(objective, start, bounds, optimizer, report,
                                       max_iter=max_iter, tol=tol,
                                       limit_remedy=limit_remedy, deadline=deadline,
                                       max_time=max_time))
        except KeyboardInterrupt as exc:
            # nothing finite in this run, but earlier runs may have a point
            if not any(math.isfinite(run.value) for run in runs):
                raise
            warn_user(
                "The fit was interrupted (KeyboardInterrupt) during optimizer "
                f"restart {index}: it keeps the best point of the {index} runs "
                "before.", ConvergenceWarning)
            interrupt = exc
            break
        if runs[-1].interrupted:
            interrupt = runs[-1].interrupt
            break
    kept = best_run(runs)
    if headers:
        report.run_kept(kept, n_runs, runs[kept].value)
    best = runs[kept]
    if interrupt is not None:
        best = dataclasses.replace(best, interrupt=interrupt)
    return best


def _past(deadline):
    return deadline is not None and clock() >= deadline


def restart_starts(theta0, bounds, n_restarts, rng):
    """The starting points of every run, drawn up front: ``theta0``, then
    ``n_restarts`` log-uniform draws within ``bounds`` (``rng.uniform`` per
    restart, in order: scikit-learn's draws for the same ``random_state``),
    so runs executed anywhere, in any order, start where a sequential fit's
    would.

    Returns
    -------
    list of ndarray of shape (n_theta,)

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
    return [theta0] + [rng.uniform(bounds[:, 0], bounds[:, 1]) for _ in range(n_restarts)]


def best_run(runs):
    """Index of the run with the smallest value, the first one on ties."""
    return min(range(len(runs)), key=lambda i: runs[i].value)


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


#: SciPy's ``status`` for "the iteration limit was reached" (L-BFGS-B and CG).
_ITERATION_LIMIT = 1


def _warn_trouble(optimizer, tracker, n_iterations, message, status, interrupt, stuck,
                  limit_remedy, max_time=None):
    """One ConvergenceWarning saying what went wrong, if anything did, with
    the advice that fits the cause."""
    name = {"fmin_l_bfgs_b": "L-BFGS-B", "CG": "CG"}.get(optimizer, "The optimizer") \
        if isinstance(optimizer, str) else "The optimizer"
    if tracker.theta is None:
        text = (f"{name} found no point at which the negative log marginal likelihood "
                f"and its gradient are finite ({tracker.n_calls} evaluated, starting "
                "point included; the kernel matrix may not be positive definite there, "
                "or the gradient overflows): the initial hyperparameters are kept. "
                "Consider another starting point, tighter bounds, a larger noise "
                "level (alpha, or a WhiteKernel's lower bound), or rescaling the data.")
    elif interrupt is not None:
        text = (f"{name} was interrupted (KeyboardInterrupt) after {n_iterations} "
                f"iterations and {tracker.n_calls} evaluations: the fit keeps the best "
                f"point evaluated so far (negative log marginal likelihood "
                f"{tracker.value:.6g}), then the interrupt propagates.")
    elif max_time is not None:
        text = (f"{name} stopped at the fit's time limit (max_time={max_time:g} s) after "
                f"{n_iterations} iterations and {tracker.n_calls} evaluations, before "
                "converging: the fit keeps the best point it evaluated (negative log "
                f"marginal likelihood {tracker.value:.6g}). To let it converge, raise "
                "max_time or leave it None.")
    elif stuck:
        text = (f"{name} stopped at a point whose gradient is not small: every trial "
                f"step from there, down to {10.0 ** -STEP_RETRIES:g} of the first, "
                "reached hyperparameters at which the kernel matrix is not positive "
                "definite. The fit keeps the best point it evaluated. Consider a larger "
                "noise level (alpha, or a WhiteKernel's lower bound) or tighter bounds.")
    elif status == _ITERATION_LIMIT:
        remedy = limit_remedy or "allow more iterations or loosen the tolerance"
        text = (f"{name} reached its iteration limit ({message}; {n_iterations} "
                f"iterations) before converging: the fit keeps the best point it "
                f"evaluated. To let it converge: {remedy}.")
    elif status != 0:
        text = (f"{name} stopped without converging ({message}; {n_iterations} "
                "iterations): the fit keeps the best point it evaluated. The line "
                "search could not descend, which happens where the objective is "
                "badly conditioned: consider a larger noise level (alpha, or a "
                "WhiteKernel's lower bound), or rescaling the data.")
    else:
        return
    warn_user(text, ConvergenceWarning)

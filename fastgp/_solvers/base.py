"""The solver interface: what GaussianProcessRegressor asks of the solver it
chose, and what every solver's objective shares (docs/design.md, "Solvers").

A solver is one way of computing the regression's negative log marginal
likelihood, its gradient, the kept model and the predictions from it: the
exact Cholesky path in one N x N buffer (:mod:`.cholesky`), the matrix-free
path (:mod:`.iterative`), Vecchia's nearest-neighbour approximation
(:mod:`.vecchia`). The estimator builds one :class:`Solver` from its
parameters when a fit starts (:func:`fastgp._solvers.choice.choose_solver`)
and from then on only calls its methods; it never asks which solver it has.

    problem   = Problem(n_samples, n_features, n_targets, n_theta, fast)
    solver.fit_bytes(problem), solver.remedies(problem)   the memory check
    seed      = solver.draw_seed(rng)                     the fit's draws, if any
    objective = solver.objective(covariance, Y, diag_add, seed)
    value, grad = objective(theta); objective.value(theta)
    solver.update(objective, theta)                       optimise again if True
    kept      = solver.final(objective, theta, messages)  a KeptModel
    solver.predict(fitted, X_query, want)                 mean, and var or cov

Every objective answers ``(inf, zeros)`` where it has no finite answer (the
kernel matrix is not positive definite, a value overflows, a trial point is
abandoned), so that a line search backs off instead of raising: that guard
is written once, here (:func:`guarded_value_and_grad`, :func:`guarded_value`),
for the solvers' objectives and the GPLVM's and classifier's.
"""

import math
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._engine.threads import threads_for
from ..exceptions import NotPositiveDefiniteError

__all__ = [
    "Problem",
    "KeptModel",
    "Fitted",
    "FactorTexts",
    "NOT_FINITE_ON_TRAINING_INPUTS",
    "FactorMessages",
    "PointFailed",
    "guarded_value",
    "guarded_value_and_grad",
    "on_idle_cores",
    "Solver",
]


@dataclass(frozen=True)
class Problem:
    """The sizes that set a fit's cost.

    n_samples, n_features, n_targets, n_theta : int
    fast : bool, whether the kernel runs on the fast path (a lowered program)
    """

    n_samples: int
    n_features: int
    n_targets: int
    n_theta: int
    fast: bool


@dataclass
class FitDescription:
    """What the notice of a long fit (:mod:`fastgp._fit.clock`) says of it.

    what : str, such as ``'solver "cholesky", N = 20,000 samples'``
    faster : str or None, a faster way, such as ``'solver="vecchia" (...)'``
    faster_seconds : float or None, that way's estimated seconds per
        evaluation; it is named only where it is under a quarter of the
        measured ones (None: named whenever ``faster`` is given)
    evaluations : (low, typical, high) ints or None, the evaluations of
        one optimiser run where the caller knows them better than the
        count of free variables (the GPLVM's latent points)
    """

    what: str
    faster: str = None
    faster_seconds: float = None
    evaluations: tuple = None


@dataclass(frozen=True)
class KeptModel:
    """What a fit keeps at its chosen point, the same for every solver.

    A : ndarray (n, T), the dual coefficients K^-1 Y (the solver's K^-1)
    value : float, the objective (negative log marginal likelihood) there
    jitter : float, added to the diagonal beyond alpha (0.0 normally)
    L : ndarray (n, n) F-contiguous or None, the lower Cholesky factor
        (strict upper triangle zero): the one N x N buffer the fit worked
        in; None for a solver that keeps no N x N factor
    state : object or None, what the solver's predictions reuse (its own
        type); rebuilt by the solver when it is missing or stale
    """

    A: np.ndarray
    value: float
    jitter: float = 0.0
    L: Any = None
    state: Any = None


@dataclass
class Fitted:
    """A fitted regressor's model, as a solver's prediction reads it.

    kernel : the fitted kernel (``kernel_``); X, Y : the training inputs and
    (normalised) targets, (n, d) and (n, T); diag_add : (n,) float64, alpha;
    A : (n, T); L : (n, n) or None; seed : the fit's draws (or None);
    cache : dict, owned by the estimator, where a solver keeps the state its
    predictions reuse between calls (it checks that the state still matches
    ``kernel`` and ``diag_add``).
    """

    kernel: Any
    X: Any
    Y: np.ndarray
    diag_add: np.ndarray
    A: np.ndarray
    L: Any
    seed: Any
    cache: dict


#: The :attr:`FactorTexts.non_finite` of an estimator fitted on training
#: inputs (the regressor's and the classifier's).
NOT_FINITE_ON_TRAINING_INPUTS = (
    "The kernel, {kernel}, returns non-finite values (NaN or infinity) on the training "
    "inputs at its hyperparameters. Rescale X, or check the kernel's hyperparameters "
    "and their bounds.")


@dataclass(frozen=True)
class FactorTexts:
    """What an estimator tells its user when the final step of a fit is in
    trouble, as ``str.format`` templates: ``{kernel}`` is the fitted kernel,
    ``{jitter}`` the jitter, and any other field a value the estimator gives
    (:meth:`messages`).

    non_finite : ValueError, K holds NaN or infinity at the fitted point
    not_positive_definite : LinAlgError, not positive definite even with the
        largest jitter (``{jitter}``: the largest tried)
    jitter : JitterWarning, the jitter that was added
    overflow : ValueError, the log marginal likelihood or A = K^-1 Y is not
        finite
    """

    non_finite: str
    not_positive_definite: str
    jitter: str
    overflow: str

    def messages(self, kernel, **values):
        """The :class:`FactorMessages` for ``kernel``; a value that is a
        function (a lambda) is called only when a text needs it."""
        return FactorMessages(self, dict(values, kernel=kernel))


@dataclass(frozen=True)
class FactorMessages:
    """:class:`FactorTexts` with their values: each method builds its text
    (and any figure in it) only when it is needed."""

    texts: FactorTexts
    values: dict

    def _format(self, template, **extra):
        values = {name: value() if isinstance(value, types.FunctionType) else value
                  for name, value in self.values.items() if "{" + name in template}
        return template.format(**values, **extra)

    def non_finite(self):
        return self._format(self.texts.non_finite)

    def not_positive_definite(self, jitter):
        return self._format(self.texts.not_positive_definite, jitter=jitter)

    def jitter(self, jitter):
        return self._format(self.texts.jitter, jitter=jitter)

    def overflow(self):
        return self._format(self.texts.overflow)


class PointFailed(Exception):
    """An objective has no finite answer at this point (a non-finite value, a
    trial point abandoned): the guarded evaluation answers inf, as where the
    kernel matrix is not positive definite."""


#: What an objective raises where it has no answer at a point.
_NO_ANSWER = (NotPositiveDefiniteError, PointFailed)


def guarded_value(value_at, point):
    """``value_at(point)``, or inf where it raises NotPositiveDefiniteError
    or :class:`PointFailed`, or is not finite: the answer that makes a line
    search back off."""
    try:
        value = value_at(point)
    except _NO_ANSWER:
        return math.inf
    return value if math.isfinite(value) else math.inf


def guarded_value_and_grad(value_and_grad_at, point):
    """``value_and_grad_at(point)`` -> (value, grad), or (inf, zeros) where
    it raises NotPositiveDefiniteError or :class:`PointFailed`, or anything
    it returns is not finite."""
    point = np.asarray(point, dtype=np.float64)
    failed = (math.inf, np.zeros(point.shape))
    try:
        value, grad = value_and_grad_at(point)
    except _NO_ANSWER:
        return failed
    if not (math.isfinite(value) and np.all(np.isfinite(grad))):
        return failed
    return value, grad


def on_idle_cores(n_samples, function, *args, **kwargs):
    """``function(*args, **kwargs)`` outside a fit (a prediction, one
    ``log_marginal_likelihood(theta)``) under a fit's thread settings
    (:func:`fastgp._engine.threads.threads_for`): serial below its
    threshold, otherwise Numba and BLAS on the cores idle when it starts, so
    that LAPACK's threads do not wait for time slices on a busy machine."""
    with threads_for(n_samples) as governor:
        return governor.evaluate(function, *args, **kwargs)


class Solver(ABC):
    """One way of computing the regression's likelihood, gradient, kept
    model and predictions (module docstring). Built from the estimator's
    parameters; holds no fitted state of its own.

    Attributes
    ----------
    name : str
        The estimator's ``solver`` value that selects it; recorded as
        ``solver_``.
    restarts_in_workers : bool
        Whether its restarts may run as joblib tasks (each copies the
        objective, :meth:`objective`'s ``for_worker``).
    """

    name = None
    restarts_in_workers = False

    # ---------------------------------------------------------------- fit
    def accept(self, covariance, kernel):
        """Called once the backend exists: raise ValueError if this solver
        cannot run ``kernel`` (``covariance.is_fast`` says whether it is on
        the fast path), or warn about its cost. Default: accept."""

    @abstractmethod
    def fit_bytes(self, problem):
        """Estimated peak bytes of a fit (:mod:`fastgp.memory.estimates`)."""

    @abstractmethod
    def remedies(self, problem):
        """What a memory refusal of a fit tells the user to do, most useful
        first (list of str)."""

    def draw_seed(self, rng):
        """Draw what the objective needs from the fit's RandomState (before
        any restart is drawn); None if nothing."""
        return None

    @abstractmethod
    def objective(self, covariance, Y, diag_add, seed, verbose=False):
        """``f(theta) -> (value, grad)`` with ``value(theta)``,
        ``n_samples`` and ``n_evaluations``; allocates nothing large before
        its first call."""

    @abstractmethod
    def final(self, objective, theta, messages):
        """The :class:`KeptModel` at ``theta``; raises ValueError and
        numpy.linalg.LinAlgError with ``messages``' texts."""

    def update(self, objective, theta):
        """Adapt ``objective`` to the optimum ``theta`` the optimiser found
        (Vecchia's approximation finds its neighbours again at new length
        scales); True if it changed, and the optimiser should run again from
        theta. Default: nothing to adapt."""
        return False

    def replay(self, objective, seed):
        """What ``objective(..., seed)`` needs after the fit to rebuild the
        function the optimiser saw last (``log_marginal_likelihood(theta)``):
        by default the fit's draws."""
        return seed

    def after_fit(self, objective):
        """Warn about what the fit's evaluations met (nothing by default)."""

    # ----------------------------------------------------- outside a fit
    @abstractmethod
    def evaluation_bytes(self, problem, eval_gradient):
        """Estimated peak bytes of one ``log_marginal_likelihood(theta)``."""

    def after_evaluation(self, objective):
        """Warn about what one ``log_marginal_likelihood(theta)`` met."""

    @abstractmethod
    def predict(self, fitted, X_query, want):
        """The latent predictive moments at X_query (m, d): ``want`` is
        "mean" (returns (mean (m, T), None)), "var" ((mean, var (m,))) or
        "cov" ((mean, cov (m, m))). ``fitted`` is a :class:`Fitted`."""

    @abstractmethod
    def predict_cov_bytes(self, n_train, n_query, n_targets):
        """Estimated peak bytes of ``predict(X, return_cov=True)`` on
        ``n_query`` points of a model of ``n_train`` samples."""

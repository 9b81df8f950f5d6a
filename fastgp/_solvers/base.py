"""The solver interface: what the estimators ask of the solver they chose,
and what every solver's objective shares (docs/design.md, "Solvers").

A solver is one way of computing the negative log marginal likelihood, its
gradient, the kept model and the predictions from it: the exact Cholesky
path in one N x N buffer (:mod:`.cholesky`), the matrix-free path
(:mod:`.iterative`), Vecchia's nearest-neighbour approximation
(:mod:`.vecchia`). An estimator builds one :class:`Solver` from its
parameters when a fit starts (:func:`fastgp._solvers.choice.choose_solver`,
:meth:`Solver.from_params`), keeps it as fitted, and from then on only calls
its methods; it never asks which solver it has.

    problem   = Problem(n_samples, n_features, n_targets, n_theta, fast)
    solver.fit_memory(problem), solver.remedies(problem)  the memory check, per place
    draws     = solver.draw(rng)                          the fit's draws (Draws)
    solver.accept_mean(mean)                              a mean it cannot estimate: ValueError
    objective = solver.objective(covariance, Y, diag_add, draws, mean=mean)
    with solver.evaluation_context(n) as place:           threads, or a device
        value, grad = place.evaluate(objective, theta)
    solver.update(objective, theta)                       optimise again if True
    kept      = solver.final(objective, theta, messages)  a KeptModel
    draws     = solver.replay(objective, draws)           what rebuilds the objective
    solver.predict(fitted, X_query, want)                 mean, and var or cov

An exact solver serves the GPLVM too (:meth:`Solver.latent_objective`,
:meth:`Solver.latent_density`, :meth:`Solver.predict_from_factor`), and the
Laplace classifier where it can (:meth:`Solver.laplace_objective`); the
estimators reach the factor, the inverse and the fused pass only through
these methods.

Every objective is a :class:`GuardedObjective`: it answers ``(inf, zeros)``
where it has no finite answer (the kernel matrix is not positive definite, a
value overflows, a trial point is abandoned), so that a line search backs off
instead of raising; that guard, and the counting of evaluations, are written
once, there.
"""

import math
import tracemalloc
import types
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._engine.threads import threads_for
from ..exceptions import NotPositiveDefiniteError

__all__ = [
    "Problem",
    "MemoryNeed",
    "Draws",
    "KeptModel",
    "Fitted",
    "GuardedObjective",
    "regression_targets",
    "require_fast_path",
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


@dataclass(frozen=True)
class MemoryNeed:
    """A peak-memory estimate per place (:mod:`fastgp.memory.estimates`).

    host : int, bytes of the machine's memory (reserved in its ledger)
    device : int, bytes of an accelerator's memory (0 for the CPU solvers;
        checked against the device's free memory before anything is
        allocated there)
    """

    host: int
    device: int = 0


@dataclass(frozen=True)
class Draws:
    """What a fit drew for its objective, and what rebuilds that objective
    after the fit (:meth:`Solver.replay`).

    seed : int or None, one integer from the fit's RandomState, drawn before
        any restart (the matrix-free path's probes, Vecchia's ordering);
        None for a solver that draws nothing
    scales : ndarray (d,) or None, the length scales Vecchia's last layout
        was found at (None: the kernel's own)
    """

    seed: Any = None
    scales: Any = None


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
    time_factor : float, the fit's time in evaluations' worth per
        evaluation (:attr:`Solver.fit_time_factor`): the range of
        evaluations is scaled by it
    """

    what: str
    faster: str = None
    faster_seconds: float = None
    evaluations: tuple = None
    time_factor: float = 1.0


@dataclass(frozen=True)
class KeptModel:
    """What a fit keeps at its chosen point, the same for every solver.

    A : ndarray (n, T), the dual coefficients K^-1 Y (the solver's K^-1),
        in host memory
    value : float, the objective (negative log marginal likelihood) there
    jitter : float, added to the diagonal beyond alpha (0.0 normally)
    L : (n, n) F-contiguous array or None, the lower Cholesky factor (strict
        upper triangle zero): the one N x N buffer the fit worked in, a
        NumPy array or, for a device solver, an array in the device's
        memory; None for a solver that keeps no N x N factor
    state : object or None, what the solver's predictions reuse (its own
        type); rebuilt by the solver when it is missing or stale
    mean : fastgp._solvers.mean.FittedMean or None, the mean's coefficients
        where the fit estimated one (A is then K^-1 (Y - H beta))
    """

    A: np.ndarray
    value: float
    jitter: float = 0.0
    L: Any = None
    state: Any = None
    mean: Any = None

    @property
    def host_factor(self):
        """L where it lies in host memory (the memory the fit's reservation
        in the machine's ledger covers), else None."""
        return self.L if isinstance(self.L, np.ndarray) else None


@dataclass
class Fitted:
    """A fitted regressor's model, as a solver's prediction reads it.

    kernel : the fitted kernel (``kernel_``); X, Y : the training inputs and
    (normalised) targets, (n, d) and (n, T); diag_add : (n,) float64, alpha
    as the fit used it; A : (n, T); L : (n, n) or None (the KeptModel's);
    draws : :class:`Draws`, what rebuilds the fit's objective; cache : dict,
    owned by the estimator, where a solver keeps the state its predictions
    reuse between calls (it checks that the state still matches ``kernel``
    and ``diag_add``); mean : the KeptModel's ``mean`` (A is then the
    residuals' K^-1 (Y - H beta)), which
    :func:`fastgp._solvers.mean.predict_moments` adds around the solver's
    predictions.
    """

    kernel: Any
    X: Any
    Y: np.ndarray
    diag_add: np.ndarray
    A: np.ndarray
    L: Any
    draws: Any
    cache: dict
    mean: Any = None


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


def require_fast_path(covariance, kernel, who, why, instead):
    """A ValueError where ``kernel`` (on the backend ``covariance``) is off
    the fast path, for a solver that needs the lowered kernel: ``who`` needs
    it (such as 'solver="vecchia"'), ``why`` (what it evaluates from it) and
    what to use ``instead``."""
    if not covariance.is_fast:
        raise ValueError(
            f"{who} needs a kernel on fastgp's fast path, and {kernel!r} (or inputs that "
            f"are not a float array) is not: {why}. Use {instead}, or a kernel built from "
            "the fast path's (docs/adding_a_kernel.md).")


def regression_targets(Y, diag_add):
    """(Y (n, T) C-contiguous float64, diag_add (n,) C-contiguous float64):
    the targets as every regression objective holds them (a vector becomes
    one column) and alpha broadcast to one entry per sample."""
    Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).reshape(len(Y), -1))
    diag_add = np.ascontiguousarray(
        np.broadcast_to(np.asarray(diag_add, dtype=np.float64), (len(Y),)))
    return Y, diag_add


class GuardedObjective(ABC):
    """What the optimiser calls: ``objective(point) -> (value, grad)`` and
    ``objective.value(point)``, each guarded (inf, and zeros for the
    gradient, where the point has no finite answer: :func:`guarded_value`,
    :func:`guarded_value_and_grad`) and counted in ``n_evaluations``.

    A subclass defines :attr:`n_samples` and either ``evaluate(point,
    with_gradient=True) -> (value, gradient or None)`` or
    :meth:`value_and_grad_at` and :meth:`value_at` themselves; they may raise
    NotPositiveDefiniteError or :class:`PointFailed`. One whose solver runs
    restarts in joblib workers defines :meth:`for_worker`.
    """

    #: Evaluations so far (value alone or with the gradient).
    n_evaluations = 0

    @property
    @abstractmethod
    def n_samples(self):
        """The training samples (the size the thread policy and the clock read)."""

    def value_and_grad_at(self, point):
        """(value, gradient) at ``point``, unguarded."""
        return self.evaluate(point)

    def value_at(self, point):
        """The value alone at ``point``, unguarded (no gradient computed)."""
        return self.evaluate(point, False)[0]

    def __call__(self, point):
        """(value, gradient); (inf, zeros) where there is no finite answer."""
        self.n_evaluations += 1
        return guarded_value_and_grad(self.value_and_grad_at, point)

    def value(self, point):
        """The value alone; inf where there is no finite answer."""
        self.n_evaluations += 1
        return guarded_value(self.value_at, np.asarray(point, dtype=np.float64))

    def for_worker(self):
        """A copy for one optimiser run in a joblib task (its own workspace
        and count of evaluations)."""
        raise NotImplementedError(f"{type(self).__name__} does not run in workers")

    def kept_mean(self, *state):
        """The mean's :class:`~fastgp._solvers.mean.FittedMean` at the point
        last evaluated, for the kept model (``state``: what the solver's
        last step still holds, such as the factor); None without a mean."""
        return None


def on_idle_cores(n_samples, function, *args, **kwargs):
    """``function(*args, **kwargs)`` outside a fit (a prediction, one
    ``log_marginal_likelihood(theta)``) under a fit's thread settings
    (:func:`fastgp._engine.threads.threads_for`): serial below its
    threshold, otherwise Numba and BLAS on the cores idle when it starts, so
    that LAPACK's threads do not wait for time slices on a busy machine."""
    with threads_for(n_samples) as governor:
        return governor.evaluate(function, *args, **kwargs)


@contextmanager
def host_memory_peak():
    """Measure the peak of host memory that NumPy reports to tracemalloc
    inside the block: yields a dict whose ``"host"`` is set on exit (bytes
    above what was traced on entry)."""
    result = {"host": 0, "device": 0}
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    try:
        yield result
    finally:
        _, peak = tracemalloc.get_traced_memory()
        if started:
            tracemalloc.stop()
        result["host"] = peak - before


class Solver(ABC):
    """One way of computing the likelihood, gradient, kept model and
    predictions (module docstring). Built from the estimator's parameters
    (:meth:`from_params`) and kept by the fitted estimator as it was built:
    predictions read this object, never the estimator's current parameters.
    Holds no fitted state of its own.

    Attributes
    ----------
    name : str
        The estimator's ``solver`` value that selects it; recorded as
        ``solver_``.
    restarts_in_workers : bool
        Whether its restarts may run as joblib tasks (each copies the
        objective, :meth:`GuardedObjective.for_worker`).
    fit_time_factor : float
        A fit's time in evaluations' worth per evaluation its optimiser
        takes (1: the evaluations are the fit), for the notice of a long
        fit (:class:`FitDescription`).
    """

    name = None
    restarts_in_workers = False
    fit_time_factor = 1.0

    @classmethod
    @abstractmethod
    def from_params(cls, params):
        """The solver for an estimator's ``get_params()`` (only the
        parameters it reads)."""

    # ---------------------------------------------------------------- fit
    @classmethod
    def accept(cls, covariance, kernel):
        """Called once the backend exists: raise ValueError if this solver
        cannot run ``kernel`` (``covariance.is_fast`` says whether it is on
        the fast path), or warn about its cost. It depends on the kernel
        alone (fastgp.kernels.fast_path asks it). Default: accept."""

    @abstractmethod
    def fit_bytes(self, problem):
        """Estimated peak bytes of host memory of a fit
        (:mod:`fastgp.memory.estimates`)."""

    def fit_memory(self, problem):
        """The fit's estimated peak per place, a :class:`MemoryNeed`
        (default: :meth:`fit_bytes` in host memory, nothing on a device)."""
        return MemoryNeed(host=int(self.fit_bytes(problem)))

    @abstractmethod
    def remedies(self, problem):
        """What a memory refusal of a fit tells the user to do, most useful
        first (list of str)."""

    def draw(self, rng):
        """The fit's own draws from its RandomState, before any restart is
        drawn: a :class:`Draws` (default: none)."""
        return Draws()

    @abstractmethod
    def objective(self, covariance, Y, diag_add, draws, verbose=False, mean=None, kept=None):
        """A :class:`GuardedObjective` over theta; allocates nothing large
        before its first call. ``draws``: :meth:`draw`'s or
        :meth:`replay`'s. ``mean``: a :class:`~fastgp._solvers.mean.MeanTerm`
        whose coefficients the objective profiles out (its value is then the
        profile or restricted likelihood), or None. ``kept``: after a fit,
        the fitted model's state (``Fitted.cache["state"]``), which a solver
        may reuse where it still matches (Vecchia's layout), or None."""

    def accept_mean(self, mean):
        """Raise ValueError where this solver cannot estimate ``mean`` (a
        :class:`~fastgp._solvers.mean.MeanTerm`) with the covariance.
        Default: accept."""

    def check_device_memory(self, needed_bytes, n_samples, operation, remedies):
        """Raise :class:`~fastgp.exceptions.InsufficientMemoryError` where
        ``needed_bytes`` of the solver's device memory are not free (a
        device solver's; the CPU solvers need none, and
        :meth:`fit_memory`'s device part is 0 for them)."""
        raise RuntimeError(f'the "{self.name}" solver holds nothing on a device')

    def evaluation_context(self, n_samples):
        """The context every evaluation of a fit, and its final model, runs
        in: ``with solver.evaluation_context(n) as place:
        place.evaluate(function, *args)``. Default: the CPU thread governor
        (:func:`fastgp._engine.threads.threads_for`), the idle cores."""
        return threads_for(n_samples)

    def outside_fit(self, n_samples, function, *args, **kwargs):
        """``function(*args, **kwargs)`` for work outside a fit (a
        prediction, one ``log_marginal_likelihood(theta)``), in
        :meth:`evaluation_context`."""
        with self.evaluation_context(n_samples) as place:
            return place.evaluate(function, *args, **kwargs)

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

    def replay(self, objective, draws):
        """The :class:`Draws` that rebuild, after the fit, the function the
        optimiser saw last (``log_marginal_likelihood(theta)``); by default
        the fit's draws."""
        return draws

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
    def predict_cov_bytes(self, n_train, n_query, n_targets, n_features):
        """Estimated peak bytes of ``predict(X, return_cov=True)`` on
        ``n_query`` points of ``n_features`` dimensions of a model of
        ``n_train`` samples."""

    # ------------------------------------------- the conformance battery
    def memory_peak(self):
        """A context that measures the peak memory of what runs inside it
        per place: it yields a dict whose ``"host"`` and ``"device"`` bytes
        are set when it ends (what the conformance battery compares with
        :meth:`fit_memory`). Default: host memory through tracemalloc."""
        return host_memory_peak()

    # ------------------------------------------------ the other estimators
    def latent_objective(self, kernel, Y, n_components, diag_add):
        """The GPLVM's objective over z = [X.ravel(), theta] (an exact solver's;
        :mod:`fastgp._solvers.cholesky.latent`)."""
        raise ValueError(f'the "{self.name}" solver does not fit a GPLVM')

    def latent_fit_memory(self, n_samples, n_features, n_components, objective):
        """The GPLVM fit's estimated peak per place, a :class:`MemoryNeed`."""
        raise ValueError(f'the "{self.name}" solver does not fit a GPLVM')

    def latent_density(self, kernel, X_train, L, A, Y_new):
        """The predictive density of new data rows over latent points (the
        GPLVM's transform), from a kept factor."""
        raise ValueError(f'the "{self.name}" solver does not fit a GPLVM')

    def predict_from_factor(self, kernel, X_train, L, A, X_query, want_var):
        """(mean (m, T), variance (m,) or None) at X_query from a kept
        factor L of k(X_train, X_train) + alpha and A = K^-1 Y (the GPLVM's
        inverse_transform)."""
        raise ValueError(f'the "{self.name}" solver keeps no factor')

    def laplace_objective(self, covariance, y, max_iter, warm_start, f_cached=None):
        """The binary Laplace classifier's objective (an exact solver's;
        :mod:`fastgp._solvers.cholesky.laplace`)."""
        raise ValueError(f'the "{self.name}" solver does not fit the Laplace classifier')

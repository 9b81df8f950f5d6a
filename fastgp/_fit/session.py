"""The fit core: what every fastgp estimator's fit does around its objective.

GaussianProcessRegressor.fit and GPLVM.fit validate their input and build
their objective (:mod:`fastgp._solvers.cholesky.objective`, :mod:`fastgp._solvers.cholesky.latent`);
this module owns the rest, in the order a fit runs it (:func:`fit_objective`):

1. the memory check: the estimator's peak estimate (:mod:`fastgp.memory`)
   reserved in the machine's ledger (:mod:`fastgp.memory.ledger`: it waits
   for other fits to release memory, up to a timeout), before the N x N
   buffer exists, with the estimator's remedies in the message;
2. the :class:`Workspace`, the one N x N buffer the objective works in
   (allocated on first use, with a memory check of its own as a backstop);
3. the optimiser run the estimator hands in (:mod:`fastgp._optimize.minimize`), inside
   the thread settings of :func:`fastgp._engine.threads.threads_for`: each
   evaluation of the objective uses the cores that are idle when it starts;
4. the final factor (:func:`final_factor`) at the chosen point, with jitter
   where K is not numerically positive definite (Rasmussen & Williams 2006,
   Alg. 2.1 lines 2-3): linalg's errors become the user-facing ValueError and
   LinAlgError that name the kernel and what to do, the amount of jitter is a
   :class:`~fastgp._linalg.lapack.JitterWarning`, a non-finite likelihood is a
   ValueError, the strict upper triangle is zeroed, and the workspace hands
   its buffer over to become ``L_``;
5. publication: the estimator sets every fitted attribute at once, after all
   that can raise (:func:`publish`), inside :func:`atomic_fit`, which restores
   the estimator's attributes as they were if anything raises (scikit-learn's
   ``validate_data`` sets ``n_features_in_`` before the fit can fail). So a
   fit that raises leaves a fitted estimator exactly as it was. The one
   exception is Ctrl-C during the optimisation (:func:`run_fit`): the best
   point so far is published, a fitted and usable estimator, and then the
   KeyboardInterrupt propagates, so loops and cross-validation stop.

It also owns :class:`IterationReport`, the progress lines of a verbose fit,
and what a fitted estimator's ``log_marginal_likelihood(theta)`` does before
it evaluates (:func:`likelihood_request`, :func:`check_evaluation_memory`).
"""

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._engine.threads import threads_for
from .._user_warnings import warn_user
from .._backend.covariance import make_covariance
from ..exceptions import JitterWarning, NonFiniteMatrixError, NotPositiveDefiniteError
from ..memory import check_memory
from ..memory.ledger import check_could_fit, reserve
from .._validation import kernel_for_likelihood

__all__ = [
    "Workspace",
    "IterationReport",
    "FactorMessages",
    "kernel_not_finite",
    "FitResult",
    "fit_objective",
    "final_factor",
    "atomic_fit",
    "publish",
    "run_fit",
    "evaluate_on_idle_cores",
    "likelihood_request",
    "check_evaluation_memory",
]


class Workspace:
    """The one N x N float64 buffer (F-contiguous, LAPACK's layout) that a fit
    reuses for K, its factor L and K^-1 in turn. Allocated on first use.

    Before allocating, :func:`fastgp.memory.check_memory` compares its 8 N^2
    bytes with the memory available and raises
    :class:`~fastgp.memory.InsufficientMemoryError` if it will not fit, so
    every user of a Workspace (regression, the GPLVM) is covered. Estimators
    check their whole estimate earlier (:func:`fit_objective`), with remedies
    of their own; this is the backstop.
    """

    def __init__(self, n):
        self.n = int(n)
        self._buffer = None

    @property
    def nbytes(self):
        return 8 * self.n * self.n

    def buffer(self):
        if self._buffer is None:
            check_memory(self.nbytes, n_samples=self.n,
                         operation="Allocating fastgp's N x N workspace",
                         remedies=["use fewer samples (a random subset, or "
                                   "aggregate neighbouring points)",
                                   "use a machine with more memory"])
            self._buffer = np.empty((self.n, self.n), dtype=np.float64, order="F")
        return self._buffer

    def release(self):
        """Hand the buffer to the caller (for example as the kept factor L_)
        and forget it, so the next use allocates anew."""
        buffer, self._buffer = self._buffer, None
        return buffer


class IterationReport:
    """The progress lines of a verbose fit.

    ``report(iteration, value, grad_norm)`` prints
    ``iter <n>  <objective_name> <value>  |grad| <norm>  <seconds> s/iter``,
    the time since the previous line (or since the run started). With
    restarts, ``run_started(index, n_runs)`` prints a header before each run
    and ``run_kept(index, n_runs, value)`` says which run the fit keeps.

    objective_name : str, such as ``"-log p(y|X)"``
    width : int, digits given to the iteration number
    """

    def __init__(self, objective_name, width, clock=time.perf_counter):
        self.objective_name = objective_name
        self.width = int(width)
        self.clock = clock
        self._last = None

    def __call__(self, iteration, value, grad_norm):
        now = self.clock()
        elapsed = "" if self._last is None else f"  {now - self._last:.3g} s/iter"
        self._last = now
        print(f"iter {iteration:{self.width}d}  {self.objective_name} {value: .6e}  "
              f"|grad| {grad_norm:.3e}{elapsed}", flush=True)

    def start(self):
        """Start the clock of the first line (a run begins)."""
        self._last = self.clock()

    def run_started(self, index, n_runs):
        origin = ("the initial hyperparameters" if index == 0
                  else "a random start within the bounds")
        print(f"run {index + 1} of {n_runs}: from {origin}", flush=True)
        self.start()

    def run_kept(self, index, n_runs, value):
        print(f"kept run {index + 1} of {n_runs} ({self.objective_name} {value: .6e})",
              flush=True)


@dataclass(frozen=True)
class FactorMessages:
    """What a fit tells the user when its final factor is in trouble. Each
    is a callable so that the text (and any figure in it) is built only when
    it is needed.

    non_finite : () -> str
        ValueError: K holds NaN or infinity at the fitted point.
    not_positive_definite : (largest_jitter_tried) -> str
        LinAlgError: not positive definite even with the largest jitter.
    jitter : (jitter) -> str
        JitterWarning: the jitter that was added.
    overflow : () -> str
        ValueError: the log marginal likelihood or A = K^-1 Y is not finite.
    """

    non_finite: Callable[[], str]
    not_positive_definite: Callable[[float], str]
    jitter: Callable[[float], str]
    overflow: Callable[[], str]


def kernel_not_finite(kernel, where, advice):
    """A :attr:`FactorMessages.non_finite`: ``kernel`` returns NaN or infinity
    ``where`` (e.g. "on the training inputs"); ``advice`` says what to do."""
    return lambda: (f"The kernel, {kernel}, returns non-finite values (NaN or "
                    f"infinity) {where}. {advice}")


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit_objective` found; the estimator publishes it.

    point : ndarray, the optimiser's chosen point (theta, or the GPLVM's z)
    n_iterations, n_evaluations : int
    L : ndarray (n, n) F-contiguous, the lower Cholesky factor (strict upper
        triangle zero), the buffer the fit worked in; None on the
        matrix-free path
    A : ndarray (n, T), K^-1 Y
    value : float, the objective (negative log marginal likelihood) at point
    jitter : float, added to K's diagonal beyond the estimator's alpha
    interrupt : KeyboardInterrupt or None, the Ctrl-C that ended the
        optimisation (:func:`run_fit` re-raises it after publishing)
    """

    point: np.ndarray
    n_iterations: int
    n_evaluations: int
    L: np.ndarray
    A: np.ndarray
    value: float
    jitter: float
    interrupt: BaseException = None


def fit_objective(objective, optimize, *, needed_bytes, operation, remedies, messages,
                  optimize_in_workers=False, final=None):
    """Run a fit of ``objective``: steps 1, 3 and 4 of the module docstring.

    Parameters
    ----------
    objective : NegLogMarginalLikelihood or LatentNegLogMarginalLikelihood
        Built on a :class:`Workspace` that has not allocated yet; its
        ``factor_with_jitter(point)`` gives the final factor.
    optimize : callable (evaluate) -> (point, n_iterations, interrupt)
        The estimator's optimiser run(s), minimising ``evaluate`` (the
        objective, each call run on the cores idle when it starts); called
        after the memory check. ``interrupt`` is the KeyboardInterrupt that
        ended the optimisation, or None.
    needed_bytes : int
        The fit's peak memory estimate (:mod:`fastgp.memory`).
    operation : str
        Names the fit in a refusal ("Fitting GPLVM").
    remedies : sequence of str
        What the user can do if memory is short, most useful first.
    messages : FactorMessages
    optimize_in_workers : bool, default=False
        ``optimize`` runs its evaluations in joblib workers, each with a
        workspace and a reservation of its own (:mod:`fastgp._optimize.workers`); it is
        called with one run's budget instead of ``evaluate``: a dict of
        ``needed`` (bytes), ``n_samples``, ``operation`` and ``remedies``, the
        arguments of :func:`fastgp.memory.ledger.reserve`. This process then
        only checks that the fit could fit at all before it, and reserves for
        the final factor after it (holding a reservation meanwhile could
        starve its workers).
    final : callable (objective, point, messages) -> (L, A, value, jitter), optional
        The kept model at the chosen point; default :func:`final_factor`
        (the matrix-free path passes its own, whose L is None).

    Returns
    -------
    FitResult

    Raises
    ------
    InsufficientMemoryError, ValueError, numpy.linalg.LinAlgError
        Before anything is published (module docstring).

    Notes
    -----
    The memory is reserved in the machine's ledger
    (:func:`fastgp.memory.ledger.reserve`, which may wait for other fits to
    release memory); the reservation shrinks to the kept factor ``L`` and
    lives until that array is freed, or ends here if the fit raises.
    """
    n_samples = objective.n_samples
    budget = dict(needed=needed_bytes, n_samples=n_samples, operation=operation,
                  remedies=list(remedies))
    if optimize_in_workers:
        check_could_fit(**budget)
        point, n_iterations, interrupt = optimize(budget)
    reservation = reserve(**budget)
    try:
        with reservation.covering(), threads_for(n_samples) as governor:
            if not optimize_in_workers:
                point, n_iterations, interrupt = optimize(
                    lambda theta: governor.evaluate(objective, theta))
            L, A, value, jitter = governor.evaluate(final or final_factor, objective, point,
                                                    messages)
        if L is None:  # the matrix-free path keeps no N x N factor
            reservation.release()
        else:
            reservation.keep(L)
    except BaseException:
        reservation.release()
        raise
    return FitResult(point=point, n_iterations=int(n_iterations),
                     n_evaluations=objective.n_evaluations, L=L, A=A,
                     value=float(value), jitter=jitter, interrupt=interrupt)


def final_factor(objective, point, messages):
    """The factor of the model that is kept: (L, A, value, jitter) at
    ``point``, with jitter where K is not numerically positive definite
    (:func:`fastgp._linalg.lapack.cholesky_with_jitter`).

    L is the workspace's buffer, released to the caller, with its strict
    upper triangle zeroed; A = K^-1 Y. Raises ValueError (K not finite, or the
    value or A not finite) and numpy.linalg.LinAlgError (not positive definite
    even with jitter) with ``messages``' texts; warns
    :class:`~fastgp._linalg.lapack.JitterWarning` where jitter was added.
    """
    try:
        L, A, value, jitter = objective.factor_with_jitter(point)
    except NonFiniteMatrixError as exc:
        raise ValueError(messages.non_finite(), str(exc)) from exc
    except NotPositiveDefiniteError as exc:
        raise np.linalg.LinAlgError(
            messages.not_positive_definite(getattr(exc, "jitter", 0.0)), str(exc)
        ) from exc
    if jitter > 0.0:
        warn_user(messages.jitter(jitter), JitterWarning)
    if not (np.isfinite(value) and np.all(np.isfinite(A))):
        raise ValueError(messages.overflow())
    for j in range(1, L.shape[1]):  # zero the strict upper triangle, column by
        L[:j, j] = 0.0              # column: no N x N temporary
    released = objective.workspace.release()
    if released is not L:
        raise AssertionError("the final factor is not the workspace's buffer")
    return L, A, value, jitter


@contextlib.contextmanager
def atomic_fit(estimator):
    """Inside the block, anything that raises restores every attribute of
    ``estimator`` as it was on entry (the same objects) before it propagates.

    A fit computes into local variables and :func:`publish` es them last; this
    also undoes what scikit-learn's ``validate_data(reset=True)`` sets early
    (``n_features_in_``, ``feature_names_in_``). Nothing inside may change a
    fitted attribute's object in place.
    """
    saved = dict(vars(estimator))
    try:
        yield
    except BaseException:
        attributes = vars(estimator)
        attributes.clear()
        attributes.update(saved)
        raise


def publish(estimator, attributes):
    """Set every fitted attribute of ``estimator`` from ``attributes``
    (name -> value), all at once, as the last step of a fit."""
    for name, value in attributes.items():
        setattr(estimator, name, value)


def run_fit(estimator, work):
    """An estimator's fit: ``work()`` returns ``(attributes, fitted)``, the
    fitted attributes (name -> value) and the :class:`FitResult`; they are
    published inside :func:`atomic_fit`. If a KeyboardInterrupt ended the
    optimisation (``fitted.interrupt``), it is re-raised after publishing:
    the estimator is fitted at the best point so far and usable, and the
    interrupt still stops the caller's loop, notebook cell or
    cross-validation, as it does with scikit-learn.
    """
    with atomic_fit(estimator):
        attributes, fitted = work()
        publish(estimator, attributes)
    if fitted.interrupt is not None:
        raise fitted.interrupt


def evaluate_on_idle_cores(n_samples, function, *args):
    """``function(*args)`` outside a fit (an estimator's
    ``log_marginal_likelihood(theta)`` or prediction) under a fit's thread
    settings (:func:`fastgp._engine.threads.threads_for`): serial below its
    threshold, otherwise Numba and BLAS on the cores idle when it starts, so
    that LAPACK's threads do not wait for time slices on a busy machine."""
    with threads_for(n_samples) as governor:
        return governor.evaluate(function, *args)


def likelihood_request(estimator, theta, eval_gradient, clone_kernel):
    """What a fitted estimator's ``log_marginal_likelihood(theta,
    eval_gradient, clone_kernel)`` evaluates, by scikit-learn's contract.

    Returns None where ``theta`` is None (the caller returns its fitted
    value), else ``(kernel, theta, covariance)``: the kernel at ``theta``
    (:func:`fastgp._validation.kernel_for_likelihood`), ``theta`` as float64
    and the covariance backend over the estimator's ``X_train_``.
    """
    at_theta = kernel_for_likelihood(estimator.kernel_, theta, eval_gradient, clone_kernel)
    if at_theta is None:
        return None
    kernel, theta = at_theta
    return kernel, theta, make_covariance(kernel, estimator.X_train_, warn=False)


def check_evaluation_memory(needed_bytes, n_samples):
    """The memory check of one ``log_marginal_likelihood(theta)``
    (:func:`fastgp.memory.check_memory`, with its remedies)."""
    check_memory(needed_bytes, n_samples=n_samples,
                 operation="log_marginal_likelihood(theta)",
                 remedies=["evaluate it on fewer samples", "use a machine with more memory"])

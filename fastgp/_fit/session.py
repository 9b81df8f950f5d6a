"""The fit core: what every fastgp estimator's fit does around its objective,
as a context the fit reads top to bottom in (docs/design.md, "The fit").

    with FitSession(self, "Fitting GPLVM") as fit:
        ...validate, build the objective...
        fit.budget(need, n_samples, remedies)          # a MemoryNeed per place
        best = fit.minimize(objective, start, bounds, optimizer, ...)
        kept = fit.finalise(final, objective, best.theta, messages)
        fit.publish({...every fitted attribute...})
    return self

What the session supplies:

1. the memory reservation: the estimate given to :meth:`FitSession.budget`
   is reserved in the machine's ledger (:func:`fastgp.memory.ledger.reserve`:
   it waits for other fits to release memory, up to a timeout) by the first
   step that needs it, before any N x N buffer exists; a fit whose optimiser
   runs in joblib workers only checks that it could fit at all
   (each worker reserves its own run), and reserves for the final model
   afterwards. The reservation shrinks to the kept factor ``L_`` and lives
   until that array is freed, or ends when the fit raises;
2. the threads: every evaluation of the objective runs through
   :func:`fastgp._engine.threads.threads_for`'s governor, on the cores that
   are idle when it starts;
3. the optimiser run (:mod:`fastgp._optimize`), with the progress report of
   a verbose fit (:class:`fastgp._fit.report.IterationReport`), each
   evaluation timed, the notice of a long fit after the first one and the
   fit's time limit (:class:`fastgp._fit.clock.EvaluationClock`);
4. the final model (the solver's ``final``) under the same governor;
5. publication: :meth:`FitSession.publish` sets every fitted attribute at
   once, after all that can raise. If anything raises inside the block, every
   attribute of the estimator is restored as it was on entry (scikit-learn's
   ``validate_data`` sets ``n_features_in_`` before the fit can fail), so a
   fit that raises leaves a fitted estimator exactly as it was. The one
   exception is Ctrl-C during the optimisation: the best point so far is
   published, a fitted and usable estimator, and the KeyboardInterrupt is
   raised when the block ends, so that loops and cross-validation stop.
"""

from .._engine.threads import threads_for
from .._optimize import minimize as _minimize
from .._optimize.minimize import minimize_with_restarts
from .._optimize.workers import minimize_in_workers, runs_in_workers
from ..memory.ledger import check_could_fit, reserve
from .clock import EvaluationClock
from .report import IterationReport

__all__ = ["FitSession", "DEFAULT_LIMIT_REMEDY"]

#: What a fit whose optimiser stopped at its iteration limit tells the user,
#: where the estimator has no parameter for the limit.
DEFAULT_LIMIT_REMEDY = ("pass a callable optimizer (scikit-learn's contract) that "
                        "allows more iterations or a looser tolerance")


class FitSession:
    """One estimator's fit (module docstring).

    Parameters
    ----------
    estimator : the estimator being fitted; its attributes are restored if
        the block raises
    operation : str
        Names the fit in a memory refusal ("Fitting GPLVM").
    """

    def __init__(self, estimator, operation):
        self.estimator = estimator
        self.operation = operation
        self._saved = None
        self._budget = None
        self._reservation = None
        self._interrupt = None
        self._in_workers = False
        self._clock = None

    # --------------------------------------------------------- the context
    def __enter__(self):
        self._saved = dict(vars(self.estimator))
        return self

    def __exit__(self, kind, exc, traceback):
        if kind is not None:
            self._release()
            attributes = vars(self.estimator)
            attributes.clear()
            attributes.update(self._saved)
            return False
        if self._interrupt is not None:
            raise self._interrupt
        return False

    def _release(self):
        if self._reservation is not None:
            self._reservation.release()
            self._reservation = None

    # ------------------------------------------------------------- memory
    def budget(self, need, n_samples, remedies, parallel_runs=None, device_check=None):
        """The fit's peak memory estimate per place (a
        :class:`~fastgp._solvers.base.MemoryNeed`,
        :mod:`fastgp.memory.estimates`), the N that sets it and what a
        refusal tells the user to do (most useful first): the host part
        reserved now, before the objective allocates anything, and the
        device part, if any, checked now by ``device_check(bytes,
        n_samples=..., operation=..., remedies=...)`` (the solver's).

        ``parallel_runs`` = (n_jobs, n_restarts): the optimiser's runs may
        go to joblib's workers (:func:`fastgp._optimize.workers.runs_in_workers`
        decides); then each reserves its own, and this process only checks
        now that the fit could fit at all and reserves for the final model
        after the runs."""
        if need.device and device_check is not None:
            device_check(int(need.device), n_samples=int(n_samples),
                         operation=self.operation, remedies=list(remedies))
        self._budget = dict(needed=int(need.host), n_samples=int(n_samples),
                            operation=self.operation, remedies=list(remedies))
        self._in_workers = parallel_runs is not None and runs_in_workers(*parallel_runs)
        if self._in_workers:
            check_could_fit(**self._budget)
        else:
            self._reserved()

    def _reserved(self):
        """The reservation of the fit's budget, made now if not yet."""
        if self._budget is None:
            raise RuntimeError("FitSession: budget() must come before the work")
        if self._reservation is None:
            self._reservation = reserve(**self._budget)
        return self._reservation

    # ---------------------------------------------------------- optimise
    def minimize(self, objective, start, bounds, optimizer, *, n_restarts=0, rng=None,
                 n_jobs=None, verbose=0, objective_name="-log p(y|X)", width=4,
                 max_iter=None, tol=None, limit_remedy=DEFAULT_LIMIT_REMEDY,
                 max_time=None, description=None, context=threads_for):
        """The best of the optimiser's runs on ``objective`` from ``start``
        and ``n_restarts`` random starts (:mod:`fastgp._optimize.minimize`),
        an :class:`~fastgp._optimize.minimize.OptimizationResult`.

        Where :meth:`budget` found that the runs go to joblib's workers
        (and there are restarts), they are joblib tasks, each with its own
        copy of the objective (``objective.for_worker()``) and its own
        reservation; otherwise they run here, inside the fit's reservation,
        every evaluation in ``context(n_samples)`` (the solver's evaluation
        context: by default the CPU thread governor, on the idle cores). A
        KeyboardInterrupt that ended the
        optimisation after a finite point is kept for the end of the block
        (module docstring).

        ``max_time`` (seconds) is the whole fit's limit, counted from its
        first call here (later calls, such as a Vecchia fit's runs after
        its neighbours moved, share it); ``description``
        (:class:`fastgp._fit.clock.FitDescription`) is what the notice of a
        long fit says, None for no notice. Runs in joblib's workers are
        neither timed nor noticed; each may take the time left.
        """
        n_samples = objective.n_samples
        if self._clock is None:
            self._clock = EvaluationClock(len(start), n_restarts + 1, optimizer,
                                          description, max_time, max_iter,
                                          clock=_minimize.clock)
        timer = self._clock
        report = (IterationReport(objective_name, width, progress=timer.progress)
                  if verbose else None)
        if self._in_workers and n_restarts > 0:
            best = minimize_in_workers(
                objective, start, bounds, optimizer, n_restarts, rng, n_jobs,
                budget=self._budget, limit_remedy=limit_remedy, report=report,
                deadline=timer.deadline, max_time=max_time)
        else:
            with self._reserved().covering(), context(n_samples) as governor:
                if report is not None:
                    report.start()
                best = minimize_with_restarts(
                    lambda point: timer.evaluate(governor.evaluate, objective, point),
                    start, bounds, optimizer, n_restarts, rng, report,
                    limit_remedy=limit_remedy, max_iter=max_iter, tol=tol,
                    deadline=timer.deadline, max_time=max_time)
        if best.interrupt is not None:
            self._interrupt = best.interrupt
        return best

    @property
    def out_of_time(self):
        """Whether the fit's ``max_time`` has passed."""
        return self._clock is not None and self._clock.out_of_time

    def defer(self, interrupt):
        """Raise ``interrupt`` (a KeyboardInterrupt) when the block ends,
        after publication (a multi-class classifier collects its models')."""
        if self._interrupt is None:
            self._interrupt = interrupt

    # ------------------------------------------------------------ finalise
    def finalise(self, final, objective, point, messages, context=threads_for):
        """``final(objective, point, messages)`` -> the solver's
        :class:`~fastgp._solvers.base.KeptModel`, computed inside the fit's
        reservation in ``context(n_samples)`` (as :meth:`minimize`'s); the
        reservation then shrinks to the kept factor ``L`` where it lies in
        host memory (and lives until that array is freed), or ends where the
        model keeps no N x N factor there."""
        reservation = self._reserved()
        with reservation.covering(), context(objective.n_samples) as governor:
            kept = governor.evaluate(final, objective, point, messages)
        if kept.host_factor is None:
            self._release()
        else:
            reservation.keep(kept.host_factor)
            self._reservation = None  # it belongs to L now
        return kept

    # ------------------------------------------------------------- publish
    def publish(self, attributes):
        """Set every fitted attribute (name -> value) of the estimator at
        once, as the last step of the fit."""
        for name, value in attributes.items():
            setattr(self.estimator, name, value)

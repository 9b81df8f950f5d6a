"""Optimiser restarts in parallel, through joblib.

``GaussianProcessRegressor(n_restarts_optimizer=k, n_jobs=j)`` runs its k + 1
optimiser runs as joblib tasks, so the user chooses where they run the way
scikit-learn users already do, with ``joblib.parallel_config``: loky worker
processes by default, threads (``backend="threading"``), or the workers of a
dask.distributed cluster (``backend="dask"``, docs/cluster.md). fastgp starts
no scheduler and opens no socket of its own.

- **The same result whatever runs it.** Every starting point is drawn in the
  calling process before anything is dispatched
  (:func:`fastgp._optimize.minimize.restart_starts`, the sequential fit's draws), each
  run is an independent :func:`fastgp._optimize.minimize.minimize_theta` from its start,
  and the kept run is chosen as the sequential fit chooses it (the smallest
  value, the first on ties). Each run's numbers depend only on its start and
  on the BLAS thread count (docs/reliability.md, "Python threads and BLAS"),
  so a parallel fit gives a sequential fit's bits where both run BLAS on the
  same number of threads (always below 256 samples, which run serial).
- **Its own workspace per run.** A worker runs a copy of the objective
  (``objective.for_worker()``: on the Cholesky path a fresh, unallocated
  :class:`~fastgp._solvers.workspace.Workspace`), so runs that share
  a process (the threading backend) never share a buffer.
- **Every buffer that runs at once is reserved.** Each run reserves its
  fit's estimate in the ledger of the machine it runs on
  (:func:`fastgp.memory.ledger.reserve`) for as long as its workspace exists,
  and waits there if the machine's budget is spent; the calling process holds
  nothing meanwhile (it would starve its own workers) and reserves for the
  final factor after the runs end.
- **No oversubscribed cores.** A run caps its Numba and BLAS threads at the
  usable cores divided by the number of runs executing at once (joblib's
  loky backend sets the same limit in its workers' environment).

A ``KeyboardInterrupt`` during parallel restarts stops the fit with the
estimator left as it was (the sequential path keeps the best point so far).
"""

import joblib

from .._engine.threads import threads_for, usable_cpus
from ..memory.ledger import reserve
from . import minimize as _minimize
from .minimize import best_run, minimize_theta, restart_starts

__all__ = ["runs_in_workers", "minimize_in_workers"]


def runs_in_workers(n_jobs, n_restarts):
    """Whether restarts go to joblib: more than one run, and more than one
    job under the active ``joblib.parallel_config`` (``n_jobs=None`` takes the
    configured number, as in scikit-learn)."""
    return n_restarts > 0 and joblib.effective_n_jobs(n_jobs) > 1


def _run_from(objective, start, bounds, optimizer, limit_remedy, budget, n_at_once,
              seconds=None, max_time=None):
    """One optimiser run in a joblib worker (module docstring), ended
    ``seconds`` after it starts where not None. Returns the
    :class:`~fastgp._optimize.minimize.OptimizationResult` and the run's number of
    objective evaluations."""
    deadline = None if seconds is None else _minimize.clock() + seconds
    run = [objective.for_worker()]  # shares the read-only inputs
    reservation = reserve(**budget)
    try:
        with reservation.covering(), threads_for(
                objective.n_samples,
                max_threads=max(1, usable_cpus() // n_at_once)) as governor:
            result = minimize_theta(lambda theta: governor.evaluate(run[0], theta),
                                    start, bounds, optimizer, limit_remedy=limit_remedy,
                                    deadline=deadline, max_time=max_time)
        n_evaluations = run[0].n_evaluations
    finally:
        run.clear()  # the run's workspace goes before the reservation
        reservation.release()
    return result, n_evaluations


def minimize_in_workers(objective, theta0, bounds, optimizer, n_restarts, rng, n_jobs, *,
                        budget, limit_remedy=None, report=None, deadline=None,
                        max_time=None):
    """The best of one run from ``theta0`` and ``n_restarts`` from random
    starts, each run a joblib task: what
    :func:`fastgp._optimize.minimize.minimize_with_restarts` returns, computed in
    parallel (module docstring).

    Parameters
    ----------
    objective : NegLogMarginalLikelihood
        The fit's objective, on a workspace that has not allocated; it is
        copied to every task (pickled for process-based backends), and its
        ``n_evaluations`` grows by the tasks' evaluations.
    theta0 : ndarray of shape (n_theta,)
    bounds : ndarray of shape (n_theta, 2), log space
    optimizer : "fmin_l_bfgs_b", "CG" or callable
        As :func:`fastgp._optimize.minimize.minimize_theta` (a callable must pickle for
        process-based backends).
    n_restarts : int
    rng : numpy.random.RandomState
        Draws the starts, in this process.
    n_jobs : int or None
        joblib's ``n_jobs`` (None: the active ``parallel_config``'s).
    budget : dict
        One run's memory: ``needed`` (bytes, :func:`fastgp.memory.fit_bytes`),
        ``n_samples``, ``operation``, ``remedies``, the arguments of
        :func:`fastgp.memory.ledger.reserve` that each task calls on the
        machine it runs on (:meth:`fastgp._fit.session.FitSession.minimize` hands it over).
    limit_remedy : str or None
        As :func:`fastgp._optimize.minimize.minimize_theta`.
    report : IterationReport or None
        Says which run was kept (runs' own progress lines are not printed).
    deadline, max_time : float or None
        The fit's deadline (on :data:`fastgp._optimize.minimize.clock`) and
        the user's limit: each run may take the time left when the runs are
        dispatched, counted on its worker's clock from its start.

    Returns
    -------
    OptimizationResult
    """
    starts = restart_starts(theta0, bounds, n_restarts, rng)
    n_at_once = max(1, min(joblib.effective_n_jobs(n_jobs), len(starts)))
    budget = dict(budget, operation=f"{budget['operation']} (one optimizer run in a "
                                    "joblib worker)")
    seconds = None if deadline is None else max(0.0, deadline - _minimize.clock())
    done = joblib.Parallel(n_jobs=n_jobs)(
        joblib.delayed(_run_from)(objective, start, bounds, optimizer, limit_remedy,
                                  budget, n_at_once, seconds, max_time)
        for start in starts)
    runs = [run for run, _ in done]
    objective.n_evaluations += sum(count for _, count in done)
    kept = best_run(runs)
    if report is not None:
        report.run_kept(kept, len(runs), runs[kept].value)
    return runs[kept]

"""The progress lines of a verbose fit."""

import time

__all__ = ["IterationReport"]


class IterationReport:
    """The progress lines of a verbose fit.

    ``report(iteration, value, grad_norm)`` prints
    ``iter <n>  <objective_name> <value>  |grad| <norm>  <seconds> s/iter``,
    the time since the previous line (or since the run started). With
    restarts, ``run_started(index, n_runs)`` prints a header before each run
    and ``run_kept(index, n_runs, value)`` says which run the fit keeps.

    objective_name : str, such as ``"-log p(y|X)"``
    width : int, digits given to the iteration number
    progress : callable returning str, or None
        Its text ends each line (the fit's
        :meth:`fastgp._fit.clock.EvaluationClock.progress`: the last
        evaluation's time, the time elapsed and the time to go).
    """

    def __init__(self, objective_name, width, clock=time.perf_counter, progress=None):
        self.objective_name = objective_name
        self.width = int(width)
        self.clock = clock
        self.progress = progress
        self._last = None

    def __call__(self, iteration, value, grad_norm):
        now = self.clock()
        elapsed = "" if self._last is None else f"  {now - self._last:.3g} s/iter"
        self._last = now
        suffix = "" if self.progress is None else self.progress()
        print(f"iter {iteration:{self.width}d}  {self.objective_name} {value: .6e}  "
              f"|grad| {grad_norm:.3e}{elapsed}{suffix}", flush=True)

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

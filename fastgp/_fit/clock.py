"""How long a fit takes: each evaluation's time (Numba's compilation and
cache loading left out), the notice of a long fit, the fit's deadline and
the estimated time to go of a verbose fit (docs/reliability.md, "Long
fits").

A fit's cost is its number of evaluations times the cost of one. The cost
of one is measured: the first evaluation of the fit, less the time Numba
spent compiling or loading compiled routines in it (Numba's
``"numba:compiler_lock"`` event spans both), so that the first fit after an
installation is not taken for a slow one. The number is not known before
the optimiser ends; :func:`typical_evaluations` is what fits of that many
hyperparameters took when measured.
"""

import math
import time

from .._engine.compile_time import compile_seconds
from .._solvers.base import FitDescription
from .._user_warnings import warn_user
from ..exceptions import LongFitWarning

__all__ = ["LONG_FIT_SECONDS", "FitDescription", "EvaluationClock",
           "typical_evaluations", "format_seconds"]

#: A fit estimated to take longer than this says so once (a LongFitWarning).
LONG_FIT_SECONDS = 30.0

#: Evaluations of SciPy's CG per L-BFGS-B evaluation on the same fits
#: (bench/bench_optimizers.py: 67 against 27 at N = 500 on sin(3x)).
CG_EVALUATIONS_FACTOR = 2.5


def typical_evaluations(n_theta, optimizer="fmin_l_bfgs_b"):
    """The evaluations a fit of ``n_theta`` hyperparameters typically takes:
    max(25, 6 n_theta) for L-BFGS-B, :data:`CG_EVALUATIONS_FACTOR` times
    that for CG.

    Measured on 72 L-BFGS-B fits (N = 200 and 600; 1-, 2-, 5- and 10-D
    inputs; C * RBF + White with and without ARD, C * Matern + White, the
    default kernel; three seeds each): medians of 22 evaluations for 2
    hyperparameters, 24 for 3, 21 for 4, 27 for 7 and 72 for 12 (90th
    percentiles 30, 60, 27, 31 and 88); the Mauna Loa kernel's 11 took 184
    (docs/benchmarks.md, "Thread-count independent bits").
    """
    typical = max(25, 6 * int(n_theta))
    return int(math.ceil(typical * (CG_EVALUATIONS_FACTOR if optimizer == "CG" else 1)))


def format_seconds(seconds):
    """A duration for people: ``0.41 s``, ``45 s``, ``3.2 min``, ``1.4 h``."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


class EvaluationClock:
    """Times one fit's evaluations, says once when the fit looks long, and
    holds the fit's deadline (module docstring).

    Parameters
    ----------
    n_theta : int, the hyperparameters optimised
    n_runs : int, optimiser runs (1 + restarts)
    optimizer : the optimiser ("fmin_l_bfgs_b", "CG" or a callable)
    description : FitDescription or None
        None: no notice (the caller's fit says nothing of its time).
    max_time : float or None, the fit's time limit in seconds
    max_iter : int or None, each run's iteration limit: where it is below
        the typical number of evaluations, the fit is expected to take
        about that many (each iteration takes at least one evaluation)
    clock : callable returning seconds (``time.monotonic``'s clock, which
        :data:`fastgp._optimize.minimize.clock` also uses)
    """

    def __init__(self, n_theta, n_runs, optimizer, description=None, max_time=None,
                 max_iter=None, clock=time.monotonic):
        self.clock = clock
        self.started = clock()
        self.deadline = None if max_time is None else self.started + float(max_time)
        self.max_time = max_time
        self.description = description
        self.optimizer = optimizer
        self.n_runs = int(n_runs)
        typical = typical_evaluations(n_theta, optimizer)
        self.capped = max_iter is not None and max_iter < typical
        self.per_run = int(max_iter) if self.capped else typical
        self.expected = self.per_run * self.n_runs
        self.n_evaluations = 0
        self.seconds = 0.0  # evaluation time, compilation excluded
        self.compile_seconds = 0.0  # Numba's, compiling or loading routines
        self.last = None

    def evaluate(self, function, *args):
        """``function(*args)``, timed; after the fit's first evaluation, the
        notice of a long fit."""
        start = self.clock()
        with compile_seconds() as compiling:
            result = function(*args)
        self.compile_seconds += sum(compiling)
        self.last = max(0.0, self.clock() - start - sum(compiling))
        self.seconds += self.last
        self.n_evaluations += 1
        if self.n_evaluations == 1 and self.description is not None:
            self._notice(self.last)
        return result

    @property
    def out_of_time(self):
        """Whether the fit's deadline has passed."""
        return self.deadline is not None and self.clock() >= self.deadline

    def estimated_total(self, per_evaluation):
        """Seconds of a typical fit at ``per_evaluation`` seconds each,
        within ``max_time``."""
        total = per_evaluation * self.expected
        return total if self.max_time is None else min(total, float(self.max_time))

    def _notice(self, seconds):
        total = self.estimated_total(seconds)
        if total <= LONG_FIT_SECONDS:
            return
        d = self.description
        name = {"fmin_l_bfgs_b": "an L-BFGS-B", "CG": "a CG"}.get(
            self.optimizer if isinstance(self.optimizer, str) else None, "a")
        runs = "" if self.n_runs == 1 else f" in each of its {self.n_runs} runs"
        count = (f"stops after max_iter={self.per_run} iterations (at least as many "
                 "evaluations)" if self.capped else
                 f"typically takes about {self.per_run} evaluations")
        text = (f"This fit may take about {format_seconds(total)}: its first evaluation "
                f"of the objective and its gradient took {format_seconds(seconds)} "
                f"({d.what}), and {name} fit {count}{runs}")
        if self.max_time is not None and total >= float(self.max_time):
            text += f"; max_time={self.max_time:g} s stops it at its best point by then"
        text += "."
        if d.faster is not None and (d.faster_seconds is None
                                     or d.faster_seconds < 0.25 * seconds):
            text += f" Faster: {d.faster}."
        text += (" Pass max_time (seconds) to stop the fit at its best point by then, "
                 "or verbose=1 to see each evaluation's time and the time to go.")
        warn_user(text, LongFitWarning)

    def progress(self):
        """The suffix of a verbose fit's progress line: the last evaluation's
        time, the time since the fit began and the estimated time to go."""
        if self.last is None:
            return ""
        now = self.clock()
        elapsed = now - self.started
        mean = self.seconds / self.n_evaluations
        left = self.expected - self.n_evaluations
        if left > 0:
            to_go = left * mean
            if self.deadline is not None:
                to_go = min(to_go, max(0.0, self.deadline - now))
            eta = f"ETA ~{format_seconds(to_go)} (typical {self.expected} evaluations)"
        else:
            eta = f"past a typical fit's {self.expected} evaluations"
            if self.deadline is not None:
                eta += f", {format_seconds(max(0.0, self.deadline - now))} to max_time"
        return (f"  eval {format_seconds(self.last)}  elapsed "
                f"{format_seconds(elapsed)}  {eta}")

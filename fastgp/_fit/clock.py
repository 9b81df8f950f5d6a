"""How long a fit takes: each evaluation's time (Numba's compilation and
cache loading left out), the notice of a long fit, the fit's deadline and
the estimated time to go of a verbose fit (docs/reliability.md, "Long
fits").

A fit's cost is its number of evaluations times the cost of one. The cost
of one is measured: the first evaluation of the fit, less the time Numba
spent compiling or loading compiled routines in it (Numba's
``"numba:compiler_lock"`` event spans both, in any thread of this process),
so that the first fit after an installation is not taken for a slow one.
Where the first evaluation sent work to joblib's workers (a cluster's,
:mod:`fastgp._solvers.workers`), their processes compiled or loaded
fastgp's routines and received the fit's inputs in it, which this process
cannot time: the cost of one is then the second evaluation's, and the first
is left out of the estimates. The number is not known before the optimiser
ends; :func:`evaluation_range` is the range that fits of that many
hyperparameters took when measured, and the notice and the time to go give
that range, not one figure.
"""

import math
import time

from .._engine.compile_time import compile_seconds, compiling_seconds
from .._solvers.base import FitDescription
from .._solvers.workers import calls_sent
from .._user_warnings import warn_user
from ..exceptions import LongFitWarning

__all__ = ["LONG_FIT_SECONDS", "LATENT_EVALUATIONS", "FitDescription", "EvaluationClock", "compiling_seconds",
           "typical_evaluations", "evaluation_range", "format_seconds", "format_span"]

#: A fit whose typical time exceeds this says so once (a LongFitWarning).
LONG_FIT_SECONDS = 30.0

#: Evaluations of SciPy's CG per L-BFGS-B evaluation on the same fits
#: (bench/bench_optimizers.py: 67 against 27 at N = 500 on sin(3x)).
CG_EVALUATIONS_FACTOR = 2.5

#: The range of evaluations most fits take, as shares of the typical count
#: (:func:`evaluation_range`).
LOW_SHARE, HIGH_FACTOR = 0.6, 3.0


#: (low, typical, high) evaluations of a GPLVM fit, whose free variables
#: are mostly latent coordinates (their count says little of the
#: evaluations). Measured with the defaults (L-BFGS-B, tol 1e-6,
#: converged): scikit-learn's digits, 200 to 800 rows of 64 features,
#: Q = 2: 150 to 233 evaluations; all 1,797: about 270 (40.5 s at 0.15 s
#: each); standard normal Y of 200 to 600 rows: 316 (D = 12, Q = 2), 508
#: (D = 5, Q = 2), 575 (D = 12, Q = 3) and 621 (D = 30, Q = 5).
LATENT_EVALUATIONS = (150, 300, 700)


def typical_evaluations(n_theta, optimizer="fmin_l_bfgs_b"):
    """The evaluations a fit of ``n_theta`` hyperparameters typically takes:
    max(25, 6 n_theta) for L-BFGS-B, :data:`CG_EVALUATIONS_FACTOR` times
    that for CG.

    Measured on 72 L-BFGS-B fits (N = 200 and 600; 1-, 2-, 5- and 10-D
    inputs; C * RBF + White with and without ARD, C * Matern + White, the
    default kernel; three seeds each): medians of 22 evaluations for 2
    hyperparameters, 24 for 3, 21 for 4, 27 for 7 and 72 for 12 (90th
    percentiles 30, 60, 27, 31 and 88); the Mauna Loa kernel's 11 took 184
    to 188 (docs/benchmarks.md, "Determinism and threads", has 188).
    """
    typical = max(25, 6 * int(n_theta))
    return int(math.ceil(typical * (CG_EVALUATIONS_FACTOR if optimizer == "CG" else 1)))


def evaluation_range(n_theta, optimizer="fmin_l_bfgs_b"):
    """(low, typical, high): the evaluations most fits of ``n_theta``
    hyperparameters take, :data:`LOW_SHARE` and :data:`HIGH_FACTOR` times
    :func:`typical_evaluations` around it.

    The high end holds what the longest measured fits took: the 90th
    percentiles above (at most 2.4 x the typical count), the Mauna Loa
    kernel's 11 hyperparameters (184 to 188 evaluations, 2.85 x). The low
    end: half the fits take fewer than the typical count (the medians
    above), and a run started near its optimum fewer still. A solver whose
    fit spends time between evaluations scales the range by its
    ``fit_time_factor`` (Vecchia's relayouts: :class:`EvaluationClock`).
    """
    typical = typical_evaluations(n_theta, optimizer)
    return max(1, int(LOW_SHARE * typical)), typical, int(HIGH_FACTOR * typical)


def format_seconds(seconds):
    """A duration for people: ``0.41 s``, ``45 s``, ``3.2 min``, ``1.4 h``."""
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def format_span(low, high):
    """A range of durations for people: ``38 s to 3.1 min``, or ``about
    45 s`` where both ends read the same."""
    low, high = format_seconds(low), format_seconds(high)
    return f"about {low}" if low == high else f"{low} to {high}"


class EvaluationClock:
    """Times one fit's evaluations, says once when the fit looks long, and
    holds the fit's deadline (module docstring).

    Parameters
    ----------
    n_theta : int, the hyperparameters optimised
    n_runs : int, optimiser runs (1 + restarts)
    optimizer : the optimiser ("fmin_l_bfgs_b", "CG" or a callable)
    description : FitDescription or None
        None: no notice (the caller's fit says nothing of its time). Its
        ``evaluations`` (low, typical, high; L-BFGS-B's, and
        :data:`CG_EVALUATIONS_FACTOR` times them for CG), where given,
        replace :func:`evaluation_range`.
    max_time : float or None, the fit's time limit in seconds
    max_iter : int or None, each run's iteration limit: where it is below
        the range's high end, the fit is expected to take at most about that
        many evaluations (each iteration takes at least one)
    clock : callable returning seconds (``time.monotonic``'s clock, which
        :data:`fastgp._optimize.minimize.clock` also uses)

    Attributes
    ----------
    low, typical, high : int, the evaluations of the whole fit (all runs)
    seconds : float, the evaluations' time, compilation and the workers'
        start left out; ``timed`` evaluations count in it
    compile_seconds : float, Numba's, compiling or loading routines
    warm_up : float or None, the first evaluation's time where it sent work
        to joblib's workers (then left out of ``seconds``)
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
        given = None if description is None else description.evaluations
        if given is None:
            low, typical, high = evaluation_range(n_theta, optimizer)
        else:
            scale = CG_EVALUATIONS_FACTOR if optimizer == "CG" else 1.0
            low, typical, high = (int(math.ceil(e * scale)) for e in given)
        if description is not None and description.time_factor != 1.0:
            low, typical, high = (int(math.ceil(e * description.time_factor))
                                  for e in (low, typical, high))
        self.max_iter = max_iter
        # max_iter below the range's low end: the fit takes about that many
        self.capped = max_iter is not None and max_iter < low
        if max_iter is not None:
            low, typical, high = (min(low, max_iter), min(typical, max_iter),
                                  min(high, max_iter))
        self.per_run = (low, typical, high)
        self.low, self.typical, self.high = (e * self.n_runs for e in self.per_run)
        self.n_evaluations = 0
        self.timed = 0
        self.seconds = 0.0  # evaluation time, compilation excluded
        self.compile_seconds = 0.0  # Numba's, compiling or loading routines
        self.warm_up = None
        self.last = None

    def evaluate(self, function, *args):
        """``function(*args)``, timed; after the fit's first timed
        evaluation, the notice of a long fit."""
        start = self.clock()
        sent = calls_sent()
        with compile_seconds() as compiling:
            result = function(*args)
        self.compile_seconds += sum(compiling)
        self.last = max(0.0, self.clock() - start - sum(compiling))
        self.n_evaluations += 1
        if self.n_evaluations == 1 and calls_sent() != sent:
            # the workers' first tasks compiled or loaded fastgp's routines
            # and received the inputs in their processes (module docstring)
            self.warm_up = self.last
            return result
        self.seconds += self.last
        self.timed += 1
        if self.timed == 1 and self.description is not None:
            self._notice(self.last)
        return result

    @property
    def out_of_time(self):
        """Whether the fit's deadline has passed."""
        return self.deadline is not None and self.clock() >= self.deadline

    def _within_time(self, seconds):
        return seconds if self.max_time is None else min(seconds, float(self.max_time))

    def estimated_total(self, per_evaluation):
        """Seconds of a typical fit at ``per_evaluation`` seconds each,
        within ``max_time``."""
        return self._within_time(per_evaluation * self.typical)

    def estimated_span(self, per_evaluation):
        """(low, high) seconds of most fits at ``per_evaluation`` seconds
        each (:attr:`low` and :attr:`high` evaluations), within
        ``max_time``."""
        return (self._within_time(per_evaluation * self.low),
                self._within_time(per_evaluation * self.high))

    def _notice(self, seconds):
        if self.estimated_total(seconds) <= LONG_FIT_SECONDS:
            return
        d = self.description
        name = {"fmin_l_bfgs_b": "an L-BFGS-B", "CG": "a CG"}.get(
            self.optimizer if isinstance(self.optimizer, str) else None, "a")
        runs = "" if self.n_runs == 1 else f" in each of its {self.n_runs} runs"
        low, _, high = self.per_run
        if self.capped:
            count = (f"stops after max_iter={self.max_iter} iterations (at least as many "
                     "evaluations)")
        else:
            counted = ("evaluations" if d.time_factor == 1.0 else
                       "evaluations' time (what the fit does between them included)")
            count = f"typically takes {low} to {high} {counted}"
            if self.max_iter is not None and self.max_iter == high:
                count += f" (max_iter={self.max_iter} iterations at most)"
        which = "first"
        if self.warm_up is not None:
            which = "second"
            seconds_of = (f"; the first, {format_seconds(self.warm_up)}, included the "
                          "joblib workers' start in their own processes, which this "
                          "process cannot time")
        else:
            seconds_of = ""
        span = format_span(*self.estimated_span(seconds))
        text = (f"This fit may take {span}: its {which} evaluation of the objective and "
                f"its gradient took {format_seconds(seconds)} ({d.what}{seconds_of}), and "
                f"{name} fit {count}{runs}")
        if self.max_time is not None and seconds * self.high >= float(self.max_time):
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
        time, the time since the fit began and the estimated time to go
        (the range of :attr:`low` to :attr:`high` evaluations)."""
        if self.last is None:
            return ""
        now = self.clock()
        elapsed = now - self.started
        mean = self.seconds / self.timed if self.timed else self.last
        left = self.high - self.n_evaluations
        if left > 0:
            soonest = max(0, self.low - self.n_evaluations) * mean
            latest = left * mean
            if self.deadline is not None:
                remaining = max(0.0, self.deadline - now)
                soonest, latest = min(soonest, remaining), min(latest, remaining)
            span = (f"up to {format_seconds(latest)}" if soonest == 0.0
                    else format_span(soonest, latest).replace("about ", "~"))
            eta = f"ETA {span} (typical fits {self.low} to {self.high} evaluations)"
        else:
            eta = f"past typical fits' {self.high} evaluations"
            if self.deadline is not None:
                eta += f", {format_seconds(max(0.0, self.deadline - now))} to max_time"
        return (f"  eval {format_seconds(self.last)}  elapsed "
                f"{format_seconds(elapsed)}  {eta}")

"""Long fits (docs/reliability.md, "Long fits"): the notice after the first
evaluation, the progress line's time to go, ``max_iter`` and ``max_time``.

Time is faked (a clock that advances by a fixed step at every reading), so
nothing here depends on how fast or busy the machine is."""

import contextlib
import re
import warnings

import joblib
import numba
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils._param_validation import InvalidParameterError

import fastgp._fit.clock as clock_module
from fastgp import GPLVM, GaussianProcessClassifier, GaussianProcessRegressor
from fastgp._fit.clock import (LATENT_EVALUATIONS, EvaluationClock, FitDescription,
                               evaluation_range, format_seconds, format_span,
                               typical_evaluations)
from fastgp.exceptions import LongFitWarning


class Ticks:
    """A clock that advances ``step`` seconds at every reading."""

    def __init__(self, step=1.0):
        self.step = step
        self.now = 0.0

    def __call__(self):
        self.now += self.step
        return self.now


class Stopwatch:
    """A clock moved by hand."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _slow(stopwatch, seconds):
    def evaluation(x):
        stopwatch.now += seconds
        return x
    return evaluation


def _problem(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def _fake_time(monkeypatch, step=1.0):
    ticks = Ticks(step)
    monkeypatch.setattr("fastgp._optimize.minimize.clock", ticks)
    return ticks


# ------------------------------------------------------------- the clock
def test_long_fits_typical_evaluations_grow_with_the_hyperparameters():
    assert typical_evaluations(2) == typical_evaluations(4) == 25
    assert typical_evaluations(12) == 72
    assert typical_evaluations(12, "CG") == 180


def test_long_fits_the_range_holds_the_measured_counts():
    # the fits that took most, against their count of hyperparameters
    # (docs/reliability.md, "Long fits"): the Mauna Loa kernel's 11 took 184
    # to 188 evaluations, 10-D ARD's 12 a 90th percentile of 88, Vecchia's
    # 3 about 40 and relayouts
    assert evaluation_range(3) == (15, 25, 75)
    for n_theta, evaluations in ((11, 188), (12, 88), (3, 60), (3, 40)):
        low, _, high = evaluation_range(n_theta)
        assert low <= evaluations <= high
    assert evaluation_range(12, "CG") == (108, 180, 540)
    low, _, high = LATENT_EVALUATIONS
    assert low <= 150 and 621 <= high  # the GPLVM's measured counts


@pytest.mark.parametrize("seconds, text", [(0.0123, "0.012 s"), (9.5, "9.5 s"), (45.4, "45 s"),
                                           (190, "3.2 min"), (5000, "83 min"),
                                           (9000, "2.5 h")])
def test_long_fits_durations_read_as_people_write_them(seconds, text):
    assert format_seconds(seconds) == text


def test_long_fits_spans_read_as_people_write_them():
    assert format_span(37.5, 187.5) == "38 s to 3.1 min"
    assert format_span(100.2, 99.8) == "about 100 s"


def test_long_fits_notice_gives_the_time_the_count_and_the_faster_way():
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b",
                            FitDescription('solver "cholesky", N = 9 samples',
                                           'solver="vecchia" (quick)', 2.0),
                            clock=watch)
    with pytest.warns(LongFitWarning) as record:
        assert timer.evaluate(_slow(watch, 10.0), 7) == 7
    assert len(record) == 1
    text = str(record[0].message)
    # 15 to 75 evaluations of 10 s
    assert text.startswith("This fit may take 2.5 min to 12 min: its first evaluation")
    assert "took 10 s (solver \"cholesky\", N = 9 samples)" in text
    assert "an L-BFGS-B fit typically takes 15 to 75 evaluations." in text
    assert 'Faster: solver="vecchia" (quick).' in text
    assert "max_time" in text and "verbose=1" in text
    # said once per fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        timer.evaluate(_slow(watch, 10.0), 7)


def test_long_fits_notice_names_the_faster_way_only_where_it_is_faster():
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "CG", FitDescription("x", 'solver="vecchia"', 5.0),
                            clock=watch)
    with pytest.warns(LongFitWarning) as record:
        timer.evaluate(_slow(watch, 10.0), 0)
    text = str(record[0].message)
    assert "Faster" not in text
    assert "a CG fit typically takes 37 to 189 evaluations" in text


def test_long_fits_a_short_fit_says_nothing():
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), clock=watch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        timer.evaluate(_slow(watch, 1.0), 0)  # 25 s in all
    assert timer.last == 1.0 and timer.n_evaluations == 1


def test_long_fits_restarts_and_max_time_set_the_estimate():
    watch = Stopwatch()
    runs = EvaluationClock(3, 3, "fmin_l_bfgs_b", FitDescription("x"), clock=watch)
    with pytest.warns(LongFitWarning, match=r"45 s to 3.8 min: .* in each of its 3 runs\."):
        runs.evaluate(_slow(watch, 1.0), 0)  # 3 x 25 s typically
    capped = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), max_time=20,
                             clock=watch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capped.evaluate(_slow(watch, 10.0), 0)  # 250 s, but stopped at 20 s
    longer = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), max_time=100,
                             clock=watch)
    with pytest.warns(LongFitWarning,
                      match=r"about 100 s: .*; max_time=100 s stops it at its best"):
        longer.evaluate(_slow(watch, 10.0), 0)


def test_long_fits_max_iter_below_the_typical_count_sets_it():
    watch = Stopwatch()
    timer = EvaluationClock(40, 1, "fmin_l_bfgs_b", FitDescription("x"), max_iter=100,
                            clock=watch)
    assert (timer.low, timer.typical, timer.high) == (100, 100, 100)
    with pytest.warns(LongFitWarning,
                      match="stops after max_iter=100 iterations .at least as many"):
        timer.evaluate(_slow(watch, 1.0), 0)


def test_long_fits_no_description_no_notice():
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", None, clock=watch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        timer.evaluate(_slow(watch, 100.0), 0)


def test_long_fits_numbas_compilation_is_not_the_evaluations_time():
    # a fake clock: the evaluation takes 10 s by it, and Numba's compiling
    # (really timed by Numba's event) is taken out of those 10 s
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", clock=watch)

    @numba.njit
    def compiled_on_first_call(x):
        return x + 1.0

    def evaluation(x):
        watch.now += 10.0
        return compiled_on_first_call(x)

    assert timer.evaluate(evaluation, 1.0) == 2.0
    compiling = timer.compile_seconds
    assert 0.0 < compiling < 10.0
    assert timer.last == pytest.approx(10.0 - compiling, abs=1e-9)
    timer.evaluate(evaluation, 1.0)  # compiled: all 10 s are the evaluation's
    assert timer.compile_seconds == compiling and timer.last == 10.0
    assert timer.seconds == pytest.approx(20.0 - compiling, abs=1e-9)


def _compiling_for(seconds):
    """A stand-in for fastgp._engine.compile_time.compile_seconds: Numba
    held its compiler lock ``seconds`` in the block."""
    @contextlib.contextmanager
    def compile_seconds():
        yield [seconds]
    return compile_seconds


def test_long_fits_notice_leaves_out_the_compilation_of_a_cold_cache(monkeypatch):
    # a first evaluation of 10 s by the clock, 8 s of it compiling: the
    # notice is about 2 s evaluations (15 to 75 of them)
    watch = Stopwatch()
    monkeypatch.setattr(clock_module, "compile_seconds", _compiling_for(8.0))
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), clock=watch)
    with pytest.warns(LongFitWarning) as record:
        timer.evaluate(_slow(watch, 10.0), 0)
    assert timer.last == 2.0 and timer.compile_seconds == 8.0
    assert str(record[0].message).startswith(
        "This fit may take 30 s to 2.5 min: its first evaluation of the objective and "
        "its gradient took 2 s (x)")
    # compiling that leaves a short fit: no notice
    monkeypatch.setattr(clock_module, "compile_seconds", _compiling_for(9.0))
    quick = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), clock=watch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quick.evaluate(_slow(watch, 10.0), 0)  # 1 s: 25 s typically


def test_long_fits_notice_waits_past_the_workers_start(monkeypatch):
    # an evaluation whose work went to joblib's workers in other processes:
    # the first holds their compiling and loading, which no event here
    # reports, so the notice comes after the second, from its time
    watch = Stopwatch()
    sent = [0]
    monkeypatch.setattr(clock_module, "calls_sent", lambda: sent[0])

    def on_workers(seconds):
        def evaluation(x):
            sent[0] += 3  # three calls to the workers
            watch.now += seconds
            return x
        return evaluation

    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), clock=watch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        timer.evaluate(on_workers(60.0), 0)
    assert timer.warm_up == 60.0 and timer.timed == 0
    with pytest.warns(LongFitWarning) as record:
        timer.evaluate(on_workers(2.0), 0)
    text = str(record[0].message)
    assert text.startswith("This fit may take 30 s to 2.5 min: its second evaluation of "
                           "the objective and its gradient took 2 s (x; the first, 60 s, "
                           "included the joblib workers' start")
    assert (timer.seconds, timer.timed, timer.n_evaluations) == (2.0, 1, 2)
    assert timer.progress().endswith("ETA 26 s to 2.4 min (typical fits 15 to 75 "
                                     "evaluations)")
    # a first evaluation that stayed in this process is the measure
    local = EvaluationClock(3, 1, "fmin_l_bfgs_b", FitDescription("x"), clock=watch)
    with pytest.warns(LongFitWarning, match="its first evaluation"):
        local.evaluate(_slow(watch, 60.0), 0)


def test_long_fits_a_described_range_replaces_the_hyperparameters_count():
    # the GPLVM's: its free variables are latent coordinates
    watch = Stopwatch()
    timer = EvaluationClock(4000, 1, "fmin_l_bfgs_b",
                            FitDescription("N = 1,797 points", evaluations=(150, 300, 700)),
                            max_iter=1000, clock=watch)
    with pytest.warns(LongFitWarning) as record:
        timer.evaluate(_slow(watch, 0.15), 0)
    assert str(record[0].message).startswith(
        "This fit may take 22 s to 105 s: its first evaluation")
    assert "typically takes 150 to 700 evaluations." in str(record[0].message)
    # max_iter within the range ends it: its high end
    capped = EvaluationClock(4000, 1, "fmin_l_bfgs_b",
                             FitDescription("x", evaluations=(150, 300, 700)),
                             max_iter=400, clock=watch)
    with pytest.warns(LongFitWarning, match=r"22 s to 60 s: .*150 to 400 evaluations "
                                            r"\(max_iter=400 iterations at most\)"):
        capped.evaluate(_slow(watch, 0.15), 0)
    cg = EvaluationClock(4000, 1, "CG", FitDescription("x", evaluations=(150, 300, 700)),
                         clock=watch)
    assert (cg.low, cg.typical, cg.high) == (375, 750, 1750)


def test_long_fits_a_solvers_time_factor_scales_the_range():
    # Vecchia's fits spend time between evaluations (relayouts, neighbour
    # searches): 4 hyperparameters count 15, 25 and 75 evaluations, so 2.8
    # x that is 42, 70 and 210 evaluations' time
    watch = Stopwatch()
    timer = EvaluationClock(4, 1, "fmin_l_bfgs_b",
                            FitDescription("x", time_factor=2.8),
                            clock=watch)
    assert (timer.low, timer.typical, timer.high) == (42, 70, 210)
    with pytest.warns(LongFitWarning) as record:
        timer.evaluate(_slow(watch, 2.7), 0)
    text = str(record[0].message)
    assert text.startswith("This fit may take 113 s to 9.4 min: its first evaluation")
    assert ("typically takes 42 to 210 evaluations' time (what the fit does between "
            "them included).") in text
    # a fit of 0.8 s evaluations is long (56 s), though 25 of them are not
    quick = EvaluationClock(4, 1, "fmin_l_bfgs_b", FitDescription("x", time_factor=2.8),
                            clock=watch)
    with pytest.warns(LongFitWarning, match="34 s to 2.8 min"):
        quick.evaluate(_slow(watch, 0.8), 0)


def test_long_fits_progress_gives_the_time_to_go():
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", clock=watch)
    assert timer.progress() == ""
    for _ in range(5):
        timer.evaluate(_slow(watch, 2.0), 0)
    assert timer.progress() == ("  eval 2 s  elapsed 10 s  ETA 20 s to 2.3 min "
                                "(typical fits 15 to 75 evaluations)")
    for _ in range(25):
        timer.evaluate(_slow(watch, 2.0), 0)
    assert timer.progress().endswith("ETA up to 90 s (typical fits 15 to 75 evaluations)")
    for _ in range(45):
        timer.evaluate(_slow(watch, 2.0), 0)
    assert timer.progress().endswith("past typical fits' 75 evaluations")

    limited = EvaluationClock(3, 1, "fmin_l_bfgs_b", max_time=15, clock=watch)
    for _ in range(5):
        limited.evaluate(_slow(watch, 2.0), 0)
    assert limited.progress().endswith("ETA ~5 s (typical fits 15 to 75 evaluations)")
    assert not limited.out_of_time
    watch.now += 5
    assert limited.out_of_time


# ------------------------------------------------------------ estimators
def test_long_fits_the_regressor_says_so_once(monkeypatch):
    monkeypatch.setattr(clock_module, "LONG_FIT_SECONDS", -1.0)
    X, y = _problem()
    with pytest.warns(LongFitWarning) as record:
        GaussianProcessRegressor(C() * RBF() + WhiteKernel(), n_restarts_optimizer=2,
                                 random_state=0).fit(X, y)
    notices = [w for w in record if w.category is LongFitWarning]
    assert len(notices) == 1
    text = str(notices[0].message)
    assert 'solver "cholesky", N = 60 samples, 3 hyperparameters' in text
    assert "in each of its 3 runs" in text
    assert notices[0].filename == __file__


def test_long_fits_a_kernel_off_the_fast_path_is_pointed_at_a_public_function(monkeypatch):
    import fastgp.kernels

    monkeypatch.setattr(clock_module, "LONG_FIT_SECONDS", -1.0)
    X, y = _problem()
    from sklearn.gaussian_process.kernels import Matern

    from fastgp.exceptions import SlowKernelWarning

    with pytest.warns(LongFitWarning) as record:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SlowKernelWarning)
            GaussianProcessRegressor(Matern(nu=1.0) + WhiteKernel()).fit(X, y)
    text = str(next(w for w in record if w.category is LongFitWarning).message)
    assert "Faster: a kernel on fastgp's fast path (fastgp.kernels.fast_path(kernel, X)" in text
    assert callable(fastgp.kernels.fast_path)


def test_long_fits_vecchias_runs_share_one_notice(monkeypatch):
    monkeypatch.setattr(clock_module, "LONG_FIT_SECONDS", -1.0)
    X, y = _problem(200)
    with pytest.warns(LongFitWarning) as record:
        model = GaussianProcessRegressor(C() * RBF([1.0]) + WhiteKernel(),
                                         solver="vecchia", n_neighbors=5).fit(X, y)
    assert model.solver_ == "vecchia"
    notices = [w for w in record if w.category is LongFitWarning]
    assert len(notices) == 1 and "Faster" not in str(notices[0].message)
    # the solver's relayouts are counted: 3 hyperparameters, 2.8 x (15, 75)
    assert ("typically takes 42 to 210 evaluations' time (what the fit does between "
            "them included)") in str(notices[0].message)


def test_long_fits_the_gplvm_counts_its_measured_evaluations(monkeypatch):
    monkeypatch.setattr(clock_module, "LONG_FIT_SECONDS", -1.0)
    Y = np.random.default_rng(0).standard_normal((30, 3))
    with pytest.warns(LongFitWarning) as record:
        GPLVM(n_components=1, max_iter=20, random_state=0).fit(Y)
    text = str(next(w for w in record if w.category is LongFitWarning).message)
    # the range measured, not max_iter's default 1,000 nor 6 per variable
    assert "N = 30 points, 1 latent dimensions, 3 features" in text
    assert "stops after max_iter=20 iterations" in text
    with pytest.warns(LongFitWarning) as record:
        GPLVM(n_components=1, max_iter=1000, tol=1e-1, random_state=0).fit(Y)
    assert "typically takes 150 to 700 evaluations." in str(
        next(w for w in record if w.category is LongFitWarning).message)


def test_long_fits_max_time_keeps_the_best_point_and_skips_restarts(monkeypatch):
    X, y = _problem()
    kernel = C() * RBF() + WhiteKernel()
    free = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    ticks = _fake_time(monkeypatch)
    with pytest.warns(ConvergenceWarning) as record:
        model = GaussianProcessRegressor(kernel, max_time=6, n_restarts_optimizer=2,
                                         random_state=0).fit(X, y)
    texts = [str(w.message) for w in record]
    assert any(re.search(r"stopped at the fit's time limit \(max_time=6 s\) after "
                         r"\d+ iterations and \d+ evaluations", t) for t in texts)
    assert any("reached before optimizer restart 1 of 2" in t for t in texts)
    assert 2 <= model.n_evaluations_ < free.n_evaluations_
    assert ticks.now > 6
    # the kept point is the best evaluated one, and the model is usable there
    assert model.log_marginal_likelihood_value_ == pytest.approx(
        model.log_marginal_likelihood(model.kernel_.theta), rel=1e-12)
    assert model.log_marginal_likelihood_value_ < free.log_marginal_likelihood_value_
    assert np.all(np.isfinite(model.predict(X[:5])))


def test_long_fits_max_time_reaches_runs_in_joblib_workers(monkeypatch):
    X, y = _problem()
    _fake_time(monkeypatch)
    with joblib.parallel_config(backend="threading"), \
            pytest.warns(ConvergenceWarning, match=r"time limit \(max_time=4 s\)"):
        model = GaussianProcessRegressor(C() * RBF() + WhiteKernel(), max_time=4,
                                         n_restarts_optimizer=1, n_jobs=2,
                                         random_state=0).fit(X, y)
    assert np.isfinite(model.log_marginal_likelihood_value_)


def test_long_fits_max_iter_caps_each_run():
    X, y = _problem()
    with pytest.warns(ConvergenceWarning, match=r"raise max_iter \(now 2\)"):
        model = GaussianProcessRegressor(C() * RBF() + WhiteKernel(),
                                         max_iter=2).fit(X, y)
    assert model.n_iter_ == 2


@pytest.mark.parametrize("params, name", [({"max_iter": 0}, "max_iter"),
                                          ({"max_time": 0.0}, "max_time"),
                                          ({"max_time": "1"}, "max_time")])
def test_long_fits_limits_are_validated(params, name):
    X, y = _problem()
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        GaussianProcessRegressor(**params).fit(X, y)


def test_long_fits_verbose_lines_carry_the_eta(capsys):
    X, y = _problem()
    GaussianProcessRegressor(C() * RBF() + WhiteKernel(), verbose=1).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("iter")]
    assert lines and all(re.search(r"  eval \S+ s  elapsed \S+ \S+  "
                                   r"(ETA |past typical)", line) for line in lines)


def test_long_fits_gplvm_max_time(monkeypatch):
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((30, 3))
    _fake_time(monkeypatch)
    with pytest.warns(ConvergenceWarning, match=r"time limit \(max_time=5 s\)"):
        model = GPLVM(n_components=1, max_time=5, random_state=0).fit(Y)
    assert model.n_iter_ <= 5


def test_long_fits_classifier_max_time(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (60, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    kernel = C(1.0) * RBF([1.0, 1.0])
    assert GaussianProcessClassifier(max_time=2).get_params()["max_time"] == 2
    _fake_time(monkeypatch)
    with pytest.warns(ConvergenceWarning, match=r"time limit \(max_time=5 s\)"):
        model = GaussianProcessClassifier(kernel, max_time=5).fit(X, y)
    assert model.score(X, y) > 0.5


def test_long_fits_the_classifier_says_so(monkeypatch):
    monkeypatch.setattr(clock_module, "LONG_FIT_SECONDS", -1.0)
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (40, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.warns(LongFitWarning, match="the Laplace approximation, N = 40 samples"):
        GaussianProcessClassifier(C(1.0) * RBF(1.0)).fit(X, y)

"""Long fits (docs/reliability.md, "Long fits"): the notice after the first
evaluation, the progress line's time to go, ``max_iter`` and ``max_time``.

Time is faked (a clock that advances by a fixed step at every reading), so
nothing here depends on how fast or busy the machine is."""

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
from fastgp._fit.clock import (EvaluationClock, FitDescription, format_seconds,
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


@pytest.mark.parametrize("seconds, text", [(0.0123, "0.012 s"), (9.5, "9.5 s"), (45.4, "45 s"),
                                           (190, "3.2 min"), (5000, "83 min"),
                                           (9000, "2.5 h")])
def test_long_fits_durations_read_as_people_write_them(seconds, text):
    assert format_seconds(seconds) == text


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
    assert text.startswith("This fit may take about 4.2 min: its first evaluation")
    assert "took 10 s (solver \"cholesky\", N = 9 samples)" in text
    assert "an L-BFGS-B fit typically takes about 25 evaluations." in text
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
    assert "a CG fit typically takes about 63 evaluations" in text


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
    with pytest.warns(LongFitWarning, match=r"about 75 s: .* in each of its 3 runs\."):
        runs.evaluate(_slow(watch, 1.0), 0)  # 3 x 25 s
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
    assert timer.expected == 100
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
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b")

    @numba.njit
    def compiled_on_first_call(x):
        return x + 1.0

    assert timer.evaluate(compiled_on_first_call, 1.0) == 2.0
    compiling = timer.compile_seconds
    assert compiling > 0.0
    timer.evaluate(compiled_on_first_call, 1.0)
    assert timer.compile_seconds == compiling
    assert timer.seconds >= 0.0


def test_long_fits_progress_gives_the_time_to_go():
    watch = Stopwatch()
    timer = EvaluationClock(3, 1, "fmin_l_bfgs_b", clock=watch)
    assert timer.progress() == ""
    for _ in range(5):
        timer.evaluate(_slow(watch, 2.0), 0)
    assert timer.progress() == ("  eval 2 s  elapsed 10 s  ETA ~40 s "
                                "(typical 25 evaluations)")
    for _ in range(25):
        timer.evaluate(_slow(watch, 2.0), 0)
    assert timer.progress().endswith("past a typical fit's 25 evaluations")

    limited = EvaluationClock(3, 1, "fmin_l_bfgs_b", max_time=15, clock=watch)
    for _ in range(5):
        limited.evaluate(_slow(watch, 2.0), 0)
    assert limited.progress().endswith("ETA ~5 s (typical 25 evaluations)")
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


def test_long_fits_vecchias_runs_share_one_notice(monkeypatch):
    monkeypatch.setattr(clock_module, "LONG_FIT_SECONDS", -1.0)
    X, y = _problem(200)
    with pytest.warns(LongFitWarning) as record:
        model = GaussianProcessRegressor(C() * RBF([1.0]) + WhiteKernel(),
                                         solver="vecchia", n_neighbors=5).fit(X, y)
    assert model.solver_ == "vecchia"
    notices = [w for w in record if w.category is LongFitWarning]
    assert len(notices) == 1 and "Faster" not in str(notices[0].message)


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
                                   r"(ETA ~|past a typical)", line) for line in lines)


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

"""Every warning fastgp emits points at the user's line: the warning's
filename is the file that called the estimator (this one), not
scikit-learn's base.py, joblib, SciPy or fastgp's own modules, whichever path
raised it and through whatever depth (``fit``, ``fit_transform``,
``cross_val_score``)."""

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, PairwiseKernel, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp._solvers.cholesky.objective as objective_module
import fastgp._solvers.cholesky as cholesky_solver
from fastgp import GPLVM, GaussianProcessRegressor
from fastgp.exceptions import SlowKernelWarning
from fastgp.exceptions import JitterWarning


def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, size=(n, 1))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def _caught(category, action):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    found = [w for w in caught if issubclass(w.category, category)]
    assert found, [str(w.message) for w in caught]
    return found


def _assert_here(found):
    assert {w.filename for w in found} == {__file__}, [(w.filename, str(w.message)[:60])
                                                       for w in found]


def _regressor():
    """The regressor the optimiser's warnings are provoked on."""
    return GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1))


def _replace_objective(monkeypatch, replacement):
    """NegLogMarginalLikelihood.__call__ becomes ``replacement(original,
    objective, theta)`` for the test, ``original`` being the real one."""
    original = objective_module.NegLogMarginalLikelihood.__call__
    monkeypatch.setattr(objective_module.NegLogMarginalLikelihood, "__call__",
                        lambda objective, theta: replacement(original, objective, theta))


def _assert_fit_warns_here(X, y, message):
    """A fit of :func:`_regressor` on (X, y) warns ConvergenceWarning with
    ``message`` in one of its warnings, and every one points here."""
    found = _caught(ConvergenceWarning, lambda: _regressor().fit(X, y))
    assert any(message in str(w.message) for w in found)
    _assert_here(found)


def test_user_warnings_slow_kernel_points_here():
    X, y = _data()
    kernel = PairwiseKernel(metric="laplacian") + WhiteKernel(0.1)
    _assert_here(_caught(SlowKernelWarning,
                         lambda: GaussianProcessRegressor(kernel).fit(X, y)))


def test_user_warnings_jitter_points_here():
    X = np.repeat(np.linspace(0, 5, 10)[:, None], 2, axis=0)
    y = np.sin(X[:, 0])
    _assert_here(_caught(JitterWarning, lambda: GaussianProcessRegressor(
        RBF(1.0), alpha=0.0, optimizer=None).fit(X, y)))


def test_user_warnings_iteration_limit_points_here_through_fit_transform():
    Y = np.random.default_rng(0).standard_normal((30, 3))
    _assert_here(_caught(ConvergenceWarning, lambda: GPLVM(
        n_components=1, max_iter=2, random_state=0).fit_transform(Y)))


def test_user_warnings_iteration_limit_points_here_through_cross_val_score():
    from sklearn.model_selection import cross_val_score

    Y = np.random.default_rng(0).standard_normal((30, 3))
    found = _caught(ConvergenceWarning, lambda: cross_val_score(
        GPLVM(n_components=1, max_iter=2, random_state=0), Y, cv=2,
        scoring=lambda est, X, y=None: 0.0))
    _assert_here(found)


def test_user_warnings_no_finite_point_points_here():
    X = np.array([[0.0], [1e200], [-1e200], [1.0]])
    y = np.array([0.0, 1.0, 2.0, 3.0])
    _assert_fit_warns_here(X, y, "found no point")


def test_user_warnings_abnormal_termination_points_here(monkeypatch):
    def flipped(original, objective, theta):  # the line search cannot descend
        value, grad = original(objective, theta)
        return value, -grad

    _replace_objective(monkeypatch, flipped)
    _assert_fit_warns_here(*_data(), "stopped without converging")


def test_user_warnings_stuck_start_points_here(monkeypatch):
    start = []

    def wall(original, objective, theta):  # finite only at the start, gradient outwards
        if not start:
            start.append(np.array(theta))
        if not np.array_equal(theta, start[0]):
            return math.inf, np.zeros_like(theta)
        value, grad = original(objective, theta)
        return value, np.full_like(grad, -1e3)

    _replace_objective(monkeypatch, wall)
    _assert_fit_warns_here(*_data(), "every trial step")


def test_user_warnings_interrupt_in_a_restart_points_here(monkeypatch):
    X, y = _data()
    first = _regressor().fit(X, y)
    count = []

    def interrupting(original, objective, theta):
        if len(count) == first.n_evaluations_:
            raise KeyboardInterrupt
        count.append(1)
        return original(objective, theta)

    _replace_objective(monkeypatch, interrupting)

    def fit():
        with pytest.raises(KeyboardInterrupt):
            _regressor().set_params(n_restarts_optimizer=2, random_state=0).fit(X, y)

    found = _caught(ConvergenceWarning, fit)
    assert any("restart 1" in str(w.message) for w in found)
    _assert_here(found)


def test_user_warnings_negative_variance_points_here(monkeypatch):
    X, y = _data()
    gpr = _regressor().fit(X, y)
    original = cholesky_solver.predict_mean_var

    def negative(*args, **kwargs):
        mean, var = original(*args, **kwargs)
        var[0] = -1e-12
        return mean, var

    monkeypatch.setattr(cholesky_solver, "predict_mean_var", negative)
    found = _caught(UserWarning, lambda: gpr.predict(X[:3], return_std=True))
    assert "smaller than 0" in str(found[0].message)
    _assert_here(found)


def test_user_warnings_point_at_the_calling_line_itself():
    """Not only this file: the very line that called the estimator (the
    helpers above call it from a lambda, one frame below a function of this
    file, so the file alone would not tell the two frames apart)."""
    import inspect

    X = np.repeat(np.linspace(0, 5, 10)[:, None], 2, axis=0)
    y = np.sin(X[:, 0])
    gpr = GaussianProcessRegressor(RBF(1.0), alpha=0.0, optimizer=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        gpr.fit(X, y)
    found = [w for w in caught if issubclass(w.category, JitterWarning)]
    assert found
    assert {(w.filename, w.lineno) for w in found} == {(__file__, line)}

"""Optimiser trouble and interrupts (issue 6): a start at which the gradient is
not finite, a run that hits its iteration limit, scipy's
ABNORMAL_TERMINATION, and a KeyboardInterrupt all end at the best finite
point evaluated with a ConvergenceWarning that says what happened; an
interrupt is re-raised only if nothing finite was found."""

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp.objective as objective_module
from fastgp import GaussianProcessRegressor
from fastgp.optimize import minimize_theta

BOUNDS = np.array([[-5.0, 5.0], [-5.0, 5.0]])


class Recorder:
    """A Rosenbrock objective that records what it was asked."""

    def __init__(self, flip_gradient=False, non_finite_at=None):
        self.values, self.thetas = [], []
        self.flip_gradient = flip_gradient
        self.non_finite_at = non_finite_at

    def __call__(self, theta):
        x, y = theta
        value = (1 - x) ** 2 + 100 * (y - x * x) ** 2
        grad = np.array([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)])
        if self.flip_gradient:
            grad = -grad
        if self.non_finite_at is not None and np.allclose(theta, self.non_finite_at):
            value, grad = math.inf, np.zeros(2)
        self.values.append(value)
        self.thetas.append(np.array(theta))
        return value, grad

    def best(self):
        i = int(np.argmin(self.values))
        return self.thetas[i], self.values[i]


def _one_warning(caught, pattern):
    texts = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(texts) == 1, texts
    assert pattern in texts[0], texts[0]
    return texts[0]


@pytest.mark.parametrize("optimizer", ["fmin_l_bfgs_b", "CG"])
def test_optimizer_iteration_limit_keeps_the_best_point_and_warns(optimizer):
    objective = Recorder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = minimize_theta(objective, np.array([-1.2, 1.0]), BOUNDS, optimizer,
                                max_iter=3)
    text = _one_warning(caught, "stopped without converging")
    assert "ITERATIONS" in text.upper() or "maximum number of iterations" in text
    theta, value = objective.best()
    assert result.value == value and np.array_equal(result.theta, theta)
    assert result.n_iterations == 3 and not result.interrupted


def test_optimizer_abnormal_termination_keeps_the_best_point_and_warns():
    objective = Recorder(flip_gradient=True)  # the line search cannot descend
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = minimize_theta(objective, np.array([-1.2, 1.0]), BOUNDS, "fmin_l_bfgs_b")
    _one_warning(caught, "ABNORMAL")
    theta, value = objective.best()
    assert result.value == value and np.array_equal(result.theta, theta)


def test_optimizer_non_finite_start_warns_instead_of_claiming_convergence():
    start = np.array([-1.2, 1.0])
    objective = Recorder(non_finite_at=start)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = minimize_theta(objective, start, BOUNDS, "fmin_l_bfgs_b")
    _one_warning(caught, "found no point")
    assert result.value == math.inf and np.array_equal(result.theta, start)


def test_optimizer_converged_run_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = minimize_theta(Recorder(), np.array([-1.2, 1.0]), BOUNDS, "fmin_l_bfgs_b")
    np.testing.assert_allclose(result.theta, [1.0, 1.0], atol=1e-3)


# ------------------------------------------------- the estimator, for real
def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, size=(n, 1))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def _kernel():
    return C(1.0) * RBF(1.0) + WhiteKernel(0.1)


def test_optimizer_fit_with_non_finite_gradient_at_the_start_keeps_it_and_warns():
    # inputs 1e200 apart: the RBF's squared distance overflows, k = 0 is fine
    # but its length-scale derivative is inf * 0 = NaN
    X = np.array([[0.0], [1e200], [-1e200], [1.0]])
    y = np.array([0.0, 1.0, 2.0, 3.0])
    kernel = _kernel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(kernel).fit(X, y)
    _one_warning(caught, "found no point")
    np.testing.assert_array_equal(gpr.kernel_.theta, kernel.theta)
    mean, std = gpr.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))
    assert np.isfinite(gpr.log_marginal_likelihood_value_)


class _Interrupting:
    """Patches NegLogMarginalLikelihood.__call__: raises KeyboardInterrupt at
    evaluation ``after`` (0-based) and records the values before it."""

    def __init__(self, monkeypatch, after):
        self.after, self.values, self.thetas = after, [], []
        original = objective_module.NegLogMarginalLikelihood.__call__
        recorder = self

        def patched(objective, theta):
            if len(recorder.values) == recorder.after:
                raise KeyboardInterrupt
            value, grad = original(objective, theta)
            recorder.values.append(value)
            recorder.thetas.append(np.array(theta))
            return value, grad

        monkeypatch.setattr(objective_module.NegLogMarginalLikelihood, "__call__", patched)

    def best(self):
        i = int(np.argmin(self.values))
        return self.thetas[i], self.values[i]


@pytest.mark.parametrize("after", [1, 6])
def test_optimizer_keyboard_interrupt_keeps_the_best_point_so_far(monkeypatch, after):
    X, y = _data()
    interrupt = _Interrupting(monkeypatch, after)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(_kernel(), n_restarts_optimizer=2,
                                       random_state=0).fit(X, y)
    _one_warning(caught, "interrupted (KeyboardInterrupt)")
    assert len(interrupt.values) == after  # no restart ran after the interrupt
    theta, value = interrupt.best()
    np.testing.assert_allclose(gpr.kernel_.theta, theta, rtol=1e-14)
    np.testing.assert_allclose(gpr.log_marginal_likelihood_value_, -value, rtol=1e-12)
    mean, std = gpr.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))


def test_optimizer_keyboard_interrupt_in_a_restart_keeps_the_earlier_runs(monkeypatch):
    X, y = _data()
    first = GaussianProcessRegressor(_kernel()).fit(X, y)
    evaluations = first.n_evaluations_
    _Interrupting(monkeypatch, evaluations)  # the first evaluation of restart 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(_kernel(), n_restarts_optimizer=3,
                                       random_state=0).fit(X, y)
    _one_warning(caught, "interrupted")
    np.testing.assert_allclose(gpr.kernel_.theta, first.kernel_.theta, rtol=1e-14)


def test_optimizer_keyboard_interrupt_before_anything_finite_is_re_raised(monkeypatch):
    X, y = _data()
    fitted = GaussianProcessRegressor(_kernel()).fit(X, y)
    before = fitted.predict(X)
    _Interrupting(monkeypatch, 0)
    with pytest.raises(KeyboardInterrupt):
        GaussianProcessRegressor(_kernel()).fit(X, y)
    # a refit that is interrupted leaves the earlier fit as it was
    with pytest.raises(KeyboardInterrupt):
        fitted.fit(X[:20], y[:20])
    np.testing.assert_array_equal(fitted.predict(X), before)


def test_optimizer_keyboard_interrupt_in_a_callable_optimizer(monkeypatch):
    X, y = _data()

    def optimizer(obj_func, initial_theta, bounds):
        theta = np.array(initial_theta)
        for step in range(5):
            obj_func(theta + 0.1 * step)
        raise KeyboardInterrupt

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(_kernel(), optimizer=optimizer).fit(X, y)
    _one_warning(caught, "interrupted")
    assert gpr.n_evaluations_ == 5 + 0  # the final factor is not an evaluation
    reference = GaussianProcessRegressor(_kernel(), optimizer=None)
    values = [-reference.fit(X, y).log_marginal_likelihood(_kernel().theta + 0.1 * s)
              for s in range(5)]
    best = int(np.argmin(values))
    np.testing.assert_allclose(gpr.kernel_.theta, _kernel().theta + 0.1 * best, rtol=1e-14)

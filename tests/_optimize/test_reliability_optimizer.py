"""Optimiser trouble and interrupts: a start at which the gradient is not
finite, a run that hits its iteration limit, scipy's ABNORMAL_TERMINATION,
and a KeyboardInterrupt all end at the best finite point evaluated with a
ConvergenceWarning that says what happened (and advice that fits the cause);
an interrupt then propagates, after the estimator was fitted at the best point
if there was one. L-BFGS-B's first step into a region where K is not positive
definite is retried with a shorter step; CG keeps theta within the bounds."""

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp._solvers.cholesky.objective as objective_module
from fastgp import GaussianProcessRegressor
from fastgp.exceptions import JitterWarning
from fastgp._optimize.minimize import minimize_theta

from _interrupt import Interrupting

#: The regression objective whose evaluations the interrupt tests count.
NLML = objective_module.NegLogMarginalLikelihood

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


def _assert_warned_here(caught):
    """Every warning points at this file, the line that called fastgp."""
    files = {w.filename for w in caught}
    assert files == {__file__}, files


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
    text = _one_warning(caught, "reached its iteration limit")
    assert "ITERATIONS" in text.upper() or "maximum number of iterations" in text
    # the advice fits the cause: iterations or tolerance, not the noise level
    assert "more iterations or loosen the tolerance" in text
    assert "noise" not in text and "rescal" not in text
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


@pytest.mark.parametrize("after", [1, 6])
def test_optimizer_keyboard_interrupt_keeps_the_best_point_so_far(monkeypatch, after):
    X, y = _data()
    interrupt = Interrupting(monkeypatch, NLML, after)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(_kernel(), n_restarts_optimizer=2, random_state=0)
        with pytest.raises(KeyboardInterrupt):  # kept the point, then propagated
            gpr.fit(X, y)
    _one_warning(caught, "interrupted (KeyboardInterrupt)")
    _assert_warned_here(caught)
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
    Interrupting(monkeypatch, NLML, evaluations)  # the first evaluation of restart 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(_kernel(), n_restarts_optimizer=3, random_state=0)
        with pytest.raises(KeyboardInterrupt):
            gpr.fit(X, y)
    _one_warning(caught, "interrupted")
    _assert_warned_here(caught)
    np.testing.assert_allclose(gpr.kernel_.theta, first.kernel_.theta, rtol=1e-14)


def test_optimizer_keyboard_interrupt_before_anything_finite_is_re_raised(monkeypatch):
    X, y = _data()
    fitted = GaussianProcessRegressor(_kernel()).fit(X, y)
    before = fitted.predict(X)
    Interrupting(monkeypatch, NLML, 0)
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
        gpr = GaussianProcessRegressor(_kernel(), optimizer=optimizer)
        with pytest.raises(KeyboardInterrupt):
            gpr.fit(X, y)
    _one_warning(caught, "interrupted")
    assert gpr.n_evaluations_ == 5 + 0  # the final factor is not an evaluation
    reference = GaussianProcessRegressor(_kernel(), optimizer=None)
    values = [-reference.fit(X, y).log_marginal_likelihood(_kernel().theta + 0.1 * s)
              for s in range(5)]
    best = int(np.argmin(values))
    np.testing.assert_allclose(gpr.kernel_.theta, _kernel().theta + 0.1 * best, rtol=1e-14)


def test_optimizer_keyboard_interrupt_stops_cross_validation(monkeypatch):
    # scikit-learn stops a cross-validation at Ctrl-C; a fastgp fit that kept
    # its best point must not swallow the interrupt and let the loop go on
    from sklearn.model_selection import cross_val_score

    X, y = _data(n=40)
    fits = []
    original = GaussianProcessRegressor.fit

    def counting_fit(self, *args, **kwargs):
        fits.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GaussianProcessRegressor, "fit", counting_fit)
    Interrupting(monkeypatch, NLML, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(KeyboardInterrupt):
            cross_val_score(GaussianProcessRegressor(_kernel()), X, y, cv=3)
    assert len(fits) == 1  # the first fold's interrupt ended the loop
    assert hasattr(fits[0], "L_")  # and that fold's estimator is fitted


def test_optimizer_keyboard_interrupt_in_gplvm_keeps_the_best_point_then_propagates(
        monkeypatch):
    import fastgp._solvers.cholesky.latent as latent_module
    from fastgp import GPLVM

    rng = np.random.default_rng(0)
    t = rng.uniform(0, 3, size=30)
    Y = np.column_stack([np.sin(t), np.cos(t), t]) + 0.05 * rng.standard_normal((30, 3))
    original = latent_module.LatentNegLogMarginalLikelihood.__call__
    seen = []

    def patched(objective, z):
        if len(seen) == 8:
            raise KeyboardInterrupt
        value, grad = original(objective, z)
        seen.append((value, np.array(z)))
        return value, grad

    monkeypatch.setattr(latent_module.LatentNegLogMarginalLikelihood, "__call__", patched)
    gplvm = GPLVM(n_components=1, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            gplvm.fit(Y)
    _one_warning(caught, "interrupted (KeyboardInterrupt)")
    _assert_warned_here(caught)
    value, z = min(seen, key=lambda pair: pair[0])
    np.testing.assert_allclose(gplvm.log_marginal_likelihood_value_, -value, rtol=1e-10)
    np.testing.assert_array_equal(gplvm.embedding_.ravel(), z[:30])
    assert np.all(np.isfinite(gplvm.transform(Y[:3])))


def test_optimizer_gplvm_iteration_limit_advises_max_iter_and_points_here():
    from fastgp import GPLVM

    rng = np.random.default_rng(0)
    Y = rng.standard_normal((30, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GPLVM(n_components=1, max_iter=2, random_state=0).fit(Y)
    text = _one_warning(caught, "reached its iteration limit")
    _assert_warned_here(caught)
    assert "raise max_iter (now 2) or loosen tol" in text
    assert "noise" not in text and "rescal" not in text


# ----------------------------------------------------- CG within the bounds
def test_optimizer_cg_keeps_the_noise_level_within_its_bounds():
    # sin(x) without noise: the likelihood pulls WhiteKernel's noise_level to
    # zero; unbounded CG took it to 2.85e-30, far below its bound of 1e-5
    X = np.linspace(0, 10, 100)[:, None]
    y = np.sin(X[:, 0])
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(1e-1, noise_level_bounds=(1e-5, 1e5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpr = GaussianProcessRegressor(kernel, optimizer="CG").fit(X, y)
    bounds = gpr.kernel_.bounds
    assert np.all(gpr.kernel_.theta >= bounds[:, 0])
    assert np.all(gpr.kernel_.theta <= bounds[:, 1])
    # within the bound in log space (above); in natural scale up to the
    # rounding of exp(log(1e-5)), which numpy 1.25 gives as 9.999999999999997e-06
    assert gpr.kernel_.k2.noise_level >= 1e-5 * (1 - 4 * np.finfo(float).eps)
    assert gpr.kernel_.k2.noise_level < 1e-4  # it did go to the bound


def test_optimizer_box_map_round_trips_and_its_gradient_is_the_chain_rule():
    from fastgp._optimize.minimize import BoxMap

    bounds = np.array([[-2.0, 3.0], [0.5, np.inf], [-np.inf, 1.0], [-np.inf, np.inf]])
    box = BoxMap(bounds)
    theta = np.array([0.7, 4.0, -3.0, 12.0])
    u = box.u(theta)
    np.testing.assert_allclose(box.theta(u)[0], theta, rtol=1e-12)
    rng = np.random.default_rng(1)
    for u in rng.normal(scale=5.0, size=(20, 4)):
        t, slope = box.theta(u)
        assert np.all(t > bounds[:, 0]) and np.all(t < bounds[:, 1])
        h = 1e-6
        numeric = (box.theta(u + h)[0] - box.theta(u - h)[0]) / (2 * h)
        # central differences of theta ~ 3 carry rounding of ~eps * 3 / h
        np.testing.assert_allclose(slope, numeric, rtol=1e-6, atol=1e-9)
    # a start on a bound moves inside, where the inverse is finite
    assert np.all(np.isfinite(box.u(np.array([-2.0, 0.5, 1.0, 0.0]))))


def test_optimizer_cg_reaches_lbfgsb_optimum_on_a_bounded_problem():
    objective = Recorder()  # Rosenbrock, optimum (1, 1) inside the box
    result = minimize_theta(objective, np.array([-1.2, 1.0]), BOUNDS, "CG")
    np.testing.assert_allclose(result.theta, [1.0, 1.0], atol=1e-3)
    box = np.array([[-5.0, 0.5], [-5.0, 5.0]])  # optimum outside: x stops at 0.5
    result = minimize_theta(Recorder(), np.array([-1.2, 1.0]), box, "CG")
    assert result.theta[0] <= 0.5 and result.theta[0] > 0.5 - 1e-3


# --------------------------- L-BFGS-B's first step into a non-PD region
class _Cliff:
    """A quadratic with its minimum at 0.4 whose values beyond 0.5 are not
    finite (answered ``(inf, 0)``, as the objective does where K is not
    positive definite). From -3 L-BFGS-B's first step (length one along the
    gradient, here up to the bound 10) lands beyond the cliff."""

    def __init__(self):
        self.thetas = []

    def __call__(self, theta):
        self.thetas.append(float(theta[0]))
        if theta[0] > 0.5:
            return math.inf, np.zeros(1)
        return 50.0 * (theta[0] - 0.4) ** 2, np.array([100.0 * (theta[0] - 0.4)])


def test_optimizer_first_step_into_a_non_finite_region_is_retried_shorter():
    import scipy.optimize

    # scipy alone reports convergence at the start
    plain = scipy.optimize.minimize(_Cliff(), np.array([-3.0]), jac=True,
                                    method="L-BFGS-B", bounds=[(-10.0, 10.0)])
    assert plain.success and plain.x[0] == -3.0
    cliff = _Cliff()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = minimize_theta(cliff, np.array([-3.0]), np.array([[-10.0, 10.0]]),
                                "fmin_l_bfgs_b")
    np.testing.assert_allclose(result.theta, [0.4], atol=1e-6)


def test_optimizer_a_start_that_cannot_move_warns():
    def wall(theta):  # finite only at the start, gradient pushing outwards
        if theta[0] != -3.0:
            return math.inf, np.zeros(1)
        return 1.0, np.array([-1.0])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = minimize_theta(wall, np.array([-3.0]), np.array([[-10.0, 10.0]]),
                                "fmin_l_bfgs_b")
    _one_warning(caught, "every trial step")
    assert result.theta[0] == -3.0


def test_optimizer_fit_whose_first_step_leaves_the_positive_definite_region():
    # noise-free targets on duplicated inputs, no alpha, noise at 1e-15 with a
    # lower bound of 1e-300: the gradient pushes the noise down, and the first
    # trial step (length one in log space) lands where K is singular; SciPy
    # then stops at the start and says it converged
    X = np.repeat(np.linspace(0, 5, 15)[:, None], 2, axis=0)
    y = np.sin(X[:, 0])
    kernel = RBF(1.0) + WhiteKernel(1e-15, noise_level_bounds=(1e-300, 1e5))
    calls = []
    original = objective_module.NegLogMarginalLikelihood.__call__

    def recording(objective, theta):
        value, grad = original(objective, theta)
        calls.append(value)
        return value, grad

    objective_module.NegLogMarginalLikelihood.__call__ = recording
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("ignore", JitterWarning)
            warnings.simplefilter("always", ConvergenceWarning)
            gpr = GaussianProcessRegressor(kernel, alpha=0.0).fit(X, y)
    finally:
        objective_module.NegLogMarginalLikelihood.__call__ = original
    assert not math.isfinite(calls[1])  # the first trial step left the PD region
    # the fit did not stay stuck at its start: it went on to points far better
    # (the kept value includes the jitter the final factor needed)
    assert min(v for v in calls if math.isfinite(v)) < calls[0] - 10.0
    assert gpr.n_iter_ > 1
    # On this badly conditioned problem SciPy 1.10's line search stalls again
    # later, at a point where every trial step leaves the region, and the fit
    # says so; newer SciPy goes on to converge. Either way the warning is
    # about a point past the start, never the start itself.
    messages = [str(w.message) for w in seen if issubclass(w.category, ConvergenceWarning)]
    stalled = [m for m in messages if "every trial step from there" in m]
    assert len(stalled) <= 1, messages
    assert np.max(np.abs(gpr.kernel_.theta - kernel.theta)) > 0.1, messages


def test_optimizer_gplvm_with_cg_keeps_the_kernel_within_its_bounds():
    from fastgp import GPLVM

    rng = np.random.default_rng(0)
    t = rng.uniform(0, 3, size=30)
    Y = np.column_stack([np.sin(t), np.cos(t), t])  # no noise: the noise level falls
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(1e-1, noise_level_bounds=(1e-3, 1e3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gplvm = GPLVM(n_components=1, kernel=kernel, optimizer="CG", max_iter=200,
                      random_state=0).fit(Y)
    bounds = gplvm.kernel_.bounds
    assert np.all(gplvm.kernel_.theta >= bounds[:, 0])
    assert np.all(gplvm.kernel_.theta <= bounds[:, 1])
    assert gplvm.kernel_.k2.noise_level < 2e-3  # it went to its bound, not past it


@pytest.mark.parametrize("n_restarts", [1, 3])
def test_restart_starts_refuse_an_open_bound_from_the_first_restart(n_restarts):
    """A restart draws log-uniformly within the bounds, which needs them
    finite: one restart already needs it; none does not."""
    from fastgp._optimize.minimize import restart_starts

    theta0 = np.log([1.0, 0.1])
    bounds = np.log([[1e-2, 1e2], [1e-5, np.inf]])
    rng = np.random.default_rng(0)
    assert len(restart_starts(theta0, bounds, 0, rng)) == 1
    with pytest.raises(ValueError, match="requires that all bounds are finite"):
        restart_starts(theta0, bounds, n_restarts, rng)

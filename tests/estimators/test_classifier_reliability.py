"""GaussianProcessClassifier's failure behaviour, as the regressor's
(docs/reliability.md): memory refused before it is spent, with remedies and
every kept factor counted; no (N, N, n_theta) tensor; jitter where B is not
numerically positive definite; optimiser trouble and Ctrl-C keep the best
point; bad input is a clear error; a fit that raises leaves a fitted
estimator as it was."""

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process.kernels import RBF, CompoundKernel, Kernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp._solvers.cholesky.laplace as laplace
import fastgp.memory as memory
from fastgp import GaussianProcessClassifier
from fastgp._backend.covariance import FastCovariance, KernelObjectCovariance
from fastgp.exceptions import JitterWarning
from fastgp.memory import MemoryReading, laplace_fit_bytes
from fastgp.exceptions import InsufficientMemoryError

from _interrupt import Interrupting


def _data(n=50, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    score = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n)
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.digitize(score, edges)


def _kernel():
    return C(1.0) * RBF([1.0, 1.0])


def _same_state(before, estimator):
    after = vars(estimator)
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert after[name] is value, name


# ------------------------------------------------------------------ memory
def _spy_kernel_passes(monkeypatch):
    ran = []
    for cls in (FastCovariance, KernelObjectCovariance):
        original = cls.fill_lower

        def spy(*args, _original=original, **kwargs):
            ran.append("fill_lower")
            return _original(*args, **kwargs)

        monkeypatch.setattr(cls, "fill_lower", spy)
    return ran


def _limit_memory(monkeypatch, available):
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: MemoryReading(int(available), "a test's limit"))


def test_classifier_memory_refused_before_any_kernel_pass_with_remedies(monkeypatch):
    X, y = _data(n=60)
    fitted = GaussianProcessClassifier(_kernel()).fit(X, y)
    before = dict(vars(fitted))
    ran = _spy_kernel_passes(monkeypatch)
    _limit_memory(monkeypatch, 8 * 60 * 60 // 2)
    with pytest.raises(InsufficientMemoryError) as info:
        fitted.fit(X, y)
    message = str(info.value)
    assert "Fitting GaussianProcessClassifier" in message and "N = 60 samples" in message
    assert "fewer samples" in message and "skip_memory_check" in message
    assert ran == []
    _same_state(before, fitted)  # the earlier fit is untouched
    with pytest.raises(InsufficientMemoryError, match="log_marginal_likelihood"):
        fitted.log_marginal_likelihood(fitted.kernel_.theta)


def test_classifier_memory_counts_every_kept_factor_and_the_models_in_flight(monkeypatch):
    """One binary model fits where three one-vs-rest models, each keeping
    its N x N factor, do not; the message says what to change."""
    n = 600  # 8 N^2 well above the fixed megabyte of every estimate
    X, y = _data(n=n, n_classes=3)
    one_model = laplace_fit_bytes([n], 2, 3)
    _limit_memory(monkeypatch, one_model * 1.5)
    GaussianProcessClassifier(_kernel(), optimizer=None).fit(X, y == 0)  # fits
    with pytest.raises(InsufficientMemoryError) as info:
        GaussianProcessClassifier(_kernel(), optimizer=None).fit(X, y)
    assert "one_vs_rest, 3 binary models" in str(info.value)
    assert "multi_class='one_vs_one'" in str(info.value)
    assert "n_jobs=None" not in str(info.value)
    # pairs hold two thirds of the samples: 3 x (2/3)^2 = 4/3 of one model
    _limit_memory(monkeypatch, one_model * 1.5)
    GaussianProcessClassifier(_kernel(), optimizer=None, multi_class="one_vs_one").fit(X, y)
    _limit_memory(monkeypatch, laplace_fit_bytes([n] * 3, 2, 3) * 1.01)
    GaussianProcessClassifier(_kernel(), optimizer=None).fit(X, y)
    with pytest.raises(InsufficientMemoryError, match="n_jobs=None"):
        GaussianProcessClassifier(_kernel(), optimizer=None, n_jobs=3).fit(X, y)


def test_classifier_memory_estimate_bounds_what_a_fit_allocates():
    n = 400
    X, y = _data(n=n)
    GaussianProcessClassifier(_kernel(), optimizer=None).fit(X[:20], y[:20])  # compile
    tracemalloc.start()
    try:
        GaussianProcessClassifier(_kernel()).fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= laplace_fit_bytes([n], 2, 3)


@pytest.mark.slow  # fits side by side under tracemalloc
@pytest.mark.parametrize("what", ["fit", "log_marginal_likelihood"])
def test_classifier_no_n_by_n_by_n_theta_tensor(what):
    """A loss+gradient (and a whole fit, whose buffer is kept as L_) peaks
    below twice the N x N buffer; scikit-learn's, measured the same way,
    holds its (N, N, n_theta) tensor beside several N x N matrices."""
    n = 500
    X, y = _data(n=n)
    kernel = C(1.0) * RBF([1.0, 2.0])  # n_theta = 3
    gpc = GaussianProcessClassifier(kernel, optimizer=None).fit(X, y)
    sk = SklearnGPC(kernel, optimizer=None).fit(X, y)
    theta = gpc.kernel_.theta + 0.1
    gpc.log_marginal_likelihood(theta, eval_gradient=True)  # compiled, warm

    def peak_of(call):
        tracemalloc.start()
        try:
            call()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    if what == "fit":
        ours = peak_of(lambda: GaussianProcessClassifier(kernel).fit(X, y))
        theirs = peak_of(lambda: SklearnGPC(kernel).fit(X, y))
    else:
        ours = peak_of(lambda: gpc.log_marginal_likelihood(theta, eval_gradient=True))
        theirs = peak_of(lambda: sk.log_marginal_likelihood(theta, eval_gradient=True))
    buffer = 8 * n * n
    assert ours < 1.5 * buffer
    assert theirs > (3 + 2) * buffer  # the measurement sees a tensor where there is one


# ------------------------------------------------------------------ jitter
class _DiagonalKernel(Kernel):
    """K = diag(values) on the training inputs (a kernel that need not be
    positive semi-definite), 0 between distinct inputs."""

    def __init__(self, values=None):
        self.values = values

    def __call__(self, X, Y=None, eval_gradient=False):
        if Y is None:
            K = np.diag(np.asarray(self.values, dtype=float)[:len(X)])
            return (K, np.empty((len(X), len(X), 0))) if eval_gradient else K
        return np.zeros((len(X), len(Y)))

    def diag(self, X):
        return np.ones(len(X))

    def is_stationary(self):
        return False


def test_classifier_jitter_where_b_is_singular_warns_and_keeps_it():
    # W = 1/4 at f = 0, so B = I + K / 4 has a zero pivot where K_ii = -4
    X, y = _data(n=6)
    y = np.array([0, 1, 0, 1, 0, 1])
    kernel = _DiagonalKernel([-4.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpc = GaussianProcessClassifier(kernel, optimizer=None, max_iter_predict=1).fit(X, y)
    jitters = [w for w in caught if issubclass(w.category, JitterWarning)]
    assert len(jitters) == 1 and "jitter" in str(jitters[0].message)
    assert jitters[0].filename == __file__  # the user's line
    assert gpc.base_estimator_.jitter_ > 0
    assert np.all(np.isfinite(gpc.predict_proba(X)))


def test_classifier_not_positive_definite_even_with_jitter_is_a_linalg_error():
    X, y = _data(n=6)
    y = np.array([0, 1, 0, 1, 0, 1])
    kernel = _DiagonalKernel([-50.0] * 6)
    fitted = GaussianProcessClassifier(_kernel(), optimizer=None).fit(X, y)
    before, params = dict(vars(fitted)), fitted.get_params(deep=False)
    fitted.set_params(kernel=kernel)
    with pytest.warns(Warning), pytest.raises(np.linalg.LinAlgError,
                                             match="not returning a positive semi-definite"):
        fitted.fit(X, y)
    fitted.set_params(**params)
    _same_state(before, fitted)


# --------------------------------------------------------------- optimiser
def test_classifier_callable_optimizer_keeps_the_best_point_it_evaluated():
    X, y = _data()
    seen = []

    def optimizer(obj_func, initial_theta, bounds):
        for step in (0.0, 0.5, 1.0, -0.5):
            theta = initial_theta + step
            seen.append((obj_func(theta, eval_gradient=True)[0], theta))
        return initial_theta + 3.0, np.inf  # a worse answer than it saw

    gpc = GaussianProcessClassifier(_kernel(), optimizer=optimizer).fit(X, y)
    value, theta = min(seen, key=lambda pair: pair[0])
    np.testing.assert_allclose(gpc.kernel_.theta, theta, rtol=1e-14)
    np.testing.assert_allclose(gpc.log_marginal_likelihood_value_, -value, rtol=1e-9)


@pytest.mark.parametrize("after", [1, 5])
def test_classifier_keyboard_interrupt_keeps_the_best_point_then_propagates(monkeypatch, after):
    X, y = _data()
    interrupt = Interrupting(monkeypatch, laplace.LaplaceObjective, after)
    gpc = GaussianProcessClassifier(_kernel(), n_restarts_optimizer=2, random_state=0)
    with pytest.warns(ConvergenceWarning, match="interrupted"), \
            pytest.raises(KeyboardInterrupt):
        gpc.fit(X, y)
    assert len(interrupt.values) == after  # nothing ran after the interrupt
    best = int(np.argmin(interrupt.values))
    np.testing.assert_allclose(gpc.kernel_.theta, interrupt.thetas[best], rtol=1e-14)
    np.testing.assert_allclose(gpc.log_marginal_likelihood_value_,
                               -interrupt.values[best], rtol=1e-9)
    assert np.all(np.isfinite(gpc.predict_proba(X)))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_keyboard_interrupt_without_a_kept_point_leaves_the_fit_as_it_was(
        monkeypatch, n_classes):
    """An interrupt before any finite point propagates, and the earlier fit
    stays."""
    X, y = _data(n_classes=n_classes)
    fitted = GaussianProcessClassifier(_kernel()).fit(X, y)
    before, proba = dict(vars(fitted)), fitted.predict_proba(X)
    Interrupting(monkeypatch, laplace.LaplaceObjective, 0)
    with pytest.raises(KeyboardInterrupt):
        fitted.fit(X, y)
    _same_state(before, fitted)
    np.testing.assert_array_equal(fitted.predict_proba(X), proba)


def test_classifier_keyboard_interrupt_in_a_multi_class_fit_keeps_every_model(monkeypatch):
    """Ctrl-C in the first of three one-vs-rest models: it keeps its best
    point, the two after it are fitted at the initial hyperparameters, the
    estimator is published, then the interrupt propagates."""
    X, y = _data(n_classes=3)
    interrupt = Interrupting(monkeypatch, laplace.LaplaceObjective, 4)
    gpc = GaussianProcessClassifier(_kernel())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            gpc.fit(X, y)
    assert any("models after it were fitted at the kernel's initial" in str(w.message)
               for w in caught if issubclass(w.category, ConvergenceWarning))
    models = gpc.base_estimator_.estimators_
    best = int(np.argmin(interrupt.values))
    np.testing.assert_allclose(models[0].kernel_.theta, interrupt.thetas[best], rtol=1e-14)
    for model in models[1:]:
        np.testing.assert_array_equal(model.kernel_.theta, _kernel().theta)
    assert len(interrupt.values) == 4  # nothing optimised after the interrupt
    proba = gpc.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    # a fit afterwards optimises every model again
    monkeypatch.undo()
    refit = GaussianProcessClassifier(_kernel()).fit(X, y)
    assert all(np.any(m.kernel_.theta != _kernel().theta)
               for m in refit.base_estimator_.estimators_)


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad, match", [
    ("nan", "NaN"),
    ("one class", "requires 2 or more distinct classes"),
    ("compound", "cannot be a CompoundKernel"),
    ("zero length scale", "not finite and positive"),
    ("multi_class", "multi_class"),
    ("max_iter_predict", "max_iter_predict"),
])
def test_classifier_bad_input_is_a_clear_error_and_leaves_the_fit(bad, match):
    X, y = _data()
    gpc = GaussianProcessClassifier(_kernel()).fit(X, y)
    before = dict(vars(gpc))
    params = gpc.get_params(deep=False)
    if bad == "nan":
        X = X.copy()
        X[3, 1] = np.nan
    elif bad == "one class":
        y = np.zeros_like(y)
    elif bad == "compound":
        gpc.set_params(kernel=CompoundKernel([RBF(), RBF()]))
    elif bad == "zero length scale":
        gpc.set_params(kernel=RBF(0.0))
    else:
        gpc.set_params(**{bad: "bad" if bad == "multi_class" else 0})
    with pytest.raises(ValueError, match=match):
        gpc.fit(X, y)
    gpc.set_params(**params)
    _same_state(before, gpc)


def test_classifier_predict_before_fit_is_not_fitted_error():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        GaussianProcessClassifier().predict_proba(np.zeros((2, 2)))


def test_classifier_lml_gradient_without_theta_is_an_error():
    X, y = _data()
    gpc = GaussianProcessClassifier(_kernel(), optimizer=None).fit(X, y)
    with pytest.raises(ValueError, match="theta!=None"):
        gpc.log_marginal_likelihood(eval_gradient=True)
    assert gpc.log_marginal_likelihood() == gpc.log_marginal_likelihood_value_

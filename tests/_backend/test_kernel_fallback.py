"""Kernels off the fast path (a user's subclass, PairwiseKernel, Matern with
another nu, CompoundKernel, or any expression containing one) go through the
kernel object itself: the same likelihood, gradient, predictions and samples
as scikit-learn and as the fast path, and one SlowKernelWarning per fit."""

import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import (
    RBF,
    CompoundKernel,
    Matern,
    PairwiseKernel,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from conftest import (ALPHA, assert_gradient_close, assert_regressor_matches_sklearn, make_problem,
                      random_theta)
from fastgp import GaussianProcessRegressor
from fastgp._backend.covariance import (
    KernelObjectCovariance,
    SlowKernelWarning,
    make_covariance,
)


class UserRBF(RBF):
    """A user's subclass with RBF's formula: exact-type lowering must skip it
    (a subclass may override __call__), so it runs on the fallback."""


class UserScaledRBF(RBF):
    """A user's subclass that does change __call__: twice RBF."""

    def __call__(self, X, Y=None, eval_gradient=False):
        out = super().__call__(X, Y, eval_gradient)
        if eval_gradient:
            return 2.0 * out[0], 2.0 * out[1]
        return 2.0 * out

    def diag(self, X):
        return 2.0 * super().diag(X)


#: name -> (fallback kernel, the same kernel on the fast path or None)
FALLBACK = {
    "subclass": (C(1.3) * UserRBF([0.8, 1.6]) + WhiteKernel(0.1),
                 C(1.3) * RBF([0.8, 1.6]) + WhiteKernel(0.1)),
    "subclass-changed-call": (UserScaledRBF(0.9) + WhiteKernel(0.1),
                              C(2.0, "fixed") * RBF(0.9) + WhiteKernel(0.1)),
    "pairwise-rbf": (PairwiseKernel(gamma=0.4, metric="rbf") + WhiteKernel(0.1), None),
    "Matern-nu0.7": (C(1.1) * Matern(0.9, nu=0.7) + WhiteKernel(0.1), None),
    "nested-Matern-nu2*RBF": ((Matern(1.2, nu=2.0) + C(0.5)) * RBF(2.0) ** 2
                              + WhiteKernel(0.1), None),
}


def fallback_params():
    return [pytest.param(slow.clone_with_theta(slow.theta), fast, id=name)
            for name, (slow, fast) in FALLBACK.items()]


def fit_quietly(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowKernelWarning)
        return estimator.fit(X, y)


@pytest.mark.parametrize("kernel, fast_twin", fallback_params())
def test_kernel_fallback_is_taken(kernel, fast_twin):
    with pytest.warns(SlowKernelWarning, match="not on fastgp's fast path"):
        covariance = make_covariance(kernel, np.zeros((3, 2)))
    assert isinstance(covariance, KernelObjectCovariance)


def test_kernel_fallback_compound_kernel_is_taken():
    kernel = CompoundKernel([RBF(1.0), RBF(2.0)])
    with pytest.warns(SlowKernelWarning):
        assert isinstance(make_covariance(kernel, np.zeros((3, 2))), KernelObjectCovariance)


@pytest.mark.parametrize("kernel, fast_twin", fallback_params())
def test_kernel_fallback_lml_gradient_and_predictions_match_sklearn(kernel, fast_twin, rng):
    X, y = make_problem(rng, n_samples=30)
    ours = fit_quietly(GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None), X, y)
    ref = SklearnGPR(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    X_query = X[:6] + 0.25
    assert_regressor_matches_sklearn(ours, ref, (kernel.theta, random_theta(kernel, rng, 0.4)),
                                     X_query)
    np.testing.assert_allclose(ours.sample_y(X_query, 3, random_state=5),
                               ref.sample_y(X_query, 3, random_state=5), rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("kernel, fast_twin",
                         [p for p in fallback_params() if p.values[1] is not None])
def test_kernel_fallback_equals_fast_path(kernel, fast_twin, rng):
    X, y = make_problem(rng, n_samples=30)
    slow = fit_quietly(GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None), X, y)
    fast = GaussianProcessRegressor(fast_twin, alpha=ALPHA, optimizer=None).fit(X, y)
    assert not isinstance(make_covariance(fast.kernel_, X), KernelObjectCovariance)
    theta = random_theta(kernel, rng, 0.4)
    value, grad = slow.log_marginal_likelihood(theta, eval_gradient=True)
    fast_value, fast_grad = fast.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, fast_value, rtol=1e-8)
    assert_gradient_close(grad, fast_grad, rtol=1e-8)
    X_query = X[:6] - 0.25
    for kwargs in ({"return_std": True}, {"return_cov": True}):
        (mean, spread), (fast_mean, fast_spread) = (slow.predict(X_query, **kwargs),
                                                    fast.predict(X_query, **kwargs))
        np.testing.assert_allclose(mean, fast_mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(spread, fast_spread, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(slow.sample_y(X_query, 4, random_state=3),
                               fast.sample_y(X_query, 4, random_state=3), rtol=1e-6,
                               atol=1e-8)


def test_kernel_fallback_fit_optimises_like_the_fast_path(rng):
    X, y = make_problem(rng, n_samples=40)
    slow, fast = FALLBACK["subclass"]
    slow_fit = fit_quietly(GaussianProcessRegressor(slow, alpha=ALPHA), X, y)
    fast_fit = GaussianProcessRegressor(fast, alpha=ALPHA).fit(X, y)
    np.testing.assert_allclose(slow_fit.log_marginal_likelihood_value_,
                               fast_fit.log_marginal_likelihood_value_, rtol=1e-7)
    np.testing.assert_allclose(slow_fit.kernel_.theta, fast_fit.kernel_.theta, atol=1e-4)


def _slow_warnings(record):
    return [w for w in record if issubclass(w.category, SlowKernelWarning)]


def test_kernel_fallback_warns_once_per_fit(rng):
    X, y = make_problem(rng, n_samples=25)
    kernel = C(1.0) * UserRBF(1.0) + WhiteKernel(0.1)
    gpr = GaussianProcessRegressor(kernel, alpha=ALPHA, n_restarts_optimizer=1,
                                   random_state=0)
    for _ in range(2):  # each fit warns again, once
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            gpr.fit(X, y)
        slow = _slow_warnings(record)
        assert len(slow) == 1
        assert "UserRBF" in str(slow[0].message)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        gpr.predict(X[:3], return_std=True)
        gpr.predict(X[:3], return_cov=True)
        gpr.sample_y(X[:3], 2, random_state=0)
        gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
    assert _slow_warnings(record) == []


def test_kernel_fallback_fast_kernels_do_not_warn(rng):
    X, y = make_problem(rng, n_samples=25)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1)).fit(X, y)
    assert _slow_warnings(record) == []

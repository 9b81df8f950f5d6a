"""The fast path for ExpSineSquared, DotProduct, Exponentiation, Matern(nu=inf),
fastgp.kernels' ARD kernels, and Sum/Product/Exponentiation nested two and three
levels deep with fixed and free hyperparameters: lowering bookkeeping, and the
log marginal likelihood, its gradient and predictions against scikit-learn.

scikit-learn's ExpSineSquared takes the sine of the Euclidean distance, which
is not a positive definite kernel in two or more dimensions (its matrices have
negative eigenvalues), so cases containing it use one input dimension.
"""

import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    Exponentiation,
    ExpSineSquared,
    Matern,
    Product,
    RationalQuadratic,
    Sum,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from conftest import ALPHA, assert_gradient_close, make_problem, random_theta
from fastgp import GaussianProcessRegressor
from fastgp._engine import opcodes as op
from fastgp import kernels as fk
from fastgp._backend.covariance import FastCovariance, make_covariance
from fastgp.exceptions import SlowKernelWarning
from fastgp._backend.lowering import lower_kernel

#: name -> (kernel, n_features). Leaves first, then two and three levels of
#: nesting; "fixed" marks hyperparameters with bounds="fixed".
CASES = {
    # leaves
    "ExpSine": (ExpSineSquared(0.9, 1.7), 1),
    "ExpSine-fixed-period": (ExpSineSquared(0.9, 1.7, periodicity_bounds="fixed"), 1),
    "ExpSine-fixed-length": (ExpSineSquared(0.9, 1.7, length_scale_bounds="fixed"), 1),
    "Dot": (DotProduct(0.8), 2),
    "Dot-3d": (DotProduct(1.3), 3),
    "Dot-fixed+RBF": (DotProduct(0.8, sigma_0_bounds="fixed") + RBF(1.2), 2),
    "MaternInf-ard": (Matern([0.7, 1.3], nu=np.inf), 2),
    "RBF**2": (RBF(1.1) ** 2, 2),
    "RQ**0.5": (RationalQuadratic(0.9, alpha=1.5) ** 0.5, 2),
    "Dot**2": (DotProduct(0.5) ** 2, 2),
    "fk.RQ-ard": (fk.RationalQuadratic([0.7, 1.8], alpha=1.3), 2),
    "fk.RQ-iso": (fk.RationalQuadratic(0.9, alpha=0.6), 2),
    "fk.RQ-ard-fixed-alpha": (fk.RationalQuadratic([0.7, 1.8], 1.3, alpha_bounds="fixed"), 2),
    "fk.ExpSine-ard": (fk.ExpSineSquared([0.9, 1.4], [1.7, 2.3]), 2),
    "fk.ExpSine-shared-l": (fk.ExpSineSquared(1.1, [1.7, 2.3]), 2),
    "fk.ExpSine-shared-p": (fk.ExpSineSquared([0.9, 1.4], 2.1), 2),
    "fk.ExpSine-iso-3d": (fk.ExpSineSquared(1.2, 1.9), 3),
    "fk.ExpSine-fixed-p": (fk.ExpSineSquared([0.9, 1.4], [1.7, 2.3],
                                             periodicity_bounds="fixed"), 2),
    # two levels
    "C*ExpSine*RBF": (C(1.4) * ExpSineSquared(1.1, 1.3) * RBF(2.5), 1),
    "(C*RBF+Dot)*RQ": ((C(1.2) * RBF([0.8, 1.5]) + DotProduct(0.6))
                       * RationalQuadratic(1.3, alpha=0.8), 2),
    "(RBF+C)**1.5": ((RBF(0.9) + C(0.5)) ** 1.5, 2),
    "C*fk.RQ+fk.ExpSine": (C(0.9) * fk.RationalQuadratic([0.7, 1.8], alpha=1.3)
                           + fk.ExpSineSquared([0.9, 1.4], [1.7, 2.3]), 2),
    "Dot*MaternInf-fixed": (DotProduct(0.4) * Matern(1.2, nu=np.inf,
                                                     length_scale_bounds="fixed"), 2),
    # three levels
    "((C*ExpSine+RBF)**2)*(Dot+C)": (((C(0.8) * ExpSineSquared(1.2, 1.6) + RBF(1.4)) ** 2)
                                     * (DotProduct(0.7) + C(0.3, "fixed")), 1),
    "((fk.RQ*Matern52)+Dot**2)*fk.ExpSine": (
        (fk.RationalQuadratic([0.9, 1.6], 2.0) * Matern([1.1, 0.8], nu=2.5)
         + DotProduct(0.5) ** 2) * fk.ExpSineSquared(1.3, [2.0, 2.6]), 2),
    "(C*(RBF**3+RQ))**2+Dot": ((C(0.9) * (RBF([1.5, 2.0]) ** 3
                                          + RationalQuadratic(1.0, 0.7, alpha_bounds="fixed")))
                               ** 2 + DotProduct(0.9, "fixed"), 2),
}


def case_params():
    return [pytest.param(kernel.clone_with_theta(kernel.theta), d, id=name)
            for name, (kernel, d) in CASES.items()]


def fitted_pair(kernel, rng, n_features, n_samples=30, normalize_y=False):
    """fastgp's and scikit-learn's regressors on the same problem, not optimised."""
    X, y = make_problem(rng, n_samples=n_samples, n_features=n_features)
    X = X + 2.5  # DotProduct**0.5 and friends need x . x' > 0
    ours = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None,
                                    normalize_y=normalize_y).fit(X, y)
    ref = SklearnGPR(kernel, alpha=ALPHA, optimizer=None,
                     normalize_y=normalize_y).fit(X, y)
    return ours, ref, X


def _leaves_post_order(kernel):
    if isinstance(kernel, (Sum, Product)):
        return _leaves_post_order(kernel.k1) + _leaves_post_order(kernel.k2)
    if isinstance(kernel, Exponentiation):
        return _leaves_post_order(kernel.kernel)
    return [kernel]


@pytest.mark.parametrize("kernel, n_features", case_params())
def test_kernels_fastpath_lowers_without_warning(kernel, n_features):
    X = np.zeros((3, n_features))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowKernelWarning)
        covariance = make_covariance(kernel, X)
    assert isinstance(covariance, FastCovariance)
    assert covariance.n_theta == kernel.n_dims


@pytest.mark.parametrize("kernel, n_features", case_params())
def test_kernels_fastpath_params_are_the_kernels_own_values(kernel, n_features, rng):
    """program.params(theta) is every leaf's hyperparameter values, leaves in
    post-order and each leaf's hyperparameters sorted by name (scikit-learn's
    theta order), for the kernel's theta and for a moved one."""
    program = lower_kernel(kernel, n_features)
    for theta in (kernel.theta, random_theta(kernel, rng)):
        moved = kernel.clone_with_theta(theta)
        expected = [np.atleast_1d(np.asarray(getattr(leaf, hp.name), dtype=float))
                    for leaf in _leaves_post_order(moved) for hp in leaf.hyperparameters]
        np.testing.assert_allclose(program.params(theta), np.concatenate(expected),
                                   rtol=1e-14)
    # free slots read theta in order: 0, 1, ..., n_theta - 1
    free = program.theta_of_param[program.theta_of_param >= 0]
    np.testing.assert_array_equal(free, np.arange(kernel.n_dims))


@pytest.mark.parametrize("kernel, n_features", case_params())
def test_kernels_fastpath_lml_and_gradient_match_sklearn(kernel, n_features, rng):
    ours, ref, _ = fitted_pair(kernel, rng, n_features)
    for theta in (kernel.theta, random_theta(kernel, rng, 0.4),
                  random_theta(kernel, rng, 0.4)):
        value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        ref_value, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(value, ref_value, rtol=1e-8)
        assert_gradient_close(grad, ref_grad, rtol=1e-8)
        np.testing.assert_allclose(ours.log_marginal_likelihood(theta), ref_value, rtol=1e-8)


@pytest.mark.parametrize("kernel, n_features", case_params())
def test_kernels_fastpath_predictions_match_sklearn(kernel, n_features, rng):
    ours, ref, X = fitted_pair(kernel, rng, n_features, normalize_y=True)
    X_query = X[:7] + 0.3 * rng.standard_normal((7, n_features))
    mean, std = ours.predict(X_query, return_std=True)
    ref_mean, ref_std = ref.predict(X_query, return_std=True)
    scale = np.max(np.abs(ref_mean))
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-8, atol=1e-8 * scale)
    np.testing.assert_allclose(std, ref_std, rtol=1e-6, atol=1e-8 * np.max(ref_std))
    _, cov = ours.predict(X_query, return_cov=True)
    _, ref_cov = ref.predict(X_query, return_cov=True)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-6, atol=1e-8 * np.max(np.abs(ref_cov)))


@pytest.mark.parametrize("n_features", [1, 2])
def test_kernels_fastpath_matern_inf_is_rbf(n_features, rng):
    length_scale = [0.7, 1.3][:n_features]
    program = lower_kernel(Matern(length_scale, nu=np.inf), n_features)
    assert program.ops[0, op.COL_CODE] == op.RBF
    matern, reference, _ = fitted_pair(Matern(length_scale, nu=np.inf) + WhiteKernel(0.1),
                                       rng, n_features)
    rbf, _, _ = fitted_pair(RBF(length_scale) + WhiteKernel(0.1),
                            np.random.default_rng(20261129), n_features)
    theta = matern.kernel_.theta + 0.2
    value, grad = matern.log_marginal_likelihood(theta, True)
    # the same program as RBF's (a lowering property, bitwise) ...
    np.testing.assert_array_equal(grad, rbf.log_marginal_likelihood(theta, True)[1])
    # ... and the numbers of scikit-learn's own Matern(nu=inf), an independent reference
    ref_value, ref_grad = reference.log_marginal_likelihood(theta, True)
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    assert_gradient_close(grad, ref_grad, rtol=1e-8)


def test_kernels_fastpath_exponentiation_records_its_exponent():
    program = lower_kernel((RBF(1.0) + C(1.0)) ** 2.5, 1)
    codes = list(program.ops[:, op.COL_CODE])
    assert codes == [op.RBF, op.CONST, op.SUM, op.POW]
    assert program.op_float[-1] == 2.5
    # POW rescales its whole subtree's theta range
    assert (program.ops[-1, op.COL_T0], program.ops[-1, op.COL_T1]) == (0, 2)


def test_kernels_fastpath_exp_sine_records_periods_per_dimension():
    program = lower_kernel(fk.ExpSineSquared([1.0, 2.0, 3.0], 4.0), 3)
    assert program.ops[0, op.COL_CODE] == op.EXPSINE_ARD
    assert (program.ops[0, op.COL_M], program.ops[0, op.COL_M2]) == (3, 1)
    np.testing.assert_array_equal(program.base_params, [1.0, 2.0, 3.0, 4.0])
    assert lower_kernel(ExpSineSquared(1.0, 2.0), 3).ops[0, op.COL_CODE] == op.EXPSINE


def test_kernels_fastpath_ard_period_mismatch_raises():
    with pytest.raises(ValueError, match="same number of dimensions"):
        lower_kernel(fk.ExpSineSquared(1.0, [1.0, 2.0, 3.0]), 2)
    with pytest.raises(ValueError, match="same number of dimensions"):
        fk.ExpSineSquared(1.0, [1.0, 2.0, 3.0])(np.zeros((2, 2)))


def test_kernels_fastpath_fit_reaches_sklearns_optimum(rng):
    """A periodic-times-trend fit from the same start ends at least as high as
    scikit-learn's (both use L-BFGS-B on the same objective)."""
    X = np.sort(rng.uniform(0.0, 6.0, size=(60, 1)), axis=0)
    y = (np.exp(-X[:, 0] / 3.0) * np.sin(2 * np.pi * X[:, 0] / 1.3) + 0.3 * X[:, 0]
         + 0.1 * rng.standard_normal(60))  # a decaying seasonal pattern on a trend
    kernel = (C(1.0) * ExpSineSquared(1.0, 1.2) * RBF(5.0) + DotProduct(1.0)
              + WhiteKernel(0.1))
    ours = GaussianProcessRegressor(kernel).fit(X, y)
    ref = SklearnGPR(kernel).fit(X, y)
    assert ours.log_marginal_likelihood_value_ >= ref.log_marginal_likelihood_value_ - 1e-6


def test_kernels_fastpath_mauna_loa_kernel_matches_sklearn():
    """The CLI's default: Rasmussen & Williams' CO2 kernel (11 free
    hyperparameters, the period fixed) on the first 150 weeks."""
    from fastgp.cli import mauna_loa_kernel
    from fastgp.datasets import load_mauna_loa_co2

    kernel = mauna_loa_kernel()
    assert kernel.n_dims == 11
    X, y = load_mauna_loa_co2()
    X, y = X[:150], y[:150] - y[:150].mean()
    assert isinstance(make_covariance(kernel, X), FastCovariance)
    ours = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    ref = SklearnGPR(kernel, optimizer=None).fit(X, y)
    for theta in (kernel.theta, kernel.theta + np.linspace(-0.3, 0.3, 11)):
        value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        ref_value, ref_grad = ref.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(value, ref_value, rtol=1e-8)
        assert_gradient_close(grad, ref_grad, rtol=1e-8)

"""fastgp.kernels: the ARD RationalQuadratic and the per-dimension
ExpSineSquared behave as scikit-learn kernels (API), their NumPy gradients
agree with central finite differences, they equal scikit-learn's kernels where
those are defined, and the fast path's likelihood gradient agrees with finite
differences and with scikit-learn's estimator running the NumPy reference."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process import kernels as skk

from conftest import ALPHA, assert_regressor_matches_sklearn, make_problem
from fastgp import GaussianProcessRegressor
from fastgp._backend.covariance import FastCovariance, make_covariance
from fastgp.kernels import ExpSineSquared, RationalQuadratic

#: name -> fastgp.kernels instance for 2-D inputs, with every mix of scalar,
#: per-dimension, fixed and free hyperparameters.
ARD_KERNELS = {
    "RQ-ard": RationalQuadratic([0.7, 1.8], alpha=1.3),
    "RQ-iso": RationalQuadratic(0.9, alpha=0.6),
    "RQ-ard-fixed-alpha": RationalQuadratic([0.7, 1.8], 1.3, alpha_bounds="fixed"),
    "RQ-fixed-length": RationalQuadratic([0.7, 1.8], 1.3, length_scale_bounds="fixed"),
    "ExpSine-ard": ExpSineSquared([0.9, 1.4], [1.7, 2.3]),
    "ExpSine-shared-l": ExpSineSquared(1.1, [1.7, 2.3]),
    "ExpSine-shared-p": ExpSineSquared([0.9, 1.4], 2.1),
    "ExpSine-iso": ExpSineSquared(1.2, 1.9),
    "ExpSine-fixed-p": ExpSineSquared([0.9, 1.4], [1.7, 2.3], periodicity_bounds="fixed"),
    "ExpSine-fixed-l": ExpSineSquared([0.9, 1.4], 2.1, length_scale_bounds="fixed"),
}


def ard_params():
    return [pytest.param(clone(k), id=name) for name, k in ARD_KERNELS.items()]


def central_differences(f, theta, step=1e-6):
    """d f / d theta_p by central differences; f returns an array."""
    columns = []
    for p in range(theta.size):
        e = np.zeros_like(theta)
        e[p] = step
        columns.append((f(theta + e) - f(theta - e)) / (2.0 * step))
    return np.stack(columns, axis=-1)


# ----------------------------------------------------------------- the API
def test_kernels_ard_hyperparameters_and_theta_order():
    kernel = RationalQuadratic([0.5, 2.0, 3.0], alpha=4.0)
    assert [hp.name for hp in kernel.hyperparameters] == ["alpha", "length_scale"]
    assert kernel.hyperparameter_length_scale.n_elements == 3
    np.testing.assert_allclose(kernel.theta, np.log([4.0, 0.5, 2.0, 3.0]))
    assert kernel.bounds.shape == (4, 2)
    periodic = ExpSineSquared([1.0, 2.0], 3.0, periodicity_bounds="fixed")
    assert [hp.name for hp in periodic.hyperparameters] == ["length_scale", "periodicity"]
    assert periodic.hyperparameter_periodicity.fixed
    np.testing.assert_allclose(periodic.theta, np.log([1.0, 2.0]))
    periodic.theta = np.log([5.0, 6.0])
    np.testing.assert_allclose(periodic.length_scale, [5.0, 6.0])
    assert periodic.periodicity == 3.0


@pytest.mark.parametrize("kernel", ard_params())
def test_kernels_ard_clone_params_and_operators(kernel):
    twin = clone(kernel)
    assert twin == kernel and twin is not kernel
    assert set(kernel.get_params()) >= {"length_scale", "length_scale_bounds"}
    moved = kernel.clone_with_theta(kernel.theta + 0.5)
    np.testing.assert_allclose(moved.theta, kernel.theta + 0.5)
    assert isinstance(kernel + skk.WhiteKernel(), skk.Sum)
    assert isinstance(2.0 * kernel, skk.Product)
    assert isinstance(kernel ** 2, skk.Exponentiation)
    assert kernel.is_stationary()
    assert kernel.requires_vector_input


@pytest.mark.parametrize("kernel", ard_params())
def test_kernels_ard_diag_and_cross_covariance(kernel, rng):
    X = rng.uniform(-2, 2, size=(6, 2))
    Y = rng.uniform(-2, 2, size=(4, 2))
    np.testing.assert_allclose(kernel.diag(X), np.diag(kernel(X)))
    np.testing.assert_allclose(kernel(X, Y), kernel(np.vstack([X, Y]))[:6, 6:], rtol=1e-14)
    np.testing.assert_allclose(kernel(X), kernel(X).T)
    assert np.linalg.eigvalsh(kernel(X)).min() > -1e-12
    with pytest.raises(ValueError, match="Gradient can only be evaluated when Y is None"):
        kernel(X, Y, eval_gradient=True)


def test_kernels_ard_repr_says_which_class_is_in_use():
    assert repr(RationalQuadratic([1.0, 2.5], alpha=3.0)) == \
        "fastgp.kernels.RationalQuadratic(alpha=3, length_scale=[1, 2.5])"
    assert repr(RationalQuadratic(0.5)) == \
        "fastgp.kernels.RationalQuadratic(alpha=1, length_scale=0.5)"
    assert repr(ExpSineSquared(1.0, [2.0, 7.0])) == \
        "fastgp.kernels.ExpSineSquared(length_scale=1, periodicity=[2, 7])"
    # scikit-learn's classes of the same names print differently
    from sklearn.gaussian_process import kernels as sk

    assert repr(sk.RationalQuadratic(0.5)) != repr(RationalQuadratic(0.5))
    assert repr(sk.ExpSineSquared(1.0, 2.0)) != repr(ExpSineSquared(1.0, 2.0))
    # in a composed kernel too, and clone and get_params keep working
    kernel = 2.0 * RationalQuadratic([1.0, 2.5]) + ExpSineSquared(1.0, 3.0)
    assert "fastgp.kernels.RationalQuadratic(" in str(kernel)
    assert "fastgp.kernels.ExpSineSquared(" in str(kernel)
    copy = clone(kernel)
    assert repr(copy) == repr(kernel)
    assert copy.get_params()["k1__k2"].get_params()["length_scale"] == [1.0, 2.5]
    np.testing.assert_array_equal(copy.theta, kernel.theta)


def test_kernels_ard_wrong_dimension_raises():
    with pytest.raises(ValueError, match="same number of dimensions"):
        RationalQuadratic([1.0, 2.0, 3.0])(np.zeros((2, 2)))


def test_kernels_ard_periodic_along_each_axis():
    kernel = ExpSineSquared([0.8, 1.5], [1.3, 4.0])
    X = np.array([[0.2, -0.4], [0.2 + 2 * 1.3, -0.4 - 4.0]])
    np.testing.assert_allclose(kernel(X), np.ones((2, 2)), atol=1e-14)


# ------------------------------------------------------ gradients and values
@pytest.mark.parametrize("kernel", ard_params())
def test_kernels_ard_gradient_matches_central_differences(kernel, rng):
    X = rng.uniform(-2, 2, size=(7, 2))
    K, K_gradient = kernel(X, eval_gradient=True)
    assert K_gradient.shape == (7, 7, kernel.n_dims)
    numeric = central_differences(lambda t: kernel.clone_with_theta(t)(X), kernel.theta)
    np.testing.assert_allclose(K_gradient, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n_features", [1, 2, 3])
def test_kernels_ard_rational_quadratic_scalar_equals_sklearn(n_features, rng):
    X = rng.uniform(-2, 2, size=(8, n_features))
    for bounds in [(1e-5, 1e5), "fixed"]:
        ours = RationalQuadratic(0.8, alpha=1.7, alpha_bounds=bounds)
        ref = skk.RationalQuadratic(0.8, alpha=1.7, alpha_bounds=bounds)
        np.testing.assert_array_equal(ours.theta, ref.theta)
        K, G = ours(X, eval_gradient=True)
        K_ref, G_ref = ref(X, eval_gradient=True)
        np.testing.assert_allclose(K, K_ref, rtol=1e-14)
        np.testing.assert_allclose(G, G_ref, rtol=1e-12, atol=1e-15)


def test_kernels_ard_rational_quadratic_equal_length_scales_equal_isotropic(rng):
    X = rng.uniform(-2, 2, size=(8, 3))
    K_ard, G_ard = RationalQuadratic([0.8] * 3, alpha=1.7)(X, eval_gradient=True)
    K_iso, G_iso = RationalQuadratic(0.8, alpha=1.7)(X, eval_gradient=True)
    np.testing.assert_allclose(K_ard, K_iso, rtol=1e-14)
    np.testing.assert_allclose(G_ard[:, :, 0], G_iso[:, :, 0], rtol=1e-12)
    np.testing.assert_allclose(G_ard[:, :, 1:].sum(axis=2), G_iso[:, :, 1], rtol=1e-12,
                               atol=1e-15)


@pytest.mark.parametrize("length_scale, periodicity", [(0.8, 1.7), ([0.8], [1.7])])
@pytest.mark.parametrize("fixed", [None, "length_scale_bounds", "periodicity_bounds"])
def test_kernels_ard_exp_sine_one_dimension_equals_sklearn(length_scale, periodicity,
                                                           fixed, rng):
    X = rng.uniform(-3, 3, size=(9, 1))
    extra = {} if fixed is None else {fixed: "fixed"}
    ours = ExpSineSquared(length_scale, periodicity, **extra)
    ref = skk.ExpSineSquared(0.8, 1.7, **extra)
    np.testing.assert_array_equal(ours.theta, ref.theta)
    K, G = ours(X, eval_gradient=True)
    K_ref, G_ref = ref(X, eval_gradient=True)
    np.testing.assert_allclose(K, K_ref, rtol=1e-13)
    np.testing.assert_allclose(G, G_ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(ours(X, X[:4]), ref(X, X[:4]), rtol=1e-13)


# ------------------------------------------------- through the estimators
def _problem(rng):
    return make_problem(rng, n_samples=30, n_features=2)


@pytest.mark.parametrize("kernel", ard_params())
def test_kernels_ard_are_on_the_fast_path(kernel):
    assert isinstance(make_covariance(kernel + skk.WhiteKernel(), np.zeros((3, 2))),
                      FastCovariance)


@pytest.mark.parametrize("kernel", ard_params())
def test_kernels_ard_lml_gradient_matches_central_differences(kernel, rng):
    X, y = _problem(rng)
    kernel = skk.ConstantKernel(1.3) * kernel + skk.WhiteKernel(0.05)
    gpr = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    theta = kernel.theta + 0.1
    _, grad = gpr.log_marginal_likelihood(theta, eval_gradient=True)
    numeric = central_differences(lambda t: np.array(gpr.log_marginal_likelihood(t)), theta)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6 * np.abs(grad).max())


@pytest.mark.parametrize("kernel", ard_params())
def test_kernels_ard_lml_matches_sklearn_estimator_on_reference(kernel, rng):
    """scikit-learn's estimator calls our NumPy __call__; fastgp runs the
    lowered program: the two agree to 1e-8."""
    X, y = _problem(rng)
    kernel = skk.ConstantKernel(1.3) * kernel + skk.WhiteKernel(0.05)
    ours = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    ref = SklearnGPR(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    assert_regressor_matches_sklearn(ours, ref, [kernel.theta - 0.2], X[:5] + 0.2)


def test_kernels_ard_rational_quadratic_finds_the_irrelevant_input(rng):
    """A fit with one length scale per input: the column the target ignores
    gets a much longer length scale."""
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(1.5 * X[:, 0]) + 0.05 * rng.standard_normal(60)
    kernel = RationalQuadratic([1.0, 1.0], alpha=1.0) + skk.WhiteKernel(0.01)
    gpr = GaussianProcessRegressor(kernel).fit(X, y)
    fitted = gpr.kernel_.k1.length_scale
    assert fitted[1] > 5 * fitted[0]
    assert gpr.log_marginal_likelihood_value_ > gpr.log_marginal_likelihood(kernel.theta)


@pytest.mark.parametrize("ours, theirs", [(ExpSineSquared, skk.ExpSineSquared),
                                          (RationalQuadratic, skk.RationalQuadratic)])
def test_per_dimension_kernels_default_to_scikit_learns_starts_and_bounds(ours, theirs):
    """Built without arguments, fastgp's per-dimension kernel is
    scikit-learn's: the same starting values and bounds of the parameters
    they share."""
    mine, reference = ours().get_params(), theirs().get_params()
    shared = set(mine) & set(reference)
    assert any(name.endswith("_bounds") for name in shared)
    for name in shared:
        assert mine[name] == reference[name], name

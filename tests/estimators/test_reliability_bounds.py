"""Kernel bounds at the boundary: every estimator that optimises a kernel
(regressor, classifier, GPLVM) and every optimiser ("fmin_l_bfgs_b", "CG",
a callable) says which hyperparameter has unusable bounds, the bounds as
written, and what is wrong, with no numpy RuntimeWarning from taking their
logarithms; the bounds scikit-learn accepts (0 or inf to leave a side open,
equal bounds) still fit, also without RuntimeWarnings.

Hyperparameters are optimised in log space, so a bound must have a
logarithm: negative bounds (including -inf) cannot be used; 0 and inf can,
as open sides, except with restarts, which draw their starts between the
log-space bounds (docs/reliability.md, "Bad input at the boundary").
"""

import re
import warnings

import numpy as np
import pytest
import scipy.optimize
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GPLVM, GaussianProcessClassifier, GaussianProcessRegressor
from fastgp._optimize.minimize import BoxMap
from fastgp._validation import check_kernel_hyperparameters, kernel_log_bounds


def _lbfgsb(obj_func, initial_theta, bounds):
    """A user's optimiser, scikit-learn's contract."""
    result = scipy.optimize.minimize(obj_func, initial_theta, jac=True,
                                     method="L-BFGS-B", bounds=bounds)
    return result.x, result.fun


OPTIMIZERS = ["fmin_l_bfgs_b", "CG", _lbfgsb]
OPTIMIZER_IDS = ["lbfgsb", "cg", "callable"]


def _data(n=15, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.1 * X[:, 1]


def _fit(estimator, length_scale_bounds, optimizer, n_restarts=0):
    """Fit ``estimator`` ("regressor", "classifier", "gplvm") with a
    length scale bounded by ``length_scale_bounds``."""
    X, y = _data()
    kernel = C(1.0) * RBF(1.0, length_scale_bounds=length_scale_bounds)
    if estimator == "regressor":
        return GaussianProcessRegressor(kernel, optimizer=optimizer,
                                        n_restarts_optimizer=n_restarts,
                                        random_state=0).fit(X, y)
    if estimator == "classifier":
        return GaussianProcessClassifier(kernel, optimizer=optimizer,
                                         n_restarts_optimizer=n_restarts,
                                         random_state=0).fit(X, y > 0)
    return GPLVM(n_components=1, kernel=kernel + WhiteKernel(0.1), optimizer=optimizer,
                 max_iter=5, random_state=0).fit(X)


def _cases():
    """(estimator, optimizer) pairs: the GPLVM takes only the named ones."""
    for estimator in ("regressor", "classifier", "gplvm"):
        for optimizer, name in zip(OPTIMIZERS, OPTIMIZER_IDS):
            if estimator == "gplvm" and callable(optimizer):
                continue
            yield pytest.param(estimator, optimizer, id=f"{estimator}-{name}")


def _name(estimator):
    """The length scale's name in the kernel ``_fit`` builds."""
    return "k1__k2__length_scale" if estimator == "gplvm" else "k2__length_scale"


@pytest.mark.parametrize("bounds, written, problem", [
    ((-np.inf, np.inf), "(-inf, inf)", "lower bound is negative, so it has no logarithm"),
    ((-1.0, 10.0), "(-1, 10)", "lower bound is negative"),
    ((1e-5, -3.0), "(1e-05, -3)", "upper bound is negative"),
    ((0.0, 0.0), "(0, 0)", "upper bound is 0"),
    ((np.inf, np.inf), "(inf, inf)", "lower bound is infinite"),
    ((10.0, 1.0), "(10, 1)", "lower bound exceeds the upper bound"),
    ((np.nan, 1.0), "(nan, 1)", "NaN"),
], ids=["-inf-inf", "negative-lower", "negative-upper", "zero-zero", "inf-inf",
        "reversed", "nan"])
@pytest.mark.parametrize("estimator, optimizer", list(_cases()))
def test_bounds_unusable_ones_are_named_with_the_values_written(
        estimator, optimizer, bounds, written, problem):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from np.log on the way
        with pytest.raises(ValueError) as info:
            _fit(estimator, bounds, optimizer)
    message = str(info.value)
    assert f"bounds for {_name(estimator)}: {written}" in message
    assert problem in message
    assert "NaN" not in message or np.isnan(bounds).any()


@pytest.mark.parametrize("bounds, side", [((0.0, 10.0), "lower bound is 0"),
                                          ((1e-5, np.inf), "upper bound is infinite")],
                         ids=["zero-lower", "inf-upper"])
@pytest.mark.parametrize("estimator", ["regressor", "classifier"])
def test_bounds_open_sides_with_restarts_name_the_hyperparameter(estimator, bounds, side):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=re.escape(
                f"bounds for k2__length_scale: ({bounds[0]:g}, {bounds[1]:g})")) as info:
            _fit(estimator, bounds, "fmin_l_bfgs_b", n_restarts=1)
    message = str(info.value)
    # scikit-learn's sentence, then why, then what to do
    assert "requires that all bounds are finite" in message
    assert side in message and "log space" in message
    assert "n_restarts_optimizer=0" in message


@pytest.mark.parametrize("bounds", [(0.0, 10.0), (1e-5, np.inf), (0.0, np.inf), (1.0, 1.0)],
                         ids=["zero-lower", "inf-upper", "open", "equal"])
@pytest.mark.parametrize("estimator, optimizer", list(_cases()))
def test_bounds_scikit_learn_accepts_fit_without_runtime_warnings(estimator, optimizer,
                                                                  bounds):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)  # ConvergenceWarning and others
        fitted = _fit(estimator, bounds, optimizer)
    length_scale = fitted.kernel_.get_params()[_name(estimator)]
    # within the bounds in log space, up to the rounding of exp(log(bound))
    assert bounds[0] * (1 - 1e-12) <= length_scale <= bounds[1] * (1 + 1e-12)
    if bounds[0] == bounds[1]:
        assert length_scale == pytest.approx(bounds[0], rel=1e-12)


def test_bounds_vector_hyperparameter_names_the_element():
    kernel = RBF([1.0, 2.0], length_scale_bounds=[(1e-5, 1e5), (-2.0, 1e5)])
    with pytest.raises(ValueError, match=re.escape("length_scale[1]: (-2, 100000)")):
        check_kernel_hyperparameters(kernel)


def test_bounds_values_that_are_not_positive_are_named_without_runtime_warnings():
    kernel = C(-1.0) * RBF([1.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=re.escape(
                "not finite and positive: k1__constant_value = -1, "
                "k2__length_scale[1] = 0")):
            check_kernel_hyperparameters(kernel)


def test_bounds_fixed_hyperparameters_have_none_to_check():
    kernel = C(1.0, "fixed") * RBF(1.0, "fixed")
    assert check_kernel_hyperparameters(kernel, n_restarts=3).shape == (0, 2)
    # a fixed one beside a free one: only the free one's bounds
    kernel = C(1.0, "fixed") * RBF(1.0, (1e-2, 1e2))
    np.testing.assert_allclose(check_kernel_hyperparameters(kernel),
                               np.log([[1e-2, 1e2]]))


def test_bounds_log_bounds_are_scikit_learns_without_the_warning():
    kernel = C(1.0, (1e-3, 1e3)) * RBF(1.0, (0.0, np.inf))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = kernel_log_bounds(kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(ours, kernel.bounds)
    assert ours[1, 0] == -np.inf and ours[1, 1] == np.inf


def test_bounds_box_map_pins_a_coordinate_with_equal_bounds():
    box = BoxMap(np.array([[0.5, 0.5], [-1.0, 2.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        u = box.u(np.array([0.5, 0.0]))
        theta, slope = box.theta(u + 3.0)
    assert np.all(np.isfinite(u))
    assert theta[0] == 0.5 and slope[0] == 0.0
    assert -1.0 < theta[1] < 2.0 and slope[1] > 0.0

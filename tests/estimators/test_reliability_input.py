"""Bad input at the boundary: for every public method, NaN or
infinity, wrong dimensions, too few samples, empty arrays, non-numeric input,
a mismatched number of features, constant y, y of huge or tiny scale, and
float32 or integer input: a clear ValueError or a correct result, never a
crash inside Numba or LAPACK and never NaN returned silently.

Decision on fewer than two samples: GaussianProcessRegressor accepts one
sample, as scikit-learn does (a one-point posterior is well defined, and
scikit-learn's check_fit2d_1sample accepts either outcome); zero samples are
a ValueError.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor


def _kernel():
    return C(1.0) * RBF(1.0) + WhiteKernel(0.1)


def _data(n=12, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * X[:, 1]


@pytest.fixture(scope="module")
def fitted():
    X, y = _data()
    return GaussianProcessRegressor(_kernel(), random_state=0).fit(X, y)


def _with(X, i, j, value):
    X = np.array(X, dtype=np.float64)
    X[i, j] = value
    return X


# ---------------------------------------------------------------- fit
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_input_fit_rejects_non_finite_X(bad):
    X, y = _data()
    with pytest.raises(ValueError, match="NaN|infinity"):
        GaussianProcessRegressor(_kernel()).fit(_with(X, 3, 1, bad), y)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_input_fit_rejects_non_finite_y(bad):
    X, y = _data()
    y = y.copy()
    y[4] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        GaussianProcessRegressor(_kernel()).fit(X, y)
    with pytest.raises(ValueError, match="NaN|infinity"):
        GaussianProcessRegressor(_kernel()).fit(X, np.column_stack([y, y]))


@pytest.mark.parametrize("X, y, match", [
    (np.zeros((0, 2)), np.zeros(0), "0 sample"),
    (np.zeros((5, 0)), np.zeros(5), "0 feature"),
    (np.zeros(5), np.zeros(5), "2D array"),
    (np.zeros((5, 2, 2)), np.zeros(5), "dim"),
    (np.zeros((5, 2)), np.zeros((5, 2, 2)), "dim|shape"),
    (np.zeros((5, 2)), np.zeros(4), "inconsistent numbers of samples"),
    ([["a", "b"], ["c", "d"]], [1.0, 2.0], "convert|numeric|could not"),
    (np.zeros((3, 2)), ["a", "b", "c"], "convert|numeric|could not"),
    (np.zeros((3, 2), dtype=complex), np.zeros(3), "Complex"),
])
def test_input_fit_rejects_malformed_arrays(X, y, match):
    with pytest.raises(ValueError, match=match):
        GaussianProcessRegressor(_kernel()).fit(X, y)


@pytest.mark.parametrize("alpha, match", [
    (np.array([1e-2, np.nan, 1e-2]), "finite"),
    (np.array([1e-2, -1.0, 1e-2]), "negative"),
    (np.array([1e-2, 1e-2]), "same number of entries"),
    (np.inf, "alpha"),  # scikit-learn's parameter validation
])
def test_input_fit_rejects_bad_alpha(alpha, match):
    X, y = _data(3)
    with pytest.raises(ValueError, match=match):
        GaussianProcessRegressor(_kernel(), alpha=alpha).fit(X, y)


@pytest.mark.parametrize("kernel", [RBF(0.0), C(-1.0) * RBF(1.0), RBF(np.inf)],
                         ids=["length-0", "negative-constant", "length-inf"])
def test_input_fit_rejects_non_finite_hyperparameters(kernel):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log(0), log(-1)
        with pytest.raises(ValueError, match="not finite and positive"):
            GaussianProcessRegressor(kernel).fit(X, y)


@pytest.mark.parametrize("estimator", ["regressor", "classifier", "gplvm"])
def test_input_fit_names_a_negative_fixed_constant(estimator):
    # a fixed hyperparameter is not in theta, so its log is never taken: a
    # negative one made an indefinite matrix and a NaN LinAlgError
    from fastgp import GPLVM, GaussianProcessClassifier

    X, y = _data()
    kernel = C(-1.0, "fixed") * RBF()
    fit = {"regressor": lambda: GaussianProcessRegressor(kernel).fit(X, y),
           "classifier": lambda: GaussianProcessClassifier(kernel).fit(X, y > y.mean()),
           "gplvm": lambda: GPLVM(n_components=1, kernel=kernel).fit(
               np.column_stack([X[:, 0], y]))}[estimator]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the repr's sqrt(-1)
        with pytest.raises(ValueError, match=r"fixed hyperparameters that are negative or "
                                             r"not finite: k1__constant_value = -1\. "):
            fit()
    # zero is a fixed value scikit-learn users give (no noise): accepted
    GaussianProcessRegressor(C(1.0) * RBF() + WhiteKernel(0.0, "fixed"), alpha=1e-2).fit(X, y)


@pytest.mark.parametrize("column", ["text", "category", "string"])
@pytest.mark.parametrize("estimator", ["regressor", "classifier", "gplvm", "predict"])
def test_input_a_tables_column_that_is_not_numbers_is_named(column, estimator):
    # scikit-learn's message is "could not convert string to float: 'y'"
    pd = pytest.importorskip("pandas")
    from fastgp import GPLVM, GaussianProcessClassifier

    X, y = _data()
    words = ["x", "y"] * (len(y) // 2) + ["x"] * (len(y) % 2)
    table = pd.DataFrame({"a": X[:, 0], "colour": {
        "text": words, "category": pd.Categorical(words),
        "string": pd.Series(words, dtype="string")}[column]})
    fitted = GaussianProcessRegressor(_kernel()).fit(np.column_stack([X[:, 0], y]), y)
    call = {"regressor": lambda: GaussianProcessRegressor(_kernel()).fit(table, y),
            "classifier": lambda: GaussianProcessClassifier().fit(table, y > y.mean()),
            "gplvm": lambda: GPLVM(n_components=1).fit(table),
            "predict": lambda: fitted.predict(table)}[estimator]
    with pytest.raises(ValueError, match=r"X has columns that are not numbers: 'colour' "):
        call()
    # numbers, booleans and numeric categories are numbers
    numbers = pd.DataFrame({"a": X[:, 0], "flag": X[:, 1] > 0.5,
                            "level": pd.Categorical((X[:, 1] > 0.5).astype(int))})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        GaussianProcessRegressor(_kernel()).fit(numbers, y)


def test_input_one_sample_fits_like_sklearn():
    X, y = np.array([[0.3, -1.0]]), np.array([2.0])
    for normalize_y in (False, True):
        ours = GaussianProcessRegressor(_kernel(), normalize_y=normalize_y,
                                        optimizer=None).fit(X, y)
        theirs = SklearnGPR(_kernel(), normalize_y=normalize_y, optimizer=None).fit(X, y)
        Xq = np.array([[0.3, -1.0], [1.0, 1.0]])
        for ours_part, theirs_part in zip(ours.predict(Xq, return_std=True),
                                          theirs.predict(Xq, return_std=True)):
            np.testing.assert_allclose(ours_part, theirs_part, rtol=1e-10)
    # and with the optimiser: finite, and the mean at the point close to y
    gpr = GaussianProcessRegressor(_kernel()).fit(X, y)
    mean, std = gpr.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))


# ------------------------------------------------------------- predict
_METHODS = {
    "predict": lambda g, X: g.predict(X),
    "predict-std": lambda g, X: g.predict(X, return_std=True),
    "predict-cov": lambda g, X: g.predict(X, return_cov=True),
    "sample_y": lambda g, X: g.sample_y(X, 2),
    "score": lambda g, X: g.score(X, np.zeros(len(X))),
}


@pytest.mark.parametrize("method", _METHODS, ids=list(_METHODS))
@pytest.mark.parametrize("X, match", [
    (_with(np.zeros((3, 2)), 1, 0, np.nan), "NaN"),
    (_with(np.zeros((3, 2)), 1, 0, np.inf), "infinity"),
    (np.zeros((3, 3)), "features"),
    (np.zeros((3, 1)), "features"),
    (np.zeros((0, 2)), "0 sample"),
    (np.zeros(2), "2D array"),
    (np.zeros((3, 2, 1)), "dim"),
    ([["a", "b"]], "convert|numeric|could not"),
], ids=["nan", "inf", "more-features", "fewer-features", "empty", "1d", "3d", "strings"])
def test_input_prediction_methods_reject_bad_X(fitted, method, X, match):
    with pytest.raises(ValueError, match=match):
        _METHODS[method](fitted, X)


@pytest.mark.parametrize("method", _METHODS, ids=list(_METHODS))
def test_input_prediction_methods_before_fit_reject_bad_X(method):
    with pytest.raises(ValueError, match="NaN"):
        _METHODS[method](GaussianProcessRegressor(_kernel()),
                         _with(np.zeros((3, 2)), 0, 0, np.nan))


def test_input_log_marginal_likelihood_rejects_wrong_theta_length(fitted):
    with pytest.raises(ValueError, match="theta has"):
        fitted.log_marginal_likelihood(np.zeros(7))


def test_input_log_marginal_likelihood_at_nan_theta_is_minus_inf_not_a_crash(fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = fitted.log_marginal_likelihood(np.full(3, np.nan))
    assert value == -np.inf


# ----------------------------------------------------------- awkward y
@pytest.mark.parametrize("normalize_y", [False, True])
def test_input_constant_y_predicts_the_constant(normalize_y):
    X, _ = _data()
    y = np.full(len(X), 3.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpr = GaussianProcessRegressor(_kernel(), normalize_y=normalize_y).fit(X, y)
    mean, std = gpr.predict(X, return_std=True)
    np.testing.assert_allclose(mean, 3.25, atol=1e-3)
    assert np.all(np.isfinite(std))


@pytest.mark.parametrize("scale", [1e-200, 1e-30, 1e30, 1e200, 1e300])
def test_input_extreme_y_scale_with_normalize_y_scales_the_predictions(scale):
    # normalize_y makes the fit scale-free: predictions scale exactly with y
    X, y = _data()
    base = GaussianProcessRegressor(_kernel(), normalize_y=True, optimizer=None).fit(X, y)
    big = GaussianProcessRegressor(_kernel(), normalize_y=True, optimizer=None).fit(
        X, y * scale)
    Xq = X[:4] + 0.1
    mean, std = big.predict(Xq, return_std=True)
    base_mean, base_std = base.predict(Xq, return_std=True)
    np.testing.assert_allclose(mean / scale, base_mean, rtol=1e-9)
    np.testing.assert_allclose(std / scale, base_std, rtol=1e-9)


@pytest.mark.parametrize("scale", [1e-200, 1e-30, 1e30, 1e100])
def test_input_extreme_y_scale_without_normalize_y_is_linear(scale):
    # the posterior mean is linear in y at fixed hyperparameters
    X, y = _data()
    base = GaussianProcessRegressor(_kernel(), optimizer=None).fit(X, y)
    scaled = GaussianProcessRegressor(_kernel(), optimizer=None).fit(X, y * scale)
    np.testing.assert_allclose(scaled.predict(X) / scale, base.predict(X), rtol=1e-9)
    assert np.isfinite(scaled.log_marginal_likelihood_value_)


def test_input_overflowing_y_without_normalize_y_is_a_clear_error():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(ValueError, match="normalize_y=True"):
            GaussianProcessRegressor(_kernel()).fit(X, y * 1e300)


# ------------------------------------------------------- dtype conversion
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.float16])
def test_input_other_dtypes_are_converted_and_give_the_float64_result(dtype):
    rng = np.random.default_rng(3)
    X = rng.integers(-3, 4, size=(10, 2)).astype(dtype)
    y = rng.integers(-5, 6, size=10).astype(dtype)
    X64, y64 = X.astype(np.float64), y.astype(np.float64)
    ours = GaussianProcessRegressor(_kernel(), random_state=0).fit(X, y)
    reference = GaussianProcessRegressor(_kernel(), random_state=0).fit(X64, y64)
    assert ours.X_train_.dtype == np.float64
    np.testing.assert_array_equal(ours.kernel_.theta, reference.kernel_.theta)
    Xq = (X[:4] + 1).astype(dtype)
    np.testing.assert_array_equal(ours.predict(Xq), reference.predict(Xq.astype(np.float64)))


def test_input_python_lists_are_accepted():
    X, y = _data(6)
    gpr = GaussianProcessRegressor(_kernel(), optimizer=None).fit(X.tolist(), y.tolist())
    np.testing.assert_array_equal(gpr.predict(X[:2].tolist()), gpr.predict(X[:2]))


def test_input_extreme_X_magnitudes_give_finite_results_or_a_clear_error():
    X = np.array([[0.0], [1e150], [-1e150], [1e-300], [3.0]])
    y = np.array([0.0, 1.0, -1.0, 0.5, 0.2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr = GaussianProcessRegressor(_kernel()).fit(X, y)
    mean, std = gpr.predict(np.array([[1e150], [2.0]]), return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))


def test_input_failed_refit_leaves_the_previous_fit_intact(fitted):
    import copy
    gpr = copy.deepcopy(fitted)
    X, _ = _data()
    before = gpr.predict(X[:3])
    with pytest.raises(ValueError, match="NaN"):
        gpr.fit(X, np.full(len(X), np.nan))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.raises(ValueError, match="overflow"):
            gpr.fit(X, np.sin(X[:, 0]) * 1e300)  # fails after optimising
    np.testing.assert_array_equal(gpr.predict(X[:3]), before)

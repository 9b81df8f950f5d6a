"""Fuzzing the public API (issue 6): random shapes, values (extremes and
non-finite ones included) and parameters; every outcome is a correct result
or a documented exception.

Documented exceptions (docs/reliability.md): ValueError for bad input or an
unusable fit (numpy.linalg.LinAlgError, which the kernel-not-positive-definite
error is, subclasses it). Anything else (a TypeError or IndexError from deep
inside, a ZeroDivisionError, a crash in Numba or LAPACK) fails the test, and
so does a result that is not finite or not of the documented shape.
"""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    ExpSineSquared,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GPLVM, GaussianProcessRegressor

FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPECIAL = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e150, -1e150, 1e300, -1e300,
           np.finfo(np.float64).max, np.nan, np.inf, -np.inf]

#: Mostly ordinary numbers, sometimes an extreme or non-finite one (one_of
#: draws its branches about equally often, so the ordinary branch is repeated).
_ordinary = st.floats(-5.0, 5.0, allow_nan=False, width=64)
values = st.one_of(*([_ordinary] * 14), st.sampled_from(SPECIAL),
                   st.floats(allow_nan=True, allow_infinity=True, width=64))

KERNELS = [
    lambda: RBF(1.0),
    lambda: C(1.0) * RBF(1.0) + WhiteKernel(0.1),
    lambda: Matern(1.0, nu=1.5) + WhiteKernel(1e-3, (1e-12, 1.0)),
    lambda: RationalQuadratic(1.0, 1.0),
    lambda: C(2.0) * Matern(0.5, nu=0.5),
    lambda: DotProduct(1.0) + WhiteKernel(0.1),
    lambda: ExpSineSquared(1.0, 2.0) + WhiteKernel(0.1),
    lambda: RBF([1.0, 2.0]),  # ARD: valid only for two features
    lambda: RBF(1e5, "fixed"),  # a rank-one K: jitter
]

ALPHAS = [1e-10, 1e-10, 0.0, 0.0, 1e-2, 1.0, -1.0, np.nan, "array", "array"]

#: What the public API may raise (documented in docs/reliability.md).
DOCUMENTED = (ValueError,)


@st.composite
def fit_problems(draw):
    n = draw(st.integers(0, 7))
    d = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3]))
    X = draw(arrays(np.float64, (n, d), elements=values))
    n_targets = draw(st.sampled_from([None, None, 1, 2]))
    y_shape = (n,) if n_targets is None else (n, n_targets)
    y = draw(arrays(np.float64, y_shape, elements=values))
    if draw(st.booleans()):  # duplicated rows, the classic singular K
        X = np.vstack([X, X])
        y = np.concatenate([y, y + draw(st.sampled_from([0.0, 0.1]))])
    if draw(st.integers(0, 5)) == 0:
        with np.errstate(all="ignore"):  # NaN to int is some integer: still data
            X = X.astype(draw(st.sampled_from([np.float32, np.int64])))
    alpha = draw(st.sampled_from(ALPHAS))
    if alpha == "array":
        alpha = np.full(len(y), 1e-3)
    params = dict(
        kernel=draw(st.sampled_from(KERNELS))(),
        alpha=alpha,
        normalize_y=draw(st.booleans()),
        optimizer=draw(st.sampled_from([None, "fmin_l_bfgs_b", "fmin_l_bfgs_b", "CG"])),
        n_restarts_optimizer=draw(st.sampled_from([0, 0, 1])),
        random_state=0,
    )
    m = draw(st.integers(0, 4))
    dq = draw(st.sampled_from([d, d, d, d + 1]))
    Xq = draw(arrays(np.float64, (m, dq), elements=values))
    return X, y, params, Xq


def _call(func, *args, **kwargs):
    """func's result, or None if it raised a documented exception."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                return func(*args, **kwargs)
            except DOCUMENTED as exc:
                assert str(exc), f"{type(exc).__name__} without a message"
                return None


def _assert_finite(*parts):
    for part in parts:
        assert np.all(np.isfinite(part)), part


def _assert_fitted_model_is_consistent(gpr):
    X = gpr.X_train_
    K = gpr.kernel_(X)
    if not np.all(np.isfinite(K)):
        return  # scikit-learn's kernel object overflows where fastgp's did not
    K[np.diag_indices_from(K)] += gpr._diag_add(len(X)) + gpr.jitter_
    scale = max(float(np.max(np.abs(np.diag(K)))), 1e-300)
    np.testing.assert_allclose(gpr.L_ @ gpr.L_.T, K, rtol=0, atol=1e-9 * scale)
    assert np.isfinite(gpr.log_marginal_likelihood_value_)
    _assert_finite(gpr.alpha_)


@FUZZ
@given(fit_problems())
def test_fuzz_regressor_fit_and_predict(problem):
    X, y, params, Xq = problem
    gpr = GaussianProcessRegressor(**params)
    if _call(gpr.fit, X, y) is None:
        event("fit: ValueError")
        assert not hasattr(gpr, "L_")  # a failed fit leaves nothing half-made
        return
    event("fit: fitted" + (" with jitter" if gpr.jitter_ else ""))
    _assert_fitted_model_is_consistent(gpr)
    n_targets = 1 if np.ndim(y) == 1 else y.shape[1]
    # scikit-learn's shapes: one target column is squeezed
    out_shape = (len(Xq),) if n_targets == 1 else (len(Xq), n_targets)

    mean = _call(gpr.predict, Xq)
    if mean is not None:
        assert mean.shape == out_shape
        _assert_finite(mean)
    result = _call(gpr.predict, Xq, return_std=True)
    if result is not None:
        mean, std = result
        assert mean.shape == out_shape and std.shape == out_shape
        _assert_finite(mean, std)
        assert np.all(std >= 0)
    result = _call(gpr.predict, Xq, return_cov=True)
    if result is not None:
        mean, cov = result
        assert cov.shape[:2] == (len(Xq), len(Xq))
        _assert_finite(mean, cov)
    samples = _call(gpr.sample_y, Xq, 2)
    if samples is not None:
        _assert_finite(samples)
        assert samples.shape[0] == len(Xq) and samples.shape[-1] == 2
    theta = gpr.kernel_.theta
    value = _call(gpr.log_marginal_likelihood, theta)
    if value is not None:
        assert not np.isnan(value)
    result = _call(gpr.log_marginal_likelihood, theta + 0.5, eval_gradient=True)
    if result is not None and np.isfinite(result[0]):
        _assert_finite(result[1])


@FUZZ
@given(arrays(np.float64, st.tuples(st.integers(0, 4), st.integers(0, 3)), elements=values),
       st.sampled_from(KERNELS), st.booleans())
def test_fuzz_regressor_prior_predict(Xq, make_kernel, want_std):
    gpr = GaussianProcessRegressor(make_kernel())
    result = _call(gpr.predict, Xq, return_std=want_std)
    if result is not None:
        _assert_finite(*(result if want_std else (result,)))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(0, 8), st.integers(0, 3), st.integers(1, 3), st.data())
def test_fuzz_gplvm_fit_transform(n, d, q, data):
    Y = data.draw(arrays(np.float64, (n, d), elements=values))
    model = GPLVM(n_components=q, max_iter=5, random_state=0,
                  init=data.draw(st.sampled_from(["pca", "random"])))
    if _call(model.fit, Y) is None:
        return
    assert model.embedding_.shape == (n, q)
    _assert_finite(model.embedding_, model.log_marginal_likelihood_value_)
    Y_new = data.draw(arrays(np.float64, (data.draw(st.integers(0, 3)), d), elements=values))
    Z = _call(model.transform, Y_new)
    if Z is not None:
        assert Z.shape == (len(Y_new), q)
        _assert_finite(Z)
    latent = data.draw(arrays(np.float64, (2, q), elements=values))
    back = _call(model.inverse_transform, latent)
    if back is not None:
        _assert_finite(back)


def test_fuzz_documented_exceptions_are_what_the_doc_says():
    # the reliability page lists ValueError; LinAlgError is one
    assert issubclass(np.linalg.LinAlgError, ValueError)
    with pytest.raises(ValueError):
        GaussianProcessRegressor().fit(np.zeros((2, 1)), [np.nan, 1.0])

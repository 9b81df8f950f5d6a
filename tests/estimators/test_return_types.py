"""Every public return value has scikit-learn's type (numpy.float64 where it
returns one, arrays of its dtype and shape): code written for scikit-learn's
estimators keeps working, float32 arithmetic included under NumPy 2."""

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GPLVM, GaussianProcessClassifier, GaussianProcessRegressor


def _kind(value):
    """What a caller can rely on: the type, and an array's dtype and shape."""
    if isinstance(value, tuple):
        return tuple(_kind(v) for v in value)
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype, value.shape)
    return type(value)


def _regression(n_targets):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(30, 2))
    y = np.sin(X[:, 0]) if n_targets == 1 else np.column_stack([np.sin(X[:, 0]),
                                                               np.cos(X[:, 1])])
    return X, y, rng.uniform(-2, 2, size=(5, 2))


@pytest.mark.parametrize("n_targets", [1, 2])
def test_return_types_regressor_are_sklearns(n_targets):
    X, y, Xq = _regression(n_targets)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    ours = GaussianProcessRegressor(kernel, random_state=0).fit(X, y)
    theirs = SklearnGPR(kernel, random_state=0).fit(X, y)
    theta = theirs.kernel_.theta
    for call in (lambda m: m.log_marginal_likelihood_value_,
                 lambda m: m.log_marginal_likelihood(),
                 lambda m: m.log_marginal_likelihood(theta),
                 lambda m: m.log_marginal_likelihood(theta, eval_gradient=True),
                 lambda m: m.predict(Xq),
                 lambda m: m.predict(Xq, return_std=True),
                 lambda m: m.predict(Xq, return_cov=True),
                 lambda m: m.sample_y(Xq, 3),
                 lambda m: m.score(X, y),
                 lambda m: m.alpha_,
                 lambda m: m.kernel_.theta):
        assert _kind(call(ours)) == _kind(call(theirs))
    # the idiom that Python floats break under NumPy 2
    eps = np.float32(1e-3)
    assert (ours.log_marginal_likelihood(theta) - eps).dtype == np.float64


@pytest.mark.parametrize("n_classes", [2, 3])
def test_return_types_classifier_are_sklearns(n_classes):
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(40, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5][:n_classes - 1])
    kernel = C(1.0) * RBF(1.0)
    ours = GaussianProcessClassifier(kernel, random_state=0).fit(X, y)
    theirs = SklearnGPC(kernel, random_state=0).fit(X, y)
    calls = [lambda m: m.log_marginal_likelihood_value_,
             lambda m: m.log_marginal_likelihood(),
             lambda m: m.log_marginal_likelihood(m.kernel_.theta[:2]),
             lambda m: m.predict(X[:5]),
             lambda m: m.predict_proba(X[:5]),
             lambda m: m.score(X, y)]
    if n_classes == 2:
        calls.append(lambda m: m.log_marginal_likelihood(m.kernel_.theta,
                                                         eval_gradient=True))
    for call in calls:
        assert _kind(call(ours)) == _kind(call(theirs))


def test_return_types_gplvm_likelihood_is_numpys():
    Y = np.random.default_rng(2).standard_normal((20, 3))
    with pytest.warns(Warning):  # ConvergenceWarning at max_iter=5
        model = GPLVM(n_components=1, max_iter=5, random_state=0).fit(Y)
    assert type(model.log_marginal_likelihood_value_) is np.float64

"""What fastgp relies on where scikit-learn has no public API (fastgp/_validation.py
lists the private names): each test pins one behaviour, so that a scikit-learn
release that changes it fails here, by name, rather than somewhere inside a fit."""

import inspect
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF

from fastgp import GPLVM, GaussianProcessClassifier, GaussianProcessRegressor
from fastgp._validation import count_samples, fit_context, nonzero_scale, warn_at_bounds


@pytest.mark.parametrize("estimator, parameter", [
    (GaussianProcessRegressor(n_restarts_optimizer=-1), "n_restarts_optimizer"),
    (GaussianProcessRegressor(optimizer="BFGS"), "optimizer"),
    (GaussianProcessRegressor(alpha=-1.0), "alpha"),
    (GaussianProcessRegressor(n_targets=0), "n_targets"),
    (GPLVM(tol=-1.0), "tol"),
    (GPLVM(init="spectral"), "init"),
    (GPLVM(n_components=0), "n_components"),
])
def test_contract_fit_context_checks_parameter_constraints_before_fit(estimator, parameter):
    # sklearn.base._fit_context validates _parameter_constraints (built from
    # sklearn.utils._param_validation's Interval and StrOptions) before fit
    # runs: a ValueError naming the parameter, and nothing fitted
    X = np.linspace(0, 1, 8).reshape(-1, 1)
    with pytest.raises(ValueError, match=f"'{parameter}' parameter"):
        estimator.fit(np.hstack([X, X**2]), X[:, 0])
    assert not [name for name in vars(estimator) if name.endswith("_")]


@pytest.mark.parametrize("cls", [GaussianProcessRegressor, GaussianProcessClassifier, GPLVM])
def test_contract_constraints_name_every_constructor_parameter(cls):
    parameters = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(cls._parameter_constraints) == parameters


@pytest.mark.parametrize("ours, theirs", [(GaussianProcessRegressor, SklearnGPR),
                                          (GaussianProcessClassifier, SklearnGPC)])
def test_contract_constraints_are_sklearns_plus_fastgps(ours, theirs):
    # fastgp spells scikit-learn's constraints out; they must stay scikit-learn's
    ours, theirs = ours._parameter_constraints, theirs._parameter_constraints
    for name, constraints in theirs.items():
        if name == "optimizer":  # fastgp adds "CG"
            continue
        assert [str(c) for c in ours[name]] == [str(c) for c in constraints], name


def test_contract_fit_context_adds_exactly_one_frame_between_caller_and_fit():
    # fastgp attributes its warnings to the first frame outside fastgp and
    # scikit-learn; this pins that _fit_context's wrapper lives in scikit-learn
    from sklearn.base import _fit_context

    assert fit_context is _fit_context

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self):
        return inspect.stack()[1].filename, inspect.stack()[2].filename

    class Estimator(GaussianProcessRegressor):
        pass

    wrapper_file, caller_file = fit(Estimator())
    assert wrapper_file == inspect.getsourcefile(_fit_context)
    assert caller_file == __file__


def test_contract_kernel_check_bounds_params_warns_at_a_bound():
    # the regressor calls Kernel._check_bounds_params after the optimiser, as
    # scikit-learn's own regressor does
    kernel = RBF(1.0, length_scale_bounds=(1e-2, 1.0))
    with pytest.warns(ConvergenceWarning, match="length_scale"):
        warn_at_bounds(kernel)
    kernel = RBF(0.5, length_scale_bounds=(1e-2, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_at_bounds(kernel)


@pytest.mark.parametrize("scale", [
    np.array([0.0, 1e-16, 2.3, 1e-300]), np.float64(0.0), np.float64(1e-17),
    np.float64(4.0), np.array(1e-17)])
def test_contract_nonzero_scale_is_sklearns_rule(scale):
    from sklearn.preprocessing._data import _handle_zeros_in_scale

    expected = _handle_zeros_in_scale(np.copy(scale) if isinstance(scale, np.ndarray)
                                      else scale, copy=True)
    ours = nonzero_scale(np.copy(scale) if isinstance(scale, np.ndarray) else scale)
    np.testing.assert_array_equal(ours, expected)


def test_contract_count_samples_agrees_with_sklearn():
    from sklearn.utils.validation import _num_samples

    pd = pytest.importorskip("pandas")
    for X in (np.zeros((5, 2)), [[1.0], [2.0]], ["a", "b", "c"],
              pd.DataFrame({"a": [1, 2, 3]}), np.zeros(4)):
        assert count_samples(X) == _num_samples(X)
    for X in (3.0, np.float64(2.0), GaussianProcessRegressor(), object()):
        assert count_samples(X) is None
        with pytest.raises(TypeError):
            _num_samples(X)


def test_contract_gplvm_tags_preserve_float64_and_say_transformer():
    tags = GPLVM().__sklearn_tags__()
    assert tags.transformer_tags is not None
    assert tags.transformer_tags.preserves_dtype == ["float64"]
    assert GaussianProcessRegressor().__sklearn_tags__().estimator_type == "regressor"


@pytest.mark.parametrize("ours, theirs", [(GaussianProcessRegressor, SklearnGPR),
                                          (GaussianProcessClassifier, SklearnGPC)])
def test_contract_sklearns_constructor_stores_each_argument(ours, theirs):
    # fastgp's estimators subclass scikit-learn's and call its __init__ for
    # scikit-learn's own parameters (the classifier) or mirror it (the
    # regressor): get_params must name and return each one
    estimator = ours(optimizer=None, n_restarts_optimizer=2)
    params = estimator.get_params(deep=False)
    assert set(inspect.signature(theirs.__init__).parameters) - {"self"} <= set(params)
    assert params["optimizer"] is None and params["n_restarts_optimizer"] == 2

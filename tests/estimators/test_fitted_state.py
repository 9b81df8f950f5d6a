"""A fitted regressor's predictions read fitted state only: a constructor
parameter set after the fit changes nothing until the next fit
(scikit-learn's contract for ``predict``; fastgp extends it to
``log_marginal_likelihood(theta)``, whose alpha is the fit's: docs/differences.md).

Every solver, every parameter: each is set in turn to another valid value,
then all at once, and predict (mean, std, covariance), sample_y,
log_marginal_likelihood (with and without theta) and score must give the same
bits as before.
"""

import warnings

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor

#: Solver -> parameters under which its fit is quick on 60 points.
SOLVERS = {
    "cholesky": {},
    "iterative": {"preconditioner_rank": 20, "n_probes": 8},
    "vecchia": {"n_neighbors": 8},
}

#: Parameter -> another valid value (every constructor parameter: the test
#: below checks the list is complete).
OTHER_VALUES = {
    "kernel": RBF(0.3),
    "alpha": 0.5,
    "optimizer": "CG",
    "n_restarts_optimizer": 3,
    "max_iter": 2,
    "max_time": 1.0,
    "normalize_y": False,
    "copy_X_train": False,
    "n_targets": 4,
    "random_state": 123,
    "verbose": 1,
    "solver": None,  # another solver: set per case
    "cg_tol": 0.3,
    "n_probes": 2,
    "preconditioner_rank": 3,
    "max_cg_iter": 4,
    "n_neighbors": 3,
    "n_neighbors_predict": 2,
    "ordering": "random",
    "n_jobs": 2,
    "device": "cuda",
    "mean": "linear",
    "mean_method": "profile",
}


def _data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2.0, 2.0, size=(60, 2))
    y = np.sin(2.0 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(60)
    return X, y, rng.uniform(-2.2, 2.2, size=(9, 2))


def _answers(gpr, X, y, X_query):
    """Everything a fitted model answers, as arrays."""
    theta = gpr.kernel_.theta + 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, std = gpr.predict(X_query, return_std=True)
        _, cov = gpr.predict(X_query, return_cov=True)
        value, grad = gpr.log_marginal_likelihood(theta, eval_gradient=True)
        return (mean, std, cov, gpr.sample_y(X_query, 3, random_state=0), np.array(value),
                grad, np.array(gpr.log_marginal_likelihood()),
                np.array(gpr.score(X, y)))


def _assert_same(before, after, what):
    for a, b in zip(before, after):
        assert np.array_equal(a, b), f"predictions moved after {what}"


def test_fitted_state_every_constructor_parameter_has_another_value():
    names = set(GaussianProcessRegressor().get_params(deep=False))
    assert names == set(OTHER_VALUES), sorted(names ^ set(OTHER_VALUES))


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_fitted_state_predictions_do_not_move_after_set_params(solver):
    X, y, X_query = _data()
    params = dict(SOLVERS[solver], solver=solver, normalize_y=True, random_state=0,
                  alpha=1e-3, n_neighbors_predict=None if solver != "vecchia" else 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr = GaussianProcessRegressor(C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.05),
                                       max_iter=15, **params).fit(X, y)
    before = _answers(gpr, X, y, X_query)
    others = dict(OTHER_VALUES, solver=next(s for s in SOLVERS if s != solver))
    changed = {}
    for name, value in others.items():
        if gpr.get_params(deep=False)[name] == value and not hasattr(value, "theta"):
            continue  # the same value: nothing to test
        gpr.set_params(**{name: value})
        changed[name] = value
        _assert_same(before, _answers(gpr, X, y, X_query), f"set_params({name}=...)")
    assert {"alpha", "solver", "kernel", "normalize_y"} <= set(changed)
    _assert_same(before, _answers(gpr, X, y, X_query), "setting every parameter")

"""A mean estimated with the covariance, through the estimator
(docs/design.md, "A mean estimated with the covariance"): ``mean=None`` is
the regressor as it was; the coefficients against NumPy's generalised least
squares at N = 2,000; bad bases are a ValueError that says what to do and
leave a fitted estimator as it was; sample_y, score and the fitted
likelihood agree with the predictions; Vecchia's fitted layout is reused by
``log_marginal_likelihood(theta)``. The solvers' values, gradients and
predictions with each mean against the dense reference are the conformance
battery's (tests/_conformance.py, MeanConformance).
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.metrics import r2_score

from fastgp import GaussianProcessRegressor
from fastgp._solvers import mean as mean_module
from fastgp._solvers.vecchia import objective as vecchia_objective

#: Solver -> parameters under which a fit on 60 points is quick.
SOLVERS = {
    "cholesky": {},
    "iterative": {"preconditioner_rank": 60, "cg_tol": 1e-10},
    "vecchia": {"n_neighbors": 10},
}


def trend_data(n=60, seed=3):
    """X (n, 2) on [0, 1]^2 and y: a linear trend plus a smooth field and
    noise; query points (9, 2)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n, 2))
    y = (4.0 + 3.0 * X[:, 0] - 2.0 * X[:, 1] + np.sin(5.0 * X[:, 0]) * np.cos(4.0 * X[:, 1])
         + 0.05 * rng.standard_normal(n))
    return X, y, rng.uniform(0.0, 1.0, size=(9, 2))


def kernel():
    return C(1.0) * Matern(0.3, nu=1.5) + WhiteKernel(0.01)


def quiet_fit(gpr, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpr.fit(X, y)


def answers(gpr, X, y, X_query):
    """Everything a fitted model answers, as arrays."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, std = gpr.predict(X_query, return_std=True)
        _, cov = gpr.predict(X_query, return_cov=True)
        value, grad = gpr.log_marginal_likelihood(gpr.kernel_.theta + 0.1,
                                                  eval_gradient=True)
        return (mean, std, cov, gpr.sample_y(X_query, 2, random_state=0), np.array(value),
                grad, np.array(gpr.log_marginal_likelihood_value_), gpr.alpha_,
                gpr.kernel_.theta, np.array(gpr.score(X, y)))


def assert_same_bits(first, second):
    for a, b in zip(first, second, strict=True):
        assert np.array_equal(a, b)


# ------------------------------------------------------------- mean=None
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_mean_none_is_the_estimator_without_the_parameter_bit_for_bit(solver, monkeypatch):
    # mean=None (the default) gives the bits of an estimator built without
    # the parameter, and never reaches the mean's code: its GLS and the
    # augmented prediction raise here
    X, y, X_query = trend_data()
    without = quiet_fit(GaussianProcessRegressor(kernel(), solver=solver, random_state=0,
                                                 **SOLVERS[solver]), X, y)

    def forbidden(*args, **kwargs):
        raise AssertionError("mean=None reached the mean's code")

    monkeypatch.setattr(mean_module.MeanTerm, "whitened", forbidden)
    monkeypatch.setattr(mean_module.MeanTerm, "solved", forbidden)
    monkeypatch.setattr(mean_module, "mean_term", lambda spec, *a: None if spec is None
                        else forbidden())
    monkeypatch.setattr(mean_module.FittedMean, "residuals", forbidden)
    explicit = quiet_fit(GaussianProcessRegressor(kernel(), solver=solver, random_state=0,
                                                  mean=None, mean_method="profile",
                                                  **SOLVERS[solver]), X, y)
    assert explicit.mean_coef_ is None and explicit.mean_coef_cov_ is None
    assert_same_bits(answers(without, X, y, X_query), answers(explicit, X, y, X_query))


#: What the estimator gave before it had a mean (commit 3ade45b), on
#: trend_data() with kernel() and random_state=0: the fitted log marginal
#: likelihood, the predictive mean and standard deviation at the first three
#: query points. Checked bit for bit on the machine and releases they were
#: written with; here to 1e-8 relative: another CPU may round the kernel's
#: exp differently (docs/design.md, "Parallel passes, determinism and
#: threads"), and the fit's end point moves by about 1e-9 relative between
#: SciPy releases (SciPy 1.15 rewrote L-BFGS-B), as the minimum-version CI
#: stage measures. A mean=None that reached the mean's code would move these
#: by far more; the same-process bit-for-bit check is the test above.
SAVED = {
    "cholesky": ["0x1.2a3e4ec434fe3p+5", "0x1.b6ec4971e1000p+1", "0x1.87cebb2a1ab80p+2",
                 "0x1.648e93b008480p+2", "0x1.2e7b91f0e93d8p-4", "0x1.03771ec0b3795p-4",
                 "0x1.a6291bc40a386p-3"],
    "iterative": ["0x1.2a3e4ec4395ebp+5", "0x1.b6ec4971e1de4p+1", "0x1.87cebb2a1a9abp+2",
                  "0x1.648e93b009386p+2", "0x1.2e7b91f0eca02p-4", "0x1.03771ec0b5727p-4",
                  "0x1.a6291bc41021fp-3"],
    "vecchia": ["0x1.1e71a5efdf2fbp+5", "0x1.b6fdc6a7e5b9dp+1", "0x1.87e6170cf2914p+2",
                "0x1.64d932ffce390p+2", "0x1.2f8f3e6eb3c8fp-4", "0x1.00353549d274ep-4",
                "0x1.b0c2b0e1026cep-3"],
}


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_mean_none_reproduces_the_values_saved_before_the_mean(solver):
    X, y, X_query = trend_data()
    gpr = quiet_fit(GaussianProcessRegressor(kernel(), solver=solver, random_state=0,
                                             **SOLVERS[solver]), X, y)
    mean, std = gpr.predict(X_query[:3], return_std=True)
    got = np.concatenate([[gpr.log_marginal_likelihood_value_], mean, std])
    expected = np.array([float.fromhex(h) for h in SAVED[solver]])
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=0)


# ------------------------------------------------------ the coefficients
@pytest.mark.parametrize("method", ["profile", "reml"])
def test_mean_coefficients_at_2000_equal_numpy_gls(method):
    # the Cholesky path's mean_coef_ and mean_coef_cov_ against generalised
    # least squares written with NumPy at the same K (R&W 2006, eq. 2.42)
    rng = np.random.default_rng(0)
    n = 2000
    X = rng.uniform(0.0, 10.0, size=(n, 2))
    y = 5.0 + 0.3 * X[:, 0] - 0.2 * X[:, 1] + np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    k = C(0.8) * Matern(1.5, nu=1.5) + WhiteKernel(0.02)
    gpr = GaussianProcessRegressor(k, optimizer=None, mean="linear", mean_method=method,
                                   solver="cholesky").fit(X, y)
    H = np.column_stack([np.ones(n), X])
    K = k(X) + 1e-10 * np.eye(n)
    KinvH = np.linalg.solve(K, H)
    cov = np.linalg.inv(H.T @ KinvH)
    beta = cov @ (KinvH.T @ y)
    np.testing.assert_allclose(gpr.mean_coef_, beta, rtol=1e-8, atol=1e-8 * np.abs(beta).max())
    np.testing.assert_allclose(gpr.mean_coef_cov_, cov, rtol=1e-8,
                               atol=1e-8 * np.abs(cov).max())


def test_mean_coefficients_take_normalize_y_into_account():
    # normalize_y: the same coefficients (the intercept takes the shift) and
    # the same predictions as without it, at the same kernel
    X, y, X_query = trend_data()
    fits = [GaussianProcessRegressor(kernel(), optimizer=None, mean="linear",
                                     normalize_y=normalize).fit(X, y)
            for normalize in (False, True)]
    # the same model up to the targets' scale: the kernel is the one given,
    # so divide the normalised fit's signal and noise out by scaling y
    scale = np.std(y)
    scaled = GaussianProcessRegressor(kernel(), optimizer=None, mean="linear").fit(
        X, (y - np.mean(y)) / scale)
    coef = scaled.mean_coef_ * scale
    coef[0] += np.mean(y)
    np.testing.assert_allclose(fits[1].mean_coef_, coef, rtol=1e-10)
    np.testing.assert_allclose(fits[1].mean_coef_cov_, scaled.mean_coef_cov_ * scale**2,
                               rtol=1e-10)
    np.testing.assert_allclose(fits[1].predict(X_query),
                               scaled.predict(X_query) * scale + np.mean(y), rtol=1e-10)
    assert fits[0].mean_coef_.shape == (3,) and fits[0].mean_coef_cov_.shape == (3, 3)


def test_mean_coefficient_shapes_follow_the_targets():
    X, y, _ = trend_data()
    Y = np.column_stack([y, 2.0 * y + X[:, 0]])
    gpr = GaussianProcessRegressor(kernel(), optimizer=None, mean="constant",
                                   normalize_y=True).fit(X, Y)
    assert gpr.mean_coef_.shape == (1, 2)
    assert gpr.mean_coef_cov_.shape == (1, 1, 2)
    # one column given as a column: (p, 1) and one (p, p)
    gpr.fit(X, y[:, None])
    assert gpr.mean_coef_.shape == (1, 1) and gpr.mean_coef_cov_.shape == (1, 1)


# --------------------------------------------------------- a fitted model
@pytest.mark.parametrize("method", ["profile", "reml"])
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_mean_fitted_model_is_consistent(solver, method):
    # the optimiser raised the objective, which log_marginal_likelihood
    # returns with a gradient about zero or on a bound; sample_y draws from
    # predict's mean and covariance; score is R^2 of predict
    X, y, X_query = trend_data()
    start = GaussianProcessRegressor(kernel(), optimizer=None, solver=solver, mean="linear",
                                     mean_method=method, **SOLVERS[solver]).fit(X, y)
    gpr = quiet_fit(GaussianProcessRegressor(kernel(), solver=solver, mean="linear",
                                             mean_method=method, random_state=0,
                                             **SOLVERS[solver]), X, y)
    assert gpr.log_marginal_likelihood_value_ > start.log_marginal_likelihood_value_
    value, grad = gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
    assert value == pytest.approx(gpr.log_marginal_likelihood_value_, rel=1e-9)
    bounds = gpr.kernel_.bounds
    free = ((gpr.kernel_.theta - bounds[:, 0] > 1e-3) & (bounds[:, 1] - gpr.kernel_.theta > 1e-3))
    assert np.all(np.abs(grad[free]) < 1e-2 * max(1.0, abs(value)))
    mean, cov = gpr.predict(X_query, return_cov=True)
    draws = gpr.sample_y(X_query, 3, random_state=7)
    expected = np.random.RandomState(7).multivariate_normal(mean, cov, 3).T
    np.testing.assert_allclose(draws, expected, rtol=1e-6, atol=1e-6)
    assert gpr.score(X, y) == pytest.approx(r2_score(y, gpr.predict(X)), rel=1e-12)
    if solver != "vecchia":  # Vecchia's std conditions each point on its own neighbours
        _, std = gpr.predict(X_query, return_std=True)
        np.testing.assert_allclose(std, np.sqrt(np.diag(cov)), rtol=1e-8)


def test_mean_restricted_likelihood_is_the_profile_one_plus_the_log_determinant():
    # at the same kernel: REML = profile - T/2 log|C| + T p/2 log(2 pi) in
    # log likelihood, C = H^T K^-1 H (R&W 2006, eq. 2.45's convention)
    X, y, _ = trend_data()
    fits = {m: GaussianProcessRegressor(kernel(), optimizer=None, mean="linear",
                                        mean_method=m).fit(X, y)
            for m in ("profile", "reml")}
    K = kernel()(X) + 1e-10 * np.eye(len(X))
    H = np.column_stack([np.ones(len(X)), X])
    log_det = np.linalg.slogdet(H.T @ np.linalg.solve(K, H))[1]
    assert (fits["reml"].log_marginal_likelihood_value_ ==
            pytest.approx(fits["profile"].log_marginal_likelihood_value_ - 0.5 * log_det
                          + 1.5 * np.log(2 * np.pi), rel=1e-12))


# -------------------------------------------------------------- bad input
def _with_column(column):
    """A basis: a constant and ``column(X)``."""
    return lambda X: np.column_stack([np.ones(len(X)), column(X)])


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("mean, words", [
    (_with_column(lambda X: np.where(X[:, 0] > 0.5, np.nan, X[:, 0])),
     ["NaN or infinity", "column 1 of mean(X)", "finite"]),
    (lambda X: np.column_stack([np.ones(len(X)), X[:, 0], X[:, 0]]),
     ["rank-deficient", "column 2 of mean(X) = 1 x column 1 of mean(X)", "Drop"]),
    (lambda X: np.ones((len(X) - 1, 1)), ["59 rows for the 60 points", "one row"]),
    (lambda X: np.vander(X[:, 0], 61), ["p = 61 columns for N = 60", "fewer"]),
    (lambda X: np.ones((len(X), 2, 2)), ["shape (60, 2, 2)"]),
])
def test_mean_bad_basis_at_fit_is_a_value_error_and_leaves_the_fit(solver, mean, words):
    X, y, X_query = trend_data()
    gpr = quiet_fit(GaussianProcessRegressor(kernel(), solver=solver, mean="linear",
                                             random_state=0, **SOLVERS[solver]), X, y)
    before = answers(gpr, X, y, X_query)
    gpr.set_params(mean=mean)
    with pytest.raises(ValueError) as raised:
        gpr.fit(X, y)
    for word in words:
        assert word in str(raised.value)
    assert_same_bits(before, answers(gpr, X, y, X_query))


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_mean_rank_deficiency_is_judged_relative_to_the_basis_scale(scale):
    # columns equal to rounding (1e-14 relative) in units where the basis's
    # entries are 1e-6 or 1e6: the pivots' tolerance is relative to the
    # largest, so both are refused (an absolute one misses one or the other)
    X, y, _ = trend_data()
    wobble = 1e-14 * np.random.default_rng(1).standard_normal(len(X))
    basis = lambda X: scale * np.column_stack(  # noqa: E731
        [np.ones(len(X)), X[:, 0], X[:, 0] * (1.0 + wobble[:len(X)])])
    with pytest.raises(ValueError, match="rank-deficient"):
        GaussianProcessRegressor(kernel(), optimizer=None, mean=basis).fit(X, y)


def test_mean_linear_with_a_constant_input_names_it():
    X, y, _ = trend_data()
    X = np.column_stack([X, np.full(len(X), 2.5)])
    with pytest.raises(ValueError, match=r"X\[:, 2\] = 2.5 x the intercept"):
        GaussianProcessRegressor(kernel(), mean="linear").fit(X, y)


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("at_query, words", [
    (lambda X: np.full((len(X), 2), np.nan), ["NaN or infinity", "the query points"]),
    (lambda X: np.ones((3, 2)), ["3 rows for the 9 points of the query points"]),
    (lambda X: np.ones((len(X), 3)), ["3 columns at the query points and 2"]),
])
def test_mean_bad_basis_at_predict_is_a_value_error(solver, at_query, words):
    X, y, X_query = trend_data()
    calls = {"training": True}

    def basis(points):
        if calls["training"]:
            return np.column_stack([np.ones(len(points)), points[:, 1]])
        return at_query(points)

    gpr = quiet_fit(GaussianProcessRegressor(kernel(), solver=solver, mean=basis,
                                             random_state=0, **SOLVERS[solver]), X, y)
    before = gpr.predict(X_query, return_std=True)
    calls["training"] = False
    for call in (lambda: gpr.predict(X_query), lambda: gpr.predict(X_query, return_std=True),
                 lambda: gpr.predict(X_query, return_cov=True)):
        with pytest.raises(ValueError) as raised:
            call()
        for word in words:
            assert word in str(raised.value)
    calls["training"] = True
    assert_same_bits(before, gpr.predict(X_query, return_std=True))


def test_mean_on_the_gpu_path_names_the_remedy():
    # no GPU needed: the mean is refused before the device is looked for
    X, y, _ = trend_data()
    with pytest.raises(ValueError, match='device="cpu"'):
        GaussianProcessRegressor(kernel(), mean="constant", device="cuda").fit(X, y)


@pytest.mark.parametrize("value", ["quadratic", 3])
def test_mean_parameter_is_validated(value):
    X, y, _ = trend_data()
    with pytest.raises(ValueError, match="mean"):
        GaussianProcessRegressor(kernel(), mean=value).fit(X, y)
    with pytest.raises(ValueError, match="mean_method"):
        GaussianProcessRegressor(kernel(), mean="linear", mean_method="ml").fit(X, y)


# ------------------------------------------------ Vecchia's fitted layout
def _count_layouts(monkeypatch):
    """A list that grows by one per layout found (ordered_neighbours called)."""
    found = []
    original = vecchia_objective.ordered_neighbours

    def counting(*args, **kwargs):
        found.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(vecchia_objective, "ordered_neighbours", counting)
    return found


@pytest.mark.parametrize("mean", [None, "linear"])
def test_mean_vecchia_likelihood_reuses_the_fitted_layout(mean, monkeypatch):
    # log_marginal_likelihood(theta) after a Vecchia fit evaluates on the
    # fit's last layout without finding it again, and gives the bits of one
    # found again; a pickled model (which drops the layout) and moved inputs
    # find it again
    X, y, _ = trend_data(n=300)
    gpr = quiet_fit(GaussianProcessRegressor(kernel(), solver="vecchia", n_neighbors=10,
                                             random_state=0, mean=mean), X, y)
    found = _count_layouts(monkeypatch)
    theta = gpr.kernel_.theta + 0.05
    reused = gpr.log_marginal_likelihood(theta, eval_gradient=True)
    assert found == []
    state = gpr._solver_cache["state"]
    kept, state.layout = state.layout, None
    rebuilt = gpr.log_marginal_likelihood(theta, eval_gradient=True)
    assert found == [1]
    assert_same_bits(reused, rebuilt)
    state.layout = kept
    copy = pickle.loads(pickle.dumps(gpr))
    assert copy._solver_cache["state"].layout.point is None
    assert_same_bits(reused, copy.log_marginal_likelihood(theta, eval_gradient=True))
    assert found == [1, 1]
    gpr.X_train_[0, 0] += 0.01  # the inputs moved: the layout is found again
    gpr.log_marginal_likelihood(theta, eval_gradient=True)
    assert found == [1, 1, 1]


def test_mean_vecchia_on_workers_gives_the_in_process_bits(monkeypatch):
    # the mean's passes (the rows' pass on [Y, Q], the likelihood pass on the
    # residuals E sent with every task, REML's second pass) as joblib tasks
    # over groups of blocks: the in-process bits
    import joblib

    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.choice import make_solver
    from fastgp._solvers.mean import mean_term
    from fastgp._solvers.vecchia import distributed

    X, y, _ = trend_data(n=3000)
    params = GaussianProcessRegressor(kernel(), solver="vecchia", n_neighbors=8).get_params()
    solver = make_solver("vecchia", params)
    objective = solver.objective(make_covariance(kernel(), X), y[:, None],
                                 np.full(len(y), 1e-10), solver.draw(np.random.RandomState(0)),
                                 mean=mean_term("linear", "reml", X))
    theta = kernel().theta + 0.2
    here = objective(theta)
    here_dual = objective.dual(theta)
    monkeypatch.setattr(distributed, "tasks_on_workers", lambda: True)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        there = objective(theta)
        there_dual = objective.dual(theta)
        assert objective._sums.dispatcher.traffic.tasks > 0
    assert_same_bits(here, there)
    np.testing.assert_array_equal(here_dual, there_dual)

"""fastgp.GaussianProcessRegressor as a drop-in for scikit-learn's: predictions
and samples against scikit-learn at the same fitted theta, properties of a
fitted model, the optimisers, and scikit-learn's parameter contract."""

import math
import warnings

import numpy as np
import pytest
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp._solvers.chunks
from conftest import ALPHA, KERNELS, kernel_params, make_problem, random_theta
from fastgp import GaussianProcessRegressor
from fastgp._backend.covariance import FastCovariance
from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

OUTPUTS = pytest.mark.parametrize("n_targets", [None, 2], ids=["1d", "2 targets"])
NORMALIZE = pytest.mark.parametrize("normalize_y", [False, True],
                                    ids=["raw", "normalize_y"])


def _start_kernel():
    return C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)


def _sklearn_at(gpr, X, y):
    """scikit-learn's regressor with fastgp's fitted kernel, not optimised."""
    return SklearnGPR(gpr.kernel_, alpha=gpr.alpha, optimizer=None,
                      normalize_y=gpr.normalize_y).fit(X, y)


def _assert_predictions_match(ours, theirs, X_query, rtol=1e-8):
    mean, ref_mean = ours.predict(X_query), theirs.predict(X_query)
    assert mean.shape == ref_mean.shape
    scale = np.max(np.abs(ref_mean))
    np.testing.assert_allclose(mean, ref_mean, rtol=rtol, atol=rtol * scale)
    (mean_s, std), (_, ref_std) = (g.predict(X_query, return_std=True)
                                   for g in (ours, theirs))
    np.testing.assert_allclose(mean_s, mean, rtol=0, atol=0)
    assert std.shape == ref_std.shape
    np.testing.assert_allclose(std, ref_std, rtol=rtol, atol=rtol * np.max(ref_std))
    (mean_c, cov), (_, ref_cov) = (g.predict(X_query, return_cov=True)
                                   for g in (ours, theirs))
    np.testing.assert_allclose(mean_c, mean, rtol=1e-12, atol=1e-12 * scale)
    assert cov.shape == ref_cov.shape
    np.testing.assert_allclose(cov, ref_cov, rtol=rtol,
                               atol=rtol * np.max(np.abs(ref_cov)))


# ----------------------------------------------------- against scikit-learn


@NORMALIZE
@OUTPUTS
def test_predict_matches_sklearn_at_fitted_theta(n_targets, normalize_y, rng):
    X, y = make_problem(rng, n_samples=50, n_targets=n_targets)
    ours = GaussianProcessRegressor(_start_kernel(), normalize_y=normalize_y).fit(X, y)
    theirs = _sklearn_at(ours, X, y)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-8)
    np.testing.assert_allclose(ours.alpha_, theirs.alpha_, rtol=1e-7,
                               atol=1e-9 * np.max(np.abs(theirs.alpha_)))
    np.testing.assert_allclose(ours.L_, theirs.L_, rtol=1e-10, atol=1e-14)
    assert ours.L_.shape == theirs.L_.shape and ours.alpha_.shape == theirs.alpha_.shape
    X_query = rng.uniform(-2.5, 2.5, size=(23, 2))
    X_query[:3] = X[:3]  # training points, where the variance is smallest
    _assert_predictions_match(ours, theirs, X_query)
    np.testing.assert_allclose(ours.score(X, y), theirs.score(X, y), rtol=1e-10)


@pytest.mark.parametrize("kernel", kernel_params({k: KERNELS[k] for k in (
    "White", "Matern12-ard", "RQ", "Matern12*RQ", "(C*RBF)*(C*Matern32)", "all-fixed")}))
def test_predict_matches_sklearn_for_kernels(kernel, rng):
    """Both not optimised, at a theta away from the defaults."""
    X, y = make_problem(rng, n_samples=40, n_targets=2)
    kernel = kernel.clone_with_theta(random_theta(kernel, rng, spread=0.3))
    ours = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None,
                                    normalize_y=True).fit(X, y)
    theirs = SklearnGPR(kernel, alpha=ALPHA, optimizer=None, normalize_y=True).fit(X, y)
    _assert_predictions_match(ours, theirs, rng.uniform(-2.5, 2.5, size=(17, 2)))


@OUTPUTS
def test_predict_many_points_in_several_chunks_matches_sklearn(n_targets, rng,
                                                               monkeypatch):
    X, y = make_problem(rng, n_samples=40, n_targets=n_targets)
    ours = GaussianProcessRegressor(_start_kernel(), alpha=ALPHA, optimizer=None,
                                    normalize_y=True).fit(X, y)
    theirs = _sklearn_at(ours, X, y)
    X_query = rng.uniform(-2.5, 2.5, size=(230, 2))
    # 7 query rows per chunk: 33 chunks, the last one short
    monkeypatch.setattr(fastgp._solvers.chunks, "CHUNK_BYTES", 8 * 40 * 7)
    calls = []
    cross = FastCovariance.cross

    def counting_cross(self, theta, X_query):
        calls.append(len(X_query))
        return cross(self, theta, X_query)

    monkeypatch.setattr(FastCovariance, "cross", counting_cross)
    mean, std = ours.predict(X_query, return_std=True)
    assert calls == [7] * 32 + [6]
    ref_mean, ref_std = theirs.predict(X_query, return_std=True)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-8,
                               atol=1e-8 * np.max(np.abs(ref_mean)))
    np.testing.assert_allclose(std, ref_std, rtol=1e-8, atol=1e-8 * np.max(ref_std))
    np.testing.assert_array_equal(ours.predict(X_query), mean)


@NORMALIZE
@OUTPUTS
def test_sample_y_matches_sklearn(n_targets, normalize_y, rng):
    X, y = make_problem(rng, n_samples=30, n_targets=n_targets)
    ours = GaussianProcessRegressor(_start_kernel(), alpha=ALPHA, optimizer=None,
                                    normalize_y=normalize_y).fit(X, y)
    theirs = _sklearn_at(ours, X, y)
    X_query = rng.uniform(-2.5, 2.5, size=(12, 2))
    samples = ours.sample_y(X_query, n_samples=5, random_state=3)
    ref = theirs.sample_y(X_query, n_samples=5, random_state=3)
    expected_shape = (12, 5) if n_targets is None else (12, n_targets, 5)
    assert samples.shape == ref.shape == expected_shape
    np.testing.assert_allclose(samples, ref, rtol=1e-6, atol=1e-6 * np.max(np.abs(ref)))


@pytest.mark.parametrize("n_query", [5, 12, 60])
def test_sample_y_draws_are_sklearns_up_to_the_svds_choice_of_signs(n_query, rng):
    # For one random_state both draw the same standard normals z, and NumPy's
    # multivariate_normal maps them through the SVD of the predictive
    # covariance: draw = mean + z sqrt(S) V^T. fastgp's covariance equals
    # scikit-learn's to rounding, but a singular vector is unique only up to
    # its sign (and a repeated eigenvalue's up to a rotation of its
    # eigenspace), which rounding can flip: so along every direction of a
    # distinct eigenvalue the draws' coefficients agree up to sign, and the
    # draws themselves are the same only where the SVDs chose alike
    # (docs/differences.md)
    X, y = make_problem(rng, n_samples=30)
    ours = GaussianProcessRegressor(C(1.0) * RBF([1.0, 1.0]), alpha=1e-2,
                                    optimizer=None).fit(X, y)
    theirs = _sklearn_at(ours, X, y)
    X_query = rng.uniform(-2.5, 2.5, size=(n_query, 2))
    draws = ours.sample_y(X_query, n_samples=4, random_state=3)
    reference = theirs.sample_y(X_query, n_samples=4, random_state=3)
    mean, cov = ours.predict(X_query, return_cov=True)
    values, vectors = np.linalg.eigh(cov)
    gaps = np.diff(values) / values[-1]
    distinct = (np.r_[gaps, np.inf] > 1e-6) & (np.r_[np.inf, gaps] > 1e-6)
    distinct &= values > 1e-8 * values[-1]  # above rounding
    assert distinct.sum() >= min(n_query, 5)
    ours_along = (draws.T - mean) @ vectors[:, distinct]
    theirs_along = (reference.T - mean) @ vectors[:, distinct]
    np.testing.assert_allclose(np.abs(ours_along), np.abs(theirs_along), rtol=1e-5,
                               atol=1e-7 * np.sqrt(values[-1]))


@pytest.mark.parametrize("n_targets", [None, 3])
@pytest.mark.parametrize("kernel", [None, RBF(0.7) + WhiteKernel(0.2)],
                         ids=["default", "RBF+White"])
def test_unfitted_prior_is_the_kernels_zero_mean_gaussian(kernel, n_targets, rng):
    # fastgp's prior runs scikit-learn's own predict; the independent
    # reference is the model's definition: mean 0, covariance k(X*, X*)
    # (R&W 2006, eq. 2.13 with no data), scikit-learn's default kernel
    # 1.0 * RBF(1.0) where none is given
    X_query = rng.uniform(-2, 2, size=(9, 2))
    ours = GaussianProcessRegressor(kernel, n_targets=n_targets)
    prior = C(1.0, "fixed") * RBF(1.0, "fixed") if kernel is None else kernel
    K = prior(X_query)
    shape = (9,) if n_targets is None else (9, n_targets)
    mean = ours.predict(X_query)
    assert mean.shape == shape and np.all(mean == 0.0)
    _, std = ours.predict(X_query, return_std=True)
    expected_std = np.sqrt(np.diag(K))
    if n_targets is not None:
        expected_std = np.repeat(expected_std[:, None], n_targets, axis=1)
    np.testing.assert_allclose(std, expected_std, rtol=1e-14)
    _, cov = ours.predict(X_query, return_cov=True)
    expected_cov = K if n_targets is None else np.repeat(K[:, :, None], n_targets, axis=2)
    np.testing.assert_allclose(cov, expected_cov, rtol=1e-14, atol=1e-15)
    # draws: zero mean and covariance K, within 6 standard errors of the sample
    # moments (a Wishart's entrywise sd is sqrt((K_ij^2 + K_ii K_jj) / draws))
    draws = 4000
    samples = ours.sample_y(X_query, draws, random_state=1)
    samples = samples if n_targets is None else samples[:, 0, :]
    sd = np.sqrt(np.diag(K))
    assert np.all(np.abs(samples.mean(axis=1)) < 6 * sd / np.sqrt(draws))
    wishart_sd = np.sqrt((K**2 + np.outer(np.diag(K), np.diag(K))) / draws)
    assert np.all(np.abs(np.cov(samples, bias=True) - K) < 6 * wishart_sd)
    assert not hasattr(ours, "kernel_")


def test_fit_reaches_at_least_sklearns_likelihood(rng):
    X, y = make_problem(rng, n_samples=60)
    ours = GaussianProcessRegressor(_start_kernel()).fit(X, y)
    theirs = SklearnGPR(_start_kernel()).fit(X, y)
    assert ours.log_marginal_likelihood_value_ >= theirs.log_marginal_likelihood_value_ - 1e-6
    np.testing.assert_allclose(ours.kernel_.theta, theirs.kernel_.theta, atol=1e-3)


# ---------------------------------------------------- fitted-model properties


def _smooth_problem(rng, n_samples=40):
    """A modest, sensibly scaled problem whose optimum L-BFGS-B reaches."""
    X = rng.uniform(0.0, 5.0, size=(n_samples, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n_samples)
    return X, y


@pytest.mark.parametrize("kernel", [
    pytest.param(C(1.0) * RBF(1.0) + WhiteKernel(0.1), id="C*RBF+White"),
    pytest.param(C(1.0) * Matern(1.0, nu=1.5) + WhiteKernel(0.1), id="C*Matern32+White"),
    pytest.param(RationalQuadratic(1.0, alpha=1.0, alpha_bounds=(1e-2, 1e2))
                 + WhiteKernel(0.1), id="RQ+White"),
])
def test_fit_improves_likelihood_and_stops_at_a_stationary_point(kernel, rng):
    X, y = _smooth_problem(rng)
    gpr = GaussianProcessRegressor(kernel).fit(X, y)
    initial = gpr.log_marginal_likelihood(kernel.theta)
    assert gpr.log_marginal_likelihood_value_ > initial
    np.testing.assert_allclose(gpr.log_marginal_likelihood(gpr.kernel_.theta),
                               gpr.log_marginal_likelihood_value_, rtol=1e-12)
    _, grad = gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
    theta, bounds = gpr.kernel_.theta, gpr.kernel_.bounds
    on_bound = np.isclose(theta, bounds[:, 0]) | np.isclose(theta, bounds[:, 1])
    assert np.all((np.abs(grad) < 1e-4) | on_bound), (grad, theta, bounds)
    assert gpr.n_iter_ > 0 and gpr.n_evaluations_ >= gpr.n_iter_


@OUTPUTS
def test_predict_std_is_sqrt_of_cov_diagonal(n_targets, rng):
    X, y = make_problem(rng, n_samples=40, n_targets=n_targets)
    gpr = GaussianProcessRegressor(_start_kernel(), normalize_y=True).fit(X, y)
    X_query = rng.uniform(-3, 3, size=(25, 2))
    _, std = gpr.predict(X_query, return_std=True)
    _, cov = gpr.predict(X_query, return_cov=True)
    diag = np.diagonal(cov, axis1=0, axis2=1).T if cov.ndim == 3 else np.diag(cov)
    np.testing.assert_allclose(std, np.sqrt(diag), rtol=1e-10)


@pytest.mark.parametrize("kernel", [RBF(1.0), C(1.0) * RBF(1.0),
                                    C(1.0) * Matern(1.0, nu=2.5)], ids=repr)
def test_fit_interpolates_noise_free_data(kernel):
    """scikit-learn's interpolation check: with alpha = 1e-10 the posterior
    mean at the training inputs is y - alpha K^-1 y and the variance ~0."""
    X = np.array([[1.0], [3.0], [5.0], [6.0], [7.0], [8.0]])
    y = (X * np.sin(X)).ravel()
    gpr = GaussianProcessRegressor(kernel).fit(X, y)
    mean, cov = gpr.predict(X, return_cov=True)
    np.testing.assert_allclose(mean, y, atol=1e-7)
    np.testing.assert_allclose(np.diag(cov), 0.0, atol=1e-7)
    np.testing.assert_allclose(mean, y - 1e-10 * gpr.alpha_, rtol=1e-8, atol=1e-12)


# ----------------------------------------------------------------- optimisers


def test_fit_with_cg_optimizer(rng):
    X, y = _smooth_problem(rng)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    cg = GaussianProcessRegressor(kernel, optimizer="CG").fit(X, y)
    lbfgs = GaussianProcessRegressor(kernel).fit(X, y)
    assert cg.log_marginal_likelihood_value_ > cg.log_marginal_likelihood(kernel.theta)
    np.testing.assert_allclose(cg.log_marginal_likelihood_value_,
                               lbfgs.log_marginal_likelihood_value_, rtol=1e-6)
    assert cg.n_iter_ > 0


def test_fit_with_callable_optimizer_follows_sklearns_contract(rng):
    X, y = _smooth_problem(rng)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    seen = {}

    def optimizer(obj_func, initial_theta, bounds):
        seen["initial_theta"], seen["bounds"] = initial_theta.copy(), bounds.copy()
        seen["start"] = obj_func(initial_theta)  # eval_gradient defaults to True
        seen["value_only"] = obj_func(initial_theta, eval_gradient=False)
        # a user's choice of SciPy method, as in scikit-learn's documentation
        res = scipy.optimize.minimize(obj_func, initial_theta, method="TNC",
                                      jac=True, bounds=bounds)
        return res.x, res.fun

    ours = GaussianProcessRegressor(kernel, optimizer=optimizer).fit(X, y)
    passed = dict(seen)  # what fastgp passed; scikit-learn's run refills ``seen``
    theirs = SklearnGPR(kernel, optimizer=optimizer).fit(X, y)
    np.testing.assert_array_equal(passed["initial_theta"], kernel.theta)
    np.testing.assert_array_equal(passed["bounds"], kernel.bounds)
    value, grad = passed["start"]
    assert passed["value_only"] == value
    np.testing.assert_allclose(-value, ours.log_marginal_likelihood(kernel.theta),
                               rtol=1e-12)
    assert grad.shape == kernel.theta.shape
    # same optimiser, same objective to ~1e-12: TNC ends at the same optimum
    np.testing.assert_allclose(ours.kernel_.theta, theirs.kernel_.theta, atol=1e-4)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-8)


def test_n_restarts_optimizer_keeps_the_best_run(rng, monkeypatch):
    X, y = _smooth_problem(rng, n_samples=25)
    # a start far from the optimum, on a plateau of the likelihood
    kernel = C(1.0) * RBF(1e-3, (1e-4, 1e2)) + WhiteKernel(1.0, (1e-5, 1e1))
    import fastgp._optimize.minimize as optimize_module

    runs = []
    minimize_theta = optimize_module.minimize_theta

    def recording(*args, **kwargs):
        result = minimize_theta(*args, **kwargs)
        runs.append(result)
        return result

    monkeypatch.setattr(optimize_module, "minimize_theta", recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpr = GaussianProcessRegressor(kernel, n_restarts_optimizer=3,
                                       random_state=0).fit(X, y)
    assert len(runs) == 4
    best = min(runs, key=lambda run: run.value)
    # kernel_.theta round-trips through exp and log: equal to the last bit or two
    np.testing.assert_allclose(gpr.kernel_.theta, best.theta, rtol=1e-14)
    np.testing.assert_allclose(gpr.log_marginal_likelihood_value_, -best.value, rtol=1e-10)
    # the restarts found a better optimum than the first run from the plateau
    assert best.value < runs[0].value - 1.0
    # the restart points are scikit-learn's (same random_state, same draws),
    # so both regressors end at the same optimum
    theirs = SklearnGPR(kernel, n_restarts_optimizer=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        theirs.fit(X, y)
    np.testing.assert_allclose(gpr.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-6)


def test_n_restarts_needs_finite_bounds(rng):
    X, y = _smooth_problem(rng, 10)
    kernel = RBF(1.0, (1e-2, np.inf))
    with pytest.raises(ValueError, match="requires that all bounds are finite"):
        GaussianProcessRegressor(kernel, n_restarts_optimizer=1).fit(X, y)


def test_unknown_optimizer_is_rejected(rng):
    X, y = _smooth_problem(rng, 10)
    with pytest.raises(ValueError, match="optimizer"):
        GaussianProcessRegressor(optimizer="BFGS").fit(X, y)


@pytest.mark.parametrize("optimizer, alpha", [("fmin_l_bfgs_b", 0.0), ("CG", 0.0),
                                              ("CG", 1e-14)])
def test_fit_backs_off_from_non_positive_definite_trial_steps(alpha, optimizer,
                                                              monkeypatch):
    """Closely spaced inputs, no noise term, and length-scale bounds that allow
    huge values: the start is positive definite, but the optimiser's trial
    steps towards long length scales make K numerically singular (by far more
    than rounding: many eigenvalues at -1e-11 against alpha <= 1e-14). The
    objective answers inf there; fit neither raises nor ends on such a point.

    CG continues past the failed trials to a much better optimum. SciPy's
    L-BFGS-B (as under scikit-learn's regressor) answers a failed first trial
    by backing off to a zero step and reporting convergence at the start; the
    fit then keeps the start, finite.
    """
    X = np.linspace(0.0, 1.0, 30)[:, None]
    y = np.sin(2 * np.pi * X[:, 0])
    kernel = C(1.0) * RBF(0.05, length_scale_bounds=(1e-3, 1e5))
    values, thetas = [], []
    call = NegLogMarginalLikelihood.__call__

    def recording(self, theta):
        value, grad = call(self, theta)
        values.append(value)
        thetas.append(np.array(theta))
        return value, grad

    monkeypatch.setattr(NegLogMarginalLikelihood, "__call__", recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gpr = GaussianProcessRegressor(kernel, alpha=alpha, optimizer=optimizer).fit(X, y)
    assert math.isfinite(values[0])  # the start is fine
    assert any(v == math.inf for v in values)  # some trial was not PD
    lml = gpr.log_marginal_likelihood_value_
    assert math.isfinite(lml)
    # the fit kept the best finite point the optimiser evaluated: its theta, up
    # to the rounding of the kernel's exp/log round trip (at alpha = 1e-14 one
    # ulp of theta moves this ill-conditioned loss by about 0.5, so the value
    # is compared at the published theta, not with the optimiser's record)
    best = min((v, i) for i, v in enumerate(values) if math.isfinite(v))[1]
    np.testing.assert_allclose(gpr.kernel_.theta, thetas[best], rtol=1e-13, atol=1e-13)
    assert lml == gpr.log_marginal_likelihood(gpr.kernel_.theta)
    initial = -values[0]
    if optimizer == "fmin_l_bfgs_b":
        assert lml >= initial
    else:
        assert lml > initial + 100.0
    # and the kept factor predicts
    assert np.all(np.isfinite(gpr.predict(X)))


# ------------------------------------------------------ parameters and errors


@pytest.mark.parametrize("copy_X_train", [True, False])
def test_copy_X_train(copy_X_train, rng):
    X, y = make_problem(rng, n_samples=20)
    gpr = GaussianProcessRegressor(RBF(1.0), alpha=ALPHA, optimizer=None,
                                   copy_X_train=copy_X_train).fit(X, y)
    assert np.shares_memory(gpr.X_train_, X) == (not copy_X_train)
    assert np.shares_memory(gpr.y_train_, y) == (not copy_X_train)
    np.testing.assert_array_equal(gpr.X_train_, X)
    before = gpr.predict(X[:5])
    if not copy_X_train:  # scikit-learn's documented caveat: X is shared
        X[:] += 1.0
        assert not np.allclose(gpr.predict(X[:5] - 1.0), before)


def test_n_targets_mismatch_raises_sklearns_error(rng):
    X, y = make_problem(rng, n_samples=20, n_targets=2)
    message = ("The number of targets seen in `y` is different from the parameter "
               "`n_targets`. Got 2 != 3.")
    for cls in (GaussianProcessRegressor, SklearnGPR):
        with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("`", "`")):
            cls(n_targets=3).fit(X, y)
    GaussianProcessRegressor(RBF(1.0), n_targets=2, optimizer=None).fit(X, y)


def test_alpha_of_wrong_length_raises_sklearns_error(rng):
    X, y = make_problem(rng, n_samples=20)
    errors = []
    for cls in (GaussianProcessRegressor, SklearnGPR):
        with pytest.raises(ValueError) as error:
            cls(alpha=np.full(7, 0.1)).fit(X, y)
        errors.append(str(error.value))
    assert errors[0] == errors[1]
    assert "(7 != 20)" in errors[0]


def test_alpha_array_per_sample_matches_sklearn(rng):
    X, y = make_problem(rng, n_samples=30)
    alpha = rng.uniform(0.01, 0.1, size=30)
    kernel = C(1.0) * RBF([1.0, 1.0])
    ours = GaussianProcessRegressor(kernel, alpha=alpha, optimizer=None).fit(X, y)
    theirs = SklearnGPR(kernel, alpha=alpha, optimizer=None).fit(X, y)
    theta = random_theta(kernel, rng)
    (v, g), (rv, rg) = (m.log_marginal_likelihood(theta, True) for m in (ours, theirs))
    np.testing.assert_allclose(v, rv, rtol=1e-8)
    np.testing.assert_allclose(g, rg, rtol=1e-8, atol=1e-8 * np.max(np.abs(rg)))
    _assert_predictions_match(ours, theirs, rng.uniform(-2, 2, size=(8, 2)))


def test_fit_does_not_modify_constructor_params(rng):
    """scikit-learn's fit replaces an alpha of length 1 by its element; fastgp
    leaves every constructor argument as it was given."""
    X, y = make_problem(rng, n_samples=20)
    alpha = np.array([0.05])
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    theta = kernel.theta.copy()
    gpr = GaussianProcessRegressor(kernel, alpha=alpha, n_restarts_optimizer=1,
                                   random_state=0)
    params = gpr.get_params(deep=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # noise on its bound
        gpr.fit(X, y)
    assert gpr.alpha is alpha and np.array_equal(alpha, [0.05])
    assert gpr.kernel is kernel
    np.testing.assert_array_equal(kernel.theta, theta)  # the fit works on kernel_
    assert not np.array_equal(gpr.kernel_.theta, theta)
    after = gpr.get_params(deep=False)
    assert after.keys() == params.keys()
    assert all(after[k] is params[k] for k in params)
    # the alpha of length 1 acts as the scalar, as in scikit-learn
    reference = SklearnGPR(kernel, alpha=0.05, optimizer=None).fit(X, y)
    ours = GaussianProcessRegressor(kernel, alpha=alpha, optimizer=None).fit(X, y)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               reference.log_marginal_likelihood_value_, rtol=1e-10)


def test_return_std_and_return_cov_together_raise(rng):
    X, y = make_problem(rng, n_samples=10)
    gpr = GaussianProcessRegressor(RBF(1.0), optimizer=None).fit(X, y)
    with pytest.raises(RuntimeError, match="At most one of return_std or return_cov"):
        gpr.predict(X, return_std=True, return_cov=True)


def test_integer_and_float32_inputs_are_converted(rng):
    X, y = make_problem(rng, n_samples=20)
    Xi = np.round(X * 3).astype(np.int64)
    kernel = RBF(1.0) + WhiteKernel(0.1)
    ours = GaussianProcessRegressor(kernel, optimizer=None).fit(Xi, y)
    theirs = SklearnGPR(kernel, optimizer=None).fit(Xi, y)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-10)
    ours32 = GaussianProcessRegressor(kernel, optimizer=None).fit(X.astype(np.float32), y)
    np.testing.assert_allclose(ours32.predict(X), theirs.fit(X.astype(np.float32), y)
                               .predict(X), rtol=1e-8, atol=1e-10)


def test_verbose_prints_one_line_per_iteration(rng, capsys):
    X, y = _smooth_problem(rng, 20)
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), verbose=1).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iter")]
    assert len(lines) == gpr.n_iter_ > 0
    assert "|grad|" in lines[0]


def test_fit_without_targets_raises_sklearns_error(rng):
    X, _ = make_problem(rng, n_samples=10)
    for cls in (GaussianProcessRegressor, SklearnGPR):
        with pytest.raises(ValueError, match="requires y to be passed, but the target y is None"):
            cls().fit(X, None)

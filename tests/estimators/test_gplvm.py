"""GPLVM as an estimator: fitting, transform, inverse_transform, data
handling, and the digits embedding against PCA's."""

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, DotProduct, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import train_test_split

from fastgp import GPLVM
from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood
from fastgp._solvers.cholesky.latent import predictive_density as PredictiveNegLogDensity
from fastgp._solvers.workspace import Workspace


@pytest.fixture(autouse=True)
def _quiet_convergence():
    # short fits are deliberate here; the warning itself is tested below
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _curve(n_samples=40, noise=0.02, seed=0):
    """A noisy 1-D curve in 4-D: t -> (sin t, cos t, t/2, sin 2t)."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0.0, 3.0, size=n_samples))
    Y = np.column_stack([np.sin(t), np.cos(t), 0.5 * t, np.sin(2 * t)])
    return t, Y + noise * rng.standard_normal(Y.shape)


def _objective_for(gplvm, Y):
    Yc = (Y - gplvm.mean_) / gplvm.scale_
    return LatentNegLogMarginalLikelihood(gplvm.kernel_, Yc, gplvm.n_components,
                                          gplvm.alpha, Workspace(len(Y)))


# ------------------------------------------------------------------ fit
def test_fit_sets_fitted_attributes():
    _, Y = _curve()
    gplvm = GPLVM(n_components=2, max_iter=50, random_state=0)
    assert gplvm.fit(Y) is gplvm
    assert gplvm.embedding_.shape == (40, 2)
    assert gplvm.n_iter_ >= 1 and gplvm.n_evaluations_ >= gplvm.n_iter_
    assert gplvm.L_.shape == (40, 40) and gplvm.L_.flags.f_contiguous
    assert gplvm.alpha_.shape == (40, 4)
    assert gplvm.kernel is None  # the constructor argument is not rewritten
    np.testing.assert_array_equal(gplvm.get_feature_names_out(), ["gplvm0", "gplvm1"])
    # the reported likelihood is the objective's at the fitted point
    objective = _objective_for(gplvm, Y)
    z = objective.pack(gplvm.embedding_, gplvm.kernel_.theta)
    np.testing.assert_allclose(-objective.value(z), gplvm.log_marginal_likelihood_value_,
                               rtol=1e-12)


def test_fit_transform_equals_embedding():
    _, Y = _curve()
    gplvm = GPLVM(max_iter=20, random_state=0)
    X = gplvm.fit_transform(Y)
    np.testing.assert_array_equal(X, gplvm.embedding_)
    X[0, 0] += 1.0  # a copy, not the attribute
    assert gplvm.embedding_[0, 0] != X[0, 0]


def test_fit_improves_on_its_start():
    _, Y = _curve()
    start = GPLVM(max_iter=0, random_state=0).fit(Y)
    fitted = GPLVM(max_iter=100, random_state=0).fit(Y)
    assert start.n_iter_ == 0
    assert fitted.log_marginal_likelihood_value_ > start.log_marginal_likelihood_value_ + 1.0


def test_fit_reaches_a_stationary_point():
    _, Y = _curve(n_samples=25)
    gplvm = GPLVM(n_components=1, max_iter=3000, tol=1e-12, random_state=0).fit(Y)
    objective = _objective_for(gplvm, Y)
    z0 = objective.pack(GPLVM(n_components=1, max_iter=0, random_state=0)
                        .fit(Y).embedding_, gplvm.kernel_.theta)
    _, grad0 = objective(z0)
    _, grad = objective(objective.pack(gplvm.embedding_, gplvm.kernel_.theta))
    # latent gradient (unbounded) about zero; hyperparameters may sit on a bound
    n_x = gplvm.embedding_.size
    assert np.linalg.norm(grad[:n_x]) < 1e-3 * np.linalg.norm(grad0[:n_x])


def test_max_iter_zero_keeps_the_pca_start():
    _, Y = _curve()
    gplvm = GPLVM(n_components=2, max_iter=0).fit(Y)
    scores = PCA(2).fit_transform(Y)
    scores /= scores.std(axis=0)
    # same subspace and scaling, up to the sign of each component
    np.testing.assert_allclose(np.abs(gplvm.embedding_), np.abs(scores), atol=1e-10)
    assert np.allclose(gplvm.embedding_.std(axis=0), 1.0)


def test_recovers_the_order_of_a_curve():
    t, Y = _curve(n_samples=40)
    X = GPLVM(n_components=1, max_iter=300, random_state=0).fit_transform(Y)
    rho = np.corrcoef(np.argsort(np.argsort(t)), np.argsort(np.argsort(X[:, 0])))[0, 1]
    assert abs(rho) > 0.98


def test_conjugate_gradients_optimizer_improves_too():
    _, Y = _curve()
    start = GPLVM(max_iter=0, random_state=0).fit(Y)
    fitted = GPLVM(optimizer="CG", max_iter=50, random_state=0).fit(Y)
    assert fitted.log_marginal_likelihood_value_ > start.log_marginal_likelihood_value_ + 1.0


def test_non_stationary_kernel_fits():
    _, Y = _curve()
    kernel = C(1.0) * RBF([1.0, 1.0]) + DotProduct(1.0) + WhiteKernel(0.1)
    start = GPLVM(kernel=kernel, max_iter=0, random_state=0).fit(Y)
    fitted = GPLVM(kernel=kernel, max_iter=50, random_state=0).fit(Y)
    assert fitted.log_marginal_likelihood_value_ > start.log_marginal_likelihood_value_


def test_convergence_warning_when_iterations_run_out():
    _, Y = _curve()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="reached its iteration limit"):
            GPLVM(max_iter=2, random_state=0).fit(Y)


def test_initial_latent_points():
    _, Y = _curve()
    init = np.random.default_rng(1).standard_normal((40, 3))
    gplvm = GPLVM(n_components=3, init=init, max_iter=0).fit(Y)
    np.testing.assert_array_equal(gplvm.embedding_, init)
    rand = GPLVM(n_components=3, init="random", max_iter=0, random_state=3).fit(Y)
    again = GPLVM(n_components=3, init="random", max_iter=0, random_state=3).fit(Y)
    np.testing.assert_array_equal(rand.embedding_, again.embedding_)
    with pytest.raises(ValueError, match="init has shape"):
        GPLVM(n_components=2, init=init).fit(Y)


def test_unsupported_kernel_raises_at_fit():
    _, Y = _curve()
    with pytest.raises(ValueError, match="fast path"):
        GPLVM(kernel=Matern(1.0, nu=0.7), max_iter=1).fit(Y)
    with pytest.raises(ValueError, match="dimensions"):
        GPLVM(n_components=2, kernel=RBF([1.0, 1.0, 1.0]), max_iter=1).fit(Y)


def test_default_kernel_follows_the_scale_of_the_data():
    """With the default kernel scaled by the data's variance, the objective
    of c Y is that of Y plus a constant (jitter aside), so the fit is the same."""
    _, Y = _curve()
    small = GPLVM(max_iter=30, random_state=0, alpha=0.0).fit(Y)
    large = GPLVM(max_iter=30, random_state=0, alpha=0.0).fit(1e3 * Y)
    np.testing.assert_allclose(large.embedding_, small.embedding_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(large.kernel_.k1.k1.constant_value,
                               1e6 * small.kernel_.k1.k1.constant_value, rtol=1e-5)


@pytest.mark.parametrize("n_samples", [2, 3, 5])
def test_tiny_data_and_constant_columns(n_samples):
    rng = np.random.default_rng(0)
    Y = np.column_stack([rng.standard_normal(n_samples), np.full(n_samples, 3.0)])
    # two latent dimensions for data of rank one (the second column constant)
    gplvm = GPLVM(n_components=2, max_iter=20, random_state=0).fit(Y)
    assert np.all(np.isfinite(gplvm.embedding_))
    assert np.isfinite(gplvm.log_marginal_likelihood_value_)
    assert np.all(np.isfinite(gplvm.transform(Y + 0.1)))
    np.testing.assert_allclose(gplvm.inverse_transform(gplvm.embedding_)[:, 1], 3.0)


def test_all_constant_data():
    Y = np.ones((6, 3))
    gplvm = GPLVM(max_iter=10, random_state=0, standardize=True).fit(Y)
    assert np.all(np.isfinite(gplvm.embedding_))
    np.testing.assert_allclose(gplvm.inverse_transform(gplvm.embedding_), 1.0)


def test_fit_memory_is_one_buffer():
    """Peak Python-heap memory of a fit: the N x N workspace plus O(N (D + Q))."""
    rng = np.random.default_rng(0)
    n, d = 240, 5
    Y = rng.standard_normal((n, d))
    GPLVM(max_iter=2, random_state=0).fit(Y)  # compile outside the measurement
    tracemalloc.start()
    try:
        GPLVM(max_iter=20, random_state=0).fit(Y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * n * n + 64 * 8 * n * (d + 2)


# ------------------------------------------------------------ transform
@pytest.fixture(scope="module")
def fitted_curve():
    _, Y = _curve(n_samples=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GPLVM(n_components=2, max_iter=200, random_state=0).fit(Y), Y


def test_transform_training_rows_returns_the_embedding(fitted_curve):
    gplvm, Y = fitted_curve
    np.testing.assert_array_equal(gplvm.transform(Y), gplvm.embedding_)


def test_transform_nearby_rows_land_near_their_training_point(fitted_curve):
    gplvm, Y = fitted_curve
    rng = np.random.default_rng(5)
    X_new = gplvm.transform(Y + 0.005 * rng.standard_normal(Y.shape))
    # in length-scale units: an irrelevant latent dimension has a long one
    length_scale = gplvm.kernel_.k1.k2.length_scale
    spread = np.max(np.std(gplvm.embedding_ / length_scale, axis=0))
    distance = np.linalg.norm((X_new - gplvm.embedding_) / length_scale, axis=1)
    assert np.median(distance) < 0.05 * spread


def test_transform_finds_a_minimum_of_the_predictive_density(fitted_curve):
    gplvm, Y = fitted_curve
    rng = np.random.default_rng(6)
    Y_new = Y[::4] + 0.05 * rng.standard_normal(Y[::4].shape)
    X_new = gplvm.transform(Y_new)
    density = PredictiveNegLogDensity(gplvm.kernel_, gplvm.embedding_, gplvm.L_,
                                      gplvm.alpha_, (Y_new - gplvm.mean_) / gplvm.scale_)
    rows = np.arange(len(Y_new))
    value, grad = density(X_new, rows)
    start = gplvm.embedding_[pairwise_distances(Y_new, Y).argmin(axis=1)]
    assert np.all(value <= density(start, rows)[0] + 1e-12)
    assert np.max(np.abs(grad)) < 1e-4 * max(1.0, np.max(np.abs(value)))
    for step in (1e-3, -1e-3):  # a local minimum along both axes
        for q in range(2):
            e = np.zeros(2)
            e[q] = step
            assert np.all(density(X_new + e, rows)[0] >= value - 1e-9)


def test_transform_rows_do_not_depend_on_the_batch(fitted_curve):
    gplvm, Y = fitted_curve
    rng = np.random.default_rng(7)
    Y_new = Y + 0.05 * rng.standard_normal(Y.shape)
    whole = gplvm.transform(Y_new)
    rows = [30, 4, 17]
    some = gplvm.transform(Y_new[rows])
    # Equal up to rounding that batched BLAS calls may introduce (see
    # transform), which the optimiser turns into differences within its
    # tolerance: tiny in length-scale units, nothing in the density.
    length_scale = gplvm.kernel_.k1.k2.length_scale
    np.testing.assert_allclose(some / length_scale, whole[rows] / length_scale,
                               rtol=0, atol=1e-6)
    density = PredictiveNegLogDensity(gplvm.kernel_, gplvm.embedding_, gplvm.L_,
                                      gplvm.alpha_, (Y_new[rows] - gplvm.mean_) / gplvm.scale_)
    np.testing.assert_allclose(density(some, np.arange(3))[0],
                               density(whole[rows], np.arange(3))[0], rtol=1e-9)


# ---------------------------------------------------- inverse_transform
@pytest.mark.parametrize("standardize", [False, True])
def test_inverse_transform_is_the_gp_prediction(standardize):
    _, Y = _curve()
    Y = Y * [1.0, 5.0, 0.1, 2.0] + [0.0, 3.0, -1.0, 10.0]
    gplvm = GPLVM(max_iter=50, random_state=0, standardize=standardize).fit(Y)
    Yc = (Y - gplvm.mean_) / gplvm.scale_
    if standardize:
        np.testing.assert_allclose(Yc.std(axis=0), 1.0)
    else:
        np.testing.assert_array_equal(gplvm.scale_, 1.0)
    sk = SklearnGPR(gplvm.kernel_, alpha=gplvm.alpha, optimizer=None).fit(gplvm.embedding_, Yc)
    X_query = np.random.default_rng(2).standard_normal((7, 2))
    mean, std = gplvm.inverse_transform(X_query, return_std=True)
    sk_mean, sk_std = sk.predict(X_query, return_std=True)
    np.testing.assert_allclose(mean, sk_mean * gplvm.scale_ + gplvm.mean_, rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_allclose(std, sk_std[:, :1] * gplvm.scale_, rtol=1e-7)
    np.testing.assert_allclose(gplvm.inverse_transform(X_query), mean)
    with pytest.raises(ValueError, match="n_components"):
        gplvm.inverse_transform(np.zeros((3, 3)))


def test_inverse_transform_reconstructs_the_training_data(fitted_curve):
    gplvm, Y = fitted_curve
    error = np.abs(gplvm.inverse_transform(gplvm.embedding_) - Y).max()
    assert error < 0.1


# --------------------------------------------------------------- digits
def _loo_1nn_error(Z, labels):
    D = pairwise_distances(Z)
    np.fill_diagonal(D, np.inf)
    return float(np.mean(labels[D.argmin(axis=1)] != labels))


def test_digits_embedding_separates_classes_better_than_pca():
    """Leave-one-out 1-NN error in 2-D: GPLVM below PCA (Lawrence 2005's
    claim). A stratified subset of 240 digits keeps the test fast; the full
    1,797 are reported by bench/bench_gplvm_digits.py."""
    Y, labels = load_digits(return_X_y=True)
    Y, Y_test, labels, labels_test = train_test_split(
        Y, labels, train_size=240, test_size=60, stratify=labels, random_state=0)
    pca_error = _loo_1nn_error(PCA(2).fit_transform(Y), labels)
    gplvm = GPLVM(n_components=2, max_iter=100, random_state=0).fit(Y)
    gplvm_error = _loo_1nn_error(gplvm.embedding_, labels)
    assert gplvm_error < 0.5 * pca_error
    # held-out digits placed by transform are classified by their training neighbours
    X_test = gplvm.transform(Y_test)
    nearest = pairwise_distances(X_test, gplvm.embedding_).argmin(axis=1)
    assert np.mean(labels[nearest] != labels_test) < pca_error


def test_fit_checks_memory_before_allocating(monkeypatch):
    import fastgp.memory as memory
    from fastgp._backend.latent import latent_blocks

    _, Y = _curve()
    needed = memory.gplvm_fit_bytes(40, 4, 2, latent_blocks(40, 2).size - 1)
    assert needed > 8 * 40 * 40
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: memory.MemoryReading(needed // 2, "test"))
    with pytest.raises(memory.InsufficientMemoryError, match="Fitting GPLVM"):
        GPLVM(max_iter=1).fit(Y)


def test_jitter_when_the_fitted_covariance_is_singular():
    from fastgp.exceptions import JitterWarning

    # no noise and duplicated rows: K is singular at the (PCA) start, kept by max_iter=0
    _, Y = _curve(n_samples=10)
    Y = np.vstack([Y, Y[:3]])
    gplvm = GPLVM(kernel=RBF([1.0, 1.0]), alpha=0.0, max_iter=0)
    with pytest.warns(JitterWarning):
        gplvm.fit(Y)
    assert gplvm.jitter_ > 0.0
    assert np.isfinite(gplvm.log_marginal_likelihood_value_)


def test_fixed_kernel_moves_only_the_latent_points():
    _, Y = _curve()
    kernel = C(1.0, "fixed") * RBF([1.0, 1.0], "fixed") + WhiteKernel(0.01, "fixed")
    start = GPLVM(kernel=kernel, max_iter=0, random_state=0).fit(Y)
    gplvm = GPLVM(kernel=kernel, max_iter=30, random_state=0).fit(Y)
    assert gplvm.kernel_.get_params() == kernel.get_params()
    assert gplvm.log_marginal_likelihood_value_ > start.log_marginal_likelihood_value_


def test_pandas_output():
    pd = pytest.importorskip("pandas")
    _, Y = _curve()
    gplvm = GPLVM(max_iter=5, random_state=0).set_output(transform="pandas")
    out = gplvm.fit_transform(Y)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["gplvm0", "gplvm1"]
    assert list(gplvm.transform(Y[:3]).columns) == ["gplvm0", "gplvm1"]


def test_row_bfgs_spends_no_iteration_on_rows_it_cannot_or_need_not_move():
    """Row-wise BFGS (GPLVM.transform's optimiser): a row that starts at its
    minimum, or where its function is not finite, is left as it is with no
    iteration counted; the other rows are minimised as they would be alone."""
    from fastgp._optimize.rows import minimize_rows

    centres = np.array([[1.0, -2.0], [0.5, 0.5], [3.0, 1.0]])

    def fun(X, rows):
        d = X - centres[rows]
        f, g = 0.5 * np.sum(d ** 2, axis=1), d.copy()
        f[rows == 2] = np.inf  # row 2's function is not finite anywhere
        return f, g

    X0 = np.array([[0.0, 0.0], centres[1], [0.0, 0.0]])
    X, f, n_iter = minimize_rows(fun, X0, step0=0.5)
    np.testing.assert_allclose(X[0], centres[0], atol=1e-6)
    assert n_iter[0] > 0
    np.testing.assert_array_equal(X[1:], X0[1:])
    assert n_iter[1] == 0 and n_iter[2] == 0


def test_gplvm_more_latent_dimensions_than_features_is_refused():
    # as scikit-learn's PCA: a latent dimension the data do not determine
    # left the optimiser on a flat direction until max_iter
    Y = np.random.default_rng(0).standard_normal((20, 2))
    with pytest.raises(ValueError, match=r"n_components=5 is more than the data's "
                                         r"n_features=2: .* Use n_components <= 2\."):
        GPLVM(n_components=5).fit(Y)
    assert GPLVM(n_components=2, max_iter=3).fit(Y).embedding_.shape == (20, 2)

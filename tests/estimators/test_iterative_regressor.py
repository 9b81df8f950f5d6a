"""GaussianProcessRegressor(solver="iterative") against solver="cholesky" on
the same problems: fitted hyperparameters, predictions, the log marginal
likelihood, multi-output and normalised targets, every optimiser; its
messages (slow kernels, CG short of tolerance, verbose); and the "auto"
switch with its warning, under a memory figure patched for the test."""

import pickle
import re

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, PairwiseKernel, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp.memory as memory
from fastgp import GaussianProcessRegressor
from fastgp.memory import MemoryReading
from fastgp.exceptions import InsufficientMemoryError


def _data(n=300, d=1, seed=0, noise=0.1, n_targets=None):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 8, (n, d))
    f = np.sin(X[:, 0]) + (0.5 * np.cos(X[:, 1]) if d > 1 else 0.0)
    if n_targets is None:
        return X, f + noise * rng.standard_normal(n)
    return X, np.column_stack([f * (k + 1) + noise * rng.standard_normal(n)
                               for k in range(n_targets)])


def _pair(kernel, X, y, **kwargs):
    exact = GaussianProcessRegressor(kernel, solver="cholesky", **kwargs).fit(X, y)
    iterative = GaussianProcessRegressor(kernel, solver="iterative", random_state=0,
                                         **kwargs).fit(X, y)
    return exact, iterative


@pytest.mark.parametrize("d", [1, 3])
def test_fit_matches_cholesky(d):
    X, y = _data(d=d)
    kernel = C(1.0) * RBF([1.0] * d) + WhiteKernel(0.1)
    exact, iterative = _pair(kernel, X, y)
    assert exact.solver_ == "cholesky" and iterative.solver_ == "iterative"
    assert iterative.L_ is None
    # the iterative optimum, scored by the exact likelihood, is the exact one's
    scored = exact.log_marginal_likelihood(iterative.kernel_.theta)
    assert scored == pytest.approx(exact.log_marginal_likelihood_value_, abs=0.05)
    Xq = np.random.default_rng(1).uniform(0, 8, (40, d))
    mean0, std0 = exact.predict(Xq, return_std=True)
    mean, std = iterative.predict(Xq, return_std=True)
    noise_sd = np.sqrt(exact.kernel_.k2.noise_level)
    assert np.max(np.abs(mean - mean0)) < 0.1 * noise_sd
    np.testing.assert_allclose(std, std0, rtol=0.05)


def test_predictions_and_likelihood_at_the_same_hyperparameters():
    # optimizer=None: both at the same theta, so predictions agree to CG's tolerance
    X, y = _data(n=200)
    kernel = C(1.3) * RBF(0.9) + WhiteKernel(0.05)
    exact, iterative = _pair(kernel, X, y, optimizer=None, cg_tol=1e-10,
                             preconditioner_rank=60)
    Xq = np.linspace(-1, 9, 30)[:, None]
    np.testing.assert_allclose(iterative.predict(Xq), exact.predict(Xq), atol=1e-7)
    _, std0 = exact.predict(Xq, return_std=True)
    _, std = iterative.predict(Xq, return_std=True)
    np.testing.assert_allclose(std, std0, rtol=1e-6)
    _, cov0 = exact.predict(Xq, return_cov=True)
    _, cov = iterative.predict(Xq, return_cov=True)
    np.testing.assert_allclose(cov, cov0, atol=1e-8)
    np.testing.assert_allclose(np.diag(cov), std ** 2, rtol=1e-8)
    assert iterative.score(X, y) == pytest.approx(exact.score(X, y), rel=1e-8)
    # the preconditioner is exact for this 1-D kernel: the likelihood too
    theta = kernel.theta + 0.1
    value0, grad0 = exact.log_marginal_likelihood(theta, eval_gradient=True)
    value, grad = iterative.log_marginal_likelihood(theta, eval_gradient=True)
    assert value == pytest.approx(value0, rel=1e-8)
    np.testing.assert_allclose(grad, grad0, rtol=1e-5)
    assert iterative.log_marginal_likelihood(theta) == pytest.approx(value, rel=1e-12)
    assert iterative.log_marginal_likelihood() == iterative.log_marginal_likelihood_value_


@pytest.mark.slow  # an exact and a matrix-free fit side by side
def test_predictive_std_is_accurate_where_the_noise_is_small():
    # noise variance 1e-4 beside a signal variance 2: the variance k** -
    # k*^T K~^-1 k* cancels to the noise's order, so the prediction solves to
    # 0.01 x cg_tol; at cg_tol itself the std here is 45 % off (0.5 % now)
    X, y = _data(n=400, d=2, noise=0.01)
    kernel = C(2.0) * RBF([1.5, 2.0]) + WhiteKernel(1e-4)
    exact, iterative = _pair(kernel, X, y, optimizer=None, preconditioner_rank=20)
    Xq = np.random.default_rng(1).uniform(0, 8, (40, 2))
    mean0, std0 = exact.predict(Xq, return_std=True)
    mean, std = iterative.predict(Xq, return_std=True)
    np.testing.assert_allclose(std, std0, rtol=0.02)
    assert np.max(np.abs(mean - mean0)) < 0.1 * np.sqrt(1e-4)
    _, cov0 = exact.predict(Xq, return_cov=True)
    _, cov = iterative.predict(Xq, return_cov=True)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), np.sqrt(np.diag(cov0)), rtol=0.02)


def test_sample_y_draws_from_the_iterative_posterior():
    X, y = _data(n=150)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.05)
    exact, iterative = _pair(kernel, X, y, optimizer=None, cg_tol=1e-10)
    Xq = np.linspace(0, 8, 20)[:, None]
    draws = iterative.sample_y(Xq, n_samples=4000, random_state=0)
    assert draws.shape == (20, 4000)
    mean0, std0 = exact.predict(Xq, return_std=True)
    assert np.all(np.abs(draws.mean(axis=1) - mean0) < 5 * std0 / np.sqrt(4000))


def test_multi_output_and_normalize_y():
    X, Y = _data(n=200, n_targets=2)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    exact, iterative = _pair(kernel, X, Y, normalize_y=True)
    assert iterative.alpha_.shape == (200, 2)
    scored = exact.log_marginal_likelihood(iterative.kernel_.theta)
    assert scored == pytest.approx(exact.log_marginal_likelihood_value_, abs=0.05)
    Xq = np.linspace(0, 8, 15)[:, None]
    mean0, std0 = exact.predict(Xq, return_std=True)
    mean, std = iterative.predict(Xq, return_std=True)
    assert mean.shape == mean0.shape == (15, 2) and std.shape == std0.shape
    np.testing.assert_allclose(mean, mean0, atol=0.02 * np.abs(mean0).max())
    np.testing.assert_allclose(std, std0, rtol=0.05)
    _, cov = iterative.predict(Xq, return_cov=True)
    assert cov.shape == (15, 15, 2)


@pytest.mark.parametrize("optimizer", ["CG", "callable", None])
def test_every_optimizer(optimizer):
    X, y = _data(n=150)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    if optimizer == "callable":
        def optimizer(obj_func, initial_theta, bounds):
            from scipy.optimize import minimize
            result = minimize(lambda t: obj_func(t, eval_gradient=True), initial_theta,
                              jac=True, bounds=bounds, method="L-BFGS-B")
            return result.x, result.fun
    exact, iterative = _pair(kernel, X, y, optimizer=optimizer)
    scored = exact.log_marginal_likelihood(iterative.kernel_.theta)
    assert scored == pytest.approx(exact.log_marginal_likelihood_value_, abs=0.05)


def test_restarts_and_pickle():
    X, y = _data(n=120)
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), solver="iterative",
                                   n_restarts_optimizer=1, random_state=0).fit(X, y)
    Xq = np.linspace(0, 8, 7)[:, None]
    copy = pickle.loads(pickle.dumps(gpr))
    np.testing.assert_allclose(copy.predict(Xq, return_std=True),
                               gpr.predict(Xq, return_std=True), rtol=1e-10)


def test_kernel_off_the_fast_path_is_a_value_error():
    X, y = _data(n=30)
    with pytest.raises(ValueError, match='solver="iterative" needs a kernel on'):
        GaussianProcessRegressor(PairwiseKernel(metric="laplacian"),
                                 solver="iterative").fit(X, y)


def test_cg_short_of_tolerance_is_a_convergence_warning_with_the_residual():
    X, y = _data(n=150, noise=1e-3)
    gpr = GaussianProcessRegressor(C(1.0) * RBF(0.3) + WhiteKernel(1e-6), solver="iterative",
                                   optimizer=None, max_cg_iter=2, preconditioner_rank=2,
                                   cg_tol=1e-10)
    with pytest.warns(ConvergenceWarning, match=r"largest relative residual reached was "
                                                 r"[0-9.e+-]+") as record:
        gpr.fit(X, y)
    message = str(record[0].message)
    assert "max_cg_iter=2" in message and "cg_tol=1e-10" in message
    with pytest.warns(ConvergenceWarning, match="prediction"):
        gpr.predict(X[:5], return_std=True)


def test_verbose_reports_cg_iterations_and_residual(capsys):
    X, y = _data(n=100)
    GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), solver="iterative",
                             verbose=1).fit(X, y)
    lines = capsys.readouterr().out.splitlines()
    cg = [line for line in lines if line.strip().startswith("CG ")]
    assert cg and all(re.search(r"CG \d+ iterations, relative residual \S+", line)
                      for line in cg)
    assert any(line.startswith("iter") for line in lines)


def _patch_memory(monkeypatch, available):
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: MemoryReading(int(available), "the test's figure"))


def test_auto_takes_cholesky_when_the_buffer_fits(monkeypatch):
    _patch_memory(monkeypatch, 2**40)
    X, y = _data(n=100)
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1)).fit(X, y)
    assert gpr.solver == "auto" and gpr.solver_ == "cholesky" and gpr.L_ is not None


def test_auto_switches_to_vecchia_with_a_warning_where_the_buffer_does_not_fit(monkeypatch):
    n = 2000  # past the Vecchia estimate's fixed 8 MiB
    X, y = _data(n=n)
    kwargs = dict(preconditioner_rank=10, n_probes=4, optimizer=None)
    dense = memory.fit_bytes(n, 1, 1, 3)
    vecchia = memory.vecchia_fit_bytes(n, 1, 1, 30)
    assert vecchia < dense
    _patch_memory(monkeypatch, (dense + vecchia) // 2)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    with pytest.warns(UserWarning, match='solver="auto" chose the Vecchia solver: the '
                                         "Cholesky path needs about .* only .* is available"):
        gpr = GaussianProcessRegressor(kernel, **kwargs).fit(X, y)
    assert gpr.solver_ == "vecchia" and gpr.L_ is None
    # the dense path itself refuses, naming its own first remedy, the other
    # solvers, then the rest of its own
    with pytest.raises(InsufficientMemoryError, match='fit on fewer samples.*'
                                                      'use solver="vecchia".*'
                                                      'use solver="iterative".*'
                                                      'use a machine with more memory'):
        GaussianProcessRegressor(kernel, solver="cholesky", **kwargs).fit(X, y)


def test_auto_takes_vecchia_past_its_size_with_a_warning(monkeypatch):
    from fastgp._solvers import choice

    _patch_memory(monkeypatch, 2**40)
    monkeypatch.setattr(choice, "AUTO_CHOLESKY_MAX_SAMPLES", 100)
    X, y = _data(n=150)
    with pytest.warns(UserWarning, match=r"chose the Vecchia solver: N = 150 samples is "
                                         r"past 100.*flops.*one loss\+gradient about "
                                         r"0.00054 s") as record:
        gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1),
                                       optimizer=None).fit(X, y)
    assert gpr.solver_ == "vecchia"
    assert "input dimensions" not in str(record[0].message)
    # many input dimensions: the warning says Vecchia may condition poorly
    rng = np.random.default_rng(0)
    X5 = rng.standard_normal((150, 5))
    with pytest.warns(UserWarning, match=r"With 5 input dimensions nearest neighbours are "
                                         r'far apart.*solver="iterative"'):
        GaussianProcessRegressor(C(1.0) * RBF(np.ones(5)) + WhiteKernel(0.1),
                                 optimizer=None).fit(X5, X5[:, 0])


def test_auto_keeps_cholesky_for_a_slow_kernel(monkeypatch):
    _patch_memory(monkeypatch, 1)
    X, y = _data(n=30)
    with pytest.raises(InsufficientMemoryError) as info:
        with pytest.warns(UserWarning):
            GaussianProcessRegressor(PairwiseKernel(metric="laplacian")).fit(X, y)
    assert "solver=" not in str(info.value)


def test_auto_refuses_with_the_cholesky_message_when_nothing_fits(monkeypatch):
    _patch_memory(monkeypatch, 1000)
    X, y = _data(n=50)
    with pytest.raises(InsufficientMemoryError, match='use solver="iterative"'):
        GaussianProcessRegressor(C(1.0) * RBF(1.0)).fit(X, y)


def test_iterative_memory_check(monkeypatch):
    _patch_memory(monkeypatch, 1000)
    X, y = _data(n=50)
    with pytest.raises(InsufficientMemoryError, match="Fitting GaussianProcessRegressor"):
        GaussianProcessRegressor(RBF(1.0), solver="iterative").fit(X, y)


@pytest.mark.parametrize("alpha", ["scalar", "array"])
def test_prediction_system_rebuilt_after_fit_keeps_alpha(alpha):
    # alpha is the only noise here, so a prediction that leaves it out of
    # its solve is far off (std 100 % wrong at alpha = 0.1); the system is
    # rebuilt when an option changes after the fit, and must keep it
    X, y = _data(120, noise=0.3)
    alpha = 0.1 if alpha == "scalar" else np.random.default_rng(1).uniform(0.05, 0.2, 120)
    kernel = C(1.0) * RBF(0.5)
    exact = GaussianProcessRegressor(kernel, alpha=alpha, optimizer=None,
                                     solver="cholesky").fit(X, y)
    model = GaussianProcessRegressor(kernel, alpha=alpha, optimizer=None,
                                     solver="iterative", preconditioner_rank=120,
                                     cg_tol=1e-8).fit(X, y)
    Xq = np.linspace(-0.5, 5.5, 17)[:, None]
    mean0, std0 = exact.predict(Xq, return_std=True)
    for cg_tol in (1e-8, 1e-10):  # the fit's system, then one built again
        model.set_params(cg_tol=cg_tol)
        mean, std = model.predict(Xq, return_std=True)
        np.testing.assert_allclose(mean, mean0, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(std, std0, rtol=1e-5)


def test_a_mean_alone_prediction_reports_no_unconverged_solve():
    """predict(X) solves nothing (the mean is k(X*, X) alpha), so it has no
    residual to warn about; with the standard deviation the solve converges
    on this easy problem: neither warns."""
    import warnings

    X, y = _data(n=120)
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), solver="iterative",
                                   optimizer=None, random_state=0).fit(X, y)
    Xq = np.linspace(0, 8, 7)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gpr.predict(Xq)
        gpr.predict(Xq, return_std=True)


def test_solver_options_default_to_the_regressors_defaults():
    """SolverOptions() (the matrix-free path built without an estimator, as
    in the tests and benchmarks) runs with the estimator's defaults."""
    import dataclasses

    from fastgp._solvers.iterative.system import SolverOptions

    params = GaussianProcessRegressor().get_params()
    options = SolverOptions()
    for field in dataclasses.fields(SolverOptions):
        assert getattr(options, field.name) == params[field.name], field.name

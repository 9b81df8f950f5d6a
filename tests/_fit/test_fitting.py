"""The fit core (fastgp._fit.session.FitSession): a fit that raises leaves a fitted estimator
exactly as it was, for every estimator; the final factor is the workspace's
buffer with a zero upper triangle; warnings point at the user's line."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp.memory as memory
from fastgp import GPLVM, GaussianProcessRegressor
from fastgp._fit.report import IterationReport
from fastgp._solvers.base import FactorTexts
from fastgp._solvers.kept_factor import final_factor
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood
from fastgp.exceptions import JitterWarning, NotPositiveDefiniteError
from fastgp.memory import MemoryReading
from fastgp.exceptions import InsufficientMemoryError
from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood


def _quietly(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit()


def _regression_data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    return X, np.sin(X.sum(axis=1)) + 0.05 * rng.standard_normal(n)


def _latent_data(n, d, seed):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 3, size=n)
    Y = np.column_stack([np.sin(t), np.cos(t), t, t**2])[:, :d]
    return Y + 0.02 * rng.standard_normal((n, d))


def _fitted_gplvm():
    return _quietly(lambda: GPLVM(n_components=1, max_iter=20, random_state=0)
                    .fit(_latent_data(30, 3, 0)))


def _fitted_regressor():
    X, y = _regression_data(30, 2, 0)
    return _quietly(lambda: GaussianProcessRegressor(
        C(1.0) * RBF(1.0) + WhiteKernel(0.1), random_state=0).fit(X, y))


def _snapshot(estimator):
    """Every attribute (the same objects) and a copy of every array's values."""
    objects = dict(vars(estimator))
    values = {name: np.array(value, copy=True) for name, value in objects.items()
              if isinstance(value, np.ndarray)}
    thetas = {name: np.array(value.theta) for name, value in objects.items()
              if hasattr(value, "theta")}
    return objects, values, thetas


def _assert_unchanged(estimator, snapshot):
    objects, values, thetas = snapshot
    now = vars(estimator)
    assert now.keys() == objects.keys()
    for name, value in objects.items():
        assert now[name] is value, f"{name} was replaced"
    for name, array in values.items():
        np.testing.assert_array_equal(now[name], array, err_msg=name)
    for name, theta in thetas.items():
        np.testing.assert_array_equal(now[name].theta, theta, err_msg=name)


def _tiny_machine(monkeypatch):
    monkeypatch.setattr(memory.reading, "available_memory",
                        lambda *a, **k: MemoryReading(1_000, "a test's tiny machine"))


FITTED_GPLVM = ["embedding_", "kernel_", "L_", "alpha_", "mean_", "scale_", "n_iter_",
                "n_evaluations_", "jitter_", "log_marginal_likelihood_value_",
                "n_features_in_", "_Y_fit"]
FITTED_REGRESSOR = ["X_train_", "y_train_", "kernel_", "L_", "alpha_", "n_iter_",
                    "n_evaluations_", "jitter_", "log_marginal_likelihood_value_",
                    "n_features_in_", "_y_train_mean", "_y_train_std", "_rng"]


def test_fitting_gplvm_refit_refused_by_the_memory_check_changes_nothing(monkeypatch):
    gplvm = _fitted_gplvm()
    assert set(FITTED_GPLVM) <= set(vars(gplvm))
    before = _snapshot(gplvm)
    _tiny_machine(monkeypatch)
    # other data: another N and another feature count (n_features_in_ too)
    with pytest.raises(InsufficientMemoryError, match="Fitting GPLVM"):
        _quietly(lambda: gplvm.fit(_latent_data(25, 4, 1)))
    _assert_unchanged(gplvm, before)
    # and it still transforms as the first fit did
    monkeypatch.undo()
    gplvm.transform(_latent_data(5, 3, 2))


def test_fitting_regressor_refit_refused_by_the_memory_check_changes_nothing(monkeypatch):
    gpr = _fitted_regressor()
    assert set(FITTED_REGRESSOR) <= set(vars(gpr))
    before = _snapshot(gpr)
    _tiny_machine(monkeypatch)
    X, y = _regression_data(25, 3, 1)
    with pytest.raises(InsufficientMemoryError, match="Fitting GaussianProcessRegressor"):
        _quietly(lambda: gpr.fit(X, y))
    _assert_unchanged(gpr, before)


def test_fitting_refit_that_fails_at_the_final_factor_changes_nothing(monkeypatch):
    # the latest a fit can fail: after the optimiser, at the kept factor
    gplvm, gpr = _fitted_gplvm(), _fitted_regressor()
    snapshots = [_snapshot(gplvm), _snapshot(gpr)]

    def refuse(self, point):
        error = NotPositiveDefiniteError(1, 1)
        error.jitter = 0.5
        raise error

    monkeypatch.setattr(LatentNegLogMarginalLikelihood, "factor_with_jitter", refuse)
    monkeypatch.setattr(NegLogMarginalLikelihood, "factor_with_jitter", refuse)
    with pytest.raises(np.linalg.LinAlgError, match="WhiteKernel"):
        _quietly(lambda: gplvm.fit(_latent_data(25, 4, 1)))
    X, y = _regression_data(25, 3, 1)
    with pytest.raises(np.linalg.LinAlgError, match="jitter up to 0.5"):
        _quietly(lambda: gpr.fit(X, y))
    _assert_unchanged(gplvm, snapshots[0])
    _assert_unchanged(gpr, snapshots[1])


def test_fitting_refused_first_fit_leaves_the_estimator_unfitted(monkeypatch):
    _tiny_machine(monkeypatch)
    gplvm = GPLVM(n_components=1, max_iter=5)
    with pytest.raises(InsufficientMemoryError):
        gplvm.fit(_latent_data(20, 3, 0))
    # validate_data had set n_features_in_; it is undone with the rest
    assert vars(gplvm).keys() == vars(GPLVM(n_components=1, max_iter=5)).keys()


def test_fitting_final_factor_is_the_workspace_buffer_lower_triangular():
    X, y = _regression_data(12, 1, 3)
    from fastgp._backend.covariance import make_covariance

    kernel = RBF(0.7) + WhiteKernel(0.01)
    workspace = Workspace(12)
    objective = NegLogMarginalLikelihood(make_covariance(kernel, X), y, np.zeros(12),
                                         workspace)
    buffer = workspace.buffer()
    buffer[...] = 7.0  # stale upper triangle
    messages = FactorTexts("nan", "pd", "jitter", "overflow").messages(kernel)
    kept = final_factor(objective, kernel.theta, messages)
    L, A = kept.L, kept.A
    assert L is buffer and kept.jitter == 0.0
    assert workspace._buffer is None  # released: L_ now owns it
    np.testing.assert_array_equal(L, np.tril(L))
    K = kernel(X)
    np.testing.assert_allclose(L @ L.T, K, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(A[:, 0], np.linalg.solve(K, y), rtol=1e-9)


def test_fitting_jitter_warning_points_at_the_callers_line():
    # duplicated inputs without noise: the kept factor needs jitter
    X = np.repeat(np.linspace(0, 1, 5), 2).reshape(-1, 1)
    y = np.repeat(np.sin(np.linspace(0, 1, 5)), 2)
    gpr = GaussianProcessRegressor(RBF(1.0), alpha=0.0, optimizer=None)
    with pytest.warns(JitterWarning) as caught:
        gpr.fit(X, y)
    assert [w.filename for w in caught if w.category is JitterWarning] == [__file__]
    Y = np.repeat(_latent_data(5, 3, 0), 2, axis=0)
    gplvm = GPLVM(n_components=1, kernel=C(1.0) * RBF(1.0), alpha=0.0, max_iter=0)
    with pytest.warns(JitterWarning) as caught:
        gplvm.fit_transform(Y)
    assert [w.filename for w in caught if w.category is JitterWarning] == [__file__]


def test_fitting_iteration_report_keeps_the_progress_line(capsys):
    IterationReport("-log p(y|X)", 4)(3, -1.5, 0.25)
    IterationReport("-log p(Y|X)", 5)(12, 2.0, 1e-3)
    assert capsys.readouterr().out.splitlines() == [
        "iter    3  -log p(y|X) -1.500000e+00  |grad| 2.500e-01",
        "iter    12  -log p(Y|X)  2.000000e+00  |grad| 1.000e-03",
    ]


def test_fitting_gplvm_transforms_from_a_read_only_embedding():
    # a model loaded with joblib's mmap_mode="r" has read-only arrays
    gplvm = _fitted_gplvm()
    Y_new = _latent_data(4, 3, 5)
    expected = gplvm.transform(Y_new)
    for name in ("embedding_", "L_", "alpha_"):
        getattr(gplvm, name).flags.writeable = False
    np.testing.assert_array_equal(gplvm.transform(Y_new), expected)
    gplvm.inverse_transform(expected)


def test_fitting_iteration_report_gives_time_per_iteration_and_run_headers(capsys):
    ticks = iter([10.0, 10.5, 11.25, 20.0, 20.125])
    report = IterationReport("-log p(y|X)", 4, clock=lambda: next(ticks))
    report.run_started(0, 2)  # 10.0
    report(1, -1.5, 0.25)     # 10.5
    report(2, -1.75, 0.125)   # 11.25
    report.run_started(1, 2)  # 20.0
    report(1, -1.0, 0.5)      # 20.125
    report.run_kept(0, 2, -1.75)
    assert capsys.readouterr().out.splitlines() == [
        "run 1 of 2: from the initial hyperparameters",
        "iter    1  -log p(y|X) -1.500000e+00  |grad| 2.500e-01  0.5 s/iter",
        "iter    2  -log p(y|X) -1.750000e+00  |grad| 1.250e-01  0.75 s/iter",
        "run 2 of 2: from a random start within the bounds",
        "iter    1  -log p(y|X) -1.000000e+00  |grad| 5.000e-01  0.125 s/iter",
        "kept run 1 of 2 (-log p(y|X) -1.750000e+00)",
    ]


def test_fitting_verbose_fit_with_restarts_prints_run_headers_and_the_kept_run(capsys):
    from fastgp import GaussianProcessRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 5, size=(20, 1))
    y = np.sin(X[:, 0])
    GaussianProcessRegressor(C(1.0) * RBF(1.0), n_restarts_optimizer=2, random_state=0,
                             verbose=1).fit(X, y)
    out = capsys.readouterr().out
    assert "run 1 of 3" in out and "run 3 of 3" in out and "kept run" in out
    assert "s/iter" in out


def test_fitting_guarded_value_answers_inf_where_the_objective_has_none():
    """A line search backs off where the objective has no answer (not
    positive definite, a point that failed, a value that is not finite);
    any other error is the caller's to see."""
    from fastgp._solvers.base import PointFailed, guarded_value

    def raising(exc):
        def value_at(point):
            raise exc
        return value_at

    assert guarded_value(lambda point: 2.0 * point, 1.5) == 3.0
    assert guarded_value(raising(NotPositiveDefiniteError(1, 1)), 1.0) == np.inf
    assert guarded_value(raising(PointFailed("trial")), 1.0) == np.inf
    assert guarded_value(lambda point: np.nan, 1.0) == np.inf
    with pytest.raises(KeyError):
        guarded_value(raising(KeyError("a bug")), 1.0)


@pytest.mark.parametrize("n", [1, 3, 50])
def test_fitting_workspace_checks_the_bytes_its_buffer_takes(monkeypatch, n):
    """The memory check before the N x N buffer is allocated asks for what
    the buffer will take, no less."""
    import fastgp._solvers.workspace as workspace_module

    asked = []
    monkeypatch.setattr(workspace_module, "check_memory",
                        lambda needed, **kwargs: asked.append(needed))
    workspace = Workspace(n)
    buffer = workspace.buffer()
    assert asked == [buffer.nbytes] == [workspace.nbytes]

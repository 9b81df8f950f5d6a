"""GaussianProcessRegressor(solver="vecchia"): Vecchia's approximation as the
estimator runs it (docs/design.md, "Vecchia's approximation"). The
conformance battery (tests/_solvers/test_solver_conformance.py) checks it against the
dense reference where it is exact; these tests check what is its own: the
optimiser, the neighbours in the length-scaled space, restarts and threads,
predictions on few neighbours, and answers to bad input."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, DotProduct, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import _fuzz
import _vecchia_reference as ref
from fastgp import GaussianProcessRegressor
from fastgp._solvers.vecchia.ordering import EXACT_BELOW
from fastgp._solvers.vecchia.scaling import length_scales, stale


def _data(n=300, d=2, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n, d))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, -1]) + noise * rng.standard_normal(n)
    return X, y


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit()


KERNEL = C(1.0) * Matern(0.2, nu=1.5) + WhiteKernel(0.01)


def test_vecchia_likelihood_equals_the_dense_reference_of_its_conditionals():
    # at a few neighbours the estimator's log_marginal_likelihood is the sum
    # of the conditional densities on the fit's own ordering and neighbours
    X, y = _data(120)
    gpr = GaussianProcessRegressor(KERNEL, solver="vecchia", n_neighbors=5,
                                   optimizer=None, random_state=0).fit(X, y)
    objective = GaussianProcessRegressor(KERNEL, solver="vecchia", n_neighbors=5)
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.choice import make_solver

    solver = make_solver("vecchia", objective.get_params())
    internal = solver.objective(make_covariance(KERNEL, X), y[:, None], np.full(120, 1e-10),
                                gpr._fitted_draws)
    perm = internal._sigma[internal._points]
    nbrs = np.where(internal._neighbours >= 0, internal._sigma[internal._neighbours], -1)
    value, grad = ref.vecchia_nll_grad_dense(KERNEL, X, y[:, None], np.full(120, 1e-10), perm, nbrs)
    got, got_grad = gpr.log_marginal_likelihood(KERNEL.theta, eval_gradient=True)
    assert -got == pytest.approx(value, rel=1e-10)
    np.testing.assert_allclose(-got_grad, grad, rtol=1e-8, atol=1e-10)
    assert gpr.log_marginal_likelihood_value_ == gpr.log_marginal_likelihood(KERNEL.theta)


def test_vecchia_fit_is_near_the_exact_optimum_and_predicts_as_it():
    X, y = _data(400)
    exact = _quiet(lambda: GaussianProcessRegressor(KERNEL, solver="cholesky",
                                                    random_state=0).fit(X, y))
    vecchia = _quiet(lambda: GaussianProcessRegressor(KERNEL, solver="vecchia",
                                                      random_state=0).fit(X, y))
    assert vecchia.solver_ == "vecchia" and vecchia.L_ is None
    # scored by the exact likelihood, Vecchia's optimum is within a nat
    at_vecchia = exact.log_marginal_likelihood(vecchia.kernel_.theta)
    assert exact.log_marginal_likelihood_value_ - at_vecchia < 1.0
    Xq, _ = _data(50, seed=1)
    mean, std = vecchia.predict(Xq, return_std=True)
    exact_mean, exact_std = exact.predict(Xq, return_std=True)
    assert np.max(np.abs(mean - exact_mean)) < 0.05
    np.testing.assert_allclose(std, exact_std, rtol=0.1)


def test_vecchia_neighbours_found_again_when_length_scales_move():
    # ARD: one dimension barely matters; the fit starts isotropic, so the
    # optimum's length scales' ratio moves far and the layout follows
    rng = np.random.default_rng(3)
    X = rng.uniform(0.0, 1.0, size=(400, 2))
    y = np.sin(8 * X[:, 0]) + 0.05 * rng.standard_normal(400)
    kernel = C(1.0) * RBF([0.3, 0.3]) + WhiteKernel(0.01)
    gpr = _quiet(lambda: GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=10,
                                                  random_state=0).fit(X, y))
    scales = gpr._fitted_draws.scales
    final = length_scales(gpr.kernel_, 2)
    assert not stale(scales, final)  # the last layout is at the optimum's ratios
    assert scales[1] / scales[0] > 3.0  # ... which are far from the start's 1
    # the optimiser ran again on the last layout: the published point is a
    # stationary point of that layout's objective, or held by a bound
    # (converged: below 5e-4; the previous layout's optimum, not optimised
    # again: 1 to 6)
    step = _projected_gradient(gpr)
    assert np.max(np.abs(step)) < 1e-2, step


def test_vecchia_scaling_takes_the_shortest_length_scale_per_dimension():
    kernel = RBF([1.0, 4.0]) + Matern([2.0, 0.5], nu=1.5) * DotProduct(1.0)
    np.testing.assert_array_equal(length_scales(kernel, 2), [1.0, 0.5])
    np.testing.assert_array_equal(length_scales(DotProduct(1.0) + WhiteKernel(), 3),
                                  [1.0, 1.0, 1.0])
    assert not stale(np.array([1.0, 2.0]), np.array([3.0, 6.0]))  # a common factor
    assert stale(np.array([1.0, 2.0]), np.array([1.0, 4.0]))


@pytest.mark.parametrize("count", [2])
def test_vecchia_same_bits_on_one_and_two_threads(count, numba_threads):
    # numba_threads (tests/conftest.py) skips where NUMBA_NUM_THREADS is
    # below `count` and restores this thread's count afterwards
    X, y = _data(600)
    results = []
    for threads in (1, count):
        numba_threads(threads)
        gpr = _quiet(lambda: GaussianProcessRegressor(
            KERNEL, solver="vecchia", n_neighbors=8, random_state=0).fit(X, y))
        results.append((gpr.kernel_.theta, gpr.alpha_, gpr.log_marginal_likelihood_value_,
                        gpr.predict(X[:20] + 0.01, return_std=True)))
    (t1, a1, l1, (m1, s1)), (t2, a2, l2, (m2, s2)) = results
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(a1, a2)
    assert l1 == l2
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(s1, s2)


def test_vecchia_above_the_exact_ordering_gives_the_same_bits_for_the_same_seed():
    # past EXACT_BELOW points the maxmin ordering is approximate, its subsets
    # drawn from random_state (docs/reliability.md, "Persistence and
    # determinism"): two fits with one seed are the same bits, and the
    # likelihood of the fitted theta replays the fit's own ordering
    n = EXACT_BELOW + 1
    X, y = _data(n)

    def fit(seed):
        return _quiet(lambda: GaussianProcessRegressor(
            C(1.0) * RBF(0.3) + WhiteKernel(0.01), solver="vecchia", n_neighbors=3,
            max_iter=2, random_state=seed).fit(X, y))

    first, again, other = fit(0), fit(0), fit(1)
    np.testing.assert_array_equal(first.kernel_.theta, again.kernel_.theta)
    np.testing.assert_array_equal(first.alpha_, again.alpha_)
    assert first.log_marginal_likelihood_value_ == again.log_marginal_likelihood_value_
    assert (first.log_marginal_likelihood(first.kernel_.theta)
            == first.log_marginal_likelihood_value_)
    # the seed is what fixes it: another seed, another approximate ordering
    assert not np.array_equal(first.alpha_, other.alpha_)


def _projected_gradient(gpr):
    """L-BFGS-B's projected gradient of -log p at the fitted theta, on the
    fit's own objective (its last layout): zero at a stationary point or
    where a bound holds the point."""
    theta = gpr.kernel_.theta
    _, grad = gpr.log_marginal_likelihood(theta, eval_gradient=True)
    bounds = gpr.kernel_.bounds
    return np.clip(theta + grad, bounds[:, 0], bounds[:, 1]) - theta


def test_vecchia_restarts_in_workers_give_the_sequential_fit():
    from joblib import parallel_config

    X, y = _data(200)
    kwargs = dict(solver="vecchia", n_neighbors=6, n_restarts_optimizer=2, random_state=0)
    sequential = _quiet(lambda: GaussianProcessRegressor(KERNEL, **kwargs).fit(X, y))
    with parallel_config(backend="threading"):
        parallel = _quiet(lambda: GaussianProcessRegressor(KERNEL, n_jobs=2, **kwargs)
                          .fit(X, y))
    np.testing.assert_array_equal(parallel.kernel_.theta, sequential.kernel_.theta)
    assert parallel.log_marginal_likelihood_value_ == sequential.log_marginal_likelihood_value_


@pytest.mark.parametrize("n", [1, 2, 5])
def test_vecchia_fewer_samples_than_neighbours_is_the_exact_gp(n):
    # n_neighbors >= N: every earlier point is a neighbour (documented)
    X, y = _data(n)
    kernel = C(1.0) * RBF(0.5) + WhiteKernel(0.1)
    vecchia = GaussianProcessRegressor(kernel, solver="vecchia", optimizer=None).fit(X, y)
    exact = GaussianProcessRegressor(kernel, solver="cholesky", optimizer=None).fit(X, y)
    assert vecchia.log_marginal_likelihood_value_ == pytest.approx(
        exact.log_marginal_likelihood_value_, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(vecchia.predict(X + 0.1, return_std=True),
                               exact.predict(X + 0.1, return_std=True), rtol=1e-9, atol=1e-12)


def test_vecchia_duplicated_inputs_without_any_nugget_are_a_clear_error():
    X, y = _data(50)
    X[10] = X[3]  # zero distance: a singular block without a nugget
    with pytest.raises(np.linalg.LinAlgError, match="alpha"):
        GaussianProcessRegressor(RBF(0.3), alpha=0.0, solver="vecchia",
                                 optimizer=None).fit(X, y)
    # the default alpha keeps every block positive definite (documented)
    gpr = GaussianProcessRegressor(RBF(0.3), solver="vecchia", optimizer=None).fit(X, y)
    assert np.isfinite(gpr.log_marginal_likelihood_value_)


def test_vecchia_bad_parameters_are_value_errors():
    X, y = _data(20)
    for params in (dict(n_neighbors=0), dict(n_neighbors_predict=0),
                   dict(ordering="hilbert")):
        with pytest.raises(ValueError, match=next(iter(params))):
            GaussianProcessRegressor(solver="vecchia", **params).fit(X, y)
    with pytest.raises(ValueError, match="fast path"):
        from sklearn.gaussian_process.kernels import PairwiseKernel

        GaussianProcessRegressor(PairwiseKernel(), solver="vecchia").fit(X, y)


def test_vecchia_joint_prediction_refuses_past_its_limit(monkeypatch):
    import fastgp._solvers.vecchia.predict as predict

    X, y = _data(200)
    gpr = GaussianProcessRegressor(KERNEL, solver="vecchia", optimizer=None).fit(X, y)
    mean, cov = gpr.predict(X[:4] + 0.01, return_cov=True)
    _, std = gpr.predict(X[:4] + 0.01, return_std=True)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), std, rtol=1e-3)
    monkeypatch.setattr(predict, "JOINT_MAX_POINTS", 50)
    with pytest.raises(ValueError, match="more than the 50.*return_std=True"):
        gpr.predict(X[:20] + 0.01, return_cov=True)


def test_vecchia_random_ordering_is_reproducible_and_differs_from_maxmin():
    X, y = _data(300)
    fits = [GaussianProcessRegressor(KERNEL, solver="vecchia", ordering=ordering,
                                     n_neighbors=5, optimizer=None, random_state=seed).fit(X, y)
            for ordering, seed in (("random", 0), ("random", 0), ("random", 1), ("maxmin", 0))]
    values = [f.log_marginal_likelihood_value_ for f in fits]
    assert values[0] == values[1] and values[0] != values[2] and values[0] != values[3]


@st.composite
def _vecchia_problems(draw):
    n = draw(st.integers(1, 30))
    d = draw(st.integers(1, 3))
    X = draw(arrays(np.float64, (n, d), elements=_fuzz.ordinary))
    if n > 2 and draw(st.booleans()):
        X[-1] = X[0]  # a duplicated input
    T = draw(st.sampled_from([1, 2]))
    Y = draw(arrays(np.float64, (n, T), elements=_fuzz.ordinary))
    kernel = draw(st.sampled_from([
        lambda: C(1.3) * RBF(np.full(d, 0.9)) + WhiteKernel(0.05),
        lambda: Matern(0.7, nu=0.5) + WhiteKernel(0.1),
        lambda: C(0.8) * Matern(1.2, nu=2.5),
        lambda: DotProduct(0.5) * RBF(1.1) + WhiteKernel(0.2)]))()
    alpha = draw(st.sampled_from([1e-2, 1e-3, "array"]))
    alpha = np.linspace(1e-3, 1e-2, n) if alpha == "array" else alpha
    m = draw(st.integers(1, 8))
    ordering = draw(st.sampled_from(["maxmin", "random"]))
    return X, (Y[:, 0] if T == 1 else Y), kernel, alpha, m, ordering


@_fuzz.FUZZ
@given(_vecchia_problems())
def test_fuzz_vecchia_equals_the_dense_reference_of_its_conditionals(problem):
    from fastgp._backend.covariance import make_covariance

    X, y, kernel, alpha, m, ordering = problem
    n = len(X)
    gpr = GaussianProcessRegressor(kernel, alpha=alpha, solver="vecchia", n_neighbors=m,
                                   ordering=ordering, optimizer=None, random_state=0)
    gpr.fit(X, y)
    Y = y.reshape(n, -1)
    diag_add = np.broadcast_to(alpha, (n,)).astype(np.float64)
    internal = gpr._fitted_solver.objective(
        make_covariance(kernel, X), Y, diag_add, gpr._fitted_draws)
    perm = internal._sigma[internal._points]
    nbrs = np.where(internal._neighbours >= 0, internal._sigma[internal._neighbours], -1)
    value, _ = ref.vecchia_nll_grad_dense(kernel, X, Y, diag_add, perm, nbrs)
    assert -gpr.log_marginal_likelihood_value_ == pytest.approx(value, rel=1e-8, abs=1e-8)
    mean, std = gpr.predict(X + 0.25, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))
    if m >= n - 1:  # every earlier point a neighbour: the exact likelihood
        exact = GaussianProcessRegressor(kernel, alpha=alpha, solver="cholesky",
                                         optimizer=None).fit(X, y)
        assert gpr.log_marginal_likelihood_value_ == pytest.approx(
            exact.log_marginal_likelihood_value_, rel=1e-8, abs=1e-8)


@pytest.mark.parametrize("m", [5, 30])
def test_prediction_neighbours_default_to_twice_the_fit_neighbours_or_140_past_the_plane(m):
    from fastgp._solvers.choice import make_solver
    from fastgp._solvers.vecchia import (PREDICT_NEIGHBOURS_BEYOND_PLANE,
                                         PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR)

    params = GaussianProcessRegressor(solver="vecchia", n_neighbors=m).get_params()
    solver = make_solver("vecchia", params)
    for d in (1, 2):
        assert solver.predict_neighbours(d) == PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR * m
    assert solver.predict_neighbours(3) == max(PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR * m,
                                               PREDICT_NEIGHBOURS_BEYOND_PLANE) == 140
    assert make_solver("vecchia", dict(params, n_neighbors=100)).predict_neighbours(8) == 200
    params["n_neighbors_predict"] = 7
    assert make_solver("vecchia", params).predict_neighbours(8) == 7


def test_prediction_neighbours_default_reaches_the_predictions():
    # 3-D inputs: the default conditions each query point on 140 neighbours,
    # the predictions equal those with n_neighbors_predict=140 bit for bit
    # and differ from those on 2 x m
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(400, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.01 * rng.standard_normal(400)
    X_query = rng.uniform(size=(20, 3))
    kernel = C(1.0) * RBF([0.5, 0.5, 0.5]) + WhiteKernel(1e-4)

    def predict(**params):
        gpr = GaussianProcessRegressor(kernel, optimizer=None, solver="vecchia",
                                       n_neighbors=10, **params).fit(X, y)
        return gpr.predict(X_query, return_std=True)

    default, on_140, on_20 = predict(), predict(n_neighbors_predict=140), \
        predict(n_neighbors_predict=20)
    assert all(np.array_equal(a, b) for a, b in zip(default, on_140))
    assert not np.array_equal(default[0], on_20[0])


def test_verbose_layout_times_are_parts_of_the_fit(capsys):
    """The verbose line of each Vecchia layout times its ordering, neighbour
    search and relabelling: each at least 0 and together within the fit's
    own wall time."""
    import re
    import time

    X, y = _data(n=200)
    start = time.perf_counter()
    GaussianProcessRegressor(C(1.0) * RBF([0.3, 0.3]) + WhiteKernel(0.1), solver="vecchia",
                             n_neighbors=10, optimizer=None, verbose=1).fit(X, y)
    elapsed = time.perf_counter() - start
    lines = re.findall(r"ordering (\S+) s, \d+ neighbours (\S+) s, relabelling (\S+) s",
                       capsys.readouterr().out)
    assert lines
    for times in lines:
        times = [float(t) for t in times]
        assert min(times) >= 0.0 and sum(times) <= elapsed + 0.01

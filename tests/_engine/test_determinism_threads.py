"""The same fit gives the same bits whatever the thread counts
(docs/reliability.md, "Reproducible to the bit"): each estimator and solver
fitted under (Numba, BLAS) threads (1, 1), (2, 2), (1, 2) and (2, 1), below
and above the order where the factor and inverse run as tiles, and under a
thread policy that sees a busy machine, give bitwise equal fitted
attributes and predictions. And the tiled LAPACK steps themselves give the
same bits on one thread and on two, against LAPACK's own results to
rounding."""

import warnings

import numba
import numpy as np
import pytest
from scipy.linalg import lapack
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from threadpoolctl import threadpool_limits

import fastgp._engine.threads as threads
from fastgp import GaussianProcessClassifier, GaussianProcessRegressor, GPLVM
from fastgp._linalg import blocked, lapack as fastgp_lapack, tiles

CONFIGURATIONS = [(1, 1), (2, 2), (1, 2), (2, 1)]

pytestmark = pytest.mark.slow  # fits side by side under four thread settings


@pytest.fixture(autouse=True)
def two_cores():
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.fail("these tests need NUMBA_NUM_THREADS >= 2 (CI's machine has 2 cores)")


def _under(numba_threads, blas_threads, call):
    before = numba.get_num_threads()
    numba.set_num_threads(numba_threads)
    try:
        with threadpool_limits(limits=blas_threads, user_api="blas"):
            return call()
    finally:
        numba.set_num_threads(before)


def _lbfgs_steps(steps):
    """An optimizer of a few L-BFGS-B iterations (a fit's path, cheaply)."""
    from scipy.optimize import minimize

    def optimizer(obj_func, initial_theta, bounds):
        result = minimize(obj_func, initial_theta, jac=True, bounds=bounds,
                          method="L-BFGS-B", options={"maxiter": steps})
        return result.x, result.fun

    return optimizer


def _same_everywhere(call, arrays):
    """``arrays(call())`` under every configuration is the first's, bit for bit."""
    results = [arrays(_under(n, b, call)) for n, b in CONFIGURATIONS]
    first = results[0]
    for (n, b), result in zip(CONFIGURATIONS[1:], results[1:]):
        for name in first:
            np.testing.assert_array_equal(
                result[name], first[name],
                err_msg=f"{name} under (Numba, BLAS) = ({n}, {b}) differs from (1, 1)")
    return first


def _data(n, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, size=(n, d))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)


def _regressor_arrays(gpr, X_query):
    mean, std = gpr.predict(X_query, return_std=True)
    return {"theta": gpr.kernel_.theta, "alpha_": gpr.alpha_,
            "lml": np.array(gpr.log_marginal_likelihood_value_),
            "L_": np.zeros(0) if gpr.L_ is None else gpr.L_, "mean": mean, "std": std}


# threaded but one block (300), several tiles (1,300), and past the order
# where even a call outside a fit takes the blocked path (4,200: the kept
# model and one loss+gradient at the start, to keep the four runs cheap)
@pytest.mark.parametrize("n, steps", [(300, 3), (1300, 3), (4200, 0)])
def test_regressor_cholesky_gives_the_same_bits_on_any_thread_counts(n, steps):
    X, y = _data(n)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            optimizer = _lbfgs_steps(steps) if steps else None
            return GaussianProcessRegressor(kernel, optimizer=optimizer,
                                            solver="cholesky").fit(X, y)

    def arrays(gpr):
        value, grad = gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
        return {**_regressor_arrays(gpr, X[::7] + 0.01), "value": np.array(value),
                "grad": grad}

    _same_everywhere(fit, arrays)


def test_a_busy_machine_gives_the_quiet_machines_bits(monkeypatch):
    # the thread policy halves the threads at every other evaluation
    X, y = _data(800, d=2)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)

    def fit():
        return GaussianProcessRegressor(kernel, n_restarts_optimizer=1, random_state=0,
                                        solver="cholesky").fit(X, y)

    quiet = _regressor_arrays(_under(2, 2, fit), X[:50])
    readings = iter([1, 2] * 1000)
    monkeypatch.setattr(threads, "idle_cores", lambda: next(readings))
    busy = _regressor_arrays(_under(2, 2, fit), X[:50])
    for name in quiet:
        np.testing.assert_array_equal(busy[name], quiet[name], err_msg=name)


@pytest.mark.parametrize("solver", ["iterative", "vecchia"])
def test_the_other_solvers_give_the_same_bits_on_any_thread_counts(solver):
    X, y = _data(1200, d=2)
    kernel = C(1.0) * Matern([1.0, 1.0], nu=1.5) + WhiteKernel(0.1)
    extra = dict(preconditioner_rank=50, n_probes=8) if solver == "iterative" else {}

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return GaussianProcessRegressor(kernel, solver=solver, random_state=0,
                                            optimizer=_lbfgs_steps(3), **extra).fit(X, y)

    _same_everywhere(fit, lambda gpr: _regressor_arrays(gpr, X[:60] + 0.01))


def test_classifier_gives_the_same_bits_on_any_thread_counts():
    X, y = _data(900, d=2)
    labels = (y > np.median(y)).astype(int)

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return GaussianProcessClassifier(C(1.0) * RBF([1.0, 1.0]),
                                             optimizer=_lbfgs_steps(3)).fit(X, labels)

    _same_everywhere(fit, lambda gpc: {
        "theta": gpc.kernel_.theta, "lml": np.array(gpc.log_marginal_likelihood_value_),
        "proba": gpc.predict_proba(X[:80])})


def test_gplvm_gives_the_same_bits_on_any_thread_counts():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((600, 5))

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return GPLVM(n_components=2, max_iter=3, random_state=0).fit(Y)

    _same_everywhere(fit, lambda model: {"embedding": model.embedding_,
                                         "theta": model.kernel_.theta})


# ------------------------------------------------------- the tiles themselves
def _spd(n, seed=0):
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((n, n + 3))
    return np.asfortranarray(G @ G.T / n + np.eye(n))


@pytest.mark.parametrize("n", [5, 511, 1300])
def test_tiled_factor_inverse_and_solves_are_the_same_on_one_thread_and_two(n):
    K = _spd(n)
    B = np.asfortranarray(np.random.default_rng(1).standard_normal((n, 300)))
    results = []
    for width in (1, 2):
        previous = tiles.set_width(width)
        try:
            with threadpool_limits(limits=1, user_api="blas"):
                L = K.copy(order="F")
                assert blocked.cholesky_lower(L, block=128) == 0
                X = fastgp_lapack.cho_solve_in_place(L, B.copy(order="F"))
                V = fastgp_lapack.solve_lower_in_place(L, B.copy(order="F"))
                W = fastgp_lapack.solve_right_lower_transposed(L, B.T.copy(order="F"))
                inverse = L.copy(order="F")
                assert blocked.inverse_from_cholesky_lower(inverse, block=128) == 0
        finally:
            tiles.set_width(previous)
        results.append((np.tril(L), X, V, W, np.tril(inverse)))
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)
    L, X, V, W, inverse = results[0]
    reference, info = lapack.dpotrf(K, lower=1)
    assert info == 0
    np.testing.assert_allclose(L, np.tril(reference), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(X, np.linalg.solve(K, B), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(V, np.linalg.solve(np.tril(reference), B), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(W, np.linalg.solve(np.tril(reference), B).T, rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_allclose(inverse, np.tril(np.linalg.inv(K)), rtol=1e-8, atol=1e-10)


def test_a_failing_tile_raises_in_the_caller_after_the_others_ran():
    ran = []

    def fails():
        raise RuntimeError("tile")

    previous = tiles.set_width(2)
    try:
        with pytest.raises(RuntimeError, match="tile"):
            tiles.run_tiles([lambda: ran.append(1), fails, lambda: ran.append(3)])
    finally:
        tiles.set_width(previous)
    assert sorted(ran) == [1, 3]

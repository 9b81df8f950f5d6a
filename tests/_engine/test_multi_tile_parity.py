"""The threaded, multi-tile path against independent references.

Every pass fastgp runs on a real-sized problem, at sizes of several tiles
(``fastgp._engine.interpreter.TILE`` rows) and on 1 and 2 Numba
threads, against scikit-learn's kernel objects and NumPy twins:

- the fill against ``kernel(X)``;
- the fused gradient pass against an einsum with ``K_gradient``;
- the cross covariance against ``kernel(X, X*)``;
- the GPLVM's latent pass against a dense formula built from central
  differences of scikit-learn's kernel (Lawrence 2005, sec. 3), and its
  hyperparameter trace against scikit-learn's likelihood gradient;
- estimators fitted at N > TILE against scikit-learn's
  GaussianProcessRegressor at the same hyperparameters: the log marginal
  likelihood and its gradient (R&W 2006, eq. 2.30 and 5.9), predictive mean,
  standard deviation and covariance.

The estimator tests switch fastgp's per-evaluation thread policy off
(``FASTGP_ADAPTIVE_THREADS=0``): on a busy machine it would lower the thread
count to the idle cores, and a comparison meant for 2 threads would quietly
run on one. A spy checks the count the passes ran on.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from conftest import (ALPHA, assert_fill_matches_kernel, assert_gradient_close,
                      assert_regressor_matches_sklearn, random_theta)
from fastgp import GaussianProcessRegressor
from fastgp._engine.interpreter import TILE
from fastgp._engine.threads import SERIAL_BELOW
from fastgp._backend.covariance import FastCovariance, make_covariance
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood

#: Numba thread counts compared.
THREAD_COUNTS = (1, 2)

#: Training sizes: two and three tiles, neither a multiple of TILE (a short last tile).
N_TILES = (2 * TILE + 89, 3 * TILE - 61)

#: Kernels of the pass tests: a product with ARD length scales and noise, a
#: Matern with its r = 0 branch, a sum with a rational quadratic.
PASS_KERNELS = {
    "C*RBF-ard+White": C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.1),
    "Matern32-ard*C": Matern([0.7, 1.3], nu=1.5) * C(0.8),
    "RQ+Matern12": RationalQuadratic(0.8, alpha=1.5) + Matern(0.9, nu=0.5),
}


def _kernel_params():
    return [pytest.param(k.clone_with_theta(k.theta), id=name)
            for name, k in PASS_KERNELS.items()]


def test_parity_sizes_span_several_tiles_above_the_serial_threshold():
    # the comparisons below mean something only at sizes the threaded,
    # multi-tile path runs
    for n in N_TILES:
        assert n > 2 * TILE and n % TILE and n >= SERIAL_BELOW


def _inputs(rng, n, d=2):
    """(n, d) inputs over a few length scales; two rows repeat earlier ones in
    other tiles (r = 0 off the diagonal, across a tile boundary)."""
    X = rng.uniform(-3.0, 3.0, size=(n, d))
    X[-1] = X[0]
    X[TILE + 3] = X[5]
    return X


def _fast(kernel, X):
    covariance = make_covariance(kernel, X)
    assert isinstance(covariance, FastCovariance)
    return covariance


# ------------------------------------------------------------ the passes
@pytest.mark.parametrize("count", THREAD_COUNTS)
@pytest.mark.parametrize("kernel", _kernel_params())
def test_parity_fill_of_several_tiles_matches_sklearn(kernel, count, numba_threads, rng):
    n = N_TILES[1]
    X = _inputs(rng, n)
    diag_add = rng.uniform(0.0, 0.1, size=n)
    theta = random_theta(kernel, rng, 0.3)
    numba_threads(count)
    assert_fill_matches_kernel(_fast(kernel, X), kernel, theta, X, diag_add)


@pytest.mark.parametrize("count", THREAD_COUNTS)
@pytest.mark.parametrize("kernel", _kernel_params())
def test_parity_gradient_pass_of_several_tiles_matches_sklearn_einsum(kernel, count,
                                                                     numba_threads, rng):
    n = N_TILES[0]
    X = _inputs(rng, n)
    theta = random_theta(kernel, rng, 0.3)
    W = rng.standard_normal((n, n))
    W = W + W.T  # the pass is linear in W = T K^-1 - A A^T: any symmetric one will do
    A = rng.standard_normal((n, 2))
    Kinv_lower = np.asfortranarray(np.tril(W) + np.triu(np.full((n, n), np.nan), 1))
    numba_threads(count)
    got = _fast(kernel, X).grad_trace(theta, Kinv_lower, A)
    _, K_gradient = kernel.clone_with_theta(theta)(X, eval_gradient=True)
    expected = np.einsum("ij,ijp->p", 2 * W - A @ A.T, K_gradient)
    np.testing.assert_allclose(got, expected, rtol=1e-10,
                               atol=1e-11 * np.max(np.abs(expected)))


@pytest.mark.parametrize("count", THREAD_COUNTS)
@pytest.mark.parametrize("kernel", _kernel_params())
def test_parity_cross_covariance_of_several_tiles_matches_sklearn(kernel, count,
                                                                  numba_threads, rng):
    n = N_TILES[1]
    X = _inputs(rng, n)
    Xq = rng.uniform(-3.0, 3.0, size=(TILE + 40, 2))
    Xq[:2] = X[[3, TILE + 7]]  # query points on training points in two tiles
    theta = random_theta(kernel, rng, 0.3)
    numba_threads(count)
    got = _fast(kernel, X).cross(theta, Xq)
    np.testing.assert_allclose(got, kernel.clone_with_theta(theta)(X, Xq),
                               rtol=1e-13, atol=1e-15)


# --------------------------------------------------------- the GPLVM pass
def _row_input_derivatives(kernel, X, n, h=1e-6):
    """d k(x_n, x_j) / d x_n (n_samples, Q) by central differences of the
    scikit-learn kernel in x_n alone; zero at j = n (a stationary kernel's
    k(x, x) does not move with x)."""
    Q = X.shape[1]
    D = np.empty((X.shape[0], Q))
    for q in range(Q):
        step = np.zeros((1, Q))
        step[0, q] = h
        D[:, q] = (kernel(X[n:n + 1] + step, X) - kernel(X[n:n + 1] - step, X))[0] / (2 * h)
    D[n] = 0.0
    return D


LATENT_KERNELS = {
    "C*RBF-ard+White": C(1.5) * RBF([0.7, 1.3]) + WhiteKernel(0.1),
    "Matern52*RQ+White": Matern(0.9, nu=2.5) * RationalQuadratic(1.1, alpha=0.8)
                         + WhiteKernel(0.1),
}


@pytest.mark.parametrize("count", THREAD_COUNTS)
@pytest.mark.parametrize("kernel", [pytest.param(k.clone_with_theta(k.theta), id=name)
                                    for name, k in LATENT_KERNELS.items()])
def test_parity_latent_pass_of_several_tiles_matches_a_dense_reference(kernel, count,
                                                                       numba_threads, rng):
    # dL/dx_n = sum_j W_nj dk(x_n, x_j)/dx_n with W = T K^-1 - A A^T dense
    # (W symmetric; the diagonal term vanishes for a stationary kernel), and
    # dL/dtheta against scikit-learn's multi-output likelihood gradient
    n, jitter = N_TILES[0], 1e-8
    X = rng.uniform(-2.0, 2.0, size=(n, 2))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1]) * X[:, 0],
                         0.1 * rng.standard_normal(n)])
    objective = LatentNegLogMarginalLikelihood(kernel, Y, 2, jitter, Workspace(n))
    numba_threads(count)
    value, grad = objective(objective.pack(X, kernel.theta))
    grad_x, grad_theta = grad[:X.size].reshape(X.shape), grad[X.size:]

    K = kernel(X) + jitter * np.eye(n)
    Kinv = np.linalg.inv(K)
    A = Kinv @ Y
    W = Y.shape[1] * Kinv - A @ A.T
    rows = rng.choice(n, size=40, replace=False)  # 40 rows in every tile
    rows[:3] = [0, TILE, n - 1]
    expected_x = np.array([W[r] @ _row_input_derivatives(kernel, X, r) for r in rows])
    np.testing.assert_allclose(grad_x[rows], expected_x, rtol=1e-6,
                               atol=1e-7 * np.max(np.abs(expected_x)))

    reference = SklearnGPR(kernel, alpha=jitter, optimizer=None).fit(X, Y)
    lml, lml_grad = reference.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    np.testing.assert_allclose(-value, lml, rtol=1e-9)
    assert_gradient_close(grad_theta, -lml_grad, rtol=1e-8)


# -------------------------------------------------------------- estimators
def _problem(rng, n):
    X = rng.uniform(-3.0, 3.0, size=(n, 2))
    y = np.sin(1.3 * X[:, 0]) * np.cos(0.7 * X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("count", THREAD_COUNTS)
def test_parity_regressor_of_several_tiles_matches_sklearn_at_the_same_theta(
        count, numba_threads, counted_threads, rng):
    n = N_TILES[0]
    X, y = _problem(rng, n)
    Xq = rng.uniform(-3.0, 3.0, size=(TILE + 30, 2))
    kernel = C(1.3) * RBF([0.9, 1.6]) + WhiteKernel(0.05)
    numba_threads(count)
    ours = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    theirs = SklearnGPR(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    thetas = [kernel.theta + shift * np.array([1.0, -1.0, 0.5, -0.5]) for shift in (0.0, 0.4)]
    assert_regressor_matches_sklearn(ours, theirs, thetas, Xq, value_rtol=1e-10, std_rtol=1e-8,
                                     std_atol=1e-10)
    _, cov = ours.predict(Xq[:60], return_cov=True)
    _, ref_cov = theirs.predict(Xq[:60], return_cov=True)
    np.testing.assert_allclose(cov, ref_cov, rtol=1e-8, atol=1e-10)
    assert counted_threads == {count}


@pytest.mark.parametrize("count", THREAD_COUNTS)
def test_parity_regressor_fitted_above_the_serial_threshold_is_sklearns_model(
        count, numba_threads, counted_threads, rng):
    # a fit that optimises on the threaded path: scikit-learn, given the
    # hyperparameters fastgp found, builds the same model, and finds them a
    # stationary point of its own likelihood
    n = SERIAL_BELOW + 44
    X, y = _problem(rng, n)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    numba_threads(count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = GaussianProcessRegressor(kernel, alpha=ALPHA, random_state=0).fit(X, y)
    assert counted_threads == {count}
    theirs = SklearnGPR(ours.kernel_, alpha=ALPHA, optimizer=None).fit(X, y)
    value, grad = theirs.log_marginal_likelihood(ours.kernel_.theta, eval_gradient=True)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_, value, rtol=1e-10)
    # stationary: the gradient is small beside the likelihood's curvature scale
    assert np.max(np.abs(grad)) < 1e-3 * max(1.0, abs(value)) / n
    np.testing.assert_allclose(ours.alpha_, theirs.alpha_, rtol=1e-8,
                               atol=1e-10 * np.max(np.abs(theirs.alpha_)))
    Xq = rng.uniform(-3.0, 3.0, size=(50, 2))
    mean, std = ours.predict(Xq, return_std=True)
    ref_mean, ref_std = theirs.predict(Xq, return_std=True)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(std, ref_std, rtol=1e-8, atol=1e-10)

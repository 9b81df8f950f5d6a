"""The GPLVM objective and its gradients: input derivatives of the kernel
program, the fused latent pass, the full objective against central finite
differences and against the regression objective (fastgp's and
scikit-learn's), and the transform's predictive density."""

import numba
import numpy as np
import pytest
from scipy.stats import norm
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    ExpSineSquared,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._engine import interpreter as _interpreter
from fastgp import kernels as fastgp_kernels
from fastgp._backend.covariance import kernel_input
from fastgp._backend.latent import has_non_stationary_leaf, latent_blocks
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood
from fastgp._solvers.cholesky.latent import predictive_density as PredictiveNegLogDensity
from fastgp._solvers.latent_density import lower_latent_kernel
from fastgp._linalg.lapack import cho_inverse_in_place

from _latent_kernels import TILE_KERNELS, kernel_input_derivatives

JITTER = 1e-8



#: Kernels of the objective tests: positive definite on 2-D latent points
#: (with noise), covering stationary, non-stationary and composed programs.
OBJECTIVE_KERNELS = {
    "C*RBF-ard+White": C(1.5) * RBF([0.7, 1.3]) + WhiteKernel(0.1),
    "Matern12+White": Matern(0.9, nu=0.5) + WhiteKernel(0.1),
    "C*Matern32-ard+White": C(2.0) * Matern([0.9, 1.2], nu=1.5) + WhiteKernel(0.1),
    "Matern52*RQ+White": Matern(0.9, nu=2.5) * RationalQuadratic(1.1, alpha=0.8)
                         + WhiteKernel(0.1),
    "RQ-ard+White": fastgp_kernels.RationalQuadratic([0.7, 1.4], alpha=0.9)
                    + WhiteKernel(0.1),
    "ExpSine-ard+White": fastgp_kernels.ExpSineSquared([1.1, 0.8], [2.5, 3.1])
                         + WhiteKernel(0.1),
    "Dot+White": DotProduct(0.5) + WhiteKernel(0.1),
    "(Dot*RBF)**2+White": (DotProduct(0.5) * RBF(1.0)) ** 2 + WhiteKernel(0.3),
    "C*RBF**1.5+fixed-White": C(0.8) * RBF(1.0) ** 1.5
                              + WhiteKernel(0.1, noise_level_bounds="fixed"),
}


@pytest.fixture
def rng():
    return np.random.default_rng(4)


def _kernel_params(kernels):
    return [pytest.param(k.clone_with_theta(k.theta), id=name) for name, k in kernels.items()]


def _problem(rng, n_samples=17, n_components=2, n_features=3):
    X = rng.uniform(-1.5, 1.5, size=(n_samples, n_components))
    Y = np.column_stack([np.sin(1.3 * X[:, 0]) * (k + 1) + 0.1 * rng.standard_normal(n_samples)
                         for k in range(n_features)])
    return X, Y - Y.mean(axis=0)


# ------------------------------------------------------------ tile level
@pytest.mark.parametrize("kernel", _kernel_params(TILE_KERNELS))
def test_eval_tile_input_derivatives_match_kernel_and_central_differences(kernel, rng):
    tile = _interpreter.TILE
    X1 = rng.uniform(-1.5, 1.5, size=(tile + 6, 2))  # more than one tile
    X2 = rng.uniform(-1.5, 1.5, size=(3, 2))
    program = lower_latent_kernel(kernel, 2)
    params = program.params(kernel.theta)
    V, G, D1, D2, Wk = _interpreter.allocate_scratch(program.stack_depth, 0, 2)
    mode = _interpreter.D_X1 | _interpreter.D_X2
    K = kernel(X1, X2)
    D1_ref, D2_ref = kernel_input_derivatives(kernel, X1, X2)
    for j in range(X2.shape[0]):
        for i0 in (0, tile):
            n = min(tile, X1.shape[0] - i0)
            _interpreter.eval_tile(_interpreter.engine_table(), kernel_input(X1), i0, n,
                                   kernel_input(X2), j, -1,
                                   program.ops, program.op_float,
                                   params, program.theta_of_param, mode, V, G, D1, D2, Wk)
            np.testing.assert_allclose(V[0, :n], K[i0:i0 + n, j], rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(D1[0, :, :n].T, D1_ref[i0:i0 + n, j], rtol=1e-6,
                                       atol=1e-8)
            np.testing.assert_allclose(D2[0, :, :n].T, D2_ref[i0:i0 + n, j], rtol=1e-6,
                                       atol=1e-8)


def test_eval_tile_input_mode_white_noise_only_on_the_diagonal():
    kernel = WhiteKernel(0.3) + RBF(1.0)
    X = np.array([[0.0, 0.0], [0.5, 0.1], [0.0, 0.0]])
    program = lower_latent_kernel(kernel, 2)
    V, G, D1, D2, Wk = _interpreter.allocate_scratch(program.stack_depth, 0, 2)
    _interpreter.eval_tile(_interpreter.engine_table(), kernel_input(X), 0, 3, kernel_input(X), 0,
                           0, program.ops, program.op_float,
                           program.params(kernel.theta), program.theta_of_param,
                           _interpreter.D_X1 | _interpreter.D_X2, V, G, D1, D2, Wk)
    # entry (0, 0) is the diagonal; entry (2, 0) is a different sample at the same point
    np.testing.assert_allclose(V[0, :3], [1.3, np.exp(-0.5 * 0.26), 1.0])


def test_stationary_programs_do_not_need_the_second_derivative():
    stationary = lower_latent_kernel(C(1.0) * RBF(1.0) + WhiteKernel(0.1), 2)
    assert has_non_stationary_leaf(stationary) is False
    assert has_non_stationary_leaf(lower_latent_kernel(DotProduct(1.0) + WhiteKernel(0.1),
                                                       2)) is True


# ------------------------------------------------------------ the objective
def _objective(kernel, Y, n_components):
    return LatentNegLogMarginalLikelihood(kernel, Y, n_components, JITTER,
                                          Workspace(len(Y)))


def _central_differences(f, z, h=1e-6):
    grad = np.empty_like(z)
    for k in range(z.size):
        e = np.zeros_like(z)
        e[k] = h
        grad[k] = (f(z + e) - f(z - e)) / (2 * h)
    return grad


@pytest.mark.parametrize("kernel", _kernel_params(OBJECTIVE_KERNELS))
def test_latent_gradient_matches_central_differences(kernel, rng):
    X, Y = _problem(rng)
    objective = _objective(kernel, Y, 2)
    z = objective.pack(X, kernel.theta)
    value, grad = objective(z)
    expected = _central_differences(objective.value, z)
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-7 * scale)
    assert np.isfinite(value)


def test_latent_gradient_one_dimensional_periodic(rng):
    # scikit-learn's ExpSineSquared (Euclidean distance) is positive definite in 1-D
    kernel = C(1.2) * ExpSineSquared(1.1, 2.7) + WhiteKernel(0.1)
    X, Y = _problem(rng, n_components=1)
    objective = _objective(kernel, Y, 1)
    z = objective.pack(X, kernel.theta)
    _, grad = objective(z)
    expected = _central_differences(objective.value, z)
    np.testing.assert_allclose(grad, expected, rtol=1e-6,
                               atol=1e-7 * np.max(np.abs(expected)))


@pytest.mark.parametrize("kernel", _kernel_params(OBJECTIVE_KERNELS))
def test_latent_gradient_matches_dense_formula(kernel, rng):
    """dL/dx_n = 1/2 sum_ij W_ij dK_ij/dx_n with dense W and dK from the
    scikit-learn kernel (docs/design.md), against the fused pass."""
    X, Y = _problem(rng, n_samples=12)
    objective = _objective(kernel, Y, 2)
    grad_x = objective(objective.pack(X, kernel.theta))[1][:X.size].reshape(X.shape)
    K = kernel(X) + JITTER * np.eye(len(X))
    Kinv = np.linalg.inv(K)
    A = Kinv @ Y
    W = Y.shape[1] * Kinv - A @ A.T
    expected = np.empty_like(X)
    h = 1e-6
    for n in range(X.shape[0]):
        for q in range(X.shape[1]):
            Xp, Xm = X.copy(), X.copy()
            Xp[n, q] += h
            Xm[n, q] -= h
            dK = (kernel(Xp) - kernel(Xm)) / (2 * h)  # white noise cancels
            expected[n, q] = 0.5 * np.sum(W * dK)
    np.testing.assert_allclose(grad_x, expected, rtol=1e-6,
                               atol=1e-7 * np.max(np.abs(expected)))


@pytest.mark.parametrize("kernel", _kernel_params(OBJECTIVE_KERNELS))
def test_fused_pass_equals_two_passes(kernel, rng):
    # the objective's one fused pass against the latent pass alone followed
    # by the regression's gradient pass, on the same K^-1
    X, Y = _problem(rng)
    objective = _objective(kernel, Y, 2)
    B, A, _ = objective.factor(objective.pack(X, kernel.theta))
    cho_inverse_in_place(B)
    grad_x, grad_theta = objective.gradient(kernel.theta, B, A)
    two_x, none = objective.covariance.grad_latent(kernel.theta, B, A, with_theta=False)
    assert none is None
    two_theta = objective.covariance.grad_trace(kernel.theta, B, A)
    np.testing.assert_allclose(grad_x, 0.5 * two_x, rtol=1e-12,
                               atol=1e-12 * np.max(np.abs(two_x)))
    np.testing.assert_allclose(grad_theta, 0.5 * two_theta, rtol=1e-12,
                               atol=1e-12 * np.max(np.abs(two_theta)))


@pytest.mark.parametrize("kernel", _kernel_params({
    k: OBJECTIVE_KERNELS[k] for k in ("C*RBF-ard+White", "(Dot*RBF)**2+White")}))
def test_objective_equals_regression_objective(kernel, rng):
    """At fixed latent points the GPLVM objective is the multi-output
    regression objective: fastgp's and scikit-learn's."""
    X, Y = _problem(rng, n_samples=30, n_features=4)
    objective = _objective(kernel, Y, 2)
    theta = kernel.theta + 0.1
    value, grad = objective(objective.pack(X, theta))
    grad_theta = grad[X.size:]

    ours = GaussianProcessRegressor(kernel, alpha=JITTER, optimizer=None).fit(X, Y)
    lml, lml_grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(-value, lml, rtol=1e-10)
    np.testing.assert_allclose(grad_theta, -lml_grad, rtol=1e-8,
                               atol=1e-8 * np.max(np.abs(lml_grad)))

    sk = SklearnGPR(kernel, alpha=JITTER, optimizer=None).fit(X, Y)
    sk_lml, sk_grad = sk.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(-value, sk_lml, rtol=1e-8)
    np.testing.assert_allclose(grad_theta, -sk_grad, rtol=1e-8,
                               atol=1e-8 * np.max(np.abs(sk_grad)))


def test_gradient_does_not_depend_on_thread_count(rng):
    kernel = C(1.5) * RBF([0.7, 1.3]) + WhiteKernel(0.1)
    X, Y = _problem(rng, n_samples=300)
    objective = _objective(kernel, Y, 2)
    z = objective.pack(X, kernel.theta)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        _, g1 = objective(z)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        _, g2 = objective(z)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(g1, g2)


def test_objective_not_positive_definite_backs_off(rng):
    kernel = RBF(1.0)  # no noise: coincident points make K singular
    X, Y = _problem(rng, n_samples=6)
    X[1] = X[0]
    objective = LatentNegLogMarginalLikelihood(kernel, Y, 2, 0.0, Workspace(6))
    value, grad = objective(objective.pack(X, kernel.theta))
    assert value == np.inf and np.all(grad == 0)


@pytest.mark.parametrize("n", [1, 2, 5, 63, 64, 65, 300, 5000])
@pytest.mark.parametrize("n_dims", [1, 2, 10])
def test_latent_blocks_partition_and_stay_small(n, n_dims):
    bounds = latent_blocks(n, n_dims)
    assert bounds[0] == 0 and bounds[-1] == n
    assert np.all(np.diff(bounds) > 0)
    n_blocks = bounds.size - 1
    assert n_blocks * n_dims <= max(4 * n_dims, n / 16)


def test_objective_allocates_no_n_by_n_array_per_call(rng):
    import tracemalloc

    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    n = 600
    X, Y = _problem(rng, n_samples=n)
    objective = _objective(kernel, Y, 2)
    z = objective.pack(X, kernel.theta)
    objective(z)  # allocates the workspace (and compiles)
    tracemalloc.start()
    try:
        objective(z + 0.01)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # O(N (D + Q)) vectors and NumPy's reduction buffers (64 kB), no N x N array
    assert peak < 0.25 * 8 * n**2


def test_unsupported_kernel_raises_a_clear_error():
    with pytest.raises(ValueError, match="fast path"):
        lower_latent_kernel(Matern(1.0, nu=0.7), 2)
    with pytest.raises(ValueError, match="dimensions"):
        lower_latent_kernel(RBF([1.0, 1.0, 1.0]), 2)


# ------------------------------------------------------ transform's density
def _fitted_pieces(rng, kernel, n_samples=25, n_features=3):
    X, Y = _problem(rng, n_samples=n_samples, n_features=n_features)
    objective = _objective(kernel, Y, 2)
    L, A, _ = objective.factor(objective.pack(X, kernel.theta))
    return X, Y, L, A


@pytest.mark.parametrize("kernel", _kernel_params({
    k: OBJECTIVE_KERNELS[k] for k in ("C*RBF-ard+White", "Matern52*RQ+White",
                                      "(Dot*RBF)**2+White")}))
def test_predictive_density_matches_sklearn_prediction(kernel, rng):
    X, Y, L, A = _fitted_pieces(rng, kernel)
    Y_new = rng.standard_normal((5, Y.shape[1]))
    X_new = rng.uniform(-1.5, 1.5, size=(5, 2))
    density = PredictiveNegLogDensity(kernel, X, L, A, Y_new)
    values, _ = density(X_new, np.arange(5))
    sk = SklearnGPR(kernel, alpha=JITTER, optimizer=None).fit(X, Y)
    mean, std = sk.predict(X_new, return_std=True)
    expected = -norm.logpdf(Y_new, loc=mean, scale=std[:, :1]).sum(axis=1)
    np.testing.assert_allclose(values, expected, rtol=1e-8)


@pytest.mark.parametrize("kernel", _kernel_params({
    k: OBJECTIVE_KERNELS[k] for k in ("C*RBF-ard+White", "Matern12+White",
                                      "(Dot*RBF)**2+White", "Dot+White")}))
def test_predictive_density_gradient_matches_central_differences(kernel, rng):
    X, Y, L, A = _fitted_pieces(rng, kernel)
    Y_new = rng.standard_normal((4, Y.shape[1]))
    X_new = rng.uniform(-1.5, 1.5, size=(4, 2))
    density = PredictiveNegLogDensity(kernel, X, L, A, Y_new)
    rows = np.arange(4)
    _, grads = density(X_new, rows)
    h = 1e-6
    for q in range(2):
        e = np.zeros(2)
        e[q] = h
        fd = (density(X_new + e, rows)[0] - density(X_new - e, rows)[0]) / (2 * h)
        np.testing.assert_allclose(grads[:, q], fd, rtol=1e-6,
                                   atol=1e-7 * np.max(np.abs(grads)))


def test_predictive_density_rows_are_independent_of_chunking(rng):
    kernel = OBJECTIVE_KERNELS["C*RBF-ard+White"]
    X, Y, L, A = _fitted_pieces(rng, kernel)
    Y_new = rng.standard_normal((9, Y.shape[1]))
    X_new = rng.uniform(-1.5, 1.5, size=(9, 2))
    whole = PredictiveNegLogDensity(kernel, X, L, A, Y_new)(X_new, np.arange(9))
    small = PredictiveNegLogDensity(kernel, X, L, A, Y_new, chunk_bytes=8 * 25 * 2)
    parts = small(X_new[[7, 2]], np.array([7, 2]))
    np.testing.assert_allclose(parts[0], whole[0][[7, 2]], rtol=1e-13)
    np.testing.assert_allclose(parts[1], whole[1][[7, 2]], rtol=1e-12, atol=1e-14)


def test_predictive_density_variance_floor_scales_with_the_prior_variance():
    """At a training point of a noise-free model the predictive variance is
    rounding (zero or below) and the floor decides it. Scaling the signal
    variance by c and the targets by sqrt(c) scales every variance by c and
    leaves the residual term alone, so the density shifts by exactly
    D/2 log c, where the floor is relative to the prior variance (a floor
    with an absolute part would not scale at c < 1)."""
    X = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])  # k(x_i, x_j) ~ 1e-31
    Y = np.array([[0.8, -0.3], [-0.5, 0.9], [0.2, 0.4]])
    values = {}
    for c in (1.0, 1e-6):
        kernel = C(c) * RBF(0.5)
        Yc = np.sqrt(c) * Y
        L = np.asfortranarray(np.linalg.cholesky(kernel(X)))
        A = np.linalg.solve(kernel(X), Yc)
        density = PredictiveNegLogDensity(kernel, X, L, A, Yc)
        values[c] = density(X, np.arange(3))[0]  # each row at its own point
    D = Y.shape[1]
    np.testing.assert_allclose(values[1e-6] - values[1.0], 0.5 * D * np.log(1e-6),
                               rtol=1e-10)


def test_fit_gradient_of_kinv_buffer_matches_numpy(rng):
    """The pass reads K^-1 from the lower triangle that dpotri leaves; the
    strict upper triangle is stale and must not matter."""
    kernel = C(1.5) * RBF([0.7, 1.3]) + WhiteKernel(0.1)
    X, Y = _problem(rng, n_samples=20)
    objective = _objective(kernel, Y, 2)
    z = objective.pack(X, kernel.theta)
    B, A, _ = objective.factor(z)
    cho_inverse_in_place(B)
    gx1, gt1 = objective.gradient(kernel.theta, B, A)
    B[np.triu_indices(20, 1)] = np.nan
    gx2, gt2 = objective.gradient(kernel.theta, B, A)
    np.testing.assert_array_equal(gx1, gx2)
    np.testing.assert_array_equal(gt1, gt2)


@pytest.mark.parametrize("extra", [-1, 1])
def test_latent_objective_refuses_a_z_of_the_wrong_length(extra, rng):
    # 34 latent coordinates and 2 hyperparameters: 36, where a bitwise or
    # xor of the two counts would not give it
    kernel = RBF(0.9) + WhiteKernel(0.1)
    X, Y = _problem(rng)
    objective = _objective(kernel, Y, 2)
    z = objective.pack(X, kernel.theta)
    expected = X.size + kernel.n_dims
    assert z.shape == (expected,)
    with pytest.raises(ValueError, match=rf"expected \({expected},\)"):
        objective.unpack(np.zeros(expected + extra))

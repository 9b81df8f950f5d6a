"""The parallel covariance passes (fastgp._engine.passes, through
fastgp._backend.covariance.FastCovariance) against plain NumPy twins built on
scikit-learn's kernel objects: the fill against ``kernel(X)``, the cross
covariance against ``kernel(X, Y)``, and the fused gradient pass against an
einsum of W with scikit-learn's ``K_gradient`` tensor.
"""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel

from conftest import (FREE_KERNELS, N_FEATURES, assert_fill_matches_kernel,
                      assert_same_bits_on_one_and_two_threads, kernel_params, random_theta)
from fastgp._engine import passes as _covariance
from fastgp._engine.interpreter import TILE
from fastgp._backend.covariance import (
    FastCovariance,
    KernelObjectCovariance,
    SlowKernelWarning,
    make_covariance,
)

#: Sizes around the tile width (TILE) and the number of column blocks (256).
SIZES = [1, 65, 255, 257, TILE - 1, TILE + 1]


def _inputs(rng, n):
    """(n, N_FEATURES) inputs with the last row repeating the first (r = 0 off
    the diagonal: Matern 1/2's gradient branch, WhiteKernel's zero)."""
    X = rng.uniform(-2, 2, size=(n, N_FEATURES))
    X[-1] = X[0]
    return X


def _fast(kernel, X):
    covariance = make_covariance(kernel, X)
    assert isinstance(covariance, FastCovariance)
    return covariance


def _symmetric(lower):
    """Full symmetric matrix from the lower triangle of ``lower``."""
    return np.tril(lower) + np.tril(lower, -1).T


def _twin_grad_trace(kernel, X, Kinv, A):
    """NumPy twin of grad_trace: sum_ij W_ij dK_ij/dtheta_p, W = T K^-1 - A A^T."""
    _, K_gradient = kernel(X, eval_gradient=True)
    W = A.shape[1] * Kinv - A @ A.T
    return np.einsum("ij,ijp->p", W, K_gradient)


@pytest.mark.parametrize("n", SIZES)
def test_column_blocks_partition_columns_in_equal_areas(n):
    bounds = _covariance.column_blocks(n)
    assert bounds[0] == 0 and bounds[-1] == n
    assert np.all(np.diff(bounds) >= 0)
    n_blocks = bounds.size - 1
    assert n_blocks == max(1, min(n, _covariance.MAX_BLOCKS))
    # area of block b = entries of the lower triangle in its columns
    area = np.array([sum(n - j for j in range(bounds[b], bounds[b + 1]))
                     for b in range(n_blocks)])
    assert area.sum() == n * (n + 1) // 2
    # no block is more than one column (n entries) above the mean area
    assert area.max() <= n * (n + 1) / 2 / n_blocks + n


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kernel", kernel_params())
def test_fill_lower_matches_sklearn_kernel(kernel, n, rng):
    X = _inputs(rng, n)
    theta = random_theta(kernel, rng)
    diag_add = rng.uniform(0.0, 0.1, size=n)
    assert_fill_matches_kernel(_fast(kernel, X), kernel, theta, X, diag_add)


@pytest.mark.parametrize("n", [1, 65])
@pytest.mark.parametrize("kernel", kernel_params())
def test_cross_matches_sklearn_kernel(kernel, n, rng):
    X = rng.uniform(-2, 2, size=(n, N_FEATURES))
    Xq = rng.uniform(-2, 2, size=(70, N_FEATURES))
    Xq[:3] = X[:1]  # query points that coincide with a training point
    theta = random_theta(kernel, rng)
    cross = _fast(kernel, X).cross(theta, Xq)
    assert cross.shape == (n, 70) and cross.flags.f_contiguous
    np.testing.assert_allclose(cross, kernel.clone_with_theta(theta)(X, Xq),
                               rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("kernel", kernel_params())
def test_prior_cov_matches_sklearn_kernel(kernel, rng):
    X = rng.uniform(-2, 2, size=(5, N_FEATURES))
    Xq = _inputs(rng, 70)
    theta = random_theta(kernel, rng)
    prior = _fast(kernel, X).prior_cov(theta, Xq)
    np.testing.assert_allclose(prior, kernel.clone_with_theta(theta)(Xq),
                               rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("n_targets", [1, 3])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kernel", kernel_params(FREE_KERNELS))
def test_grad_trace_matches_einsum_with_sklearn_gradient(kernel, n, n_targets, rng):
    X = _inputs(rng, n)
    theta = random_theta(kernel, rng)
    # any symmetric matrix will do: the pass is linear in W
    Kinv = _symmetric(rng.standard_normal((n, n)))
    A = rng.standard_normal((n, n_targets))
    Kinv_lower = np.asfortranarray(np.tril(Kinv) + np.triu(np.full((n, n), np.nan), 1))
    got = _fast(kernel, X).grad_trace(theta, Kinv_lower, A)
    expected = _twin_grad_trace(kernel.clone_with_theta(theta), X, Kinv, A)
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-12 * scale)


@pytest.mark.parametrize("kernel", kernel_params(FREE_KERNELS))
def test_kernel_object_covariance_agrees_with_fast_path(kernel, rng):
    """The slow backend (sklearn's kernel object) and the fast one are twins."""
    n = 30
    X = rng.uniform(-2, 2, size=(n, N_FEATURES))
    Xq = rng.uniform(-2, 2, size=(7, N_FEATURES))
    theta = random_theta(kernel, rng)
    fast, slow = _fast(kernel, X), KernelObjectCovariance(kernel, X)
    assert fast.n_theta == slow.n_theta == kernel.n_dims
    K_fast, K_slow = (np.zeros((n, n), order="F") for _ in range(2))
    fast.fill_lower(theta, np.full(n, 0.5), K_fast)
    slow.fill_lower(theta, np.full(n, 0.5), K_slow)
    np.testing.assert_allclose(np.tril(K_fast), np.tril(K_slow), rtol=1e-13, atol=1e-15)
    Kinv = np.asfortranarray(_symmetric(rng.standard_normal((n, n))))
    A = rng.standard_normal((n, 2))
    np.testing.assert_allclose(fast.grad_trace(theta, Kinv, A),
                               slow.grad_trace(theta, Kinv, A), rtol=1e-11,
                               atol=1e-12 * np.max(np.abs(slow.grad_trace(theta, Kinv, A))))
    np.testing.assert_allclose(fast.cross(theta, Xq), slow.cross(theta, Xq),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fast.prior_cov(theta, Xq), slow.prior_cov(theta, Xq),
                               rtol=1e-13, atol=1e-15)


def test_make_covariance_falls_back_with_a_warning(rng):
    X = rng.uniform(size=(5, 2))
    with pytest.warns(SlowKernelWarning, match="not on fastgp's fast path"):
        covariance = make_covariance(Matern(1.0, nu=2.0), X)
    assert isinstance(covariance, KernelObjectCovariance)
    # no warning when asked not to (predict after a fit that warned already)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not make_covariance(Matern(1.0, nu=2.0), X, warn=False).is_fast
        assert make_covariance(RBF(1.0) + WhiteKernel(), X).is_fast


def test_passes_give_identical_bits_for_any_thread_count(rng):
    """The fill and the gradient pass do not depend on Numba's thread count:
    several tiles (TILE rows) and 256 column blocks, on 1 and 2 threads."""
    n = TILE + 188
    kernel = FREE_KERNELS["C*RBF+White"]
    X = rng.uniform(-2, 2, size=(n, N_FEATURES))
    theta = random_theta(kernel, rng)
    Kinv = np.asfortranarray(_symmetric(rng.standard_normal((n, n))))
    A = rng.standard_normal((n, 2))
    covariance = _fast(kernel, X)

    def compute():
        K = np.zeros((n, n), order="F")
        covariance.fill_lower(theta, np.full(n, 1e-2), K)
        return K, covariance.grad_trace(theta, Kinv, A), covariance.cross(theta, X[:40])

    assert_same_bits_on_one_and_two_threads(compute)


def test_read_only_inputs_reuse_the_compiled_passes(rng):
    """A read-only array (a joblib memmap, writeable=False) is another Numba
    type; the passes must not compile a second specialisation for it."""
    kernel = FREE_KERNELS["C*RBF+White"]
    X = rng.uniform(-2, 2, size=(20, N_FEATURES))
    Xq = rng.uniform(-2, 2, size=(6, N_FEATURES))
    K = np.zeros((20, 20), order="F")
    writeable = _fast(kernel, X)
    expected = (writeable.cross(kernel.theta, Xq), writeable.prior_cov(kernel.theta, Xq))
    writeable.fill_lower(kernel.theta, np.zeros(20), K)
    routines = (_covariance.covariance_pass,)
    n_signatures = [len(r.signatures) for r in routines]
    X.flags.writeable = False
    Xq.flags.writeable = False
    read_only = _fast(kernel, X)
    np.testing.assert_array_equal(read_only.cross(kernel.theta, Xq), expected[0])
    np.testing.assert_array_equal(read_only.prior_cov(kernel.theta, Xq), expected[1])
    K_ro = np.zeros((20, 20), order="F")
    read_only.fill_lower(kernel.theta, np.zeros(20), K_ro)
    np.testing.assert_array_equal(K_ro, K)
    assert [len(r.signatures) for r in routines] == n_signatures

"""A kernel without a noise term fitted to noisy targets is told so
(fastgp/_fit/noise.py): one UserWarning naming the cause and the remedy,
where the fitted length scales fall below the inputs' nearest-neighbour
spacing, and none where the kernel has a noise term, alpha is one, or the
targets are smooth."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._fit.noise import neighbour_pairs, warn_noise_free_fit

NOISE_FREE = "has no noise term"


def _noisy(n=300, noise=0.1, seed=0):
    # the new user's problem: y = sin(2 x1) cos(x2) + 0.3 x2 + noise on a box
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, (n, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * X[:, 1]
    return X, y + noise * rng.standard_normal(n)


def _notices(fit):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ConvergenceWarning)  # a bound, where reached
        fit()
    return [w for w in record if NOISE_FREE in str(w.message)]


@pytest.mark.parametrize("solver", ["cholesky", "vecchia"])
def test_noise_free_default_kernel_on_noisy_targets_is_told_once(solver):
    X, y = _noisy()
    notices = _notices(lambda: GaussianProcessRegressor(solver=solver, n_neighbors=10)
                       .fit(X, y))
    assert len(notices) == 1
    text = str(notices[0].message)
    assert notices[0].category is UserWarning and notices[0].filename == __file__
    assert "add a WhiteKernel" in text and "alpha to the noise variance" in text
    assert "correlation with its nearest neighbour is typically" in text


@pytest.mark.parametrize("params", [
    dict(kernel=C() * RBF() + WhiteKernel()),           # a noise term
    dict(kernel=C() * (RBF() + WhiteKernel())),         # inside a product
    dict(alpha=0.01),                                   # alpha is the noise variance
])
def test_noise_free_not_said_where_the_model_has_noise(params):
    X, y = _noisy()
    assert _notices(lambda: GaussianProcessRegressor(**params).fit(X, y)) == []


def test_noise_free_not_said_of_smooth_targets():
    X, _ = _noisy(60)
    y = np.sin(0.3 * X[:, 0]) + 0.1 * X[:, 1]
    assert _notices(lambda: GaussianProcessRegressor().fit(X, y)) == []


def test_noise_free_the_length_scale_against_the_spacing():
    # a grid of spacing 0.1 by 1.0: a point's nearest neighbour in the
    # length-scaled inputs, and the kernel's correlation with it, against an
    # RBF's at one length scale (exp(-1/2))
    grid = np.stack(np.meshgrid(np.arange(20) * 0.1, np.arange(20) * 1.0), -1).reshape(-1, 2)
    points, neighbours = neighbour_pairs(grid / [0.1, 0.1])
    assert len(points) == len(grid)
    np.testing.assert_allclose(np.abs(grid[points] - grid[neighbours]).sum(axis=1), 0.1)
    nugget = np.full(len(grid), 1e-10)
    # spacing / length scale = 1.43: correlation exp(-1.43^2 / 2) = 0.36
    with pytest.warns(UserWarning, match="nearest neighbour is typically 0.36 under it"):
        warn_noise_free_fit(RBF([0.07, 0.7]), grid, nugget)
    with pytest.warns(UserWarning, match=NOISE_FREE):
        warn_noise_free_fit(C(2.0) * Matern(0.05), grid, nugget)
    # the correlation, not the covariance: the same at a signal variance of
    # 1e4 as at 1 (0.36)
    with pytest.warns(UserWarning, match="nearest neighbour is typically 0.36 under it"):
        warn_noise_free_fit(C(1e4) * RBF([0.07, 0.7]), grid, nugget)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_noise_free_fit(RBF([0.15, 1.5]), grid, nugget)      # longer than the spacing
        warn_noise_free_fit(RBF(0.05), grid, np.full(len(grid), 1e-3))  # alpha: noise
        warn_noise_free_fit(RBF(0.05) + WhiteKernel(1e-3), grid, nugget)
        warn_noise_free_fit(RBF(0.05), np.zeros((5, 2)), nugget[:5])  # no spacing
        # a short-range part that is a small share of the variance beside a
        # smooth one (R&W's correlated noise beside the Mauna Loa trend)
        warn_noise_free_fit(C(50.0**2) * RBF(50.0) + C(0.3**2) * RBF(0.01), grid, nugget)


def test_noise_free_the_weekly_co2_demo_is_not_warned():
    # python -m fastgp's kernel (fastgp.cli.weekly_co2_kernel) at its fitted
    # point: the noise is a 4-day RBF term, the rest smooth
    from sklearn.gaussian_process.kernels import ExpSineSquared, RationalQuadratic

    from fastgp.datasets import load_mauna_loa_co2

    X, _ = load_mauna_loa_co2()
    fitted = (48.1**2 * RBF(54.4) + 2.58**2 * RBF(132) * ExpSineSquared(1.35, 1.0)
              + 6.93**2 * RationalQuadratic(alpha=0.000791, length_scale=4.91)
              + 0.341**2 * RBF(0.012))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_noise_free_fit(fitted, X, np.full(len(X), 1e-10))
    with pytest.warns(UserWarning, match=NOISE_FREE):  # the noise part alone
        warn_noise_free_fit(0.341**2 * RBF(0.012), X, np.full(len(X), 1e-10))

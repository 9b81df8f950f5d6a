"""The negative log marginal likelihood and its gradient (fastgp._solvers.cholesky.objective),
through GaussianProcessRegressor.log_marginal_likelihood and directly:
against scikit-learn at the same theta (1e-8 relative), against central finite
differences, and its behaviour where K is not positive definite.
"""

import math

import numba
import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from conftest import (
    ALPHA,
    FREE_KERNELS,
    assert_gradient_close,
    kernel_params,
    make_problem,
    random_theta,
)
from fastgp import GaussianProcessRegressor
from fastgp._backend.covariance import KernelObjectCovariance, make_covariance
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood
from fastgp.exceptions import JitterWarning


def _fit_both(kernel, X, y, normalize_y=False, alpha=ALPHA):
    """fastgp's and scikit-learn's regressors on the same data, not optimised."""
    kwargs = dict(alpha=alpha, optimizer=None, normalize_y=normalize_y)
    return (GaussianProcessRegressor(kernel, **kwargs).fit(X, y),
            SklearnGPR(kernel, **kwargs).fit(X, y))


@pytest.mark.parametrize("normalize_y", [False, True], ids=["raw", "normalize_y"])
@pytest.mark.parametrize("n_targets", [None, 3], ids=["1d", "3 targets"])
@pytest.mark.parametrize("kernel", kernel_params())
def test_lml_value_and_gradient_match_sklearn(kernel, n_targets, normalize_y, rng):
    X, y = make_problem(rng, n_samples=40, n_targets=n_targets)
    ours, theirs = _fit_both(kernel, X, y, normalize_y)
    for theta in (kernel.theta, random_theta(kernel, rng)):
        value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
        assert math.isfinite(value)
        np.testing.assert_allclose(value, ref_value, rtol=1e-8)
        assert_gradient_close(grad, ref_grad, rtol=1e-8)
        # the value alone takes a shorter path (no dpotri, no gradient pass)
        np.testing.assert_allclose(ours.log_marginal_likelihood(theta), value, rtol=1e-13)
    # the fitted value (optimizer=None: the kernel's own theta)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-8)


@pytest.mark.parametrize("kernel", kernel_params(FREE_KERNELS))
def test_lml_gradient_matches_central_differences(kernel, rng):
    X, y = make_problem(rng, n_samples=30)
    gpr = GaussianProcessRegressor(kernel, alpha=ALPHA, optimizer=None).fit(X, y)
    theta = random_theta(kernel, rng)
    _, grad = gpr.log_marginal_likelihood(theta, eval_gradient=True)
    h = 1e-5
    numeric = np.empty_like(theta)
    for p in range(theta.size):
        step = np.zeros_like(theta)
        step[p] = h
        numeric[p] = (gpr.log_marginal_likelihood(theta + step)
                      - gpr.log_marginal_likelihood(theta - step)) / (2 * h)
    # central differences: error O(h^2) times third derivatives, plus rounding
    # eps |L| / h; both far below 1e-5 of the largest component here
    assert_gradient_close(grad, numeric, rtol=1e-5)


@pytest.mark.parametrize("clone_kernel", [True, False])
def test_lml_clone_kernel_false_sets_kernel_theta(clone_kernel, rng):
    X, y = make_problem(rng, n_samples=20)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    gpr = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    theta = kernel.theta + 0.25
    gpr.log_marginal_likelihood(theta, clone_kernel=clone_kernel)
    moved = np.allclose(gpr.kernel_.theta, theta)
    assert moved != clone_kernel


def test_lml_without_theta_is_the_fitted_value(rng):
    X, y = make_problem(rng, n_samples=20)
    gpr = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None).fit(X, y)
    assert gpr.log_marginal_likelihood() == gpr.log_marginal_likelihood_value_
    with pytest.raises(ValueError, match="Gradient can only be evaluated for theta!=None"):
        gpr.log_marginal_likelihood(eval_gradient=True)


def test_lml_not_positive_definite_is_minus_inf_as_sklearn(rng):
    """Duplicated inputs, no noise: K is singular; both answer -inf, zeros."""
    X = np.repeat(rng.uniform(size=(10, 1)), 2, axis=0)
    y = rng.standard_normal(20)
    kernel = RBF(1.0)
    # fastgp's log_marginal_likelihood reads alpha as fitted (its kept factor
    # has jitter); scikit-learn's reads the parameter at call time
    with pytest.warns(JitterWarning):
        ours = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None).fit(X, y)
    theirs = SklearnGPR(kernel, alpha=0.5, optimizer=None).fit(X, y)
    theirs.alpha = 0.0  # LML at alpha=0 without refitting
    theta = np.log([1e3])
    value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    assert value == ref_value == -np.inf
    np.testing.assert_array_equal(grad, ref_grad)
    assert ours.log_marginal_likelihood(theta) == -np.inf


# ------------------------------------------------------------------ objective


def _objective(kernel, X, y, diag_add=ALPHA):
    covariance = make_covariance(kernel, X)
    return NegLogMarginalLikelihood(covariance, y.reshape(len(y), -1), diag_add,
                                    Workspace(len(y)))


@pytest.mark.parametrize("n_targets", [1, 3])
def test_objective_counts_its_samples_not_its_targets(rng, n_targets):
    """n_samples (what the thread policy sizes an evaluation by) is N, for
    one target or several."""
    X, y = make_problem(rng, n_samples=20)
    Y = np.column_stack([y] * n_targets)
    assert _objective(RBF(1.0) + WhiteKernel(0.1), X, Y).n_samples == len(X)


def test_objective_reuses_one_workspace_buffer(rng):
    X, y = make_problem(rng, n_samples=50)
    kernel = C(1.0) * RBF([1.0, 2.0]) + WhiteKernel(0.1)
    objective = _objective(kernel, X, y)
    objective(kernel.theta)
    buffer = objective.workspace.buffer()
    assert buffer.flags.f_contiguous and buffer.shape == (50, 50)
    for shift in (0.1, -0.2, 0.3):
        objective(kernel.theta + shift)
        objective.value(kernel.theta - shift)
        assert objective.workspace.buffer() is buffer
    assert objective.n_evaluations == 7
    assert objective.workspace.nbytes == 8 * 50 * 50


def test_objective_returns_inf_and_zero_gradient_when_not_pd(rng):
    X = np.repeat(rng.uniform(size=(10, 1)), 2, axis=0)
    y = rng.standard_normal(20)
    objective = _objective(RBF(1.0), X, y, diag_add=0.0)
    value, grad = objective(np.log([1e4]))
    assert value == math.inf
    np.testing.assert_array_equal(grad, [0.0])
    assert objective.value(np.log([1e4])) == math.inf
    # a well-posed theta afterwards works in the same (partly overwritten) buffer
    objective.diag_add[:] = 0.1
    value, grad = objective(np.log([0.5]))
    assert math.isfinite(value) and np.all(np.isfinite(grad))


@pytest.mark.parametrize("kernel", kernel_params({k: FREE_KERNELS[k] for k in
                                                  ("C*RBF+White", "Matern12*RQ")}))
def test_objective_fast_and_kernel_object_paths_agree(kernel, rng):
    X, y = make_problem(rng, n_samples=40, n_targets=2)
    theta = random_theta(kernel, rng)
    fast = _objective(kernel, X, y)
    slow = NegLogMarginalLikelihood(KernelObjectCovariance(kernel, X), y, ALPHA,
                                    Workspace(40))
    (v_fast, g_fast), (v_slow, g_slow) = fast(theta), slow(theta)
    np.testing.assert_allclose(v_fast, v_slow, rtol=1e-12)
    assert_gradient_close(g_fast, g_slow, rtol=1e-10)


def test_lml_slow_path_matches_sklearn(rng):
    """A kernel off the fast path (Matern nu=2) goes through the kernel object
    and still equals scikit-learn."""
    X, y = make_problem(rng, n_samples=30)
    kernel = C(1.0) * Matern(0.8, nu=2.0) + WhiteKernel(0.1)
    with pytest.warns(UserWarning, match="not on fastgp's fast path"):
        ours = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    theirs = SklearnGPR(kernel, optimizer=None).fit(X, y)
    theta = random_theta(kernel, rng)
    value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, ref_value, rtol=1e-8)
    assert_gradient_close(grad, ref_grad, rtol=1e-8)


def test_objective_same_bits_whatever_the_thread_count(rng):
    """numba.set_num_threads(1) and the default give bitwise-identical value
    and gradient: the reduction is over a fixed number of column blocks."""
    X, y = make_problem(rng, n_samples=200, n_targets=2)
    kernel = C(1.0) * Matern([0.8, 1.5], nu=2.5) + RBF(0.5) + WhiteKernel(0.1)
    objective = _objective(kernel, X, y)
    theta = random_theta(kernel, rng)
    default = numba.get_num_threads()
    value_many, grad_many = objective(theta)
    try:
        numba.set_num_threads(1)
        value_one, grad_one = objective(theta)
    finally:
        numba.set_num_threads(default)
    assert numba.get_num_threads() == default
    assert value_one == value_many
    np.testing.assert_array_equal(grad_one, grad_many)

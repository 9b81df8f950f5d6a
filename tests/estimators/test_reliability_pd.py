"""Positive definiteness: during optimisation a kernel matrix that is
not positive definite makes the line search back off; the kept factorisation
adds diagonal jitter in growing steps up to a bound, warns with the amount,
keeps L_, alpha_ and the likelihood consistent with it, and past the bound
raises an error that names the kernel and what to do."""

import warnings

import numpy as np
import pytest
from scipy.linalg import cho_solve
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessRegressor
from fastgp._linalg.lapack import cholesky_with_jitter, rank_tolerance
from fastgp.exceptions import JitterWarning, NonFiniteMatrixError, NotPositiveDefiniteError


def _data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 5.0, size=(n, 1))
    return X, np.sin(X[:, 0])


def _assert_consistent(gpr, X, y_train):
    """L_ L_^T = K + (alpha + jitter_) I and alpha_ = (L_ L_^T)^-1 y, and the
    stored likelihood is the one of that matrix."""
    K = gpr.kernel_(X)
    K[np.diag_indices_from(K)] += gpr.alpha + gpr.jitter_
    L = gpr.L_
    assert np.all(np.triu(L, 1) == 0.0)
    scale = np.max(np.diag(K))
    np.testing.assert_allclose(L @ L.T, K, atol=1e-12 * scale, rtol=0)
    # alpha_ solves with that factor (a residual K alpha - y would measure the
    # conditioning, about 1e10 here, not the consistency)
    expected_alpha = cho_solve((L, True), y_train)
    np.testing.assert_allclose(gpr.alpha_, expected_alpha,
                               atol=1e-10 * np.max(np.abs(expected_alpha)), rtol=0)
    n = len(y_train)
    expected = -(0.5 * y_train @ gpr.alpha_ + np.sum(np.log(np.diag(L)))
                 + 0.5 * n * np.log(2 * np.pi))
    np.testing.assert_allclose(gpr.log_marginal_likelihood_value_, expected, rtol=1e-10)


def _fit_expecting_jitter(gpr, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr.fit(X, y)
    jitter_warnings = [w for w in caught if issubclass(w.category, JitterWarning)]
    assert len(jitter_warnings) == 1, [str(w.message) for w in caught]
    message = str(jitter_warnings[0].message)
    assert f"{gpr.jitter_:.3g}" in message  # the amount used
    assert "alpha" in message and "noise" in message  # what to do
    return message


def test_pd_duplicated_inputs_without_noise_get_jitter_and_average_the_targets():
    X, y = _data()
    Xd, yd = np.vstack([X, X]), np.concatenate([y, y + 0.1])
    gpr = GaussianProcessRegressor(RBF(1.0, "fixed"), alpha=0.0)
    message = _fit_expecting_jitter(gpr, Xd, yd)
    assert "RBF(length_scale=1)" in message  # names the kernel
    # the first step of the ladder: scikit-learn's default alpha, relative
    assert gpr.jitter_ == pytest.approx(1e-10)
    _assert_consistent(gpr, Xd, yd)
    # two contradicting targets at one input, tiny noise: the mean is their average
    np.testing.assert_allclose(gpr.predict(X), y + 0.05, atol=1e-5)
    mean, std = gpr.predict(X, return_std=True)
    assert np.all(np.isfinite(std)) and np.all(std >= 0)


def test_pd_duplicated_inputs_with_optimised_kernel_fit_without_raising():
    X, y = _data(20)
    Xd, yd = np.vstack([X, X]), np.concatenate([y, y])
    gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0), alpha=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", JitterWarning)
        gpr.fit(Xd, yd)
    assert np.isfinite(gpr.log_marginal_likelihood_value_)
    _assert_consistent(gpr, Xd, yd)
    np.testing.assert_allclose(gpr.predict(X), y, atol=1e-4)


def test_pd_length_scale_that_makes_K_rank_one_gets_jitter_consistently():
    X, y = _data()
    gpr = GaussianProcessRegressor(RBF(1e5, "fixed"), alpha=0.0)
    _fit_expecting_jitter(gpr, X, y)
    assert 0 < gpr.jitter_ <= 1e-6
    _assert_consistent(gpr, X, y)
    # the same model as scikit-learn's with the jitter as its alpha
    theirs = SklearnGPR(RBF(1e5, "fixed"), alpha=gpr.jitter_, optimizer=None).fit(X, y)
    Xq = np.linspace(0, 5, 7).reshape(-1, 1)
    # two Cholesky solves of one matrix differ by up to cond(K) x eps relative
    # (Golub & Van Loan 2013, sec. 4.2.6): the tolerance is that bound, not a
    # guess; K + jitter I is ill-conditioned by construction here
    K = RBF(1e5)(X) + gpr.jitter_ * np.eye(len(X))
    bound = 10 * np.linalg.cond(K) * np.finfo(float).eps
    assert bound < 1e-3  # tighter than a loose absolute tolerance would be
    expected = theirs.predict(Xq)
    np.testing.assert_allclose(gpr.predict(Xq), expected, rtol=0,
                               atol=bound * np.max(np.abs(expected)))


def test_pd_sklearn_itself_refuses_the_rank_one_kernel():
    # the case is real: without jitter scikit-learn raises
    X, y = _data()
    with pytest.raises(np.linalg.LinAlgError):
        SklearnGPR(RBF(1e5, "fixed"), alpha=0.0, optimizer=None).fit(X, y)


def _fit_with_noise_bound_1e_12(X, y):
    """A regressor with a WhiteKernel whose noise level may fall to 1e-12 and
    no alpha, fitted on (X, y) with its convergence and jitter warnings
    ignored."""
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(1e-3, (1e-12, 1.0))
    gpr = GaussianProcessRegressor(kernel, alpha=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", JitterWarning)
        return gpr.fit(X, y)


def test_pd_noise_bound_at_1e_12_fits_noise_free_data():
    X, y = _data(25)
    gpr = _fit_with_noise_bound_1e_12(X, y)
    noise = gpr.kernel_.k2.noise_level
    assert 1e-12 <= noise < 1e-4  # driven towards the bound by noise-free data
    assert np.isfinite(gpr.log_marginal_likelihood_value_)
    _assert_consistent(gpr, X, y)
    np.testing.assert_allclose(gpr.predict(X), y, atol=1e-4)


def test_pd_noise_bound_at_1e_12_with_duplicates_fits():
    X, y = _data(15)
    Xd, yd = np.vstack([X, X]), np.concatenate([y, y + 0.01])
    gpr = _fit_with_noise_bound_1e_12(Xd, yd)
    _assert_consistent(gpr, Xd, yd)
    # the contradiction is explained by noise, of variance about (0.005)^2
    assert gpr.kernel_.k2.noise_level > 1e-6


def test_pd_no_jitter_for_a_well_posed_problem():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitterWarning)
        gpr = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1)).fit(X, y)
    assert gpr.jitter_ == 0.0


class _IndefiniteRBF(RBF):
    """A user's kernel that is not positive semi-definite: RBF minus 0.5 I on
    the training covariance (a realistic bug in a hand-written kernel)."""

    def __call__(self, X, Y=None, eval_gradient=False):
        result = super().__call__(X, Y, eval_gradient)
        if Y is not None:
            return result
        K = result[0] if eval_gradient else result
        K -= 0.5 * np.eye(len(K))
        return result


def test_pd_past_the_bound_raises_naming_the_kernel_and_the_remedy():
    X, y = _data(10)
    gpr = GaussianProcessRegressor(_IndefiniteRBF(1.0), alpha=0.0, optimizer=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(np.linalg.LinAlgError) as info:
            gpr.fit(X, y)
    message = str(info.value)
    assert "_IndefiniteRBF" in message or "RBF(length_scale=1)" in message
    assert "positive definite" in message and "alpha" in message
    assert "noise_level_bounds" in message
    # the bound: 1e-6 x the largest diagonal entry, 1 - 0.5
    assert "jitter up to 5e-07" in message
    assert not hasattr(gpr, "L_")


def test_pd_indefinite_objective_is_infinite_with_a_zero_gradient():
    # in optimisation, non-PD is an infinite objective (what makes a line
    # search back off), never an exception
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.workspace import Workspace
    from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

    X, y = _data(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        covariance = make_covariance(_IndefiniteRBF(1.0), X)
    objective = NegLogMarginalLikelihood(covariance, y, np.zeros(10), Workspace(10))
    value, grad = objective(np.array([0.0]))
    assert value == np.inf and np.all(grad == 0.0)


class _IndefiniteAboveRBF(RBF):
    """C-free RBF whose training covariance is indefinite (minus 2 I) once the
    length scale exceeds ``LIMIT``: a kernel whose valid region the optimiser
    must stay inside. Records the length scales it was called at."""

    LIMIT = 2.0
    calls = []

    def __call__(self, X, Y=None, eval_gradient=False):
        result = super().__call__(X, Y, eval_gradient)
        if Y is None:
            type(self).calls.append(float(np.squeeze(self.length_scale)))
            if np.squeeze(self.length_scale) > self.LIMIT:
                K = result[0] if eval_gradient else result
                K -= 2.0 * np.eye(len(K))
        return result


@pytest.mark.parametrize("optimizer", ["fmin_l_bfgs_b", "CG"])
def test_pd_optimiser_backs_off_from_an_indefinite_region_and_fits(optimizer):
    # linear targets: the likelihood grows with the length scale, so the
    # optimiser steps past LIMIT, meets an infinite objective there and must
    # come back to the valid side instead of raising
    X = np.linspace(0.0, 5.0, 15).reshape(-1, 1)
    y = 0.4 * X[:, 0] - 1.0
    _IndefiniteAboveRBF.calls = []
    gpr = GaussianProcessRegressor(_IndefiniteAboveRBF(0.5, (1e-2, 1e3)), alpha=1e-2,
                                   optimizer=optimizer, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gpr.fit(X, y)
    tried = np.array(_IndefiniteAboveRBF.calls)
    assert np.any(tried > _IndefiniteAboveRBF.LIMIT), "the optimiser never left the valid region"
    assert 0.5 < gpr.kernel_.length_scale <= _IndefiniteAboveRBF.LIMIT
    assert np.isfinite(gpr.log_marginal_likelihood_value_)
    assert gpr.jitter_ == 0.0
    _assert_consistent(gpr, X, y)


# ------------------------------------------------------- the ladder itself
def _filler(K):
    def fill(B, jitter):
        B[...] = K
        B[np.diag_indices_from(B)] += jitter
    return fill


def test_pd_ladder_returns_zero_for_a_positive_definite_matrix():
    K = np.array([[2.0, 0.5], [0.5, 1.0]])
    B = np.empty((2, 2), order="F")
    assert cholesky_with_jitter(_filler(K), B) == 0.0
    np.testing.assert_allclose(np.tril(B) @ np.tril(B).T, K)


def test_pd_ladder_grows_until_the_matrix_factors():
    # eigenvalues 2 + 1e-8 and -1e-8: the ladder (max diag 1) tries 1e-10,
    # 1e-9 and 1e-8 (eigenvalue 0: still singular) and succeeds at 1e-7
    K = np.array([[1.0, 1.0 + 1e-8], [1.0 + 1e-8, 1.0]])
    B = np.empty((2, 2), order="F")
    jitter = cholesky_with_jitter(_filler(K), B)
    assert jitter == pytest.approx(1e-7, rel=1e-6)
    Kj = K + jitter * np.eye(2)
    np.testing.assert_allclose(np.tril(B) @ np.tril(B).T, Kj, rtol=1e-12)


def test_pd_ladder_treats_rounding_level_pivots_as_singular():
    # duplicated rows: dpotrf may accept a pivot of rounding size; the rank test does not
    v = np.array([0.3, 0.7, 0.1])
    K = np.outer(v, v) * 10.0
    B = np.empty((3, 3), order="F")
    jitter = cholesky_with_jitter(_filler(K), B)
    assert jitter > 0
    assert np.min(np.diag(B)) ** 2 > rank_tolerance(3, np.max(np.diag(K)))


def test_pd_ladder_stops_at_the_bound():
    K = np.diag([1.0, -1e-3])
    B = np.empty((2, 2), order="F")
    with pytest.raises(NotPositiveDefiniteError) as info:
        cholesky_with_jitter(_filler(K), B, max_relative_jitter=1e-6)
    assert info.value.jitter == pytest.approx(1e-6)


def test_pd_ladder_refuses_non_finite_matrices():
    B = np.empty((2, 2), order="F")
    with pytest.raises(NonFiniteMatrixError):
        cholesky_with_jitter(_filler(np.array([[1.0, 0.0], [np.nan, 1.0]])), B)
    with pytest.raises(NonFiniteMatrixError):
        cholesky_with_jitter(_filler(np.array([[np.inf, 0.0], [0.0, 1.0]])), B)


def test_pd_ladder_refuses_a_zero_matrix_at_once():
    # nothing to scale a jitter by (max diag K = 0): the first step is zero and
    # the ladder must stop there, not loop adding nothing
    B = np.zeros((3, 3), order="F")
    with pytest.raises(NotPositiveDefiniteError):
        cholesky_with_jitter(_filler(np.zeros((3, 3))), B)


def test_pd_rounding_level_pivot_is_reported_by_its_one_based_order():
    # dpotrf succeeds, but the third pivot squared (2.2e-16) is below
    # n eps max(diag K): the error names leading minor 3, LAPACK's convention
    from fastgp._linalg.lapack import _try_cholesky

    K = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0 + 3e-16]])
    error = _try_cholesky(np.asfortranarray(K), rank_tolerance(3, 1.0 + 3e-16))
    assert isinstance(error, NotPositiveDefiniteError)
    assert error.order == 3 and "pivot 3 (of 3)" in str(error)

"""Newton's float32 early iterations in fastgp._solvers.cholesky.laplace and their LAPACK
doors in fastgp._linalg.lapack: the float32 factor's place inside the float64
buffer, its accuracy, the dsymv products, and that the classifier's
values, gradients and fitted models still equal scikit-learn's and the
all-float64 path's."""

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import fastgp._linalg.blocked as blocked_lapack
import fastgp._solvers.cholesky.laplace as laplace
from fastgp import GaussianProcessClassifier
from fastgp._backend.covariance import make_covariance
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.cholesky.laplace import LaplaceObjective
from fastgp.exceptions import NotPositiveDefiniteError
from fastgp._linalg.lapack import (
    cho_solve_float32,
    cholesky_float32_in_place,
    float32_lower_view,
    symmetric_matvec,
)

from _laplace_cases import NegativeDefinite

RTOL = 1e-6

KERNELS = {
    "C*RBF-ard": lambda: C(2.0) * RBF([0.8, 1.5]),
    "large-amplitude": lambda: C(100.0) * RBF([1.0, 1.0]),
    "short-scale": lambda: C(1.0) * RBF(0.1),
    "small-amplitude": lambda: C(0.01) * RBF(1.0),
    "C*Matern32+White": lambda: C(1.0) * Matern(1.0, nu=1.5) + WhiteKernel(0.1),
}


def _binary_data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = (np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def _spd(n, seed=0):
    A = np.random.default_rng(seed).standard_normal((n, n))
    return A @ A.T / n + np.eye(n)


@pytest.fixture
def float32_on(monkeypatch):
    """Float32 early iterations at every size."""
    monkeypatch.setattr(laplace, "FLOAT32_MIN_N", 0)


# ------------------------------------------------------------ linalg doors
@pytest.mark.parametrize("n", [1, 2, 7, 60])
def test_float32_view_lies_in_the_lower_triangle_and_factors_there(n, monkeypatch):
    monkeypatch.setattr(blocked_lapack, "DEFAULT_BLOCK", 16)  # several blocks at n = 60
    S = _spd(n)
    buffer = np.asfortranarray(np.triu(S, 1) + np.tril(np.full((n, n), np.nan)))
    upper = np.triu(buffer, 1).view(np.uint64).copy()
    view = float32_lower_view(buffer)
    assert view.dtype == np.float32 and np.shares_memory(view, buffer)
    rows, cols = np.tril_indices(n)
    view[rows, cols] = S[rows, cols]
    cholesky_float32_in_place(view)
    np.testing.assert_array_equal(np.triu(buffer, 1).view(np.uint64), upper)  # K kept
    L = np.tril(view).astype(np.float64)
    np.testing.assert_allclose(L, np.linalg.cholesky(S), rtol=1e-5, atol=1e-5)
    y = np.random.default_rng(1).standard_normal(n)
    np.testing.assert_allclose(S @ cho_solve_float32(view, y), y, rtol=0, atol=1e-5)


def test_float32_factor_reports_the_failing_minor(monkeypatch):
    monkeypatch.setattr(blocked_lapack, "DEFAULT_BLOCK", 8)
    n = 30
    S = _spd(n)
    S[20, 20] = -1.0
    buffer = np.asfortranarray(np.zeros((n, n)))
    view = float32_lower_view(buffer)
    rows, cols = np.tril_indices(n)
    view[rows, cols] = S[rows, cols]
    with pytest.raises(NotPositiveDefiniteError) as info:
        cholesky_float32_in_place(view)
    assert info.value.order == 21


def test_float32_doors_refuse_a_copy_prone_or_wrong_argument():
    with pytest.raises(RuntimeError):
        float32_lower_view(np.zeros((4, 4)))  # C order
    with pytest.raises(ValueError, match="aligned float32"):
        cholesky_float32_in_place(np.zeros((4, 4)))  # float64


@pytest.mark.parametrize("n", [0, 1, 5, 300])
def test_symmetric_matvec_reads_one_triangle_and_restores_the_diagonal(n):
    rng = np.random.default_rng(n)
    A = np.asfortranarray(rng.standard_normal((n, n)))
    if n:
        A.view(np.uint64)[-1, -1] = 0x7FF0_0000_DEAD_BEEF  # a NaN with a payload
    before = A.view(np.uint64).copy()
    kdiag, v = rng.standard_normal(n), rng.standard_normal(n)
    U = np.triu(A, 1)
    np.testing.assert_allclose(symmetric_matvec(A, v, lower=False, diag=kdiag),
                               (U + U.T + np.diag(kdiag)) @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(A.view(np.uint64), before)
    A = np.asfortranarray(np.tril(rng.standard_normal((n, n))))
    Lo = np.tril(A, -1)
    np.testing.assert_allclose(symmetric_matvec(A, v, lower=True),
                               (Lo + Lo.T + np.diag(np.diag(A))) @ v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [5, 40, 700])
def test_fill_B32_writes_B_in_float32_and_keeps_K(n):
    """At sizes below, at and above one column block of fastgp._solvers.cholesky.laplace."""
    K = _spd(n, seed=n)
    buffer = np.asfortranarray(np.triu(K, 1) + np.tril(np.full((n, n), np.nan)))
    kdiag = np.diag(K).copy()
    s = np.random.default_rng(2).uniform(0.1, 0.5, n)
    view = float32_lower_view(buffer)
    laplace.fill_B32_from_upper(buffer, view, s, kdiag)
    B = np.eye(n) + s[:, None] * K * s[None, :]
    np.testing.assert_allclose(np.tril(view), np.tril(B), rtol=3e-7, atol=0)
    np.testing.assert_array_equal(np.triu(buffer, 1), np.triu(K, 1))


# ------------------------------------------------------ Newton in float32
def _objective(kernel, X, y, **params):
    return LaplaceObjective(make_covariance(kernel, X), y, Workspace(len(y)), **params)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_float32_path_equals_sklearn_and_the_float64_path(name, float32_on):
    X, y = _binary_data()
    kernel = KERNELS[name]()
    theta = kernel.theta + 0.3
    objective = _objective(kernel, X, y)
    value, grad = objective(theta)
    mode = objective.mode
    assert mode.n_float32 > 0 and mode.n_iterations - mode.n_float32 >= 2
    theirs = SklearnGPC(kernel, optimizer=None).fit(X, y)
    ref_value, ref_grad = theirs.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(-value, ref_value, rtol=RTOL)
    np.testing.assert_allclose(-grad, ref_grad, rtol=RTOL, atol=RTOL * np.abs(ref_grad).max())
    # against fastgp's all-float64 iterations, which equal scikit-learn's
    # step for step: the float32 steps change nothing but rounding
    laplace.FLOAT32_MIN_N = 10**9  # restored by the fixture's monkeypatch
    value64, grad64 = _objective(kernel, X, y)(theta)
    np.testing.assert_allclose(value, value64, rtol=1e-10)
    np.testing.assert_allclose(grad, grad64, rtol=1e-8, atol=1e-10 * np.abs(grad64).max())


def test_refinement_makes_the_switching_step_exact(float32_on, monkeypatch):
    """The float32 factor's solve, refined against float64 residuals, equals
    the dense float64 solve to rounding; a step whose refinement is refused
    (REFINE_TOL = 0) is redone by a float64 iteration whose value is not
    kept, with the same answer."""
    X, y = _binary_data(n=200, seed=4)
    kernel = C(100.0) * RBF([1.0, 1.0])
    objective = _objective(kernel, X, y)
    objective.newton(kernel.theta)  # fills K and leaves B32 free to reuse
    buffer = objective.workspace.buffer()
    n = len(y)
    s = np.sqrt(np.random.default_rng(0).uniform(0.01, 0.25, n))
    K = kernel(X)
    view = float32_lower_view(buffer)
    laplace.fill_B32_from_upper(buffer, view, s, objective._kdiag)
    cholesky_float32_in_place(view)
    r = np.random.default_rng(1).standard_normal(n)
    c = objective._refine(buffer, view, s, r, cho_solve_float32(view, r))
    exact = np.linalg.solve(np.eye(n) + s[:, None] * K * s, r)
    np.testing.assert_allclose(c, exact, rtol=0, atol=1e-12 * np.abs(exact).max())

    value, grad = objective(kernel.theta)
    refined = objective.mode
    monkeypatch.setattr(laplace, "REFINE_TOL", 0.0)
    value_redone, grad_redone = objective(kernel.theta)
    redone = objective.mode
    assert redone.n_float32 == refined.n_float32
    assert redone.n_iterations >= refined.n_iterations + 1
    np.testing.assert_allclose(value_redone, value, rtol=1e-12)
    np.testing.assert_allclose(grad_redone, grad, rtol=1e-8, atol=1e-10 * np.abs(grad).max())


def test_float32_path_gradient_matches_central_finite_differences(float32_on):
    X, y = _binary_data(n=80, seed=3)
    kernel = C(2.0) * RBF([0.8, 1.5])
    objective = _objective(kernel, X, y)
    theta = kernel.theta + 0.2
    _, grad = objective(theta)
    h = 1e-5
    fd = np.array([(objective.value(theta + h * e) - objective.value(theta - h * e)) / (2 * h)
                   for e in np.eye(theta.size)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_float32_iterations_to_their_limit_are_corrected_by_float64_ones(float32_on,
                                                                         monkeypatch):
    """Float32 iterations kept on well past convergence (no switch before
    the reserve) stall at float32's accuracy; the float64 ones that follow
    reach the all-float64 mode to rounding."""
    monkeypatch.setattr(laplace, "FLOAT32_SWITCH", -np.inf)
    X, y = _binary_data(n=200, seed=1)
    kernel = C(100.0) * RBF([1.0, 1.0])  # B's condition number about 10^3
    objective = _objective(kernel, X, y, max_iter=laplace.FLOAT32_RESERVE + 20)
    value, grad = objective(kernel.theta)
    assert objective.mode.n_float32 == 20
    assert objective.mode.n_iterations - 20 >= 2
    f_mixed = objective.mode.f
    monkeypatch.setattr(laplace, "FLOAT32_MIN_N", 10**9)
    value64, grad64 = objective(kernel.theta)
    assert objective.mode.n_float32 == 0
    np.testing.assert_allclose(f_mixed, objective.mode.f, rtol=0,
                               atol=1e-10 * np.abs(objective.mode.f).max())
    np.testing.assert_allclose(value, value64, rtol=1e-10)
    np.testing.assert_allclose(grad, grad64, rtol=1e-8, atol=1e-10 * np.abs(grad64).max())


def test_float32_path_is_skipped_for_warm_starts_and_few_iterations(float32_on):
    X, y = _binary_data()
    kernel = C(2.0) * RBF([0.8, 1.5])
    few = _objective(kernel, X, y, max_iter=laplace.FLOAT32_RESERVE)
    few.newton(kernel.theta)
    assert few.mode.n_float32 == 0
    warm = _objective(kernel, X, y, warm_start=True)
    warm.newton(kernel.theta)
    assert warm.mode.n_float32 > 0  # cold: nothing cached yet
    cold_iterations = warm.mode.n_iterations
    warm.newton(kernel.theta + 1e-3)
    assert warm.mode.n_float32 == 0 and warm.mode.n_iterations < cold_iterations


def test_float32_failure_hands_over_to_float64(float32_on):
    """Where float32 finds B not positive definite, the float64 iterations
    take over and answer as without float32 (here: inf, B indefinite)."""
    X, y = _binary_data(n=10)
    objective = LaplaceObjective(NegativeDefinite(len(y)), y, Workspace(len(y)))
    value, grad = objective(np.array([0.0]))
    assert value == np.inf and np.all(grad == 0.0)


def test_float32_path_fit_equals_sklearns(float32_on):
    X, y = _binary_data(n=120, seed=2)
    kernel = C(1.0) * RBF([1.0, 1.0])
    ours = GaussianProcessClassifier(kernel, random_state=0).fit(X, y)
    theirs = SklearnGPC(kernel, random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.kernel_.theta, theirs.kernel_.theta, atol=1e-3)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=RTOL)
    fixed = GaussianProcessClassifier(kernel, optimizer=None).fit(X, y)
    ref = SklearnGPC(kernel, optimizer=None).fit(X, y)
    # probabilities to the probit mixture's rounding, as in test_classifier.py
    np.testing.assert_allclose(fixed.predict_proba(X), ref.predict_proba(X), rtol=0, atol=1e-7)
    np.testing.assert_allclose(np.tril(fixed.base_estimator_.L_), ref.base_estimator_.L_,
                               rtol=1e-8, atol=1e-12)

"""The matrix-free objective against the exact (Cholesky) one: equal where
the preconditioner is exact, converging as probes grow at the Monte Carlo
rate 1/sqrt(t), an unbiased gradient over seeds, its gradient against finite
differences of itself with fixed probes, and fuzzed small problems."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp._backend.covariance import make_covariance
from fastgp._solvers.workspace import Workspace
from fastgp._solvers.iterative.objective import (
    TRIAL_CG_FACTOR,
    TRIAL_CG_FLOOR,
    TRIAL_RADIUS,
    IterativeNegLogMarginalLikelihood,
)
from fastgp._solvers.iterative.system import SolverOptions
from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood


def _problem(n, d, kernel, seed=0, n_targets=1, alpha=1e-2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    Y = np.column_stack([np.sin(X[:, 0] + k) for k in range(n_targets)])
    Y += 0.1 * rng.standard_normal(Y.shape)
    covariance = make_covariance(kernel, X)
    diag_add = np.full(n, alpha)
    exact = NegLogMarginalLikelihood(covariance, Y, diag_add, Workspace(n))
    return covariance, Y, diag_add, exact


def _iterative(covariance, Y, diag_add, seed=0, **options):
    return IterativeNegLogMarginalLikelihood(covariance, Y, diag_add,
                                             SolverOptions(**options), seed)


@pytest.mark.parametrize("kernel, d, n_targets", [
    (C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.1), 2, 1),
    (Matern(0.9, nu=1.5) + WhiteKernel(0.05), 1, 2),
    (RationalQuadratic(0.8, alpha=1.5) * C(0.7), 3, 1),
    (DotProduct(0.5) + WhiteKernel(0.2), 2, 1),   # non-stationary diagonal
])
def test_exact_preconditioner_gives_the_exact_value_and_gradient(kernel, d, n_targets):
    # rank n: P = K~, CG converges at once, SLQ of log|P^-1 K~| is 0 and the
    # gradient's trace is exact: value and gradient equal the Cholesky path's
    n = 50
    covariance, Y, diag_add, exact = _problem(n, d, kernel, n_targets=n_targets)
    value, grad = _iterative(covariance, Y, diag_add, cg_tol=1e-12, n_probes=4,
                             preconditioner_rank=n)(kernel.theta)
    value0, grad0 = exact(kernel.theta)
    assert value == pytest.approx(value0, rel=1e-8)
    np.testing.assert_allclose(grad, grad0, rtol=1e-6, atol=1e-8 * np.abs(grad0).max())


@pytest.mark.slow  # many probe counts
def test_error_falls_with_probes_at_the_monte_carlo_rate():
    # with a poor preconditioner (rank 5) the error is the probes': its RMS
    # over seeds (value and gradient together) falls as 1/sqrt(t); 4 -> 64
    # probes is a factor 4 (an RMS over 16 seeds is good to about 20 %)
    kernel = C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.05)
    covariance, Y, diag_add, exact = _problem(150, 2, kernel)
    value0, grad0 = exact(kernel.theta)
    rms = {}
    for t in (4, 64):
        errors = []
        for seed in range(16):
            value, grad = _iterative(covariance, Y, diag_add, seed=seed, cg_tol=1e-10,
                                     n_probes=t, preconditioner_rank=5)(kernel.theta)
            errors.append(np.concatenate([[value - value0], grad - grad0]))
        rms[t] = np.sqrt(np.mean(np.sum(np.square(errors), axis=1)))
    assert rms[4] / 4 / 1.5 < rms[64] < rms[4] / 4 * 1.5


def test_value_error_falls_as_the_tolerance_tightens():
    # one probe set; the value's CG part converges to the probes' own limit
    kernel = C(1.0) * RBF(0.5) + WhiteKernel(1e-3)
    covariance, Y, diag_add, _ = _problem(150, 1, kernel, alpha=1e-6)
    reference, _ = _iterative(covariance, Y, diag_add, cg_tol=1e-13, n_probes=8,
                              preconditioner_rank=3)(kernel.theta)
    errors = [abs(_iterative(covariance, Y, diag_add, cg_tol=tol, n_probes=8,
                             preconditioner_rank=3)(kernel.theta)[0] - reference)
              for tol in (1e-2, 1e-5, 1e-8)]
    assert errors[2] < errors[1] < errors[0]
    assert errors[2] < 1e-6 * abs(reference)


@pytest.mark.slow  # 200 and 100 seeds
@pytest.mark.parametrize("n_targets, n_seeds", [(1, 200), (2, 100)])
def test_gradient_estimator_is_unbiased_over_seeds(n_targets, n_seeds):
    # independent probe sets: the mean estimate lies within 4 standard
    # errors of the exact gradient in every component (fails for a biased
    # estimator, e.g. one that drops the preconditioner's exact trace, or,
    # with two targets, scales the probes' correction by 1/t instead of T/t:
    # 24 to 101 standard errors at 200 seeds)
    kernel = C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.05)
    covariance, Y, diag_add, exact = _problem(80, 2, kernel, n_targets=n_targets)
    _, grad0 = exact(kernel.theta)
    grads = np.array([_iterative(covariance, Y, diag_add, seed=seed, cg_tol=1e-11,
                                 n_probes=2, preconditioner_rank=4)(kernel.theta)[1]
                      for seed in range(n_seeds)])
    mean = grads.mean(axis=0)
    standard_error = grads.std(axis=0, ddof=1) / np.sqrt(len(grads))
    assert np.all(standard_error > 0)
    assert np.all(np.abs(mean - grad0) < 4 * standard_error)


def test_gradient_matches_finite_differences_of_the_iterative_value():
    # fixed probes make the estimate a function of theta; where the
    # preconditioner captures the kernel (1-D RBF, rank 30) its gradient is
    # the derivative of that function
    kernel = C(1.2) * RBF(0.8) + WhiteKernel(0.05)
    covariance, Y, diag_add, _ = _problem(200, 1, kernel)
    objective = _iterative(covariance, Y, diag_add, cg_tol=1e-12, n_probes=8,
                           preconditioner_rank=30)
    theta = kernel.theta
    _, grad = objective(theta)
    h = 1e-5
    fd = np.array([(objective(theta + h * e)[0] - objective(theta - h * e)[0]) / (2 * h)
                   for e in np.eye(len(theta))])
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-5 * np.abs(fd).max())


def test_probes_are_fixed_by_the_seed():
    kernel = C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.05)
    covariance, Y, diag_add, _ = _problem(60, 2, kernel)
    a = _iterative(covariance, Y, diag_add, seed=3, preconditioner_rank=5)(kernel.theta)
    b = _iterative(covariance, Y, diag_add, seed=3, preconditioner_rank=5)(kernel.theta)
    c = _iterative(covariance, Y, diag_add, seed=4, preconditioner_rank=5)(kernel.theta)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    assert a[0] != c[0]


def test_not_positive_definite_answers_inf():
    # a negative alpha makes K~ indefinite: (inf, zeros), as the dense path
    kernel = RBF(1.0)
    covariance, Y, _, _ = _problem(40, 1, kernel)
    objective = _iterative(covariance, Y, np.full(40, -0.5), preconditioner_rank=0)
    value, grad = objective(kernel.theta)
    assert value == np.inf and np.array_equal(grad, np.zeros(1))
    assert objective.value(kernel.theta) == np.inf


def test_a_trial_point_far_costlier_than_the_last_converged_one_is_abandoned():
    # rank 15 captures the kernel at length scale 1 (CG: a few iterations)
    # but not at 0.37, one unit of log length scale away (over a hundred)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(1e-4)
    covariance, Y, diag_add, _ = _problem(300, 1, kernel, alpha=1e-6)
    near = kernel.theta.copy()
    near[1] = np.log(0.37)
    assert np.max(np.abs(near - kernel.theta)) <= TRIAL_RADIUS

    def objective():
        return _iterative(covariance, Y, diag_add, preconditioner_rank=15, cg_tol=1e-6)

    costly = objective()
    assert np.isfinite(costly(near)[0])  # a first evaluation runs to max_cg_iter
    needed = costly.last_cg.n_iterations

    tried = objective()
    assert np.isfinite(tried(kernel.theta)[0])
    cap = max(TRIAL_CG_FLOOR, TRIAL_CG_FACTOR * tried.last_cg.n_iterations)
    assert needed > cap
    value, grad = tried(near)
    assert value == np.inf and np.array_equal(grad, np.zeros(kernel.n_dims))
    assert tried.last_cg.n_iterations == cap
    assert tried.n_abandoned == 1 and tried.n_unconverged == 0
    assert tried.value(near) == np.inf and tried.n_abandoned == 2
    # the final model's solve is never capped, and agrees with the lone one
    A, value, _ = tried.final(near)
    assert value == pytest.approx(costly(near)[0], rel=1e-10)

    # farther than TRIAL_RADIUS from the last converged point (a restart's
    # start): the full max_cg_iter
    far = near.copy()
    far[1] += TRIAL_RADIUS + 0.5
    restarted = objective()
    assert np.isfinite(restarted(far)[0])
    assert np.isfinite(restarted(near)[0]) and restarted.n_abandoned == 0


FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

KERNELS = [
    lambda d: C(1.0) * RBF(1.0) + WhiteKernel(0.1),
    lambda d: Matern([1.0] * d, nu=2.5) + WhiteKernel(1e-2),
    lambda d: Matern(0.7, nu=0.5) * C(2.0),
    lambda d: RationalQuadratic(1.0, 0.5) + WhiteKernel(0.3),
    lambda d: RBF([0.5] * d) * DotProduct(1.0) + WhiteKernel(0.1),
]


@FUZZ
@given(n=st.integers(1, 40), d=st.integers(1, 3), which=st.integers(0, len(KERNELS) - 1),
       n_targets=st.integers(1, 3), alpha=st.sampled_from([1e-3, 1e-2, 1.0]),
       log_scale=st.floats(-1.0, 1.0), seed=st.integers(0, 2**16))
def test_fuzz_iterative_equals_cholesky_with_an_exact_preconditioner(
        n, d, which, n_targets, alpha, log_scale, seed):
    kernel = KERNELS[which](d)
    theta = kernel.theta + log_scale
    covariance, Y, diag_add, exact = _problem(n, d, kernel, seed=seed,
                                              n_targets=n_targets, alpha=alpha)
    value0, grad0 = exact(theta)
    value, grad = _iterative(covariance, Y, diag_add, seed=seed, cg_tol=1e-12,
                             n_probes=3, preconditioner_rank=n)(theta)
    assert value == pytest.approx(value0, rel=1e-7, abs=1e-7)
    np.testing.assert_allclose(grad, grad0, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(grad0).max()))

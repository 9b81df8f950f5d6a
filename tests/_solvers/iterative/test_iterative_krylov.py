"""The matrix-free path's linear algebra against dense references: batched
preconditioned CG against cho_solve, the Lanczos quadrature of its
coefficients against the dense matrix function, and the pivoted Cholesky
preconditioner (Woodbury solve, exact log-determinant, probes) against the
dense P it stands for."""

import numpy as np
import pytest
from scipy.linalg import cho_factor, cho_solve, eigh
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp._backend.covariance import make_covariance
from fastgp._solvers.iterative.system import KernelSystem, SolverOptions
from fastgp._solvers.iterative.krylov import batched_cg, lanczos_quadrature, lanczos_tridiagonal
from fastgp.exceptions import NotPositiveDefiniteError
from fastgp._solvers.iterative.preconditioner import (
    PivotedCholeskyPreconditioner,
    build_preconditioner,
    pivoted_cholesky,
)


def _problem(n=120, d=2, seed=0, kernel=None, alpha=1e-2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 6, (n, d))
    kernel = C(1.3) * RBF([0.8] * d) + WhiteKernel(0.05) if kernel is None else kernel
    covariance = make_covariance(kernel, X)
    diag_add = np.full(n, alpha)
    K = kernel(X) + np.diag(diag_add)
    return covariance, kernel.theta, diag_add, K, rng


@pytest.mark.parametrize("rank", [0, 5, 40])
def test_cg_equals_cho_solve(rank):
    covariance, theta, diag_add, K, rng = _problem()
    system = KernelSystem(covariance, theta, diag_add,
                          SolverOptions(cg_tol=1e-14, max_cg_iter=2000,
                                        preconditioner_rank=rank))
    B = rng.standard_normal((len(K), 5))
    B[:, 2] = 0.0  # a zero column converges at once
    result = system.solve(B)
    reference = cho_solve(cho_factor(K), B)
    np.testing.assert_allclose(result.X, reference, rtol=0, atol=1e-10 * np.abs(reference).max())
    assert result.converged and result.iterations[2] == 0
    assert result.residual.max() <= 1e-14
    # the reported residual is the true one (to rounding)
    true = np.linalg.norm(B - K @ result.X, axis=0) / np.maximum(np.linalg.norm(B, axis=0), 1e-300)
    np.testing.assert_allclose(true, result.residual, atol=1e-13)


def test_cg_preconditioner_cuts_iterations():
    covariance, theta, diag_add, K, rng = _problem(kernel=C(1.0) * RBF(1.5) + WhiteKernel(1e-3))
    B = rng.standard_normal((len(K), 3))
    counts = [KernelSystem(covariance, theta, diag_add,
                           SolverOptions(cg_tol=1e-8, preconditioner_rank=rank)
                           ).solve(B).n_iterations for rank in (0, 60)]
    assert counts[1] < counts[0] / 3


def test_cg_stops_at_max_iter_and_reports_the_residual():
    covariance, theta, diag_add, K, rng = _problem(alpha=1e-6)
    system = KernelSystem(covariance, theta, diag_add,
                          SolverOptions(cg_tol=1e-12, max_cg_iter=3, preconditioner_rank=0))
    result = system.solve(rng.standard_normal((len(K), 2)))
    assert not result.converged
    assert result.n_iterations == 3
    assert result.max_residual > 1e-12


def test_cg_not_positive_definite_raises():
    A = np.diag([1.0, 2.0, -1.0])
    with pytest.raises(NotPositiveDefiniteError):
        batched_cg(lambda V: A @ V, np.ones((3, 1)), lambda R: R.copy(), 1e-12, 10)


def test_lanczos_quadrature_equals_dense_matrix_function():
    # after n steps the quadrature is exact: b^T M^-1/2 f(M^-1/2 A M^-1/2) M^-1/2 b
    rng = np.random.default_rng(3)
    n = 12
    G = rng.standard_normal((n, n))
    A = G @ G.T + n * np.eye(n)
    H = rng.standard_normal((n, n))
    M = H @ H.T + n * np.eye(n)
    B = rng.standard_normal((n, 3))
    Minv = np.linalg.inv(M)
    result = batched_cg(lambda V: A @ V, B, lambda R: Minv @ R, 1e-15, 5 * n)
    w, V = eigh(M)
    M_half_inv = V @ np.diag(w ** -0.5) @ V.T
    S = M_half_inv @ A @ M_half_inv
    s, U = eigh(S)
    logS = U @ np.diag(np.log(s)) @ U.T
    expected = [M_half_inv @ B[:, q] @ logS @ (M_half_inv @ B[:, q]) for q in range(3)]
    np.testing.assert_allclose(lanczos_quadrature(result, range(3)), expected, rtol=1e-9)


def test_lanczos_tridiagonal_of_plain_cg_has_the_matrix_eigenvalues():
    rng = np.random.default_rng(4)
    n = 8
    G = rng.standard_normal((n, n))
    A = G @ G.T + np.eye(n)
    # n steps: the Krylov space is the whole space (more would add rounding's
    # ghost copies of converged eigenvalues)
    result = batched_cg(lambda V: A @ V, rng.standard_normal((n, 1)), lambda R: R.copy(),
                        1e-300, n)
    m = result.iterations[0]
    assert m == n
    diagonal, off = lanczos_tridiagonal(result.alphas[:m, 0], result.betas[:m, 0])
    T = np.diag(diagonal) + np.diag(off, 1) + np.diag(off, -1)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(T)), np.linalg.eigvalsh(A),
                               rtol=1e-8)


def test_pivoted_cholesky_full_rank_reproduces_the_kernel():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 3, (30, 1))
    kernel = Matern(0.3, nu=0.5)
    K = kernel(X)
    L = pivoted_cholesky(lambda j: K[:, j], np.diag(K).copy(), 30)
    np.testing.assert_allclose(L @ L.T, K, atol=1e-12)


@pytest.mark.parametrize("scale", [1e-6, 1.0, 1e12])
def test_pivoted_cholesky_stops_at_the_kernels_rank(scale):
    """At any signal variance: the floor on a pivot is relative to the
    kernel's largest diagonal entry."""
    rng = np.random.default_rng(6)
    F = rng.standard_normal((40, 3))
    K = scale * (F @ F.T)  # rank 3
    L = pivoted_cholesky(lambda j: K[:, j], np.diag(K) + 0.1 * scale, 20)
    assert L.shape[1] == 3
    np.testing.assert_allclose(L @ L.T, K, atol=1e-10 * scale)


@pytest.mark.parametrize("rank", [0, 7, 200])
def test_preconditioner_solve_log_det_and_diagonal(rank):
    covariance, theta, diag_add, K, rng = _problem()
    P = build_preconditioner(covariance, theta, diag_add, rank)
    dense = P.L @ P.L.T + np.diag(P.D)
    np.testing.assert_allclose(np.diag(dense), np.diag(K), rtol=1e-12)
    V = rng.standard_normal((len(K), 4))
    np.testing.assert_allclose(P.solve(V), np.linalg.solve(dense, V), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(P.solve(V[:, 0]), np.linalg.solve(dense, V[:, 0]),
                               rtol=1e-8, atol=1e-10)
    assert P.log_det == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12, abs=1e-9)
    L = P.L
    S = P.into_trace_factor()
    assert S is L or np.shares_memory(S, L)  # in place: no (n, k) array beside L
    M = rng.standard_normal(K.shape)
    M = M + M.T
    exact = np.trace(np.linalg.solve(dense, M))
    assert np.sum(np.diag(M) / P.D) - np.trace(S.T @ M @ S) == pytest.approx(exact, rel=1e-8)
    with pytest.raises(RuntimeError, match="into_trace_factor"):
        P.solve(V)


def test_preconditioner_at_full_rank_is_the_model_matrix():
    covariance, theta, diag_add, K, _ = _problem(n=60)
    P = build_preconditioner(covariance, theta, diag_add, 60)
    np.testing.assert_allclose(P.L @ P.L.T + np.diag(P.D), K, atol=1e-10)


def test_probes_have_the_preconditioners_covariance():
    rng = np.random.default_rng(7)
    L = rng.standard_normal((5, 2))
    P = PivotedCholeskyPreconditioner(L=L, D=np.array([0.5, 1.0, 2.0, 0.1, 0.3]))
    n_draws = 200_000
    Z = P.probes(rng.standard_normal((4, n_draws)), rng.standard_normal((5, n_draws)))
    empirical = Z @ Z.T / n_draws
    expected = L @ L.T + np.diag(P.D)
    # standard error of a covariance entry: sqrt((S_ii S_jj + S_ij^2) / n)
    se = np.sqrt((np.outer(np.diag(expected), np.diag(expected)) + expected ** 2) / n_draws)
    assert np.all(np.abs(empirical - expected) < 5 * se)

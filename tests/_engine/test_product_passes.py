"""The product passes (K V, dK/dtheta V, tr(P^T dK/dtheta Q), k(X*, X) V)
against scikit-learn's kernel objects, at sizes of several tiles and on 1
and 2 Numba threads (the bits must not depend on the count), and the
fallback backend against the fast one."""

import numpy as np
import pytest
from sklearn.gaussian_process.kernels import (RBF, DotProduct, ExpSineSquared, Matern,
                                              RationalQuadratic, WhiteKernel)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from conftest import assert_same_bits_on_one_and_two_threads, random_theta
from fastgp._engine.interpreter import TILE
from fastgp._backend.covariance import FastCovariance, KernelObjectCovariance, make_covariance

#: A short last tile and more than one tile per row.
N = 2 * TILE + 37

KERNELS = {
    "C*RBF-ard+White": C(1.5) * RBF([0.6, 1.7]) + WhiteKernel(0.1),
    "RQ+Dot+White": RationalQuadratic(0.8, alpha=1.5) + DotProduct(0.5) + WhiteKernel(0.3),
    "ESS*RBF": ExpSineSquared(1.1, 2.0) * RBF(3.0),
    "Matern12-ard": Matern([0.7, 1.3], nu=0.5),
}


@pytest.fixture(params=list(KERNELS), ids=list(KERNELS))
def problem(request):
    rng = np.random.default_rng(7)
    kernel = KERNELS[request.param]
    X = rng.uniform(-2.0, 2.0, size=(N, 2))
    X[-1] = X[3]  # a repeated input across tiles: r = 0 off the diagonal
    theta = random_theta(kernel, rng, 0.3)
    covariance = make_covariance(kernel, X)
    assert isinstance(covariance, FastCovariance)
    K, K_gradient = kernel.clone_with_theta(theta)(X, eval_gradient=True)
    return covariance, theta, X, K, K_gradient, rng


def _close(got, expected, rtol=1e-12):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * scale)


def test_matmat_matches_the_dense_product(problem):
    covariance, theta, X, K, _, rng = problem
    V = rng.standard_normal((N, 3))
    diag_add = rng.uniform(0.0, 0.2, size=N)
    _close(covariance.matmat(theta, V, diag_add), (K + np.diag(diag_add)) @ V)
    vector = covariance.matmat(theta, V[:, 1])
    assert vector.shape == (N,)
    _close(vector, K @ V[:, 1])


def test_dmatmat_matches_sklearns_gradient_tensor(problem):
    covariance, theta, X, _, K_gradient, rng = problem
    V = rng.standard_normal((N, 2))
    got = covariance.dmatmat(theta, V)
    assert got.shape == (K_gradient.shape[2], N, 2)
    _close(got, np.einsum("ijp,jq->piq", K_gradient, V))
    _close(covariance.dmatmat(theta, V[:, 0]), np.einsum("ijp,j->pi", K_gradient, V[:, 0]))


def test_grad_bilinear_is_the_trace_of_the_low_rank_form(problem):
    covariance, theta, X, _, K_gradient, rng = problem
    P = rng.standard_normal((N, 4))
    Q = rng.standard_normal((N, 4))
    expected = np.einsum("iq,ijp,jq->p", P, K_gradient, Q)
    got = covariance.grad_bilinear(theta, P, Q)
    np.testing.assert_allclose(got, expected, rtol=1e-10,
                               atol=1e-12 * np.abs(P).max() * np.abs(Q).max() * N)
    # with a symmetric part s tr(S^T dK S), S F-ordered as the objective's
    S = np.asfortranarray(rng.standard_normal((N, 3)))
    expected_s = expected - 2.5 * np.einsum("iq,ijp,jq->p", S, K_gradient, S)
    got_s = covariance.grad_bilinear(theta, P, Q, S, -2.5)
    np.testing.assert_allclose(got_s, expected_s, rtol=1e-10,
                               atol=1e-12 * 3.0 * np.abs(S).max() ** 2 * N)
    # the symmetric part alone (no pairs), and S == P == Q, agree
    np.testing.assert_allclose(covariance.grad_bilinear(theta, S[:, :0], S[:, :0], S, 1.0),
                               covariance.grad_bilinear(theta, S, S), rtol=1e-12)


def test_cross_matmat_matches_the_cross_covariance(problem):
    covariance, theta, X, _, _, rng = problem
    kernel = covariance.kernel.clone_with_theta(theta)
    X_query = rng.uniform(-2.0, 2.0, size=(300, 2))
    V = rng.standard_normal((N, 2))
    _close(covariance.cross_matmat(theta, X_query, V), kernel(X_query, X) @ V)
    # the training points as queries: no white noise (scikit-learn's k(X*, X))
    _close(covariance.cross_matmat(theta, X[:50], V[:, 0]), kernel(X[:50], X) @ V[:, 0])


def test_fallback_backend_gives_the_same_products(problem):
    covariance, theta, X, _, _, rng = problem
    slow = KernelObjectCovariance(covariance.kernel, X)
    V = rng.standard_normal((N, 2))
    diag_add = rng.uniform(0.0, 0.2, size=N)
    _close(slow.matmat(theta, V, diag_add), covariance.matmat(theta, V, diag_add))
    _close(slow.dmatmat(theta, V[:, 0]), covariance.dmatmat(theta, V[:, 0]))
    np.testing.assert_allclose(slow.grad_bilinear(theta, V, V[:, ::-1], V[:, :1], -3.0),
                               covariance.grad_bilinear(theta, V, V[:, ::-1], V[:, :1], -3.0),
                               rtol=1e-10)
    _close(slow.cross_matmat(theta, X[:9], V), covariance.cross_matmat(theta, X[:9], V))


def test_products_do_not_depend_on_the_thread_count(problem):
    covariance, theta, X, _, _, rng = problem
    V = rng.standard_normal((N, 2))
    assert_same_bits_on_one_and_two_threads(lambda: (
        covariance.matmat(theta, V), covariance.dmatmat(theta, V),
        covariance.grad_bilinear(theta, V, V[:, ::-1], V, 0.5),
        covariance.cross_matmat(theta, X[:77], V)))


def test_a_block_of_the_wrong_length_is_refused():
    X = np.linspace(0.0, 1.0, 20)[:, None]
    covariance = make_covariance(RBF(), X)
    with pytest.raises(ValueError, match=r"shape \(20,\) or \(20, t\)"):
        covariance.matmat(covariance.kernel.theta, np.ones(19))


@pytest.mark.parametrize("n", [TILE, 4 * TILE + 1, 10 * TILE + 3, 64 * TILE, 200 * TILE])
def test_pair_schedule_meets_every_pair_of_blocks_once_and_each_block_once_a_round(n):
    """The symmetric product's schedule (docs/design.md, "Products with
    vectors"): B even row blocks that cover the rows; each round holds every
    block once (so its pairs write disjoint rows), and every pair of
    distinct blocks comes in exactly one round. From 2 blocks (one empty
    round of pairs) to the cap of MAX_PAIR_BLOCKS."""
    from fastgp._engine.product_passes import MAX_PAIR_BLOCKS, pair_schedule

    bounds, rounds = pair_schedule(n)
    blocks = bounds.size - 1
    assert blocks % 2 == 0 and 2 <= blocks <= MAX_PAIR_BLOCKS
    assert bounds[0] == 0 and bounds[-1] == n and np.all(np.diff(bounds) > 0)
    assert rounds.shape == (blocks - 1, blocks // 2, 2)
    for round_ in rounds:
        np.testing.assert_array_equal(np.sort(round_.ravel()), np.arange(blocks))
    assert np.all(rounds[:, :, 0] > rounds[:, :, 1])  # (I, J) with I > J
    met = {tuple(pair) for pair in rounds.reshape(-1, 2).tolist()}
    assert len(met) == rounds.shape[0] * rounds.shape[1]  # none twice
    assert met == {(i, j) for i in range(blocks) for j in range(i)}

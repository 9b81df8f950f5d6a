"""The numerical core of Vecchia's approximation: the jitted likelihood,
gradient and predictions (fastgp/_engine/vecchia_passes.py) against the dense
NumPy / scikit-learn reference (tests/_vecchia_reference.py), the
exact GP at m = N - 1, finite differences; the orderings and neighbour sets
against brute force; determinism over thread counts; failure flags."""

import numba
import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor as SkGPR
from sklearn.gaussian_process.kernels import RBF, DotProduct, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import _vecchia_reference as ref
from conftest import random_theta
from fastgp._engine import vecchia_passes as vp
from fastgp._engine.config import parallel_region
from fastgp._solvers.vecchia import neighbours as nb
from fastgp._solvers.vecchia import ordering as od
from fastgp._backend.covariance import kernel_input
from fastgp._backend.lowering import lower_kernel


def _kernels():
    return {
        "RBF": RBF(0.8),
        "Matern12": Matern(0.9, nu=0.5),
        "Matern32": Matern(0.7, nu=1.5),
        "Matern52": Matern(1.1, nu=2.5),
        "RBF-ard": RBF([0.6, 1.7]),
        "C*Matern32+White": C(1.3) * Matern(0.7, nu=1.5) + WhiteKernel(0.1),
        "C*RBF-ard+White": C(0.8) * RBF([0.6, 1.7]) + WhiteKernel(0.05),
        "Matern52-ard*C": Matern([0.9, 1.4], nu=2.5) * C(2.0),
        # a non-stationary leaf: column tiles, not packed ones
        "C*Dot+RBF+White": C(0.5) * DotProduct(0.3) + RBF(1.0) + WhiteKernel(0.2),
    }


KERNELS = _kernels()


def _problem(rng, n, n_targets=1, d=2):
    X = rng.uniform(-2.0, 2.0, size=(n, d))
    f = np.sin(1.3 * X[:, 0]) + 0.5 * np.cos(X[:, -1])
    Y = np.column_stack([(k + 1.0) * f + k + 0.1 * rng.standard_normal(n)
                         for k in range(n_targets)])
    return X, Y


def _maxmin_sets(X, m):
    """The maxmin ordering of X (n, d) and each position's conditioning set
    of up to m nearest earlier points: perm (n,), nbrs (n, m)."""
    perm = od.maxmin_order(X)
    return perm, nb.ordered_neighbours(X, perm, m)


def _maxmin_problem(rng, n, n_targets, m, d=2):
    """:func:`_problem` (rng, n, n_targets, d) and its :func:`_maxmin_sets`
    (m): X (n, d), Y (n, n_targets), perm (n,), nbrs (n, m)."""
    X, Y = _problem(rng, n, n_targets, d=d)
    perm, nbrs = _maxmin_sets(X, m)
    return X, Y, perm, nbrs


def _engine_nll(kernel, X, Y, diag_add, perm, nbrs, theta=None, want_grad=True, packed=None):
    """The engine's NLL and gradient over every position block, summed in
    block order: (nll, grad (n_theta,) or None, n_bad), as the backend's
    vecchia_partials and vecchia_total give them."""
    program = lower_kernel(kernel, X.shape[1])
    theta = kernel.theta if theta is None else theta
    with parallel_region():
        partial, flags = vp.vecchia_partials(
            kernel_input(X), Y, diag_add, perm, nbrs, program.ops, program.op_float,
            program.params(theta), program.theta_of_param, program.stack_depth,
            program.n_theta, want_grad=want_grad, packed=packed)
    return vp.vecchia_total(partial, flags, program.n_theta, want_grad)


def _assert_rel(actual, expected, rtol):
    actual = np.atleast_1d(actual)
    expected = np.atleast_1d(expected)
    scale = max(np.abs(expected).max(), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale)


@pytest.fixture
def rng():
    return np.random.default_rng(20261201)


# ------------------------------------------------------------ likelihood


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("m", [1, 3, 7])
@pytest.mark.parametrize("n_targets", [1, 2])
def test_nll_and_gradient_equal_dense_reference(rng, name, m, n_targets):
    kernel = KERNELS[name]
    X, Y = _problem(rng, 45, n_targets)
    perm = od.random_order(len(X), 3)
    nbrs = nb.ordered_neighbours(X, perm, m)
    for diag_add in (1e-2, rng.uniform(1e-3, 5e-2, size=len(X))):
        expected = ref.vecchia_nll_grad_dense(kernel, X, Y, diag_add, perm, nbrs)
        value, grad, n_bad = _engine_nll(kernel, X, Y, np.broadcast_to(diag_add, len(X)),
                                         perm, nbrs)
        assert n_bad == 0
        _assert_rel(value, expected[0], 1e-10)
        _assert_rel(grad, expected[1], 1e-10)


def test_three_length_scales(rng):
    kernel = C(1.1) * RBF([0.6, 1.2, 2.0]) + WhiteKernel(0.05)
    X, Y, perm, nbrs = _maxmin_problem(rng, 60, 2, 5, d=3)
    expected = ref.vecchia_nll_grad_dense(kernel, X, Y, 1e-2, perm, nbrs)
    value, grad, _ = _engine_nll(kernel, X, Y, np.full(len(X), 1e-2), perm, nbrs)
    _assert_rel(value, expected[0], 1e-10)
    _assert_rel(grad, expected[1], 1e-10)


@pytest.mark.parametrize("name", ["C*Matern32+White", "RBF-ard", "C*Dot+RBF+White"])
def test_gradient_equals_central_differences(rng, name):
    kernel = KERNELS[name]
    X, Y, perm, nbrs = _maxmin_problem(rng, 50, 2, 6)
    alpha = np.full(len(X), 1e-2)
    theta = random_theta(kernel, rng, 0.3)
    _, grad, _ = _engine_nll(kernel, X, Y, alpha, perm, nbrs, theta)
    h = 1e-5
    fd = np.empty_like(grad)
    for p in range(theta.size):
        step = np.zeros_like(theta)
        step[p] = h
        up = _engine_nll(kernel, X, Y, alpha, perm, nbrs, theta + step, want_grad=False)[0]
        down = _engine_nll(kernel, X, Y, alpha, perm, nbrs, theta - step, want_grad=False)[0]
        fd[p] = (up - down) / (2 * h)
    _assert_rel(grad, fd, 1e-7)


@pytest.mark.parametrize("name", ["C*Matern32+White", "RBF-ard", "C*Dot+RBF+White"])
@pytest.mark.parametrize("n_targets", [1, 2])
def test_every_earlier_point_as_neighbour_is_the_exact_gp(rng, name, n_targets):
    kernel = KERNELS[name]
    X, Y = _problem(rng, 40, n_targets)
    n = len(X)
    perm, nbrs = _maxmin_sets(X, n - 1)
    alpha = rng.uniform(1e-3, 5e-2, size=n)
    gpr = SkGPR(kernel, alpha=alpha, optimizer=None).fit(X, Y if n_targets > 1 else Y[:, 0])
    lml, lml_grad = gpr.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    value, grad, _ = _engine_nll(kernel, X, Y, alpha, perm, nbrs)
    _assert_rel(value, -lml, 1e-8)
    _assert_rel(grad, -lml_grad, 1e-8)


def test_value_alone_equals_value_with_gradient(rng):
    kernel = KERNELS["C*Matern32+White"]
    X, Y, perm, nbrs = _maxmin_problem(rng, 70, 1, 5)
    alpha = np.full(len(X), 1e-3)
    with_grad = _engine_nll(kernel, X, Y, alpha, perm, nbrs)
    alone = _engine_nll(kernel, X, Y, alpha, perm, nbrs, want_grad=False)
    # the interpreter's VALUES and D_THETA modes may round a value differently
    # in its last bit (measured: 1 ulp of the sum), never more
    assert alone[1] is None
    _assert_rel(alone[0], with_grad[0], 1e-14)


@pytest.mark.parametrize("name", ["C*Matern32+White", "RBF-ard", "Matern12"])
def test_packed_and_column_tiles_give_the_same_bits(rng, name):
    kernel = KERNELS[name]
    X, Y, perm, nbrs = _maxmin_problem(rng, 300, 2, 9)
    alpha = np.full(len(X), 1e-3)
    packed = _engine_nll(kernel, X, Y, alpha, perm, nbrs, packed=True)
    columns = _engine_nll(kernel, X, Y, alpha, perm, nbrs, packed=False)
    assert packed[0] == columns[0]
    np.testing.assert_array_equal(packed[1], columns[1])


def test_same_bits_on_one_and_two_threads(rng):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here")
    kernel = KERNELS["C*Matern32+White"]
    X, Y, perm, nbrs = _maxmin_problem(rng, 3000, 2, 12)
    alpha = np.full(len(X), 1e-4)
    assert vp.position_blocks(len(X)).size - 1 == vp.VECCHIA_BLOCKS
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 1):
            numba.set_num_threads(threads)
            results.append(_engine_nll(kernel, X, Y, alpha, perm, nbrs))
    finally:
        numba.set_num_threads(before)
    for value, grad, _ in results[1:]:
        assert value == results[0][0]
        np.testing.assert_array_equal(grad, results[0][1])


def test_spatial_layout_keeps_the_value(rng):
    kernel = KERNELS["C*RBF-ard+White"]
    X, Y, perm, nbrs = _maxmin_problem(rng, 500, 2, 8)
    alpha = rng.uniform(1e-3, 1e-2, size=len(X))
    plain = _engine_nll(kernel, X, Y, alpha, perm, nbrs)
    layout = nb.SpatialLayout(X, perm, nbrs)
    assert np.array_equal(layout.point, np.arange(len(X)))
    moved = _engine_nll(kernel, layout.take(X), layout.take(Y), layout.take(alpha),
                        layout.point, layout.nbrs)
    _assert_rel(moved[0], plain[0], 1e-12)
    _assert_rel(moved[1], plain[1], 1e-11)


def test_non_positive_definite_block_is_flagged(rng):
    X, Y = _problem(rng, 80)
    X[40:] = X[:40]  # every point twice
    kernel = C(1.0) * RBF(0.7)  # no WhiteKernel, no nugget
    perm, nbrs = _maxmin_sets(X, 4)
    for packed in (True, False):
        value, grad, n_bad = _engine_nll(kernel, X, Y, np.zeros(len(X)), perm, nbrs,
                                         packed=packed)
        assert n_bad > 0 and value == np.inf
        np.testing.assert_array_equal(grad, np.zeros(kernel.n_dims))
    # a nugget makes every block positive definite again
    value, grad, n_bad = _engine_nll(kernel, X, Y, np.full(len(X), 1e-2), perm, nbrs)
    assert n_bad == 0 and np.isfinite(value) and np.all(np.isfinite(grad))


# ------------------------------------------------------------ prediction


@pytest.mark.parametrize("name", ["C*Matern32+White", "RBF-ard", "C*Dot+RBF+White"])
@pytest.mark.parametrize("n_targets", [1, 2])
def test_prediction_equals_dense_conditional(rng, name, n_targets):
    kernel = KERNELS[name]
    X, Y = _problem(rng, 120, n_targets)
    Xq = rng.uniform(-2.0, 2.0, size=(37, 2))
    Xq[:3] = X[:3]  # query points on training points
    alpha = rng.uniform(1e-3, 1e-2, size=len(X))
    nbrs = nb.query_neighbours(X, Xq, 9)
    program = lower_kernel(kernel, 2)
    with parallel_region():
        mean, var, n_bad = vp.vecchia_predict(
            kernel_input(X), kernel_input(Xq), Y, alpha, nbrs, program.ops, program.op_float,
            program.params(kernel.theta), program.theta_of_param, program.stack_depth)
    expected_mean, expected_var = ref.vecchia_predict_dense(kernel, X, Y, alpha, Xq, nbrs)
    assert n_bad == 0
    _assert_rel(mean, expected_mean, 1e-10)
    np.testing.assert_allclose(var, expected_var, rtol=1e-9, atol=1e-12)
    # the variance is the latent one plus WhiteKernel's term, as kernel.diag
    # (FastCovariance.diag, scikit-learn's predict) has it: with a WhiteKernel
    # every variance is at least its noise level
    if "White" in name:
        assert np.all(var > kernel.k2.noise_level * (1 - 1e-12))


def test_prediction_flags_non_positive_definite_neighbours(rng):
    X, Y = _problem(rng, 40)
    X[20:] = X[:20]
    kernel = C(1.0) * RBF(0.7)
    nbrs = nb.query_neighbours(X, X[:5] + 0.01, 4)
    program = lower_kernel(kernel, 2)
    with parallel_region():
        mean, var, n_bad = vp.vecchia_predict(
            kernel_input(X), kernel_input(X[:5] + 0.01), Y, np.zeros(len(X)), nbrs,
            program.ops, program.op_float, program.params(kernel.theta),
            program.theta_of_param, program.stack_depth)
    assert n_bad == 5 and np.all(np.isnan(var)) and np.all(np.isnan(mean))


# ------------------------------------------------------------ orderings


@pytest.mark.parametrize("n", [200, 1000])
def test_exact_maxmin_equals_brute_force(rng, n):
    X = rng.uniform(0.0, 1.0, size=(n, 2))
    np.testing.assert_array_equal(od.maxmin_order(X), ref.brute_maxmin(X))


def test_maxmin_ties_go_to_the_lowest_index():
    g = np.arange(12.0)
    X = np.array([(a, b) for a in g for b in g])  # a grid: ties everywhere
    np.testing.assert_array_equal(od.maxmin_order(X), ref.brute_maxmin(X))


def test_approximate_maxmin_is_a_bounded_distance_from_exact(rng):
    X = rng.uniform(0.0, 1.0, size=(8000, 2))
    exact = od.maxmin_order(X)
    approx = od.maxmin_order(X, random_state=0, exact_below=1000, base_size=500)
    assert np.array_equal(np.sort(approx), np.arange(len(X)))
    assert approx[0] == exact[0]
    np.testing.assert_array_equal(
        approx, od.maxmin_order(X, random_state=0, exact_below=1000, base_size=500))
    dev = ref.maxmin_deviation(X, approx, exact)
    # bounds measured at 20,000 points: rise 1.45,
    # ratio in [0.74, 1.41]; here with room for a smaller sample
    assert dev["rise"] <= 2.0
    assert 0.5 <= dev["ratio_min"] and dev["ratio_max"] <= 2.0
    assert ref.maxmin_deviation(X, exact)["rise"] <= 1.0  # rho never increases


def test_approximate_maxmin_keeps_outliers_early():
    # heavy tails: a uniformly drawn subset misses isolated points, which
    # then came after the whole prefix (rise 151 at 20,000 points)
    X = np.random.default_rng(9).standard_t(3, size=(8000, 2))
    exact = od.maxmin_order(X)
    approx = od.maxmin_order(X, random_state=0, exact_below=1000, base_size=500)
    dev = ref.maxmin_deviation(X, approx, exact)
    assert dev["rise"] <= 2.0
    assert 0.5 <= dev["ratio_min"] and dev["ratio_max"] <= 2.0


def test_approximate_maxmin_levels_are_the_weighted_samples_of_their_size(rng, monkeypatch):
    """Each nested subset is the first point and the ceil(n / factor) - 1
    other points of the level above with the largest keys log(u) / w
    (Efraimidis & Spirakis 2006; equal weights here, density_fraction=0, so
    the largest uniform draws): checked against the draws the ordering made
    and the subsets it handed on to its exact and continued phases."""

    class Recording(np.random.RandomState):
        draws = []

        def uniform(self, *args, **kwargs):
            u = super().uniform(*args, **kwargs)
            self.draws.append(u)
            return u

    handed = {"base": None, "levels": []}
    exact, continued = od._exact, od._continue

    def record_exact(X_base, first):
        handed["base"] = X_base
        return exact(X_base, first)

    def record_continue(X_all, level, prefix):
        handed["levels"].append(level)
        return continued(X_all, level, prefix)

    monkeypatch.setattr(od, "_exact", record_exact)
    monkeypatch.setattr(od, "_continue", record_continue)
    X = rng.uniform(0.0, 1.0, size=(200, 2))
    state = Recording(5)
    order = od.maxmin_order(X, random_state=state, exact_below=100, base_size=50,
                            subset_factor=2, density_fraction=0)
    first = int(np.argmin(((X - X.mean(axis=0)) ** 2).sum(axis=1)))
    assert order[0] == first
    levels = [np.arange(200)]
    for u in state.draws:  # 200 -> 100 -> 50 points
        current = levels[-1]
        size = -(-current.size // 2)
        others = current[current != first]
        levels.append(np.sort(np.append(others[np.argsort(-u)[:size - 1]], first)))
    assert [level.size for level in levels] == [200, 100, 50]
    np.testing.assert_array_equal(handed["base"], X[levels[-1]])
    assert len(handed["levels"]) == 2
    for got, expected in zip(handed["levels"], reversed(levels[:-1])):
        np.testing.assert_array_equal(got, expected)


def test_maxmin_update_pairs_filter_keeps_the_pairs_that_can_lower_a_key(rng):
    # a pair can carry a key update where its squared distance is below the
    # smaller of its two keys (with a relative slack of 1e-12) and that key
    # is at most r2; the routine marks each pair and returns how many it kept
    from fastgp._engine.maxmin import filter_update_pairs

    X = rng.uniform(0.0, 1.0, size=(40, 2))
    key = rng.uniform(0.0, 0.3, size=40)
    a, b = np.triu_indices(40, 1)
    a, b = a.astype(np.int64), b.astype(np.int64)
    r2 = 0.2
    lim = np.minimum(key[a], key[b])
    expected = (lim <= r2) & (((X[a] - X[b]) ** 2).sum(axis=1) < lim * (1.0 + 1e-12))
    assert 0 < expected.sum() < a.size
    keep = np.empty(a.size, dtype=np.bool_)
    count = filter_update_pairs(od._transposed(X), key, a, b, r2, keep)
    np.testing.assert_array_equal(keep, expected)
    assert count == expected.sum()


def test_random_order_is_deterministic():
    a = od.random_order(500, 7)
    np.testing.assert_array_equal(a, od.random_order(500, 7))
    np.testing.assert_array_equal(np.sort(a), np.arange(500))
    assert a.dtype == np.int64


@pytest.mark.parametrize("order", ["maxmin", "random"])
@pytest.mark.parametrize("n, m", [(200, 1), (600, 5), (2000, 30)])
def test_ordered_neighbours_equal_brute_force(rng, order, n, m):
    X = rng.uniform(0.0, 1.0, size=(n, 2))
    perm = od.maxmin_order(X) if order == "maxmin" else od.random_order(n, 1)
    expected = ref.brute_ordered_neighbours(X, perm, m)
    # a small brute-force prefix, so that the tree path does most of the work
    got = nb.ordered_neighbours(X, perm, m, brute_below=16)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(nb.ordered_neighbours(X, perm, m), expected)


def test_query_neighbours(rng):
    X = rng.uniform(0.0, 1.0, size=(300, 2))
    Xq = rng.uniform(0.0, 1.0, size=(50, 2))
    got = nb.query_neighbours(X, Xq, 7)
    D = ((Xq[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    np.testing.assert_array_equal(got, np.argsort(D, axis=1, kind="stable")[:, :7])
    padded = nb.query_neighbours(X[:5], Xq, 7)
    assert np.all(padded[:, 5:] == -1) and np.all(padded[:, :5] >= 0)

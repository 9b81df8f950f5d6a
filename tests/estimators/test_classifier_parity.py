"""GaussianProcessClassifier's predictions against its own probabilities and
against scikit-learn's (docs/gpc.md, "Predictions"):

- predict is exactly ``classes_[np.argmax(predict_proba(X), axis=1)]`` (the
  first class at a tie), for vector and structured inputs, binary and
  one-vs-rest: at latent means of exactly 0 (a sequence kernel's symmetric
  problem, query points the kernel does not reach), at a probability of
  exactly 0.5, and at latent means inside the band where the probability's
  0.5 crossing lies;
- the probabilities equal scikit-learn's to about 1e-12 at the same
  hyperparameters (the same probit-mixture coefficients);
- above two tiles (N = 2 x TILE + 37, on 1 and 2 Numba threads): the log
  marginal likelihood, its gradient, predict_proba and predict against
  scikit-learn's at the same hyperparameters, binary and 3-class one-vs-rest.
"""

import warnings

import numba
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_moons
from sklearn.gaussian_process import GaussianProcessClassifier as SklearnGPC
from sklearn.gaussian_process.kernels import (RBF, GenericKernelMixin, Hyperparameter,
                                              Kernel, StationaryKernelMixin)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessClassifier
from fastgp._engine.interpreter import TILE
from fastgp._engine.threads import SERIAL_BELOW
from fastgp._solvers.laplace_predictive import (
    DECISION_BAND,
    MIXTURE_COEFFICIENTS,
    positive_class_decision,
    positive_class_probability,
)
from fastgp.exceptions import SlowKernelWarning

#: The probabilities' agreement with scikit-learn's at the same
#: hyperparameters: the mixture's coefficients (up to 3,517, of both signs)
#: turn the erf arguments' last-bit differences into about 1e-12.
PROBA_ATOL = 5e-12


def _argmax_classes(gpc, X):
    return gpc.classes_[np.argmax(gpc.predict_proba(X), axis=1)]


# ------------------------------------------------------------ structured inputs
class MiniSeqKernel(GenericKernelMixin, StationaryKernelMixin, Kernel):
    """scikit-learn's test kernel for sequences (its test_gpc.py): the sum,
    over pairs of characters, of 1 where they are equal and
    ``baseline_similarity`` elsewhere."""

    def __init__(self, baseline_similarity=0.5, baseline_similarity_bounds=(1e-5, 1)):
        self.baseline_similarity = baseline_similarity
        self.baseline_similarity_bounds = baseline_similarity_bounds

    @property
    def hyperparameter_baseline_similarity(self):
        return Hyperparameter("baseline_similarity", "numeric",
                              self.baseline_similarity_bounds)

    def _f(self, s1, s2):
        return sum(1.0 if c1 == c2 else self.baseline_similarity for c1 in s1 for c2 in s2)

    def _g(self, s1, s2):
        return sum(0.0 if c1 == c2 else 1.0 for c1 in s1 for c2 in s2)

    def __call__(self, X, Y=None, eval_gradient=False):
        Y = X if Y is None else Y
        K = np.array([[self._f(x, y) for y in Y] for x in X])
        if eval_gradient:
            return K, np.array([[[self._g(x, y)] for y in Y] for x in X])
        return K

    def diag(self, X):
        return np.array([self._f(x, x) for x in X])

    def clone_with_theta(self, theta):
        cloned = clone(self)
        cloned.theta = theta
        return cloned


def _fit_both(kernel, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowKernelWarning)
        ours = GaussianProcessClassifier(kernel, **params).fit(X, y)
    return ours, SklearnGPC(kernel, **params).fit(X, y)


def test_structured_binary_at_a_latent_mean_of_exactly_zero():
    # scikit-learn's test_predict_consistent_structured: the mode is 0, so
    # every latent mean is, and the probability is the mixture's value at 0
    X = ["A", "AB", "B"]
    y = np.array([True, False, True])
    ours, theirs = _fit_both(MiniSeqKernel(baseline_similarity_bounds="fixed"), X, y)
    mean, _ = ours.latent_mean_and_variance(X)
    assert np.all(mean == 0.0)
    proba = ours.predict_proba(X)
    assert np.all(proba[:, 1] == 0.5 * MIXTURE_COEFFICIENTS.sum())
    assert np.all(proba[:, 1] < 0.5)
    np.testing.assert_array_equal(ours.predict(X), _argmax_classes(ours, X))
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(proba, theirs.predict_proba(X), rtol=0, atol=PROBA_ATOL)


class SharedCharacterKernel(GenericKernelMixin, Kernel):
    """The number of equal pairs of characters: the inner product of the
    strings' character counts (positive semi-definite), 0 between strings
    that share no character. No hyperparameters."""

    def __init__(self):
        pass

    def __call__(self, X, Y=None, eval_gradient=False):
        Y = X if Y is None else Y
        K = np.array([[float(sum(a == b for a in x for b in z)) for z in Y] for x in X])
        return (K, np.empty(K.shape + (0,))) if eval_gradient else K

    def diag(self, X):
        return np.array([float(sum(a == b for a in x for b in x)) for x in X])

    def is_stationary(self):
        return False


def test_structured_one_vs_rest_ties_go_to_the_first_class():
    # at strings that share no character with the training strings, every
    # binary model's latent mean is exactly 0 and its variance k(x*, x*), so
    # the normalised probabilities tie exactly
    X = ["AAB", "AB", "B", "BBC", "C", "CA", "AC", "BC", "A"]
    y = np.array([2, 0, 1, 1, 2, 2, 0, 1, 0])
    queries = ["Z", "XY", "QQQ"] + X
    ours, theirs = _fit_both(SharedCharacterKernel(), X, y)
    proba = ours.predict_proba(queries)
    assert np.all(proba[:3] == proba[:3, :1])  # an exact three-way tie
    predicted = ours.predict(queries)
    np.testing.assert_array_equal(predicted, _argmax_classes(ours, queries))
    np.testing.assert_array_equal(predicted[:3], [0, 0, 0])
    ref = theirs.predict_proba(queries)
    np.testing.assert_allclose(proba, ref, rtol=0, atol=PROBA_ATOL)
    # scikit-learn's own choice at an exact tie depends on its version (its
    # one-vs-rest took the last class in 1.6, the first in 1.9), so it is
    # compared only where the top probability is clear
    decided = _clear_top(ref)
    assert not decided[:3].any() and decided[3:].any()
    np.testing.assert_array_equal(predicted[decided], theirs.predict(queries)[decided])


# --------------------------------------------------------------- vector inputs
def _vector_problem(n_classes, n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    score = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n)
    return X, np.digitize(score, np.linspace(-1, 1, n_classes + 1)[1:-1])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_vector_ties_where_the_kernel_does_not_reach_go_to_the_first_class(n_classes):
    # RBF(1) underflows to exactly 0 at distance 100: latent means exactly 0
    X, y = _vector_problem(n_classes)
    ours, theirs = _fit_both(C(2.0) * RBF(1.0), X, y, optimizer=None)
    far = np.array([[100.0, 0.0], [-80.0, 90.0], [0.0, -1e3]])
    queries = np.vstack([far, X])
    proba = ours.predict_proba(queries)
    predicted = ours.predict(queries)
    np.testing.assert_array_equal(predicted, _argmax_classes(ours, queries))
    np.testing.assert_array_equal(predicted[:3], [0, 0, 0])
    # scikit-learn's choice at an exact tie depends on its version: compared
    # where the top probability is clear
    decided = _clear_top(theirs.predict_proba(queries))
    np.testing.assert_array_equal(predicted[decided], theirs.predict(queries)[decided])
    if n_classes == 2:
        assert np.all(ours.latent_mean_and_variance(far)[0] == 0.0)
        assert np.all(proba[:3, 1] < 0.5)
    else:
        assert np.all(proba[:3] == proba[:3, :1])  # an exact three-way tie
    np.testing.assert_allclose(proba, theirs.predict_proba(queries), rtol=0,
                               atol=PROBA_ATOL)


class _OnePointCovariance:
    """A backend of one training point whose cross covariance with a query
    point is the query's value and whose prior variance is ``var``: with
    g = [1] and W^1/2 = [0] the latent mean at x* is exactly x* and the
    variance exactly var."""

    def __init__(self, var):
        self.var = var

    def cross(self, theta, X_query):
        return np.asfortranarray(np.asarray(X_query, dtype=np.float64).reshape(1, -1))

    def diag(self, theta, X_query):
        return np.full(len(X_query), self.var)


def _decide(means, var, W_sr=np.zeros(1)):
    """positive_class_decision at latent means ``means`` and variance var;
    (positive, variances computed)."""
    positive, _, computed = positive_class_decision(
        _OnePointCovariance(var), None, np.ones((1, 1), order="F"), W_sr, np.ones(1),
        np.asarray(means, dtype=np.float64))
    return positive, computed


def _boundary(predicate, lo, hi):
    """Adjacent floats (a, b), lo <= a < b <= hi, with predicate(a) false and
    predicate(b) true, by bisection (predicate(lo) false, predicate(hi) true)."""
    while True:
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            return lo, hi
        lo, hi = (lo, mid) if predicate(mid) else (mid, hi)


@pytest.mark.parametrize("var", [0.0, 0.7, 40.0])
def test_decision_at_a_probability_of_exactly_one_half_is_the_first_class(var):
    # the latent means where the probability reaches 0.5 and where it
    # passes it: between them it is exactly 0.5, a tie of [1 - p, p]
    def p(f):
        return positive_class_probability(np.array([f]), np.array([var]))[0]

    band = DECISION_BAND * np.sqrt(1.0 + var)
    assert p(0.0) < 0.5 < p(band)
    below, first_half = _boundary(lambda f: p(f) >= 0.5, 0.0, band)
    last_half, above = _boundary(lambda f: p(f) > 0.5, first_half, band)
    means = np.array([below, first_half, last_half, above])
    probabilities = np.array([p(f) for f in means])
    assert probabilities[0] < 0.5 < probabilities[3]
    assert probabilities[1] == 0.5 and probabilities[2] == 0.5
    positive, computed = _decide(means, var)
    np.testing.assert_array_equal(computed, np.full(4, var))
    proba = np.stack([1.0 - probabilities, probabilities], axis=1)
    np.testing.assert_array_equal(positive, np.argmax(proba, axis=1) == 1)
    np.testing.assert_array_equal(positive, [False, False, False, True])


@pytest.mark.parametrize("var", [0.0, 1.0, 1e6])
def test_decision_outside_the_band_needs_no_variance(var):
    # where the sign decides, the variance is never computed (W^1/2 = None
    # would fail), and the decision is the probability's argmax
    band = DECISION_BAND * np.sqrt(1.0 + var)
    means = np.array([-1e3, -1.0, -1e-300, -0.0, 0.0, band * 1.0000001, 1.0, 50.0])
    positive, computed = _decide(means, var, W_sr=None)
    assert computed.size == 0
    probabilities = positive_class_probability(means, np.full(means.size, var))
    np.testing.assert_array_equal(positive, probabilities > 1.0 - probabilities)
    np.testing.assert_array_equal(positive, means > 0)


def test_predict_inside_the_band_is_the_argmax_not_the_sign():
    # along a ray away from the data the latent mean decays through the band
    # (0, DECISION_BAND x sqrt(1 + var)); there its sign and the
    # probability's argmax can differ, and predict follows the probability
    X, y = _vector_problem(2)
    gpc = GaussianProcessClassifier(C(2.0) * RBF(1.0), optimizer=None).fit(X, y)
    direction = np.array([0.6, 0.8])
    radii = np.linspace(6.0, 12.0, 4001)
    mean = gpc.latent_mean_and_variance(radii[:, None] * direction)[0]
    if mean[-1] < 0:  # the other way along the ray has positive means
        direction = -direction
    queries = radii[:, None] * direction
    mean, var = gpc.latent_mean_and_variance(queries)
    proba = gpc.predict_proba(queries)
    in_band = (mean > 0) & (mean <= DECISION_BAND * np.sqrt(1.0 + var))
    disagree = (mean > 0) & (proba[:, 1] < 0.5)
    assert in_band.sum() > 100 and disagree.sum() > 10
    np.testing.assert_array_equal(gpc.predict(queries), _argmax_classes(gpc, queries))
    # and alone, with no query point of a mean near 0 beside them
    clear = queries[disagree & (mean > 1e-9)]
    assert len(clear) > 10
    np.testing.assert_array_equal(gpc.predict(clear), np.full(len(clear), gpc.classes_[0]))


@pytest.mark.parametrize("var", [0.0, 1.0, 1e4])
def test_probabilities_stay_within_zero_and_one(var):
    # the mixture's limits are 0 and sum(c) = 1 - 1e-8 (the unrounded
    # coefficients' sum exceeded 1)
    magnitudes = np.logspace(-3, 300, 2000)
    mean = np.concatenate([-magnitudes[::-1], [0.0], magnitudes])
    p = positive_class_probability(mean, np.full(mean.size, var))
    assert np.all((p >= 0.0) & (p < 1.0))
    assert p[0] == 0.0 and p[-1] == MIXTURE_COEFFICIENTS.sum()


# ----------------------------------------------- agreement with scikit-learn
@pytest.mark.parametrize("n_classes", [2, 3])
def test_probabilities_equal_sklearns_to_1e_12_on_moons(n_classes):
    X, y = make_moons(n_samples=200, noise=0.2, random_state=0)
    if n_classes == 3:
        y = np.where(X[:, 0] > 1.2, 2, y)
    kernel = C(2.0) * RBF([0.7, 1.1])
    ours, theirs = _fit_both(kernel, X, y, optimizer=None)
    Xq = np.random.default_rng(0).uniform(-2, 3, size=(500, 2))
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-12)
    proba, ref = ours.predict_proba(Xq), theirs.predict_proba(Xq)
    np.testing.assert_allclose(proba, ref, rtol=0, atol=PROBA_ATOL)
    np.testing.assert_array_equal(ours.predict(Xq), _argmax_classes(ours, Xq))
    decided = _clear_top(ref)
    np.testing.assert_array_equal(ours.predict(Xq)[decided], theirs.predict(Xq)[decided])


def _clear_top(proba, margin=1e-9):
    """Rows whose largest probability leads the next by more than margin
    (and, binary, lies outside the 0.5 band where scikit-learn's sign rule
    and its own probabilities differ)."""
    top = np.sort(proba, axis=1)
    return top[:, -1] - top[:, -2] > margin


# ------------------------------------------------------ above two tiles
#: Two tiles and a short third, above the serial threshold.
N_MULTI_TILE = 2 * TILE + 37

#: Numba thread counts compared.
THREAD_COUNTS = (1, 2)


def test_multi_tile_size_spans_two_tiles_above_the_serial_threshold():
    assert N_MULTI_TILE > 2 * TILE and N_MULTI_TILE % TILE and N_MULTI_TILE >= SERIAL_BELOW


@pytest.fixture
def numba_threads(counted_threads):
    """Set Numba's thread count for the test, fastgp's per-evaluation thread
    policy off (it would lower the count to the idle cores); returns the set
    of counts the fill ran on. Skips a count above NUMBA_NUM_THREADS (never
    1)."""
    before = numba.get_num_threads()

    def set_threads(count):
        if count > numba.config.NUMBA_NUM_THREADS:
            pytest.skip(f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS} < {count}")
        numba.set_num_threads(count)
        return counted_threads

    yield set_threads
    numba.set_num_threads(before)


def _multi_tile_problem(n_classes):
    rng = np.random.default_rng(7)
    X = rng.uniform(-3, 3, size=(N_MULTI_TILE, 2))
    score = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(N_MULTI_TILE)
    y = np.digitize(score, [0.0] if n_classes == 2 else [-0.5, 0.5])
    Xq = rng.uniform(-3.5, 3.5, size=(300, 2))
    Xq[:2] = X[[3, TILE + 7]]  # query points on training points in two tiles
    return X, y, Xq


MULTI_TILE_KERNEL = C(1.5) * RBF([0.9, 1.4])
MULTI_TILE_THETA_SHIFT = 0.2


@pytest.fixture(scope="module")
def sklearn_multi_tile():
    """scikit-learn's classifier on the multi-tile problems, fitted once per
    number of classes: its fit, probabilities, predictions and likelihoods."""
    references = {}
    for n_classes in (2, 3):
        X, y, Xq = _multi_tile_problem(n_classes)
        theirs = SklearnGPC(MULTI_TILE_KERNEL, optimizer=None).fit(X, y)
        theta = MULTI_TILE_KERNEL.theta + MULTI_TILE_THETA_SHIFT
        references[n_classes] = {
            "lml": theirs.log_marginal_likelihood_value_,
            "lml_at_theta": (theirs.log_marginal_likelihood(theta, eval_gradient=True)
                             if n_classes == 2 else theirs.log_marginal_likelihood(theta)),
            "proba": theirs.predict_proba(Xq),
            "predict": theirs.predict(Xq),
        }
    return references


@pytest.mark.slow
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("count", THREAD_COUNTS)
def test_multi_tile_classifier_matches_sklearn_at_the_same_theta(
        n_classes, count, numba_threads, sklearn_multi_tile):
    ref = sklearn_multi_tile[n_classes]
    X, y, Xq = _multi_tile_problem(n_classes)
    seen = numba_threads(count)
    ours = GaussianProcessClassifier(MULTI_TILE_KERNEL, optimizer=None).fit(X, y)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_, ref["lml"], rtol=1e-12)
    theta = MULTI_TILE_KERNEL.theta + MULTI_TILE_THETA_SHIFT
    if n_classes == 2:
        value, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
        ref_value, ref_grad = ref["lml_at_theta"]
        np.testing.assert_allclose(value, ref_value, rtol=1e-12)
        np.testing.assert_allclose(grad, ref_grad, rtol=0,
                                   atol=1e-11 * np.abs(ref_grad).max())
    else:
        np.testing.assert_allclose(ours.log_marginal_likelihood(theta), ref["lml_at_theta"],
                                   rtol=1e-12)
    proba = ours.predict_proba(Xq)
    np.testing.assert_allclose(proba, ref["proba"], rtol=0, atol=PROBA_ATOL)
    predicted = ours.predict(Xq)
    np.testing.assert_array_equal(predicted, ours.classes_[np.argmax(proba, axis=1)])
    decided = _clear_top(ref["proba"])
    assert decided.mean() > 0.95
    np.testing.assert_array_equal(predicted[decided], ref["predict"][decided])
    assert seen == {count}

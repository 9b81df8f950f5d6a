"""Fuzzing the public API: random shapes, values (extremes and
non-finite ones included) and parameters; every outcome is a correct result
or a documented exception.

Documented exceptions (docs/reliability.md): ValueError for bad input or an
unusable fit (numpy.linalg.LinAlgError, which the kernel-not-positive-definite
error is, subclasses it). Anything else (a TypeError or IndexError from deep
inside, a ZeroDivisionError, a crash in Numba or LAPACK) fails the test, and
so does a result that is not finite or not of the documented shape.

Every drawn input is classified before the call (``_classify_fit``,
``_fuzz.classify_query``): invalid input must raise a ValueError whose message
names the problem; ordinary input (finite, moderate values, a valid alpha and
kernel) must fit; extreme input (finite values near overflow) may fit or
raise one of the messages listed for it. The fuzz tests then require a
minimum share of successful fits, so that an estimator that always raised
would fail them.
"""

import collections
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    ExpSineSquared,
    Matern,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GPLVM, GaussianProcessRegressor

from _fuzz import (DOCUMENTED, FUZZ, classify_query, expect, fit_as_classified,
                   fit_input_reasons, fuzz_counts)
from _fuzz import ordinary as _ordinary
from _fuzz import values

KERNELS = [
    lambda: RBF(1.0),
    lambda: C(1.0) * RBF(1.0) + WhiteKernel(0.1),
    lambda: Matern(1.0, nu=1.5) + WhiteKernel(1e-3, (1e-12, 1.0)),
    lambda: RationalQuadratic(1.0, 1.0),
    lambda: C(2.0) * Matern(0.5, nu=0.5),
    lambda: DotProduct(1.0) + WhiteKernel(0.1),
    lambda: ExpSineSquared(1.0, 2.0) + WhiteKernel(0.1),
    lambda: RBF([1.0, 2.0]),  # ARD: valid only for two features
    lambda: RBF(1e5, "fixed"),  # a rank-one K: jitter
]

ALPHAS = [1e-10, 1e-10, 0.0, 0.0, 1e-2, 1.0, -1.0, np.nan, "array", "array"]


@st.composite
def fit_problems(draw):
    n = draw(st.integers(0, 7))
    d = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3]))
    # a third of the problems hold only ordinary numbers: mixed draws are
    # almost never free of an extreme or non-finite entry
    elements = draw(st.sampled_from([_ordinary, values, values]))
    X = draw(arrays(np.float64, (n, d), elements=elements))
    n_targets = draw(st.sampled_from([None, None, 1, 2]))
    y_shape = (n,) if n_targets is None else (n, n_targets)
    y = draw(arrays(np.float64, y_shape, elements=elements))
    if draw(st.booleans()):  # duplicated rows, the classic singular K
        X = np.vstack([X, X])
        y = np.concatenate([y, y + draw(st.sampled_from([0.0, 0.1]))])
    if draw(st.integers(0, 5)) == 0:
        with np.errstate(all="ignore"):  # NaN to int is some integer: still data
            X = X.astype(draw(st.sampled_from([np.float32, np.int64])))
    alpha = draw(st.sampled_from(ALPHAS))
    if alpha == "array":
        alpha = np.full(len(y), 1e-3)
    params = dict(
        kernel=draw(st.sampled_from(KERNELS))(),
        alpha=alpha,
        normalize_y=draw(st.booleans()),
        optimizer=draw(st.sampled_from([None, "fmin_l_bfgs_b", "fmin_l_bfgs_b", "CG"])),
        n_restarts_optimizer=draw(st.sampled_from([0, 0, 1])),
        random_state=0,
    )
    m = draw(st.integers(0, 4))
    dq = draw(st.sampled_from([d, d, d, d + 1]))
    Xq = draw(arrays(np.float64, (m, dq), elements=values))
    return X, y, params, Xq


def _assert_finite(*parts):
    for part in parts:
        assert np.all(np.isfinite(part)), part


def _periodic_reference_error(kernel, X):
    """A bound on the rounding error of scikit-learn's ExpSineSquared terms
    of ``kernel`` on X, relative to the kernel's scale: it takes
    sin(fl(pi r) / p), whose argument a = pi r / p is off by a few ulps of a,
    and |dk/da| = |4 sin a cos a / l^2| k <= 2 / l^2. fastgp's sin(pi (r / p))
    carries no rounding of pi r (fastgp._engine.vector_math.sincos_pi), so at
    huge distances scikit-learn's K, not fastgp's, is the inexact one (at
    r = 3.2e11, p = 2: exactly 1 against 1 - 1.7e-9)."""
    terms = [kernel, *kernel.get_params(deep=True).values()]
    periodic = [k for k in terms if isinstance(k, ExpSineSquared)]
    if not periodic:
        return 0.0
    # the largest L1 distance: a bound on the Euclidean r the kernel takes
    r_max = float(np.max(np.abs(X[:, None, :] - X[None, :, :]).sum(axis=-1)))
    return sum(2.0 / k.length_scale ** 2 * 4 * np.finfo(float).eps * np.pi * r_max
               / k.periodicity for k in periodic)


def _assert_fitted_model_is_consistent(gpr):
    X = gpr.X_train_
    K = gpr.kernel_(X)
    if not np.all(np.isfinite(K)):
        return  # scikit-learn's kernel object overflows where fastgp's did not
    K[np.diag_indices_from(K)] += gpr._diag_add(len(X)) + gpr.jitter_
    scale = max(float(np.max(np.abs(np.diag(K)))), 1e-300)
    reference_error = _periodic_reference_error(gpr.kernel_, X)
    np.testing.assert_allclose(gpr.L_ @ gpr.L_.T, K, rtol=0,
                               atol=(1e-9 + reference_error) * scale)
    assert np.isfinite(gpr.log_marginal_likelihood_value_)
    _assert_finite(gpr.alpha_)


#: Message patterns of the errors each class of input may or must raise.
INVALID_MESSAGES = {
    "no samples": r"0 sample",
    "one sample for the GPLVM": r"1 sample\(s\).*minimum of 2",
    "no features": r"0 feature",
    "non-finite X": r"NaN|infinity|not finite",
    "non-finite y": r"NaN|infinity|not finite",
    "bad alpha": r"alpha must be|'alpha' parameter",
    "ARD length scales != features": r"same number of dimensions|length.?scale",
    "more latent dimensions than features": r"n_components=\d+ is more than the data's "
                                            r"n_features=\d+",
}
#: What extreme (finite, huge) values may make a fit or a prediction raise.
EXTREME_MESSAGES = r"overflow|not finite|[Rr]escale|positive definite"
#: What an ordinary fit may raise: a kernel that no jitter up to the bound
#: makes positive definite (RBF(1e5) on duplicated rows, no noise).
ORDINARY_MESSAGES = r"positive definite"

#: Matches no message: a call that must not raise.
NOTHING = r"(?!)"

#: Largest magnitude of an "ordinary" value (the ordinary branch draws |x| <= 5).
ORDINARY_BOUND = 5.0


def _is_ard(kernel):
    return np.ndim(getattr(kernel, "length_scale", 1.0)) > 0


def _classify_fit(X, y, params):
    """("invalid", pattern), ("extreme", pattern) or ("ordinary", pattern):
    what fit(X, y) must or may do; pattern matches every message it may raise."""
    Xf = np.asarray(X, dtype=np.float64)
    reasons = fit_input_reasons(Xf, y)
    if not np.all(np.isfinite(y)):
        reasons.append("non-finite y")
    alpha = np.asarray(params["alpha"], dtype=np.float64)
    if not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
        reasons.append("bad alpha")
    if _is_ard(params["kernel"]) and Xf.shape[1] != 2:
        reasons.append("ARD length scales != features")
    if reasons:
        return "invalid", "|".join(INVALID_MESSAGES[r] for r in reasons)
    if Xf.size and np.max(np.abs(Xf)) > ORDINARY_BOUND or np.max(np.abs(y)) > ORDINARY_BOUND:
        return "extreme", EXTREME_MESSAGES
    return "ordinary", ORDINARY_MESSAGES


def _fit_and_check(problem, counts):
    X, y, params, Xq = problem
    kind, pattern = _classify_fit(X, y, params)
    gpr = GaussianProcessRegressor(**params)
    if not fit_as_classified(gpr, kind, pattern, X, y, counts, "L_"):
        return
    _assert_fitted_model_is_consistent(gpr)
    n_targets = 1 if np.ndim(y) == 1 else y.shape[1]
    # scikit-learn's shapes: one target column is squeezed
    out_shape = (len(Xq),) if n_targets == 1 else (len(Xq), n_targets)
    q_kind, q_pattern = classify_query(Xq, np.shape(X)[1], INVALID_MESSAGES, EXTREME_MESSAGES,
                                       ORDINARY_BOUND)
    if kind == "extreme" and q_kind == "ordinary":
        q_kind, q_pattern = "extreme", EXTREME_MESSAGES  # a model of huge values

    mean = expect(q_kind, q_pattern, gpr.predict, Xq)
    if mean is not None:
        assert mean.shape == out_shape
        _assert_finite(mean)
    result = expect(q_kind, q_pattern, gpr.predict, Xq, return_std=True)
    if result is not None:
        mean, std = result
        assert mean.shape == out_shape and std.shape == out_shape
        _assert_finite(mean, std)
        assert np.all(std >= 0)
    result = expect(q_kind, q_pattern, gpr.predict, Xq, return_cov=True)
    if result is not None:
        mean, cov = result
        assert cov.shape[:2] == (len(Xq), len(Xq))
        _assert_finite(mean, cov)
    samples = expect(q_kind, q_pattern, gpr.sample_y, Xq, 2)
    if samples is not None:
        _assert_finite(samples)
        assert samples.shape[0] == len(Xq) and samples.shape[-1] == 2
    theta = gpr.kernel_.theta
    # at the fitted theta nothing may be raised: the fit evaluated it
    value = expect("ordinary", NOTHING, gpr.log_marginal_likelihood, theta)
    assert not np.isnan(value)
    if kind == "ordinary" and gpr.jitter_ == 0.0:
        np.testing.assert_allclose(value, gpr.log_marginal_likelihood_value_, rtol=1e-8)
    # elsewhere K may be singular (and huge data overflow)
    elsewhere = ORDINARY_MESSAGES if kind == "ordinary" else EXTREME_MESSAGES
    result = expect("extreme", elsewhere, gpr.log_marginal_likelihood, theta + 0.5,
                    eval_gradient=True)
    if result is not None and np.isfinite(result[0]):
        _assert_finite(result[1])


#: Minimum shares of the drawn fit problems: ordinary ones that fit, and
#: fitted ones among all (an estimator that always raised fails both). The
#: draw's mix varies a little between runs (Hypothesis adapts it); measured:
#: 13-25 % ordinary, all of them fitted, 25-39 % fitted in all.
MIN_ORDINARY_FITTED = 0.9
MIN_FITTED = 0.15
#: Fewest ordinary problems a run must draw for the shares to mean something.
MIN_ORDINARY = 10


def test_fuzz_regressor_fit_and_predict():
    counts = fuzz_counts(fit_problems(), _fit_and_check)
    ordinary = counts["ordinary", True] + counts["ordinary", False]
    total = sum(counts.values())
    assert ordinary >= MIN_ORDINARY, counts  # the draw reaches ordinary input
    assert counts["ordinary", True] >= MIN_ORDINARY_FITTED * ordinary, counts
    fitted = sum(n for (_, ok), n in counts.items() if ok)
    assert fitted >= MIN_FITTED * total, counts
    assert counts["invalid", True] == 0


def test_fuzz_periodic_kernel_at_a_huge_distance_is_exact_where_the_reference_rounds():
    # a case the fuzzing drew: r = 3.2e11 is a multiple of the period 2, so
    # k = exp(-2 sin^2(pi r / 2)) = 1 exactly; fastgp's K is exact there and
    # scikit-learn's, through fl(pi r), is 1 - 1.7e-9: the consistency check
    # allows for the reference's rounding, and no more
    X = np.array([[3.2137334e11], [0.0]], dtype=np.float32)
    params = dict(kernel=ExpSineSquared(1.0, 2.0) + WhiteKernel(0.1), alpha=1e-10,
                  normalize_y=False, optimizer=None, n_restarts_optimizer=0, random_state=0)
    counts = collections.Counter()

    @settings(FUZZ, max_examples=1, database=None)  # no deadline: it may compile
    @given(st.just((X, np.zeros(2), params, np.empty((0, 1)))))
    def replay(problem):  # the check records hypothesis events
        _fit_and_check(problem, counts)

    replay()
    assert counts == {("extreme", True): 1}
    gpr = GaussianProcessRegressor(**params).fit(X, np.zeros(2))
    # exact up to the factor's own rounding
    assert abs((gpr.L_ @ gpr.L_.T)[1, 0] - 1.0) <= 2 * np.finfo(float).eps
    assert 0 < 1.0 - gpr.kernel_(gpr.X_train_)[1, 0] < \
        _periodic_reference_error(gpr.kernel_, gpr.X_train_)


@FUZZ
@given(arrays(np.float64, st.tuples(st.integers(0, 4), st.integers(0, 3)), elements=values),
       st.sampled_from(KERNELS), st.booleans())
def test_fuzz_regressor_prior_predict(Xq, make_kernel, want_std):
    kernel = make_kernel()
    gpr = GaussianProcessRegressor(kernel)
    # the prior takes any number of features; an ARD kernel's length scales
    # on others may raise (scikit-learn's prior mean and std never evaluate
    # them, so they need not)
    kind, pattern = classify_query(Xq, Xq.shape[1], INVALID_MESSAGES, EXTREME_MESSAGES,
                                   ORDINARY_BOUND)
    if Xq.shape[1] == 0:
        pattern = "|".join(filter(None, [pattern if kind == "invalid" else "",
                                         INVALID_MESSAGES["no features"]]))
        kind = "invalid"
    elif _is_ard(kernel) and Xq.shape[1] != 2 and kind != "invalid":
        kind, pattern = "extreme", "|".join(
            [pattern, INVALID_MESSAGES["ARD length scales != features"]])
    result = expect(kind, pattern, gpr.predict, Xq, return_std=want_std)
    if result is not None:
        _assert_finite(*(result if want_std else (result,)))


#: Minimum share of drawn GPLVM problems with ordinary data that fit.
MIN_GPLVM_ORDINARY_FITTED = 0.8


def _classify_gplvm(Y, n_components):
    """As _classify_fit, for GPLVM(n_components).fit(Y)."""
    patterns = []
    if Y.shape[0] == 0:
        patterns.append(INVALID_MESSAGES["no samples"])
    if Y.shape[0] == 1:  # a latent space needs two points
        patterns.append(INVALID_MESSAGES["one sample for the GPLVM"])
    if Y.shape[1] == 0:
        patterns.append(INVALID_MESSAGES["no features"])
    if not np.all(np.isfinite(Y)):
        patterns.append(INVALID_MESSAGES["non-finite X"])
    if n_components > Y.shape[1]:
        patterns.append(INVALID_MESSAGES["more latent dimensions than features"])
    if patterns:
        return "invalid", "|".join(patterns)
    if np.max(np.abs(Y)) > ORDINARY_BOUND:
        return "extreme", EXTREME_MESSAGES
    return "ordinary", ORDINARY_MESSAGES


def test_fuzz_gplvm_fit_transform():
    counts = collections.Counter()

    @settings(FUZZ, max_examples=25)
    @given(st.integers(0, 8), st.integers(0, 3), st.integers(1, 3), st.data())
    def run(n, d, q, data):
        # a third of the data sets hold only ordinary numbers (as the
        # regressor's problems do), so that ordinary fits are always drawn
        elements = data.draw(st.sampled_from([_ordinary, values, values]))
        Y = data.draw(arrays(np.float64, (n, d), elements=elements))
        model = GPLVM(n_components=q, max_iter=5, random_state=0,
                      init=data.draw(st.sampled_from(["pca", "random"])))
        kind, pattern = _classify_gplvm(Y, q)
        fitted = expect(kind, pattern, model.fit, Y) is not None
        counts[kind, fitted] += 1
        if not fitted:
            return
        assert model.embedding_.shape == (n, q)
        _assert_finite(model.embedding_, model.log_marginal_likelihood_value_)
        Y_new = data.draw(arrays(np.float64, (data.draw(st.integers(0, 3)), d),
                                 elements=values))
        q_kind, q_pattern = classify_query(Y_new, d, INVALID_MESSAGES, EXTREME_MESSAGES,
                                           ORDINARY_BOUND)
        Z = expect(q_kind, q_pattern, model.transform, Y_new)
        if Z is not None:
            assert Z.shape == (len(Y_new), q)
            _assert_finite(Z)
        latent = data.draw(arrays(np.float64, (2, q), elements=values))
        q_kind, q_pattern = classify_query(latent, q, INVALID_MESSAGES, EXTREME_MESSAGES,
                                           ORDINARY_BOUND)
        back = expect(q_kind, q_pattern, model.inverse_transform, latent)
        if back is not None:
            _assert_finite(back)

    run()
    ordinary = counts["ordinary", True] + counts["ordinary", False]
    assert ordinary > 0, counts
    assert counts["ordinary", True] >= MIN_GPLVM_ORDINARY_FITTED * ordinary, counts


def test_fuzz_documented_exceptions_are_what_the_doc_says():
    # the reliability page lists ValueError; LinAlgError is one
    assert issubclass(np.linalg.LinAlgError, ValueError)
    with pytest.raises(ValueError, match=INVALID_MESSAGES["non-finite y"]):
        GaussianProcessRegressor().fit(np.zeros((2, 1)), [np.nan, 1.0])

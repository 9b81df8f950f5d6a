"""Fuzzing GaussianProcessClassifier's public API, as the regressor's
(tests/estimators/test_reliability_fuzz.py): random shapes, values (extremes and
non-finite ones included), labels and parameters; every outcome is a correct
result or a documented exception.

Every drawn input is classified before the call: invalid input must raise a
ValueError whose message names the problem; ordinary input (finite, moderate
values, two or more classes) must fit, and its probabilities must be finite,
in [0, 1] and sum to one; extreme input (finite values near overflow) may fit
or raise one of the messages listed for it. A minimum share of successful
fits is required, so that an estimator that always raised would fail.
"""


import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.gaussian_process.kernels import (
    RBF,
    DotProduct,
    Matern,
    PairwiseKernel,
    RationalQuadratic,
    WhiteKernel,
)
from sklearn.gaussian_process.kernels import ConstantKernel as C

from fastgp import GaussianProcessClassifier

from _fuzz import classify_query, expect, fit_as_classified, fit_input_reasons, fuzz_counts
from _fuzz import ordinary as _ordinary
from _fuzz import values

KERNELS = [
    lambda: None,
    lambda: C(1.0) * RBF(1.0),
    lambda: C(1.0) * Matern(1.0, nu=1.5) + WhiteKernel(0.1),
    lambda: RationalQuadratic(1.0, 1.0),
    lambda: DotProduct(1.0),
    lambda: RBF([1.0, 2.0]),  # ARD: valid only for two features
    lambda: RBF(1e5, "fixed"),  # a rank-one K
    lambda: PairwiseKernel(metric="laplacian"),  # the fallback path
]
LABELS = [np.array([0, 1]), np.array([0, 1, 2]), np.array(["a", "b", "c", "d"]),
          np.array([-1.0, 1.0])]
ORDINARY_BOUND = 5.0

INVALID_MESSAGES = {
    "no samples": r"0 sample",
    "no features": r"0 feature",
    "non-finite X": r"NaN|infinity|not finite",
    "one class": r"requires 2 or more distinct classes",
    "ARD length scales != features": r"same number of dimensions|length.?scale",
}
EXTREME_MESSAGES = r"overflow|not finite|non-finite|[Rr]escale|positive"


@st.composite
def problems(draw):
    n = draw(st.sampled_from([0, 1, 3, 6, 10, 14, 14]))
    d = draw(st.sampled_from([0, 1, 2, 2, 2, 3]))
    # mixed draws are almost never free of an extreme or non-finite entry,
    # so half the problems hold only ordinary numbers
    elements = draw(st.sampled_from([_ordinary, values]))
    X = draw(arrays(np.float64, (n, d), elements=elements))
    labels = draw(st.sampled_from(LABELS))
    # every label drawn on its own (no fill value), so one class is the
    # exception it is in real data
    y = labels[draw(arrays(np.int64, (n,), elements=st.integers(0, len(labels) - 1),
                           fill=st.nothing()))]
    if draw(st.booleans()):  # duplicated rows
        X, y = np.vstack([X, X]), np.concatenate([y, y])
    params = dict(
        kernel=draw(st.sampled_from(KERNELS))(),
        optimizer=draw(st.sampled_from([None, "fmin_l_bfgs_b", "fmin_l_bfgs_b"])),
        n_restarts_optimizer=draw(st.sampled_from([0, 0, 1])),
        max_iter_predict=draw(st.sampled_from([1, 100, 100])),
        warm_start=draw(st.booleans()),
        multi_class=draw(st.sampled_from(["one_vs_rest", "one_vs_rest", "one_vs_one"])),
        random_state=0,
    )
    m = draw(st.integers(0, 4))
    dq = draw(st.sampled_from([d, d, d, d + 1]))
    Xq = draw(arrays(np.float64, (m, dq), elements=values))
    return X, y, params, Xq


def _classify_fit(X, y, params):
    reasons = fit_input_reasons(X, y)
    if len(y) and np.unique(y).size < 2:
        reasons.append("one class")
    kernel = params["kernel"]
    if np.ndim(getattr(kernel, "length_scale", 1.0)) > 0 and X.shape[1] != 2:
        reasons.append("ARD length scales != features")
    if reasons:
        return "invalid", "|".join(INVALID_MESSAGES[r] for r in reasons)
    if X.size and np.max(np.abs(X)) > ORDINARY_BOUND:
        return "extreme", EXTREME_MESSAGES
    return "ordinary", r"(?!)"  # nothing may be raised


def _check(problem, counts):
    X, y, params, Xq = problem
    kind, pattern = _classify_fit(X, y, params)
    gpc = GaussianProcessClassifier(**params)
    if not fit_as_classified(gpc, kind, pattern, X, y, counts, "base_estimator_"):
        return
    assert np.isfinite(gpc.log_marginal_likelihood_value_)
    q_kind, q_pattern = classify_query(Xq, X.shape[1], INVALID_MESSAGES, EXTREME_MESSAGES,
                                       ORDINARY_BOUND)
    if kind == "extreme" and q_kind == "ordinary":
        q_kind, q_pattern = "extreme", EXTREME_MESSAGES
    labels = expect(q_kind, q_pattern, gpc.predict, Xq)
    if labels is not None:
        assert labels.shape == (len(Xq),) and set(labels) <= set(gpc.classes_)
    if gpc.n_classes_ > 2 and params["multi_class"] == "one_vs_one":
        q_pattern = q_pattern + "|does not support predicting probability"
        q_kind = "invalid"
    proba = expect(q_kind, q_pattern, gpc.predict_proba, Xq)
    if proba is not None:
        assert proba.shape == (len(Xq), gpc.n_classes_)
        assert np.all(np.isfinite(proba)) and np.all((proba >= -1e-12) & (proba <= 1 + 1e-12))
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-9)
    if gpc.n_classes_ == 2 and gpc.kernel_.n_dims:
        value, grad = gpc.log_marginal_likelihood(gpc.kernel_.theta + 0.3, eval_gradient=True)
        assert not np.isnan(value)
        if np.isfinite(value):
            assert np.all(np.isfinite(grad))


#: An estimator that always raised would fail these (measured: 49 of 150
#: draws ordinary, all of them fitted; 62 fitted in all).
MIN_ORDINARY = 20
MIN_FITTED = 0.2


def test_fuzz_classifier_fit_predict_and_lml():
    counts = fuzz_counts(problems(), _check)
    ordinary = counts["ordinary", True] + counts["ordinary", False]
    assert ordinary >= MIN_ORDINARY, counts
    assert counts["ordinary", False] == 0, counts
    total = sum(counts.values())
    fitted = counts["ordinary", True] + counts["extreme", True]
    assert fitted >= MIN_FITTED * total, counts

"""What the public API's fuzz tests share: their settings, the numbers they
draw, and how a call's outcome is judged."""

import collections
import re
import warnings

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

#: Every fuzz test's settings: reproducible (derandomized), no deadline.
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: The extreme and non-finite numbers drawn beside ordinary ones.
SPECIAL = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 1e150, -1e150, 1e300, -1e300,
           np.finfo(np.float64).max, np.nan, np.inf, -np.inf]

#: Mostly ordinary numbers, sometimes an extreme or non-finite one (one_of
#: draws its branches about equally often, so the ordinary branch is repeated).
ordinary = st.floats(-5.0, 5.0, allow_nan=False, width=64)
values = st.one_of(*([ordinary] * 14), st.sampled_from(SPECIAL),
                   st.floats(allow_nan=True, allow_infinity=True, width=64))

#: What the public API may raise (documented in docs/reliability.md).
DOCUMENTED = (ValueError,)


def expect(kind, pattern, func, *args, **kwargs):
    """Call func; an "invalid" call must raise a documented error matching
    pattern, others may raise only one that matches. Returns the result or
    None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                result = func(*args, **kwargs)
            except DOCUMENTED as exc:
                assert re.search(pattern, str(exc)), (kind, pattern, str(exc))
                return None
    assert kind != "invalid", f"accepted invalid input (expected {pattern!r})"
    return result


def classify_query(Xq, n_features, invalid_messages, extreme_messages, bound):
    """How a prediction at Xq by a fitted model on ``n_features`` inputs must
    end: ("invalid", the errors it must raise), ("extreme", the errors it
    may raise: inputs beyond ``bound``) or ("ordinary", nothing may be
    raised). ``invalid_messages`` maps "no samples" and "non-finite X" to
    their patterns."""
    patterns = []
    if len(Xq) == 0:
        patterns.append(invalid_messages["no samples"])
    if Xq.shape[1] != n_features:
        patterns.append(r"features")
    if not np.all(np.isfinite(Xq)):
        patterns.append(invalid_messages["non-finite X"])
    if patterns:
        return "invalid", "|".join(patterns)
    if Xq.size and np.max(np.abs(Xq)) > bound:
        return "extreme", extreme_messages
    return "ordinary", r"(?!)"  # nothing may be raised


def fit_input_reasons(X, y):
    """What makes fit(X, y) invalid for every estimator, as keys of its
    messages: "no samples", "no features", "non-finite X"."""
    reasons = []
    if len(y) == 0:
        reasons.append("no samples")
    if X.shape[1] == 0:
        reasons.append("no features")
    if not np.all(np.isfinite(X)):
        reasons.append("non-finite X")
    return reasons


def fit_as_classified(estimator, kind, pattern, X, y, counts, fitted_attribute):
    """Fit ``estimator`` to (X, y) as :func:`expect` judges a call of this
    ``kind``, and record the outcome in ``counts`` and as a hypothesis event.
    Returns whether it fitted; a fit that raised must leave
    ``fitted_attribute`` unset (nothing half-made)."""
    fitted = expect(kind, pattern, estimator.fit, X, y) is not None
    counts[kind, fitted] += 1
    event(f"fit: {kind}, {'fitted' if fitted else 'raised'}")
    if not fitted:
        assert not hasattr(estimator, fitted_attribute), fitted_attribute
    return fitted


def fuzz_counts(problems, check):
    """Run ``check(problem, counts)`` on every problem that :data:`FUZZ`
    draws from the strategy ``problems``; returns the counts (a Counter of
    the outcomes ``check`` recorded)."""
    counts = collections.Counter()

    @FUZZ
    @given(problems)
    def run(problem):
        check(problem, counts)

    run()
    return counts

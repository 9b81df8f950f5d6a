"""fastgp._engine.vector_math.exp_inplace against numpy.exp, its plain NumPy twin."""

import numpy as np
import pytest

from fastgp._engine.vector_math import exp_inplace


def _exp(x):
    out = np.array(x, dtype=np.float64)
    exp_inplace(out, out.size, np.empty_like(out))
    return out


def test_vector_math_exp_within_two_ulp_over_normal_range():
    x = np.linspace(-708.0, 709.7, 400_001)
    got, ref = _exp(x), np.exp(x)
    assert np.max(np.abs(got - ref) / ref) < 2 * np.finfo(float).eps


def test_vector_math_exp_kernel_range_random(rng=np.random.default_rng(0)):
    # the arguments kernels produce: -r^2/2, -sqrt(3) r, ... for r up to ~40
    x = -rng.exponential(50.0, size=100_000)
    got, ref = _exp(x), np.exp(x)
    rel = np.abs(got - ref) / np.where(ref > 0, ref, 1.0)
    assert np.max(rel[x > -708]) < 2 * np.finfo(float).eps


@pytest.mark.parametrize(
    "x, expected",
    [(0.0, 1.0), (-0.0, 1.0), (-np.inf, 0.0), (np.inf, np.inf), (-750.0, 0.0),
     (710.0, np.inf), (1.0, np.e)],
)
def test_vector_math_exp_special_values(x, expected):
    got = _exp([x])[0]
    if expected in (0.0, 1.0, np.inf):  # exact results: no tolerance
        assert got == expected
    else:
        assert abs(got - expected) <= 2 * np.finfo(float).eps * expected


def test_vector_math_exp_nan_propagates():
    assert np.isnan(_exp([np.nan])[0])


def test_vector_math_exp_uses_only_first_n_entries():
    x = np.array([0.0, 1.0, 2.0])
    exp_inplace(x, 2, np.empty(3))
    assert x[2] == 2.0 and abs(x[1] - np.e) <= 2 * np.finfo(float).eps * np.e


# --- log1p_inplace and sincos_pi against numpy and a long-double reference ---

from fastgp._engine.vector_math import log1p_inplace, sincos_pi  # noqa: E402

_EPS = np.finfo(float).eps
#: pi to long-double precision (np.pi is only the double nearest pi)
_PI_LONG = np.longdouble("3.141592653589793238462643383279502884")


def _vlog1p(x):
    out = np.array(x, dtype=np.float64)
    log1p_inplace(out, out.size, np.empty_like(out), np.empty_like(out))
    return out


def _vsincos_pi(x):
    x = np.asarray(x, dtype=np.float64)
    s, c = np.empty_like(x), np.empty_like(x)
    sincos_pi(x, x.size, s, c)
    return s, c


def _rel(got, ref):
    ref = np.asarray(ref, dtype=np.float64)
    return np.abs(got - ref) / np.where(ref != 0, np.abs(ref), 1.0)


def test_log1p_within_two_ulp_of_numpy(rng=np.random.default_rng(1)):
    # the rational quadratic's r2 / (2 alpha): 0 to far beyond 1, and tiny
    x = np.concatenate([np.linspace(0.0, 4.0, 200_001),
                        rng.exponential(1.0, 50_000),
                        10.0 ** rng.uniform(-300, 300, 50_000),
                        [np.finfo(float).max, 5e-324, 1e-308, 1e-17, 2.0**-53]])
    assert np.max(_rel(_vlog1p(x), np.log1p(x))) < 2 * _EPS


@pytest.mark.parametrize("x, expected", [(0.0, 0.0), (np.inf, np.inf)])
def test_log1p_special_values(x, expected):
    assert _vlog1p([x])[0] == expected


def test_log1p_nan_propagates():
    assert np.isnan(_vlog1p([np.nan])[0])


def test_sincos_pi_relative_accuracy_against_long_double(rng=np.random.default_rng(2)):
    # ExpSineSquared's |x - x'| / p over thousands of periods, and near the
    # zeros of sin and cos, where rounding pi x first would cost the
    # relative accuracy that sin(pi x) itself keeps
    x = np.concatenate([rng.uniform(-4000.0, 4000.0, 200_000),
                        np.linspace(-3.0, 3.0, 60_001),
                        np.arange(-50, 51) * 0.5 + 1e-9,
                        np.arange(-50, 51) * 0.5 - 3e-13])
    s, c = _vsincos_pi(x)
    arg = _PI_LONG * x.astype(np.longdouble)
    for got, ref in ((s, np.sin(arg)), (c, np.cos(arg))):
        # a few ulp of the result, plus the long-double reference's own
        # rounding of pi and of pi x (2 pi |x| 2^-64 absolute)
        tol = 4 * _EPS * np.abs(ref.astype(float)) + np.abs(x) * 2.0**-60
        assert np.all(np.abs(got - ref.astype(float)) <= tol)


def test_sincos_pi_matches_numpy_to_its_argument_rounding(rng=np.random.default_rng(3)):
    x = rng.uniform(-100.0, 100.0, 100_000)
    s, c = _vsincos_pi(x)
    # numpy's sin(np.pi * x) rounds np.pi and pi x: |pi x| 2 eps absolute
    tol = 2 * _EPS * (1.0 + np.pi * np.abs(x))
    assert np.max(np.abs(s - np.sin(np.pi * x)) - tol) <= 0
    assert np.max(np.abs(c - np.cos(np.pi * x)) - tol) <= 0


@pytest.mark.parametrize("x, s_exp, c_exp", [(0.0, 0.0, 1.0), (0.5, 1.0, 0.0),
                                             (1.0, 0.0, -1.0), (-0.5, -1.0, 0.0),
                                             (1.5, -1.0, 0.0), (2.0, 0.0, 1.0)])
def test_sincos_pi_exact_at_quarter_periods(x, s_exp, c_exp):
    s, c = _vsincos_pi([x])
    assert abs(s[0]) == abs(s_exp) and abs(c[0]) == abs(c_exp)
    assert np.sign(s[0]) == np.sign(s_exp) and np.sign(c[0]) == np.sign(c_exp)


def test_sincos_pi_large_and_special_arguments():
    x = np.array([2.0**51 + 1.0, 2.0**60 + 4.0, -3.0e300, np.inf, np.nan])
    s, c = _vsincos_pi(x)
    np.testing.assert_array_equal(s[:3], np.sin(np.pi * x[:3]))
    np.testing.assert_array_equal(c[:3], np.cos(np.pi * x[:3]))
    assert np.all(np.isnan(s[3:])) and np.all(np.isnan(c[3:]))

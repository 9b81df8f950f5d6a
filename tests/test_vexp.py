"""fastgp._engine.vector_math.exp_inplace against numpy.exp, its plain NumPy twin."""

import numpy as np
import pytest

from fastgp._engine.vector_math import exp_inplace


def _vexp(x):
    out = np.array(x, dtype=np.float64)
    exp_inplace(out, out.size, np.empty_like(out))
    return out


def test_vexp_within_two_ulp_over_normal_range():
    x = np.linspace(-708.0, 709.7, 400_001)
    got, ref = _vexp(x), np.exp(x)
    assert np.max(np.abs(got - ref) / ref) < 2 * np.finfo(float).eps


def test_vexp_kernel_range_random(rng=np.random.default_rng(0)):
    # the arguments kernels produce: -r^2/2, -sqrt(3) r, ... for r up to ~40
    x = -rng.exponential(50.0, size=100_000)
    got, ref = _vexp(x), np.exp(x)
    rel = np.abs(got - ref) / np.where(ref > 0, ref, 1.0)
    assert np.max(rel[x > -708]) < 2 * np.finfo(float).eps


@pytest.mark.parametrize(
    "x, expected",
    [(0.0, 1.0), (-0.0, 1.0), (-np.inf, 0.0), (np.inf, np.inf), (-750.0, 0.0),
     (710.0, np.inf), (1.0, np.e)],
)
def test_vexp_special_values(x, expected):
    got = _vexp([x])[0]
    if expected in (0.0, 1.0, np.inf):  # exact results: no tolerance
        assert got == expected
    else:
        assert abs(got - expected) <= 2 * np.finfo(float).eps * expected


def test_vexp_nan_propagates():
    assert np.isnan(_vexp([np.nan])[0])


def test_vexp_uses_only_first_n_entries():
    x = np.array([0.0, 1.0, 2.0])
    exp_inplace(x, 2, np.empty(3))
    assert x[2] == 2.0 and abs(x[1] - np.e) <= 2 * np.finfo(float).eps * np.e

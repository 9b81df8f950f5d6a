"""The real data sets shipped inside the package (fastgp.datasets)."""

import numpy as np

from fastgp.datasets import load_mauna_loa_co2, load_seattle_temperatures


def test_mauna_loa_co2_is_the_weekly_series_without_missing_weeks():
    X, y = load_mauna_loa_co2()
    assert X.shape == (2225, 1) and y.shape == (2225,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))
    # decimal years from 1958-03-29 to 2001-12-29
    np.testing.assert_allclose(X[0, 0], 1958 + 87 / 365, atol=1e-12)
    np.testing.assert_allclose(X[-1, 0], 2001 + 362 / 365, atol=1e-12)
    steps = np.diff(X[:, 0])
    # strictly increasing, one week apart or a whole number of weeks where a
    # missing week was dropped
    assert np.all(steps > 0)
    weeks = steps * 365.25 / 7
    # (decimal years: a year has 365 or 366 days, hence the 0.05 week slack)
    np.testing.assert_allclose(weeks, np.round(weeks), atol=0.05)
    assert np.round(weeks).max() > 1  # some weeks were missing and dropped
    # ppm, rising: the first and last years' means are ~315 and ~371
    assert 310 < y.min() and y.max() < 380
    assert y[:52].mean() < 318 and y[-52:].mean() > 368
    np.testing.assert_allclose(y[:2], [316.1, 317.3])


def test_seattle_temperatures_are_hourly_for_2010():
    X, y = load_seattle_temperatures()
    assert X.shape == (8759, 1) and y.shape == (8759,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert np.all(np.isfinite(y))
    assert X[0, 0] == 0.0
    steps = np.diff(X[:, 0])
    # hours since the first sample: one hour apart, but for the one hour
    # that the source lacks (the spring daylight-saving change)
    assert set(np.unique(steps)) == {1.0, 2.0}
    assert np.count_nonzero(steps == 2.0) == 1
    assert X[-1, 0] == 8759.0
    # degrees Fahrenheit in Seattle
    assert 20 < y.min() and y.max() < 100
    np.testing.assert_allclose(y[:2], [39.4, 39.2])


def test_loaders_return_fresh_arrays():
    X, y = load_mauna_loa_co2()
    X[:] = 0.0
    y[:] = 0.0
    X2, y2 = load_mauna_loa_co2()
    assert X2[0, 0] > 1958 and y2[0] > 300


def test_heaton_temperatures_are_the_competitions_grid_and_mask():
    from fastgp.datasets import load_heaton_temperatures

    X, y, truth = load_heaton_temperatures()
    assert X.shape == (150000, 2) and y.shape == truth.shape == (150000,)
    observed = ~np.isnan(y)
    assert observed.sum() == 105_569  # the rest are held out by the cloud mask
    assert np.all(np.isfinite(truth)) and np.all(np.isfinite(X))
    # a 500 x 300 grid, about 0.00927 apart (100 km units), rows from the north
    assert len(np.unique(X[:, 0])) == 500 and len(np.unique(X[:, 1])) == 300
    np.testing.assert_allclose(np.diff(np.unique(X[:, 0])), 0.009274, atol=1e-6)
    assert X[0, 1] > X[-1, 1] and X[0, 0] < X[1, 0]
    # the mean the authors simulated around, and the first rows of their CSV
    assert 40 < truth.mean() < 50
    np.testing.assert_array_equal(X[:2], [[-95.9115300, 37.0681113],
                                          [-95.9022560, 37.0681113]])
    np.testing.assert_allclose(truth[:2], [43.86104190399225, 43.72040145259148],
                               rtol=0, atol=0)

"""Real public-domain data shipped inside the package.

- Mauna Loa CO2: weekly mean atmospheric CO2 (ppm), 1958-03-29 to 2001-12-29.
  Keeling, C.D. and T.P. Whorf (2004), atmospheric CO2 records from sites in
  the SIO air sampling network, Carbon Dioxide Information Analysis Center,
  Oak Ridge National Laboratory. Public domain.
- Seattle hourly air temperature (deg F), all of 2010. NOAA, public domain,
  as packaged by the vega-datasets project.
- Heaton et al.'s simulated land-surface temperatures: the simulated data
  set of a published competition among methods for large spatial data, on a
  500 x 300 grid, 105,569 cells observed and 44,431 held out under a real
  cloud mask. M. J. Heaton et al. (2019), "A Case Study Competition Among
  Methods for Analyzing Large Spatial Data", JABES 24:398-425,
  doi:10.1007/s13253-018-00348-w; data and code published with the paper
  (the ``heatoncomparison`` repository, provided as-is). Stored as its grid's
  coordinates and the two temperature columns, which reproduce the
  published CSV's numbers exactly.
"""

import csv
from datetime import datetime
from importlib import resources

import numpy as np

__all__ = ["load_mauna_loa_co2", "load_seattle_temperatures", "load_heaton_temperatures"]


def _rows(name):
    with resources.files("fastgp").joinpath("data", name).open("r") as f:
        reader = csv.reader(f)
        next(reader)  # header
        return list(reader)


def _decimal_year(dt):
    start = datetime(dt.year, 1, 1)
    end = datetime(dt.year + 1, 1, 1)
    return dt.year + (dt - start).total_seconds() / (end - start).total_seconds()


def load_mauna_loa_co2():
    """Weekly Mauna Loa CO2, weeks with a missing value dropped.

    Returns
    -------
    X : ndarray of shape (n_weeks, 1)
        Time in decimal years.
    y : ndarray of shape (n_weeks,)
        CO2 concentration in ppm.
    """
    t, c = [], []
    for date, co2 in _rows("mauna_loa_co2_weekly.csv"):
        if co2.strip() == "":
            continue
        t.append(_decimal_year(datetime.strptime(date, "%Y-%m-%d")))
        c.append(float(co2))
    return np.array(t).reshape(-1, 1), np.array(c)


def load_seattle_temperatures():
    """Hourly Seattle air temperature in 2010.

    Returns
    -------
    X : ndarray of shape (8759, 1)
        Hours since the first sample.
    y : ndarray of shape (8759,)
        Temperature in degrees Fahrenheit.
    """
    rows = _rows("seattle_temps_2010_hourly.csv")
    times = [datetime.strptime(d, "%Y-%m-%d %H:%M:%S") for d, _ in rows]
    hours = np.array([(t - times[0]).total_seconds() / 3600.0 for t in times])
    return hours.reshape(-1, 1), np.array([float(v) for _, v in rows])


def load_heaton_temperatures():
    """Heaton et al.'s (2019) simulated temperatures on a 500 x 300 grid.

    The field was generated from a Matern (nu = 0.5) GP plus a nugget and a
    mean (the data's README in the competition's repository); the
    competition scored each method on the held-out cells by MAE, RMSE, CRPS,
    the 95 % interval score and coverage.

    Returns
    -------
    X : ndarray of shape (150000, 2)
        The cells' coordinates (lon, lat): a map projection in units of 100
        km, so Euclidean distance on them is right.
    y : ndarray of shape (150000,)
        The observed temperature, NaN on the 44,431 held-out cells.
    truth : ndarray of shape (150000,)
        The true temperature of every cell.
    """
    with resources.files("fastgp").joinpath("data", "heaton_simulated_temps.npz").open(
            "rb") as f:
        data = np.load(f)
        lon, lat = data["lon"], data["lat"]
        y, truth = data["masked_temp"], data["true_temp"]
    row = np.arange(y.size)
    # the table's order: the grid's rows from the northernmost, west to east
    X = np.column_stack([lon[row % lon.size], lat[lat.size - 1 - row // lon.size]])
    return X, y, truth

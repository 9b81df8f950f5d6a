"""Real public-domain data shipped inside the package.

- Mauna Loa CO2: weekly mean atmospheric CO2 (ppm), 1958-03-29 to 2001-12-29.
  Keeling, C.D. and T.P. Whorf (2004), atmospheric CO2 records from sites in
  the SIO air sampling network, Carbon Dioxide Information Analysis Center,
  Oak Ridge National Laboratory. Public domain.
- Seattle hourly air temperature (deg F), all of 2010. NOAA, public domain,
  as packaged by the vega-datasets project.
"""

import csv
from datetime import datetime
from importlib import resources

import numpy as np

__all__ = ["load_mauna_loa_co2", "load_seattle_temperatures"]


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

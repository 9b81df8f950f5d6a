"""Figures of a fitted regressor: data, predictive mean and 95 % band.

The band is carried past the data as a forecast; ``python -m fastgp --plot
FILE`` draws it for the Mauna Loa CO2 series.

matplotlib is optional: nothing here imports it until a figure is drawn, and
:func:`require_matplotlib` turns its absence into a message that says how to
install it. Figures are built on :class:`matplotlib.figure.Figure` directly,
not through pyplot, so drawing one selects no backend and leaves pyplot's
global state alone.
"""

import os

import numpy as np

from .exceptions import MissingMatplotlibError

__all__ = ["FORMATS", "MissingMatplotlibError", "data_end", "plot_format",
           "plot_forecast", "require_matplotlib", "save_figure"]

#: File extensions the figure can be written to, and matplotlib's format names.
FORMATS = {".png": "png", ".pdf": "pdf"}

#: Half-width of the band in predictive standard deviations: the central 95 %
#: of a normal distribution.
Z_95 = 1.959963984540054


def require_matplotlib():
    """Import matplotlib, or say how to install it.

    fastgp does not depend on matplotlib; only drawing does.

    Returns
    -------
    module
        The :mod:`matplotlib` package.

    Raises
    ------
    MissingMatplotlibError
        If matplotlib cannot be imported; the message names the install
        command.
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingMatplotlibError(
            "drawing a figure needs matplotlib, which is not installed; install "
            "it with `pip install matplotlib` and run again") from exc
    return matplotlib


def plot_format(path):
    """The format a figure is written in, from the file's extension.

    Checked before a long fit, so that a wrong name fails at once.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write, ending in ``.png`` or ``.pdf`` (any case).

    Returns
    -------
    str
        ``"png"`` or ``"pdf"``.

    Raises
    ------
    ValueError
        If the extension is neither.

    Examples
    --------
    >>> from fastgp.plotting import plot_format
    >>> plot_format("co2.PDF")
    'pdf'
    """
    extension = os.path.splitext(os.fspath(path))[1].lower()
    if extension not in FORMATS:
        raise ValueError(
            f"cannot tell the figure's format from {os.fspath(path)!r}: give a file "
            f"name ending in {' or '.join(FORMATS)}")
    return FORMATS[extension]


def data_end(X):
    """The last input of 1-D data: where a forecast from them begins.

    Parameters
    ----------
    X : array-like of shape (n_samples, 1)
        The inputs, in any order (for the CO2 series, time in decimal years).

    Returns
    -------
    float
        The largest input, which the figure marks as "data end".

    Examples
    --------
    >>> from fastgp.plotting import data_end
    >>> data_end([[1958.2], [2001.99], [1990.0]])
    2001.99
    """
    return float(np.max(np.asarray(X, dtype=np.float64)))


def plot_forecast(gpr, X, y, *, y_offset=0.0, until=2025.0, n_points=3000, ax=None,
                  xlabel="year", ylabel="CO$_2$ (ppm)",
                  title="Mauna Loa CO$_2$: fit and forecast"):
    """Draw 1-D data, the predictive mean and its 95 % band, to ``until``.

    The mean and band run from the first input to ``until``, past the end of
    the data, where they are a forecast: a dashed vertical line marks the last
    input, labelled "data end: <its value>" on its left and "forecast" on its
    right (where the grid runs past it).

    Parameters
    ----------
    gpr : fitted GaussianProcessRegressor
        Fitted to ``(X, y - y_offset)`` with one input dimension and one target.
    X : array-like of shape (n_samples, 1)
        The training inputs (for the CO2 series, time in decimal years).
    y : array-like of shape (n_samples,)
        The training targets, on the scale to draw.
    y_offset : float, default=0.0
        Added to the predictions: the value subtracted from ``y`` before the
        fit (the CLI fits the CO2 series minus its mean).
    until : float, default=2025.0
        The last input of the forecast.
    n_points : int, default=3000
        Points of the prediction grid: enough to draw a yearly cycle smoothly
        over 70 years (about 40 per year).
    ax : matplotlib.axes.Axes or None, default=None
        Where to draw; None draws on a new standalone figure (no pyplot).
    xlabel, ylabel, title : str
        The axes' labels and the title.

    Returns
    -------
    matplotlib.figure.Figure
        The figure holding the axes.

    See Also
    --------
    save_figure : Write the figure as PNG or PDF.
    fastgp.cli.mauna_loa_kernel : The kernel ``python -m fastgp`` fits.

    Notes
    -----
    The band is ``mean +- 1.96 std`` of ``gpr.predict(..., return_std=True)``,
    the central 95 % of the predictive distribution; where the kernel holds a
    WhiteKernel the band is that of a new observation, noise included.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgp import GaussianProcessRegressor
    >>> from fastgp.plotting import plot_forecast
    >>> X = np.linspace(2000, 2010, 40).reshape(-1, 1)
    >>> y = 370 + 2 * (X[:, 0] - 2000) + np.sin(2 * np.pi * X[:, 0])
    >>> gpr = GaussianProcessRegressor(normalize_y=True).fit(X, y)
    >>> figure = plot_forecast(gpr, X, y, until=2015.0, n_points=200)
    >>> len(figure.axes)
    1
    """
    X = np.asarray(X, dtype=np.float64).reshape(-1, 1)
    y = np.asarray(y, dtype=np.float64).ravel()
    grid = np.linspace(X[:, 0].min(), max(until, X[:, 0].max()), n_points).reshape(-1, 1)
    mean, std = gpr.predict(grid, return_std=True)
    mean = mean + y_offset

    if ax is None:
        require_matplotlib()
        from matplotlib.figure import Figure

        ax = Figure(figsize=(9, 4.5), layout="constrained").subplots()
    last = data_end(X)
    ax.plot(X[:, 0], y, ".", color="0.25", markersize=2, label="measured")
    ax.plot(grid[:, 0], mean, color="C0", linewidth=1, label="predictive mean")
    ax.fill_between(grid[:, 0], mean - Z_95 * std, mean + Z_95 * std, color="C0",
                    alpha=0.25, linewidth=0, label="95 % band")
    ax.axvline(last, color="0.5", linestyle="--", linewidth=0.8)
    ax.annotate(f"data end: {last:.2f}", xy=(last, 0.04),
                xycoords=("data", "axes fraction"), xytext=(-4, 0),
                textcoords="offset points", ha="right", color="0.4")
    if grid[-1, 0] > last:
        ax.annotate("forecast", xy=(last, 0.04), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", ha="left", color="0.4")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper left")
    return ax.figure


def save_figure(figure, path):
    """Write ``figure`` to ``path`` in the format its extension names.

    PNG at 150 dots per inch, or PDF (vector).

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure to write, for example from :func:`plot_forecast`.
    path : str or os.PathLike
        Ends in ``.png`` or ``.pdf``.

    Raises
    ------
    ValueError
        If the extension is neither.

    See Also
    --------
    plot_format : The format an extension names.
    """
    figure.savefig(path, format=plot_format(path), dpi=150)

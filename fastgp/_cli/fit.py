"""``fastgp fit``: fit a GaussianProcessRegressor to a CSV file's columns.

Everything a user's data set needs from the command line: the default kernel
(scaled to the inputs' spread), an optional held-out split, the scores, and
the outputs (the model through joblib, the predictions as CSV). The argument
parser lives in :mod:`fastgp.cli`; a problem found before the fit is a
:class:`FitInputError` there shown as a usage error.
"""

import csv
import math
import os
import time

import numpy as np

from .table import MIN_ROWS, TableError, read_table

__all__ = ["FitInputError", "KERNEL_FAMILIES", "MEAN_CHOICES", "default_kernel",
           "parse_inputs", "split_rows", "run_fit"]

#: The kernels ``--kernel`` names, each ``C * <family>(per-input length scales)
#: + WhiteKernel``.
KERNEL_FAMILIES = ("rbf", "matern12", "matern32", "matern52", "rational-quadratic")

#: ``--mean``'s choices: the regressor's ``mean`` (None for "none").
MEAN_CHOICES = ("none", "constant", "linear")

#: Length scales start at each input's standard deviation and stay within
#: these multiples of it, so that neither depends on the inputs' units.
LENGTH_SCALE_RANGE = (1e-3, 1e3)

#: The WhiteKernel's start and bounds on the standardised targets
#: (normalize_y=True gives them unit variance): noise of 10 % of the variance
#: to start, from 1e-6 (almost noise-free) to 10 (all noise).
NOISE_START, NOISE_BOUNDS = 0.1, (1e-6, 1e1)

#: Column names the predictions file adds after the inputs and the target.
PREDICTION_COLUMNS = ("predicted_mean", "predicted_std")
HELD_OUT_COLUMN = "held_out"


class FitInputError(TableError):
    """An argument of ``fastgp fit`` that cannot work with the data (a
    usage error, found before the fit)."""


def input_scales(X):
    """Each input column's standard deviation, 1.0 where it is 0.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    ndarray of shape (n_features,)
    """
    scales = np.std(X, axis=0)
    return np.where(np.isfinite(scales) & (scales > 0), scales, 1.0)


def default_kernel(X, family="rbf"):
    """``ConstantKernel * <family>(ARD) + WhiteKernel`` scaled to ``X``.

    One length scale per input (automatic relevance determination: an input
    that does not matter gets a long one), started at the input's standard
    deviation and bounded to :data:`LENGTH_SCALE_RANGE` times it; a signal
    variance started at 1 and a white noise started at 0.1, both on the
    standardised targets of ``normalize_y=True``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The training inputs.
    family : {"rbf", "matern12", "matern32", "matern52", "rational-quadratic"}
        The stationary kernel: squared exponential, Matern with nu = 0.5,
        1.5 or 2.5 (rougher functions), or fastgp's per-dimension rational
        quadratic (a mixture of length scales).

    Returns
    -------
    sklearn.gaussian_process.kernels.Kernel
    """
    from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from ..kernels import RationalQuadratic

    scales = input_scales(X)
    low, high = LENGTH_SCALE_RANGE
    bounds = np.column_stack([low * scales, high * scales])
    if family == "rbf":
        stationary = RBF(length_scale=scales, length_scale_bounds=bounds)
    elif family.startswith("matern"):
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[family]
        stationary = Matern(length_scale=scales, length_scale_bounds=bounds, nu=nu)
    elif family == "rational-quadratic":
        stationary = RationalQuadratic(length_scale=scales, length_scale_bounds=bounds)
    else:
        raise ValueError(f"unknown kernel family {family!r}; one of {KERNEL_FAMILIES}")
    return (C(1.0, constant_value_bounds=(1e-5, 1e5)) * stationary
            + WhiteKernel(noise_level=NOISE_START, noise_level_bounds=NOISE_BOUNDS))


def parse_inputs(text, table, target):
    """The input columns: ``text`` split at commas, or every column but the
    target when ``text`` is None.

    Raises
    ------
    FitInputError
        For an empty name, a repeated one, the target among the inputs, or
        no column left to use.
    TableError
        For a name the file lacks.
    """
    table.check_columns([target])
    if text is None:
        inputs = [name for name in table.columns if name != target]
        if not inputs:
            raise FitInputError(f"{table.path} has no column besides the target "
                                f"{target!r} to use as an input")
        return inputs
    inputs = [name.strip() for name in text.split(",")]
    if "" in inputs:
        raise FitInputError(f"argument --inputs: an empty column name in {text!r}; give "
                            "names separated by commas, such as --inputs a,b,c")
    repeated = sorted({name for name in inputs if inputs.count(name) > 1})
    if repeated:
        raise FitInputError(f"argument --inputs: {', '.join(map(repr, repeated))} given "
                            "more than once")
    if target in inputs:
        raise FitInputError(f"argument --inputs: the target {target!r} cannot be an "
                            "input as well")
    table.check_columns(inputs)
    return inputs


def split_rows(n_rows, test_fraction, seed):
    """Row indices to fit and to hold out, drawn at random from ``seed``.

    Parameters
    ----------
    n_rows : int
    test_fraction : float or None
        The share held out, rounded to whole rows; None holds out none.
    seed : int

    Returns
    -------
    train, test : ndarray of int
        Sorted, disjoint, together every row; ``test`` is empty without a
        fraction.

    Raises
    ------
    FitInputError
        If either part would have fewer than two rows.
    """
    if test_fraction is None:
        return np.arange(n_rows), np.arange(0)
    n_test = int(round(test_fraction * n_rows))
    if n_test < 2 or n_rows - n_test < MIN_ROWS:
        raise FitInputError(
            f"argument --test-fraction: {test_fraction:g} of {n_rows} rows holds out "
            f"{n_test} and fits {n_rows - n_test}; each needs at least 2 rows")
    order = np.random.default_rng(seed).permutation(n_rows)
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def check_output_path(path, option):
    """Raise FitInputError unless ``path`` can be written: its folder exists
    and it is not a folder itself (checked before a long fit)."""
    if os.path.isdir(path):
        raise FitInputError(f"argument {option}: {path} is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FitInputError(f"argument {option}: the folder {os.path.dirname(path)} "
                            "does not exist")


def r2_and_rmse(y, predicted):
    """Coefficient of determination and root-mean-square error.

    Parameters
    ----------
    y, predicted : ndarray of shape (n_samples,)

    Returns
    -------
    r2, rmse : float
        ``r2`` is 1 - (residual sum of squares) / (total sum of squares),
        NaN where ``y`` is constant.
    """
    residual = float(np.sum((y - predicted) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else math.nan
    return r2, math.sqrt(residual / len(y))


def write_predictions(path, inputs, target, X, y, mean, std, held_out=None):
    """Write every row's inputs, target, predictive mean and standard
    deviation (and 1 for a held-out row, 0 for a fitted one) as CSV.

    Parameters
    ----------
    X : ndarray of shape (n_rows, len(inputs))
    y, mean, std : ndarray of shape (n_rows,)
    held_out : ndarray of bool of shape (n_rows,) or None
    """
    header = [*inputs, target, *PREDICTION_COLUMNS]
    if held_out is not None:
        header.append(HELD_OUT_COLUMN)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i in range(len(y)):
            row = [repr(float(v)) for v in (*X[i], y[i], mean[i], std[i])]
            if held_out is not None:
                row.append(str(int(held_out[i])))
            writer.writerow(row)


def mean_line(gpr, inputs, method):
    """The fitted mean's coefficients and standard errors, one line:
    ``mean (linear, reml): intercept 1.2 (0.3), a 0.5 (0.1)``."""
    names = ["intercept"] + (list(inputs) if len(gpr.mean_coef_) > 1 else [])
    errors = np.sqrt(np.diagonal(gpr.mean_coef_cov_))
    terms = ", ".join(f"{name} {coef:.6g} ({error:.3g})"
                      for name, coef, error in zip(names, gpr.mean_coef_, errors))
    return f"mean ({gpr.mean}, {method}; standard errors in brackets): {terms}"


def _check_prediction_columns(inputs, target, with_held_out):
    added = [*PREDICTION_COLUMNS, *([HELD_OUT_COLUMN] if with_held_out else [])]
    clash = [name for name in added if name in (*inputs, target)]
    if clash:
        raise FitInputError(f"argument --predictions: the file adds the column(s) "
                            f"{', '.join(added)}, and {', '.join(map(repr, clash))} is "
                            "already an input or the target; rename that column")


def run_fit(args, peak_rss_mb, compile_note):
    """Read, check, fit, report and write, as ``fastgp fit`` does.

    Parameters
    ----------
    args : argparse.Namespace
        ``fastgp fit``'s arguments: csv, target, inputs, kernel, solver,
        mean, mean_method, optimizer, n_restarts, test_fraction, seed, model,
        predictions, verbose.
    peak_rss_mb : callable
        The process's peak resident memory in MB (the CLI's).
    compile_note : callable
        list of Numba's compiling seconds -> what the fit's time adds about
        them (the CLI's: nothing where nothing was compiled).

    Returns
    -------
    int
        0.

    Raises
    ------
    TableError
        (FitInputError included) for anything found before the fit.
    """
    table = read_table(args.csv)
    inputs = parse_inputs(args.inputs, table, args.target)
    for path, option in ((args.model, "--model"), (args.predictions, "--predictions")):
        if path is not None:
            check_output_path(path, option)
    if (args.model is not None and args.predictions is not None
            and os.path.abspath(args.model) == os.path.abspath(args.predictions)):
        raise FitInputError("arguments --model and --predictions: the same file "
                            f"{args.model}; give two names")
    if args.predictions is not None:
        _check_prediction_columns(inputs, args.target, args.test_fraction is not None)
    X_all = table.numeric(inputs)
    y_all = table.numeric([args.target])[:, 0]
    train, test = split_rows(table.n_rows, args.test_fraction, args.seed)

    from .. import GaussianProcessRegressor
    from .._fit.clock import compiling_seconds

    X, y = X_all[train], y_all[train]
    kernel = default_kernel(X, args.kernel)
    held = f" ({len(train)} fitted, {len(test)} held out)" if len(test) else ""
    print(f"fastgp fit: {table.path}, {table.n_rows} rows{held}; target {args.target}; "
          f"inputs {', '.join(inputs)}; {kernel.n_dims} hyperparameters")
    print(f"start kernel: {kernel}")
    mean = None if args.mean == "none" else args.mean
    gpr = GaussianProcessRegressor(
        kernel, normalize_y=True, optimizer=args.optimizer, solver=args.solver,
        n_restarts_optimizer=args.n_restarts, random_state=args.seed,
        verbose=args.verbose, mean=mean, mean_method=args.mean_method)
    start = time.perf_counter()
    with compiling_seconds() as compiled:
        gpr.fit(X, y)
    wall = time.perf_counter() - start

    mean_all, std_all = gpr.predict(X_all, return_std=True)
    print(f"fitted kernel: {gpr.kernel_}")
    print(f"solver: {gpr.solver_}")
    if mean is not None:
        print(mean_line(gpr, inputs, args.mean_method))
    print(f"log marginal likelihood: {gpr.log_marginal_likelihood_value_:.4f}")
    r2, rmse = r2_and_rmse(y, mean_all[train])
    print(f"in-sample R^2: {r2:.4f}, RMSE: {rmse:.6g} ({len(train)} rows)")
    if len(test):
        r2, rmse = r2_and_rmse(y_all[test], mean_all[test])
        print(f"held-out R^2: {r2:.4f}, RMSE: {rmse:.6g} ({len(test)} rows)")
    print(f"iterations: {gpr.n_iter_}, objective evaluations: {gpr.n_evaluations_}")
    print(f"fit time: {wall:.2f} s{compile_note(compiled)}")
    print(f"peak resident memory: {peak_rss_mb():.0f} MB")
    if args.model is not None:
        import joblib

        joblib.dump(gpr, args.model)
        print(f"model written to {args.model} (joblib.load it; predict takes the "
              f"columns {', '.join(inputs)} in this order)")
    if args.predictions is not None:
        held_out = np.isin(np.arange(table.n_rows), test) if len(test) else None
        write_predictions(args.predictions, inputs, args.target, X_all, y_all,
                          mean_all, std_all, held_out)
        print(f"predictions written to {args.predictions} ({table.n_rows} rows)")
    return 0

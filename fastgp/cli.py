"""``python -m fastgp`` / ``fastgp``: fit a GP to the Mauna Loa CO2 series
shipped with the package and report the fit, its time and its peak memory;
``fastgp fit CSV --target COLUMN`` fits one to a user's CSV file
(:mod:`fastgp._cli`). Warnings print as one line each, without Python's
file name and source line."""

import argparse
import resource
import sys
import time
import warnings


from .datasets import load_mauna_loa_co2
from .plotting import (
    MissingMatplotlibError,
    data_end,
    plot_forecast,
    plot_format,
    require_matplotlib,
    save_figure,
)

__all__ = ["build_parser", "main", "mauna_loa_kernel", "weekly_co2_kernel"]

#: The last year of the ``--plot`` figure's forecast.
FORECAST_UNTIL = 2025.0


def mauna_loa_kernel():
    """The starting kernel for the CO2 series (time in years, ppm minus the
    mean): Rasmussen & Williams (2006), section 5.4.3, eqs. 5.15-5.18, with
    the start values of scikit-learn's example "Forecasting of CO2 level on
    Mona Loa dataset using Gaussian process regression (GPR)"; 11 free
    hyperparameters:

    - a long-term smooth rising trend, 50^2 RBF(50);
    - a seasonal component, 2^2 RBF(100) ExpSineSquared(l=1, p=1 year fixed),
      periodic with a slowly decaying amplitude;
    - medium-term irregularities, 0.5^2 RationalQuadratic(l=1, alpha=1);
    - correlated noise, 0.1^2 RBF(0.1), plus white noise 0.1^2.

    The benchmarks' kernel against scikit-learn's. ``python -m fastgp``
    fits :func:`weekly_co2_kernel`, whose noise suits the weekly series.
    """
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    noise = (0.1**2 * RBF(length_scale=0.1)
             + WhiteKernel(noise_level=0.1**2, noise_level_bounds=(1e-5, 1e5)))
    return _co2_signal() + noise


def _co2_signal():
    """R&W's trend, seasonal and irregular parts with scikit-learn's
    example's start (:func:`mauna_loa_kernel`)."""
    from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, RationalQuadratic

    long_term_trend = 50.0**2 * RBF(length_scale=50.0)
    seasonal = (2.0**2 * RBF(length_scale=100.0)
                * ExpSineSquared(length_scale=1.0, periodicity=1.0,
                                 periodicity_bounds="fixed"))
    irregularities = 0.5**2 * RationalQuadratic(length_scale=1.0, alpha=1.0)
    return long_term_trend + seasonal + irregularities


def weekly_co2_kernel():
    """The kernel ``python -m fastgp`` fits to the weekly CO2 series: the
    trend, seasonal and irregular parts of :func:`mauna_loa_kernel`, and
    noise correlated over days, 0.1^2 RBF(0.01 years), without a white-noise
    term; 10 free hyperparameters.

    Rasmussen & Williams (2006, section 5.4.3) fit monthly means, where the
    correlated noise's length scale came out at 0.138 years (1.6 months,
    above the sampling interval) beside a white noise. The weekly series
    resolves shorter correlations: fitted with :func:`mauna_loa_kernel`, the
    correlated noise's length scale shrinks to 0.012 years (4.4 days; a
    correlation of 0.28 between consecutive weeks) and its white noise runs
    to its lower bound, 1e-5 (a bound warning), since the likelihood is
    highest with no white noise at all: the weekly means' deviations are
    correlated over days (weather at the station), not independent. A white
    term bounded away from zero moves the fit to a worse optimum (the
    irregularities then take the noise's role), and bounding the correlated
    noise's length scale from below (by a week) only moves the bound
    warning there. So the noise is the correlated part alone, started at
    0.01 years, half the sampling interval, where its diagonal keeps the
    kernel matrix well conditioned (started at 0.1 years, with no white
    noise, the start's kernel matrix is not positive definite). It reaches
    the same optimum as :func:`mauna_loa_kernel` (log marginal likelihood
    -883.617) in about half its evaluations, no hyperparameter on a bound.
    """
    from sklearn.gaussian_process.kernels import RBF

    return _co2_signal() + 0.1**2 * RBF(length_scale=0.01)


def _version():
    from . import __version__

    return __version__


def _one_line_warning(message, category, filename, lineno, line=None):
    """A warning as the command line prints it: one line, its category and
    message (``warnings.formatwarning``'s signature), without the file name
    and the source line, which would point into scikit-learn's or the
    console script's code."""
    return f"fastgp: {category.__name__}: {message}\n"


def _compile_note(compiled):
    """What the report adds to the fit's time: the seconds Numba spent
    compiling fastgp's routines, where it compiled any (the first run after
    installing or upgrading fastgp; later runs load them from the cache)."""
    seconds = sum(compiled)
    if not seconds:
        return ""
    return (f" (of which {seconds:.1f} s Numba compiling fastgp's routines, once per "
            "install: later runs load them from its cache)")


def _peak_rss_mb():
    # ru_maxrss is in kilobytes on Linux, bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


#: ``--verbose`` and ``--quiet``: the estimator's ``verbose``.
VERBOSE, QUIET = 1, 0

def _fit_description():
    """``fastgp fit``'s help: what it does and why its default model."""
    from ._cli.fit import LENGTH_SCALE_RANGE, NOISE_BOUNDS, NOISE_START

    scales = f"{LENGTH_SCALE_RANGE[0]:g} to {LENGTH_SCALE_RANGE[1]:g}"
    noise = f"{NOISE_START:g}, bounds {NOISE_BOUNDS[0]:g} to {NOISE_BOUNDS[1]:g}"
    return f"""\
Fit fastgp.GaussianProcessRegressor to the numeric columns of a CSV file
(comma-separated, with a header line naming the columns) and report the fitted
kernel and its scores.

The kernel is ConstantKernel * K + WhiteKernel, K the stationary kernel of
--kernel with one length scale per input (ARD), fitted with normalize_y=True:
- one length scale per input lets each input have its own smoothness, and an
  input that does not matter its own long length scale (a warning that it
  reached its upper bound says so);
- each length scale starts at its input's standard deviation and stays within
  {scales} times it, so neither the start nor the bounds depend on
  the inputs' units;
- normalize_y=True standardises the target, so the signal variance's start
  (1) and the noise's ({noise}) suit any target's units;
- the WhiteKernel learns the observation noise: without it a GP interpolates
  the noise and its in-sample R^2 says nothing.

--mean linear estimates a trend in the inputs with the covariance
(generalised least squares, the kernel by --mean-method's likelihood), so
that predictions far from the data revert to the trend rather than to the
target's mean; the coefficients are printed with their standard errors.
"""


FIT_EPILOG = """\
example (a file shipped in the repository):
  python -m fastgp fit tests/data/fit_example.csv --target y --test-fraction 0.25 \\
      --model model.joblib --predictions predictions.csv
then in Python: joblib.load("model.joblib").predict(X), X's columns in the
order the output names."""


def _add_verbosity(parser, default):
    """--verbose / --quiet, one or the other, into ``verbose``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--verbose", dest="verbose", action="store_const", const=VERBOSE,
                       default=default,
                       help="print the objective, the gradient norm and the time at "
                            "every optimiser iteration (the default)")
    group.add_argument("--quiet", dest="verbose", action="store_const", const=QUIET,
                       default=default,
                       help="no per-iteration progress: only the results")


def _add_optimizer(parser, default):
    parser.add_argument("--optimizer", choices=["fmin_l_bfgs_b", "CG"],
                        default=default,
                        help="fmin_l_bfgs_b: SciPy's L-BFGS-B within the kernel's "
                             "bounds (default, as scikit-learn); CG: SciPy's nonlinear "
                             "conjugate gradients, kept within the bounds by a smooth "
                             "map of them")


def _unit_fraction(text):
    """argparse type of --test-fraction: a float strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), "
                                         f"got {text}")
    return value


def _non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _add_fit_command(subparsers):
    from ._cli.fit import KERNEL_FAMILIES, MEAN_CHOICES

    fit = subparsers.add_parser(
        # prog: argparse would build it from the top-level usage
        "fit", prog="fastgp fit", help="fit a GP to your own CSV file (fastgp fit --help)",
        description=_fit_description(), epilog=FIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    fit.add_argument("csv", metavar="CSV", help="the data: a comma-separated file "
                                                "with a header line")
    fit.add_argument("--target", required=True, metavar="COLUMN",
                     help="the column to predict")
    fit.add_argument("--inputs", metavar="A,B,...", default=None,
                     help="the input columns, separated by commas (default: every "
                          "column but the target)")
    fit.add_argument("--kernel", choices=KERNEL_FAMILIES, default="rbf",
                     help="K in ConstantKernel * K + WhiteKernel: rbf (smooth, the "
                          "default), matern12 / matern32 / matern52 (Matern, nu = 0.5, "
                          "1.5, 2.5: rougher functions) or rational-quadratic (a "
                          "mixture of length scales); each with one length scale per "
                          "input")
    fit.add_argument("--solver", choices=["auto", "cholesky", "vecchia", "iterative"],
                     default="auto",
                     help="GaussianProcessRegressor's solver: auto (the default) "
                          "picks the exact cholesky one when its N x N buffer fits in "
                          "memory, else vecchia (docs/solvers.md)")
    fit.add_argument("--mean", choices=MEAN_CHOICES, default="none",
                     help="a mean estimated with the covariance: none (the default: "
                          "the targets' mean), constant, or linear (a constant plus one "
                          "coefficient per input); its coefficients and their standard "
                          "errors are printed")
    fit.add_argument("--mean-method", choices=["reml", "profile"], default="reml",
                     help="how the kernel is fitted with the mean: reml (the "
                          "default: the restricted likelihood, less biased variances) "
                          "or profile (maximum likelihood)")
    # given after `fit` or before it: the top-level parser's values stand
    # unless given here (SUPPRESS)
    _add_optimizer(fit, argparse.SUPPRESS)
    fit.add_argument("--n-restarts", type=_non_negative_int, default=0, metavar="N",
                     help="extra optimiser runs from random starts within the bounds "
                          "(default 0)")
    fit.add_argument("--test-fraction", type=_unit_fraction, default=None, metavar="F",
                     help="hold out this share of the rows, drawn at random, and "
                          "report the held-out R^2 and RMSE (default: fit every row)")
    fit.add_argument("--seed", type=int, default=0,
                     help="seed of the held-out draw and of the restarts (default 0)")
    fit.add_argument("--model", metavar="FILE", default=None,
                     help="save the fitted GaussianProcessRegressor to FILE with joblib")
    fit.add_argument("--predictions", metavar="FILE", default=None,
                     help="write every row's inputs, target, predicted_mean and "
                          "predicted_std (of a new observation, noise included) and, "
                          "with --test-fraction, held_out (1 or 0) to FILE as CSV")
    _add_verbosity(fit, argparse.SUPPRESS)
    return fit


def build_parser():
    """The argument parsers of ``fastgp`` and of its ``fit`` command.

    Without a command the top-level options run the Mauna Loa fit; ``--optimizer``
    and ``--verbose`` / ``--quiet`` may be given before ``fit`` or after it.

    Returns
    -------
    parser : argparse.ArgumentParser
        The top-level parser; ``parse_args`` gives ``command`` None or "fit".
    fit_parser : argparse.ArgumentParser
        The ``fit`` command's, whose ``error`` reports a bad file or column.
    """
    parser = argparse.ArgumentParser(
        prog="fastgp",
        # argparse would write "COMMAND ..." as if a command were needed
        usage="%(prog)s [-h] [--optimizer {fmin_l_bfgs_b,CG}] [--n-samples N]\n"
              "              [--verbose | --quiet] [--plot FILE] [--version]\n"
              "       %(prog)s fit CSV --target COLUMN [options] (fastgp fit --help)",
        description="Without a command: fit an exact GP to the Mauna Loa CO2 series "
                    "shipped with fastgp, printing progress per optimiser iteration. "
                    "`fastgp fit CSV --target COLUMN`: fit one to your own data.")
    _add_optimizer(parser, "fmin_l_bfgs_b")
    parser.add_argument("--n-samples", type=int, default=None, metavar="N",
                        help="use only the first N weeks, 1 <= N <= the series' "
                             "length (default: all)")
    _add_verbosity(parser, VERBOSE)
    parser.add_argument("--plot", metavar="FILE", default=None,
                        help="also draw the data, the fitted mean and its 95%% band, "
                             "forecast from the end of the data to 2025 (marked on the "
                             "figure), to FILE (.png or .pdf; needs matplotlib)")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND",
                                       title="commands")
    fit_parser = _add_fit_command(subparsers)
    return parser, fit_parser


def main(argv=None):
    """Run the command line.

    Parameters
    ----------
    argv : list of str or None, default=None
        The arguments; None reads ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success; usage errors exit with status 2 (argparse).
    """
    parser, fit_parser = build_parser()
    args = parser.parse_args(argv)
    shown, warnings.formatwarning = warnings.formatwarning, _one_line_warning
    try:
        if args.command == "fit":
            if args.n_samples is not None or args.plot is not None:
                parser.error("--n-samples and --plot are options of the Mauna Loa fit, "
                             "not of `fastgp fit`")
            return _fit(args, fit_parser)
        return _mauna_loa(args, parser)
    finally:
        warnings.formatwarning = shown


def _fit(args, fit_parser):
    from ._cli.fit import run_fit
    from ._cli.table import TableError

    try:
        return run_fit(args, _peak_rss_mb, _compile_note)
    except TableError as exc:
        fit_parser.error(str(exc))


def _mauna_loa(args, parser):
    if args.plot is not None:
        try:  # before the fit, so that a missing matplotlib costs no time
            plot_format(args.plot)
            require_matplotlib()
        except (ValueError, MissingMatplotlibError) as exc:
            parser.exit(2, f"fastgp: error: --plot: {exc}\n")

    from . import GaussianProcessRegressor
    from ._fit.clock import compiling_seconds

    X, y = load_mauna_loa_co2()
    if args.n_samples is not None and not 1 <= args.n_samples <= len(y):
        parser.error(f"argument --n-samples: must be between 1 and {len(y):,} (the "
                     f"number of weekly means in the series), got {args.n_samples}")
    if args.n_samples is not None:
        X, y = X[: args.n_samples], y[: args.n_samples]
    y_mean = y.mean()
    kernel = weekly_co2_kernel()
    print(f"fastgp: Mauna Loa CO2, {len(y)} weekly means, "
          f"{kernel.n_dims} hyperparameters")
    print(f"start kernel: {kernel}")
    gpr = GaussianProcessRegressor(kernel, optimizer=args.optimizer,
                                   verbose=args.verbose)
    start = time.perf_counter()
    with compiling_seconds() as compiled:
        gpr.fit(X, y - y_mean)
    wall = time.perf_counter() - start
    print(f"fitted kernel: {gpr.kernel_}")
    print(f"log marginal likelihood: {gpr.log_marginal_likelihood_value_:.4f}")
    print(f"iterations: {gpr.n_iter_}, objective evaluations: {gpr.n_evaluations_}")
    print(f"wall time: {wall:.2f} s{_compile_note(compiled)}")
    print(f"peak resident memory: {_peak_rss_mb():.0f} MB "
          f"(one {len(y)}x{len(y)} float64 buffer is {8 * len(y)**2 / 2**20:.0f} MB)")
    if args.plot is not None:
        figure = plot_forecast(gpr, X, y, y_offset=y_mean, until=FORECAST_UNTIL)
        save_figure(figure, args.plot)
        print(f"figure written to {args.plot}: the data end at {data_end(X):.2f} "
              f"(decimal year); the rest, to {FORECAST_UNTIL:g}, is forecast")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``python -m fastgp`` / ``fastgp``: fit a GP to the Mauna Loa CO2 series
shipped with the package and report the fit, its time and its peak memory."""

import argparse
import resource
import sys
import time


from .datasets import load_mauna_loa_co2
from .plotting import (
    MissingMatplotlibError,
    plot_forecast,
    plot_format,
    require_matplotlib,
    save_figure,
)

__all__ = ["main", "mauna_loa_kernel"]


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
    """
    from sklearn.gaussian_process.kernels import (
        RBF,
        ExpSineSquared,
        RationalQuadratic,
        WhiteKernel,
    )

    long_term_trend = 50.0**2 * RBF(length_scale=50.0)
    seasonal = (2.0**2 * RBF(length_scale=100.0)
                * ExpSineSquared(length_scale=1.0, periodicity=1.0,
                                 periodicity_bounds="fixed"))
    irregularities = 0.5**2 * RationalQuadratic(length_scale=1.0, alpha=1.0)
    noise = (0.1**2 * RBF(length_scale=0.1)
             + WhiteKernel(noise_level=0.1**2, noise_level_bounds=(1e-5, 1e5)))
    return long_term_trend + seasonal + irregularities + noise


def _version():
    from . import __version__

    return __version__


def _peak_rss_mb():
    # ru_maxrss is in kilobytes on Linux, bytes on macOS
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="fastgp",
        description="Fit an exact GP to the Mauna Loa CO2 series shipped with "
                    "fastgp, printing progress per optimiser iteration.")
    parser.add_argument("--optimizer", choices=["fmin_l_bfgs_b", "CG"],
                        default="fmin_l_bfgs_b",
                        help="fmin_l_bfgs_b: SciPy's L-BFGS-B within the kernel's "
                             "bounds (default, as scikit-learn); CG: SciPy's nonlinear "
                             "conjugate gradients, kept within the bounds by a smooth "
                             "map of them")
    parser.add_argument("--n-samples", type=int, default=None, metavar="N",
                        help="use only the first N weeks, 1 <= N <= the series' "
                             "length (default: all)")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-iteration progress")
    parser.add_argument("--plot", metavar="FILE", default=None,
                        help="also draw the data, the fitted mean and its 95%% band, "
                             "forecast to 2025, to FILE (.png or .pdf; needs matplotlib)")
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {_version()}")
    args = parser.parse_args(argv)
    if args.plot is not None:
        try:  # before the fit, so that a missing matplotlib costs no time
            plot_format(args.plot)
            require_matplotlib()
        except (ValueError, MissingMatplotlibError) as exc:
            parser.exit(2, f"fastgp: error: --plot: {exc}\n")

    from . import GaussianProcessRegressor

    X, y = load_mauna_loa_co2()
    if args.n_samples is not None and not 1 <= args.n_samples <= len(y):
        parser.error(f"argument --n-samples: must be between 1 and {len(y):,} (the "
                     f"number of weekly means in the series), got {args.n_samples}")
    if args.n_samples is not None:
        X, y = X[: args.n_samples], y[: args.n_samples]
    y_mean = y.mean()
    kernel = mauna_loa_kernel()
    print(f"fastgp: Mauna Loa CO2, {len(y)} weekly means, "
          f"{kernel.n_dims} hyperparameters")
    print(f"start kernel: {kernel}")
    gpr = GaussianProcessRegressor(kernel, optimizer=args.optimizer,
                                   verbose=0 if args.quiet else 1)
    start = time.perf_counter()
    gpr.fit(X, y - y_mean)
    wall = time.perf_counter() - start
    print(f"fitted kernel: {gpr.kernel_}")
    print(f"log marginal likelihood: {gpr.log_marginal_likelihood_value_:.4f}")
    print(f"iterations: {gpr.n_iter_}, objective evaluations: {gpr.n_evaluations_}")
    print(f"wall time: {wall:.2f} s (first run in a fresh install includes "
          "Numba compilation)")
    print(f"peak resident memory: {_peak_rss_mb():.0f} MB "
          f"(one {len(y)}x{len(y)} float64 buffer is {8 * len(y)**2 / 2**20:.0f} MB)")
    if args.plot is not None:
        save_figure(plot_forecast(gpr, X, y, y_offset=y_mean), args.plot)
        print(f"figure written to {args.plot}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

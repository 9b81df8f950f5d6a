"""Does fastgp fit the Mauna Loa CO2 series with Rasmussen & Williams' kernel
(section 5.4.3, 11 hyperparameters) to a log marginal likelihood at least as
high as scikit-learn's, from the same start, and in less time?

    python -m bench.bench_mauna_loa            # all 2,225 weeks: a few minutes
    python -m bench.bench_mauna_loa --n-samples 400   # a quick check

    # on a shared or oversubscribed machine, one thread each for both libraries:
    OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python -m bench.bench_mauna_loa

(On a 2-core machine at load average 8, OpenBLAS's two threads made a
120 x 120 dpotri take 118 ms instead of 0.3 ms single-threaded, so threaded
timings there measure the contention, not the libraries.)

Both estimators get the same data (weekly means, missing weeks dropped, time
in decimal years, y minus its mean, ``normalize_y=False``), the same kernel
and start (:func:`fastgp.cli.mauna_loa_kernel`, scikit-learn's own example's
values) and the same optimiser (SciPy's L-BFGS-B with its default
tolerances, no restarts). scikit-learn's optimiser is its own
``fmin_l_bfgs_b`` call, wrapped only to count objective evaluations.

Reported per library: final log marginal likelihood, wall time of ``fit``
and the process's CPU time during it (all threads; on a shared machine the
steadier figure), objective evaluations, optimiser iterations, peak resident memory
growth during ``fit``, and the fitted kernel. Each optimum is also evaluated by
the other library's objective, so a difference in the final value is a
difference in where the optimisers stopped, not in the objectives. fastgp's
Numba compilation (or cache load) is timed apart, before its fit, on a small
slice. Results: printed, and written with the environment (versions, thread
counts, git revision) to bench/results/mauna_loa.json.
"""

import argparse
import os
import sys
import time

import scipy.optimize
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGPR

from fastgp import GaussianProcessRegressor
from fastgp.cli import mauna_loa_kernel
from fastgp.datasets import load_mauna_loa_co2

from ._measure import MB, REPO_ROOT, PeakMemory, environment, write_json


class CountingLBFGSB:
    """scikit-learn's ``fmin_l_bfgs_b`` optimiser (the same SciPy call), with
    the number of objective evaluations recorded."""

    def __init__(self):
        self.n_evaluations = 0
        self.n_iterations = 0

    def __call__(self, obj_func, initial_theta, bounds):
        def counted(theta):
            self.n_evaluations += 1
            return obj_func(theta, eval_gradient=True)

        result = scipy.optimize.minimize(counted, initial_theta, method="L-BFGS-B",
                                         jac=True, bounds=bounds)
        self.n_iterations = int(result.nit)
        return result.x, result.fun


def load(n_samples):
    X, y = load_mauna_loa_co2()
    if n_samples is not None:
        X, y = X[:n_samples], y[:n_samples]
    return X, y - y.mean()


def warm_up_numba():
    """Compile (or load from cache) fastgp's routines on a small slice."""
    X, y = load(60)
    start = time.perf_counter()
    GaussianProcessRegressor(mauna_loa_kernel(), optimizer=None).fit(X, y)
    return time.perf_counter() - start


def fit_fastgp(X, y):
    gpr = GaussianProcessRegressor(mauna_loa_kernel())
    with PeakMemory() as memory:
        start, cpu_start = time.perf_counter(), time.process_time()
        gpr.fit(X, y)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return gpr, {
        "library": "fastgp",
        "log_marginal_likelihood": float(gpr.log_marginal_likelihood_value_),
        "wall_s": wall,
        "cpu_s": cpu,
        "n_evaluations": int(gpr.n_evaluations_),
        "n_iterations": int(gpr.n_iter_),
        "peak_memory_growth_mb": memory.delta_bytes / MB,
        "theta": gpr.kernel_.theta.tolist(),
        "kernel": repr(gpr.kernel_),
    }


def fit_sklearn(X, y):
    optimizer = CountingLBFGSB()
    gpr = SklearnGPR(mauna_loa_kernel(), optimizer=optimizer, normalize_y=False)
    with PeakMemory() as memory:
        start, cpu_start = time.perf_counter(), time.process_time()
        gpr.fit(X, y)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return gpr, {
        "library": "scikit-learn",
        "log_marginal_likelihood": float(gpr.log_marginal_likelihood_value_),
        "wall_s": wall,
        "cpu_s": cpu,
        "n_evaluations": optimizer.n_evaluations,
        "n_iterations": optimizer.n_iterations,
        "peak_memory_growth_mb": memory.delta_bytes / MB,
        "theta": gpr.kernel_.theta.tolist(),
        "kernel": repr(gpr.kernel_),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-samples", type=int, default=None,
                        help="use only the first N weeks (default: all 2,225)")
    parser.add_argument("--skip-sklearn", action="store_true",
                        help="fit fastgp only")
    parser.add_argument("--out", default=str(REPO_ROOT / "bench" / "results"
                                             / "mauna_loa.json"))
    args = parser.parse_args(argv)

    X, y = load(args.n_samples)
    print(f"Mauna Loa CO2: {len(y)} weeks, kernel with "
          f"{mauna_loa_kernel().n_dims} hyperparameters")
    print(f"start: {mauna_loa_kernel()}")
    compile_s = warm_up_numba()
    print(f"fastgp warm-up (Numba compile or cache load): {compile_s:.1f} s")

    ours, ours_row = fit_fastgp(X, y)
    rows = [ours_row]
    if not args.skip_sklearn:
        ref, ref_row = fit_sklearn(X, y)
        rows.append(ref_row)
        # each optimum under the other library's objective
        ours_row["lml_by_sklearn"] = float(ref.log_marginal_likelihood(ours.kernel_.theta))
        ref_row["lml_by_fastgp"] = float(ours.log_marginal_likelihood(ref.kernel_.theta))

    print()
    print(f"{'library':<14}{'log ML':>14}{'wall s':>10}{'CPU s':>10}{'evals':>8}{'iters':>8}"
          f"{'+peak MB':>10}")
    for row in rows:
        print(f"{row['library']:<14}{row['log_marginal_likelihood']:>14.4f}"
              f"{row['wall_s']:>10.1f}{row['cpu_s']:>10.1f}{row['n_evaluations']:>8d}"
              f"{row['n_iterations']:>8d}{row['peak_memory_growth_mb']:>10.0f}")
    for row in rows:
        print(f"{row['library']} kernel: {row['kernel']}")
    if len(rows) == 2:
        print(f"fastgp's optimum by scikit-learn's objective: "
              f"{ours_row['lml_by_sklearn']:.4f}; scikit-learn's optimum by "
              f"fastgp's: {ref_row['lml_by_fastgp']:.4f}")
        gain = ours_row["log_marginal_likelihood"] - ref_row["log_marginal_likelihood"]
        per_eval = ((ref_row["wall_s"] / ref_row["n_evaluations"])
                    / (ours_row["wall_s"] / ours_row["n_evaluations"]))
        print(f"log ML difference (fastgp - scikit-learn): {gain:+.4f}; "
              f"scikit-learn / fastgp: wall {ref_row['wall_s'] / ours_row['wall_s']:.1f}x, "
              f"CPU {ref_row['cpu_s'] / ours_row['cpu_s']:.1f}x, "
              f"per evaluation (wall) {per_eval:.1f}x")
    path = write_json(args.out, {"question": __doc__.split("\n\n")[0],
                                 "n_samples": len(y), "compile_s": compile_s,
                                 "load_average_after": list(os.getloadavg()),
                                 "results": rows, "environment": environment()})
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

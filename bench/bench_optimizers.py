"""Does optimizer="CG" (within the kernel's bounds) reach L-BFGS-B's optimum
at comparable cost: at N = 500 on sin(3x) + noise, the same log marginal
likelihood within 0.1 in at most 3x L-BFGS-B's time?

    python -m bench.bench_optimizers             # N = 500, 3 rounds
    python -m bench.bench_optimizers --n 200 --repeats 1

Problem: x uniform on [0, 5] (N, 1), y = sin(3x) + 0.1 noise, kernel
C(1) * RBF(1) + WhiteKernel(1, noise_level_bounds=(1e-5, 1e5)), fastgp's
GaussianProcessRegressor with each optimiser from the same start. Each round
fits with both optimisers in turn (interleaved, so a machine that slows down
slows both); the table gives the median fit time, the iterations, the
evaluations and the log marginal likelihood of each. Numba compiles in a
warm-up fit before.

Writes bench/results/optimizers.json.
"""

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, write_json
from ._report import format_table

OPTIMIZERS = ("fmin_l_bfgs_b", "CG")


def problem(n, seed=0):
    """X (n, 1), y (n,) and the starting kernel."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 5.0, size=(n, 1))
    y = np.sin(3.0 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(1.0, noise_level_bounds=(1e-5, 1e5))
    return X, y, kernel


def fit_once(X, y, kernel, optimizer):
    from sklearn.exceptions import ConvergenceWarning

    from fastgp import GaussianProcessRegressor

    gpr = GaussianProcessRegressor(kernel, optimizer=optimizer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        gpr.fit(X, y)
        wall = time.perf_counter() - start
    return dict(seconds=wall, n_iter=gpr.n_iter_, n_evaluations=gpr.n_evaluations_,
                lml=float(gpr.log_marginal_likelihood_value_),
                kernel=str(gpr.kernel_),
                warnings=[str(w.message) for w in caught])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/optimizers.json")
    args = parser.parse_args(argv)

    X, y, kernel = problem(args.n)
    fit_once(X[:50], y[:50], kernel, "fmin_l_bfgs_b")  # compile
    runs = {name: [] for name in OPTIMIZERS}
    for _ in range(args.repeats):
        for name in OPTIMIZERS:
            runs[name].append(fit_once(X, y, kernel, name))

    summary = {}
    for name, results in runs.items():
        summary[name] = dict(median_s=statistics.median(r["seconds"] for r in results),
                             n_iter=results[-1]["n_iter"],
                             n_evaluations=results[-1]["n_evaluations"],
                             lml=results[-1]["lml"], kernel=results[-1]["kernel"],
                             warnings=results[-1]["warnings"])
    ref, cg = summary["fmin_l_bfgs_b"], summary["CG"]
    time_ratio = cg["median_s"] / ref["median_s"]
    lml_gap = ref["lml"] - cg["lml"]
    rows = [[name, f"{s['median_s']:.3f}", str(s["n_iter"]), str(s["n_evaluations"]),
             f"{s['lml']:.4f}"] for name, s in summary.items()]
    print(__doc__.splitlines()[0])
    print(f"N = {args.n}, {args.repeats} rounds")
    print(format_table(["optimizer", "median fit (s)", "iterations", "evaluations",
                        "log marginal likelihood"], rows))
    print(f"CG / L-BFGS-B time: {time_ratio:.2f} (target <= 3); "
          f"LML gap {lml_gap:+.4f} (target |gap| <= 0.1): "
          f"{'met' if time_ratio <= 3 and abs(lml_gap) <= 0.1 else 'NOT met'}")
    write_json(args.out, dict(environment=environment(), n=args.n, repeats=args.repeats,
                              runs=runs, summary=summary, time_ratio=time_ratio,
                              lml_gap=lml_gap))
    return 0


if __name__ == "__main__":
    sys.exit(main())

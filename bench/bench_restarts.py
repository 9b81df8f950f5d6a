"""Do three optimiser restarts run faster on two joblib workers than one after another, with the same optimum?

    python -m bench.bench_restarts                    # N = 2,000, loky, n_jobs 1 and 2
    python -m bench.bench_restarts --n 300 --backend threading

Problem: bench/_problems.py's "1d" (x standard normal, y = sin(x) + 0.01
noise, C*RBF + White from theta = 0), fitted by
``GaussianProcessRegressor(n_restarts_optimizer=3, random_state=0)`` (four
L-BFGS-B runs: the initial hyperparameters and three log-uniform starts) with
``n_jobs=1`` (the sequential fit, in this process) and ``n_jobs=2`` (the runs
as joblib tasks under ``parallel_config(backend=...)``, loky worker processes
by default). Before the timed fits, one untimed fit at N = 50 with each
``n_jobs`` compiles (or loads) the jitted passes here and starts the workers,
so the figures are the fits' and not the workers' start-up (reported apart:
"workers' start"). The cases alternate, ``--repeats`` times each; the table
gives each one's median wall time, the speed-up, and the optimum each found
(the log marginal likelihood and the largest difference of theta).

On a machine with two idle cores the expected speed-up is below 2: the four
runs' iteration counts differ (the slowest pair bounds the parallel time),
each worker runs Numba and BLAS on one core instead of two, and the final
factor runs in this process after the runs. Run it on an otherwise quiet
machine.

Writes bench/results/restarts.json.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, write_json
from ._problems import ALPHA, make_problem
from ._report import format_table


def fit(problem, n_jobs, n_restarts, backend):
    """(seconds, fitted estimator) of one fit."""
    import joblib

    from fastgp import GaussianProcessRegressor

    gpr = GaussianProcessRegressor(problem.kernel, alpha=ALPHA,
                                   n_restarts_optimizer=n_restarts, random_state=0,
                                   n_jobs=n_jobs)
    with joblib.parallel_config(backend=backend):
        start = time.perf_counter()
        gpr.fit(problem.X, problem.Y.ravel())
        return time.perf_counter() - start, gpr


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--backend", default="loky")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/restarts.json")
    args = parser.parse_args(argv)

    problem = make_problem("1d", args.n)
    warm = make_problem("1d", 50)
    fit(warm, 1, args.restarts, args.backend)
    workers_start, _ = fit(warm, args.jobs, args.restarts, args.backend)

    seconds, fitted = {1: [], args.jobs: []}, {}
    for _ in range(args.repeats):
        for n_jobs in seconds:
            elapsed, fitted[n_jobs] = fit(problem, n_jobs, args.restarts, args.backend)
            seconds[n_jobs].append(elapsed)

    sequential = fitted[1]
    rows, cases = [], {}
    for n_jobs, times in seconds.items():
        gpr = fitted[n_jobs]
        median = statistics.median(times)
        theta_gap = float(np.max(np.abs(gpr.kernel_.theta - sequential.kernel_.theta)))
        cases[str(n_jobs)] = dict(seconds=times, median_s=median,
                                  log_marginal_likelihood=gpr.log_marginal_likelihood_value_,
                                  theta=gpr.kernel_.theta.tolist(), theta_gap=theta_gap,
                                  n_evaluations=gpr.n_evaluations_)
        rows.append([n_jobs, f"{median:.3f}", f"{seconds[1][0] / median:.2f}"
                     if n_jobs != 1 else "1.00",
                     f"{gpr.log_marginal_likelihood_value_:.10g}", f"{theta_gap:.2e}",
                     gpr.n_evaluations_])
    speedup = statistics.median(seconds[1]) / statistics.median(seconds[args.jobs])
    lml_gap = abs(fitted[args.jobs].log_marginal_likelihood_value_
                  - sequential.log_marginal_likelihood_value_)
    same = lml_gap <= 1e-6 * max(1.0, abs(sequential.log_marginal_likelihood_value_))
    print(__doc__.splitlines()[0])
    print(f"N = {args.n}, n_restarts_optimizer = {args.restarts}, backend {args.backend}, "
          f"{args.repeats} fit(s) per case; workers' start (N = 50 fit): "
          f"{workers_start:.2f} s")
    print(format_table(["n_jobs", "median wall (s)", "speed-up", "log marginal likelihood",
                        "max |theta - sequential|", "evaluations"], rows))
    print(f"speed-up {speedup:.2f}x; same optimum (log marginal likelihood within 1e-6 "
          f"relative): {'yes' if same else 'NO'}")
    write_json(args.out, dict(environment=environment(), n=args.n, restarts=args.restarts,
                              jobs=args.jobs, backend=args.backend, repeats=args.repeats,
                              workers_start_s=workers_start, cases=cases, speedup=speedup,
                              lml_gap=lml_gap, same_optimum=same))
    return 0


if __name__ == "__main__":
    sys.exit(main())

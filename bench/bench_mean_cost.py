"""What does a mean estimated with the covariance add to one loss+gradient of each solver?

    python -m bench.bench_mean_cost       # Cholesky, iterative at 3,000; Vecchia at 50,000
    python -m bench.bench_mean_cost --sizes 1000,1000,5000 --repeats 3

One objective per solver and way (no mean; ``mean="linear"`` by the profile
likelihood; by the restricted one), built as the estimator builds it
(``solver.objective(..., mean=mean_term(...))``) on 2-D inputs uniform on
[0, 1]^2 with a linear trend, ``C * Matern(0.2, nu=1.5) + WhiteKernel`` at
its starting point; each evaluated once (compiling and allocating), then
``--repeats`` times in turn, the three ways interleaved, near the start.
The table gives the medians (docs/design.md, "A mean estimated with the
covariance", Cost).

Writes bench/results/mean-cost.json.
"""

import argparse
import sys
import time
import warnings

import numpy as np

from ._measure import REPO_ROOT, environment, write_json

SOLVERS = ("cholesky", "iterative", "vecchia")
WAYS = ((None, None), ("linear", "profile"), ("linear", "reml"))


def _int_list(text):
    return [int(float(v)) for v in text.split(",") if v.strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mean_cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_int_list, default=[3000, 3000, 50000],
                        help="N of the Cholesky, iterative and Vecchia solvers")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    from sklearn.gaussian_process.kernels import Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from fastgp import GaussianProcessRegressor
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.choice import make_solver
    from fastgp._solvers.mean import mean_term

    warnings.simplefilter("ignore")
    kernel = C(1.0) * Matern(0.2, nu=1.5) + WhiteKernel(0.01)
    result = {}
    for solver_name, n in zip(SOLVERS, args.sizes):
        rng = np.random.default_rng(0)
        X = rng.uniform(0.0, 1.0, (n, 2))
        y = 1 + 2 * X[:, 0] - X[:, 1] + np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(n)
        solver = make_solver(solver_name, GaussianProcessRegressor(
            kernel, solver=solver_name).get_params())
        draws = solver.draw(np.random.RandomState(0))
        objectives = {f"{spec or 'none'}/{method or '-'}": solver.objective(
            make_covariance(kernel, X), y, np.full(n, 1e-10), draws,
            mean=mean_term(spec, method, X)) for spec, method in WAYS}
        for objective in objectives.values():
            objective(kernel.theta)
        times = {key: [] for key in objectives}
        for _ in range(args.repeats):
            for key, objective in objectives.items():
                start = time.perf_counter()
                objective(kernel.theta + 0.01)
                times[key].append(time.perf_counter() - start)
        result[solver_name] = {"n": n, **{key: float(np.median(v)) for key, v in times.items()}}
        print(f"{solver_name:9s} N = {n:6,}: " + ", ".join(
            f"{key} {float(np.median(v)):.3f} s" for key, v in times.items()), flush=True)
    write_json(REPO_ROOT / "bench" / "results" / "mean-cost.json",
               {"command": "python -m bench.bench_mean_cost " + " ".join(
                   sys.argv[1:] if argv is None else argv),
                "environment": environment(), "repeats": args.repeats, "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""With a linear trend estimated with the covariance, which likelihood estimates the covariance's parameters with less bias: the profile or the restricted (REML)?

    python -m bench.bench_mean                         # 100 replicates, N = 200
    python -m bench.bench_mean --replicates 20 --n 100 # a quick look

The question behind ``mean_method``'s default (docs/design.md, "A mean
estimated with the covariance"). Each replicate draws N points uniform on
[0, 1]^2 and a field with a linear trend,

    y = 1 + 2 x_1 - x_2 + f(x) + e,   f ~ GP(0, s^2 Matern(range r, nu = 1.5)),
    e ~ N(0, t^2),   s^2 = 1, r = 0.2, t^2 = 0.05,

drawn exactly (a Cholesky factor of the covariance on the training and 50
held-out points together), and fits ``C * Matern(nu=1.5) + WhiteKernel``
from a start away from the truth (s^2 = 0.5, r = 0.5, t^2 = 0.2) three
ways: ``mean="linear"`` with ``mean_method="profile"`` and ``"reml"``, and
the oracle, the true trend subtracted and ``mean=None`` (maximum likelihood
with the mean known: the bias that is the covariance's own at this N, not
the mean's). For each way the table gives the mean and median of s^2, r and
t^2 over the replicates, the mean of log(s^2 / 1) (the variance's bias on
the log scale), the RMSE of the held-out predictions, the 95 % intervals'
coverage there and the mean CRPS (the held-out targets include the noise).
Run on a quiet machine it takes some tens of seconds.

Writes bench/results/mean-method.json.
"""

import argparse
import math
import sys
import time
import warnings

import numpy as np

from ._measure import REPO_ROOT, environment, write_json

TRUTH = {"variance": 1.0, "range": 0.2, "noise": 0.05}
TREND = np.array([1.0, 2.0, -1.0])
N_HELD_OUT = 50
WAYS = ("profile", "reml", "oracle")


def replicate(n, seed):
    """(X (n, 2), y (n,), X_held (50, 2), y_held (50,), trend (n,)) of one
    replicate (module docstring)."""
    from sklearn.gaussian_process.kernels import Matern

    rng = np.random.default_rng(seed)
    X_all = rng.uniform(0.0, 1.0, size=(n + N_HELD_OUT, 2))
    K = TRUTH["variance"] * Matern(TRUTH["range"], nu=1.5)(X_all)
    field = np.linalg.cholesky(K + 1e-10 * np.eye(len(K))) @ rng.standard_normal(len(K))
    trend = np.column_stack([np.ones(len(X_all)), X_all]) @ TREND
    y_all = trend + field + math.sqrt(TRUTH["noise"]) * rng.standard_normal(len(K))
    return X_all[:n], y_all[:n], X_all[n:], y_all[n:], trend


def crps(mean, std, truth):
    """The continuous ranked probability score of Gaussian predictions."""
    from scipy.stats import norm

    z = (truth - mean) / std
    return std * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))


def fit_one(way, X, y, X_held, y_held, trend, n):
    """The fitted parameters and held-out scores of one way (module
    docstring) on one replicate."""
    from sklearn.gaussian_process.kernels import Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from fastgp import GaussianProcessRegressor

    kernel = (C(0.5, (1e-3, 1e3)) * Matern(0.5, (1e-3, 1e2), nu=1.5)
              + WhiteKernel(0.2, (1e-4, 1e1)))
    if way == "oracle":
        gpr = GaussianProcessRegressor(kernel, random_state=0).fit(X, y - trend[:n])
        shift = trend[n:]
    else:
        gpr = GaussianProcessRegressor(kernel, mean="linear", mean_method=way,
                                       random_state=0).fit(X, y)
        shift = 0.0
    mean, std = gpr.predict(X_held, return_std=True)
    mean = mean + shift
    params = gpr.kernel_.get_params()
    return {"variance": float(params["k1__k1__constant_value"]),
            "range": float(params["k1__k2__length_scale"]),
            "noise": float(params["k2__noise_level"]),
            "rmse": float(np.sqrt(np.mean((mean - y_held) ** 2))),
            "coverage": float(np.mean(np.abs(y_held - mean) <= 1.959963984540054 * std)),
            "crps": float(np.mean(crps(mean, std, y_held)))}


def summary(rows):
    """Means and medians over the replicates of one way."""
    out = {}
    for key in ("variance", "range", "noise"):
        values = np.array([r[key] for r in rows])
        out[key] = {"mean": float(values.mean()), "median": float(np.median(values)),
                    "mean_log_ratio": float(np.mean(np.log(values / TRUTH[key])))}
    for key in ("rmse", "coverage", "crps"):
        out[key] = float(np.mean([r[key] for r in rows]))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mean",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="training points per replicate")
    parser.add_argument("--replicates", type=int, default=100)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    fit_one("reml", *replicate(30, 0)[:4], replicate(30, 0)[4], 30)  # compile first
    rows = {way: [] for way in WAYS}
    start = time.perf_counter()
    for seed in range(args.replicates):
        data = replicate(args.n, seed)
        for way in WAYS:
            rows[way].append(fit_one(way, *data, args.n))
    seconds = time.perf_counter() - start
    result = {way: summary(rows[way]) for way in WAYS}
    print(f"{args.replicates} replicates, N = {args.n} (+{N_HELD_OUT} held out), "
          f"truth s^2 = {TRUTH['variance']}, r = {TRUTH['range']}, t^2 = {TRUTH['noise']}; "
          f"{seconds:.1f} s")
    print(f"{'way':8s} {'s^2 mean':>9s} {'median':>7s} {'E log':>7s} {'r mean':>7s} "
          f"{'median':>7s} {'E log':>7s} {'t^2 mean':>9s} {'E log':>7s} {'RMSE':>7s} "
          f"{'cover':>6s} {'CRPS':>7s}")
    for way in WAYS:
        s = result[way]
        v, r, t = s["variance"], s["range"], s["noise"]
        print(f"{way:8s} {v['mean']:9.3f} {v['median']:7.3f} {v['mean_log_ratio']:+7.3f} "
              f"{r['mean']:7.3f} {r['median']:7.3f} {r['mean_log_ratio']:+7.3f} "
              f"{t['mean']:9.4f} {t['mean_log_ratio']:+7.3f} {s['rmse']:7.4f} "
              f"{s['coverage']:6.3f} {s['crps']:7.4f}")
    write_json(REPO_ROOT / "bench" / "results" / "mean-method.json",
               {"command": "python -m bench.bench_mean " + " ".join(
                   sys.argv[1:] if argv is None else argv),
                "truth": TRUTH, "trend": TREND.tolist(), "n": args.n,
                "replicates": args.replicates, "seconds": seconds,
                "environment": environment(), "result": result,
                "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast and how accurate is Vecchia's approximation (solver="vecchia"),
against the exact GP, against GPBoost's Vecchia, and on Heaton et al.'s
competition data?

    python -m bench.bench_vecchia --case scale --n 1000000
    python -m bench.bench_vecchia --case scale --problem ard10 --n 100000
    python -m bench.bench_vecchia --case accuracy --problem matern2d --n 10000
    python -m bench.bench_vecchia --case accuracy --problem ard10 --n 10000
    python -m bench.bench_vecchia --case prediction --ms 30 --ms-predict 30,60,120,240
    python -m bench.bench_vecchia --case memory --sizes 100000,1000000
    python -m bench.bench_vecchia --case memory --sizes 100000 --optimise
    python -m bench.bench_vecchia --case crossover --sizes 1000,2000,4000,8000
    python -m bench.bench_vecchia --case gpboost --sizes 100000,1000000
    python -m bench.bench_vecchia --case heaton
    python -m bench.bench_vecchia --case gpboost-mean --problem heaton --nu 0.5 \
        --m 20 --gpboost-python venv-gpboost/bin/python
    python -m bench.bench_vecchia --case gpboost-mean --problem trend2d --n 100000 \
        --nu 1.5 --gpboost-python venv-gpboost/bin/python
    python -m bench.bench_vecchia --case predict-neighbours --problem heaton \
        --ms-predict 30,60,140
    python -m bench.bench_vecchia --case predict-neighbours --problem trend2d --n 100000
    python -m bench.bench_vecchia --case predict-neighbours --problem ard8 --n 100000

Every fit or evaluation runs in its own fresh process (its peak resident
memory is the process's), after a warm-up fit that compiles Numba's routines
(timed apart). The problems:

- ``matern2d``: x uniform on [0, 1]^2; y a draw of a GP with kernel
  1.0 * Matern(0.1, nu=1.5) (4,000 random Fourier features, Rahimi & Recht
  2007: frequencies from the Matern's spectral density, a Student t with 3
  degrees of freedom) plus noise of variance 0.01; fitted with
  C(1) * Matern(0.1, nu=1.5) + WhiteKernel(0.01);
- ``ard10``: bench/_problems.py's 10-D problem (noise variance 1e-4), fitted
  with C * RBF(ten length scales) + WhiteKernel, all started at 1.

Cases:

- ``scale``: one fit at N with the default neighbours: the time of each
  stage (ordering, neighbour search, relabelling, one loss+gradient, the whole
  fit, predicting 10,000 new points with their standard deviation) and the
  fit's peak resident memory;
- ``accuracy``: the exact (Cholesky) fit at N, cached in bench/results, and
  Vecchia fits for each m of ``--ms``: the exact log marginal likelihood at
  Vecchia's hyperparameters against the exact optimum, Vecchia's own value
  there against the exact value (the approximation's error), and on 2,000
  held-out points the RMSE, the mean predictive standard deviation and the
  95 % interval's coverage beside the exact GP's;
- ``prediction``: at the exact optimum, Vecchia's value for each m of
  ``--ms`` and the held-out scores for each ``n_neighbors_predict`` of
  ``--ms-predict`` (whether more prediction neighbours than fit neighbours
  pay);
- ``memory``: the peak resident memory of a fit without optimisation (its
  largest arrays: the layout, the passes, the final model; ``--optimise``:
  with it, whose evaluations add only the optimiser's vectors) beside
  ``fastgp.memory.vecchia_fit_bytes``, one fresh process per N;
- ``crossover``: one loss+gradient of each solver at each N (the figures
  behind ``solver="auto"``'s switch);
- ``gpboost``: fastgp's Vecchia fit and prediction against GPBoost's
  (``GPModel(gp_approx="vecchia")``, the same Matern 1.5 kernel with a
  nugget, the same number of neighbours, random orderings for both as
  GPBoost's default, two threads) on ``matern2d``, scored on 10,000 held-out
  points (RMSE and CRPS); GPBoost runs under ``--gpboost-python``, the
  interpreter of an environment of its own (``python -m venv venv-gpboost &&
  venv-gpboost/bin/pip install gpboost scipy``; its side needs numpy and
  gpboost only), or this one's;
- ``gpboost-mean``: a mean estimated with the covariance, against GPBoost's
  fixed effects: fastgp's ``mean="linear"`` (``--mean-method``, default
  "profile": the likelihood GPBoost maximises) and GPBoost's
  ``GPModel(gp_approx="vecchia")`` fitted with the design [1, x_1, x_2] as
  fixed effects, the same Matern (``--nu``: 0.5 is the exponential) with a
  nugget, the same neighbours (``--m``), two threads; on ``--problem
  heaton`` (the simulated temperatures; ``--n`` a random subset of its
  training cells and of at most 10,000 held-out cells, 0 or none: all) or
  ``trend2d`` (``matern2d``'s field plus the trend 1 + 2 x_1 - x_2, 10,000
  held-out points). Each library fits once per random ordering
  (``--seeds``: a random ordering is one draw of the approximation, and the
  coefficients move with it by about their standard error), fastgp once
  more on its default maxmin ordering; each fit's coefficients with their
  standard errors, covariance estimates, log-likelihood, held-out RMSE,
  CRPS and coverage, and fit time; fastgp's likelihood and coefficients at
  GPBoost's covariance estimates of the same seed; the means over the
  random orderings;
- ``predict-neighbours``: one fastgp Vecchia fit (``--m``, with
  ``mean="linear"`` on ``heaton`` and ``trend2d``) on ``heaton``,
  ``trend2d`` or ``ard8`` (``ard10``'s function of 8 inputs), then the
  held-out scores and the prediction's time for each
  ``n_neighbors_predict`` of ``--ms-predict`` (the figures behind that
  parameter's default; Katzfuss, Guinness & Lawrence 2022 predict on 140
  after fitting on 30);
- ``heaton``: Heaton et al.'s (2019) simulated temperatures
  (:func:`fastgp.datasets.load_heaton_temperatures`): the
  linear trend in (lon, lat) by least squares, then C * Matern(nu) +
  WhiteKernel on its residuals by Vecchia's approximation, the held-out cells
  predicted; MAE, RMSE, CRPS, the 95 % interval score and coverage, with the
  times, beside the competition's published RMSEs.

Results go to bench/results/vecchia-<case>.json (and the exact fits'
cache); the printed lines are the tables of docs/benchmarks.md.
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np

from ._measure import REPO_ROOT, PeakMemory, environment, run_in_subprocess, write_json

RESULTS = REPO_ROOT / "bench" / "results"
#: Published RMSEs on the simulated set (Heaton et al. 2019, Table 3).
HEATON_PUBLISHED = {"SPDE": 0.86, "LatticeKrig": 0.87, "periodic embedding": 0.91,
                    "Gapfill": 1.00, "laGP": 1.11, "predictive process": 1.43,
                    "linear trend alone": 1.87}
N_QUERY = 10_000
N_HELD_OUT = 2_000
#: Threads of each library in the GPBoost comparison.
GPBOOST_THREADS = 2
#: What sets a child's thread counts (``_run``'s ``threads``).
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")


# ------------------------------------------------------------------- data
def matern2d(n, seed=0, n_features=4000, length_scale=0.1, noise=0.01):
    """X uniform on [0, 1]^2 (n, 2) and y (n,): a random-Fourier-feature draw
    of a GP with kernel Matern(length_scale, nu=1.5) plus noise of variance
    ``noise`` (module docstring). The same seed gives the same function for
    every n, so held-out points are draws of the same field."""
    field = np.random.default_rng(seed)
    # Matern nu's spectral density: a multivariate Student t with 2 nu degrees
    # of freedom and scale 1 / length_scale (Rasmussen & Williams 2006, eq. 4.15)
    dof = 3.0
    g = field.standard_normal((n_features, 2))
    chi = field.chisquare(dof, size=(n_features, 1))
    omega = g / np.sqrt(chi / dof) / length_scale
    phase = field.uniform(0.0, 2 * np.pi, n_features)
    weights = field.standard_normal(n_features) * math.sqrt(2.0 / n_features)
    points = np.random.default_rng(seed + 1 + n)
    X = points.uniform(0.0, 1.0, size=(n, 2))
    y = np.empty(n)
    for start in range(0, n, 2_000):  # (2,000, n_features) blocks: 64 MB
        stop = min(n, start + 2_000)
        y[start:stop] = np.cos(X[start:stop] @ omega.T + phase) @ weights
    return X, y + math.sqrt(noise) * points.standard_normal(n)


def trend2d(n, seed=0):
    """``matern2d``'s field plus the linear trend 1 + 2 x_1 - x_2 (the same
    field and trend for every n, as matern2d's)."""
    X, y = matern2d(n, seed)
    return X, y + 1.0 + 2.0 * X[:, 0] - X[:, 1]


def mean_problem(name, n):
    """(X, y, X_test, y_test) of the ``gpboost-mean`` and
    ``predict-neighbours`` cases (module docstring): ``heaton``'s training
    and held-out cells (a random subset of n training cells and of at most
    N_QUERY held-out ones where n > 0), ``trend2d``, or ``ard8``."""
    if name == "heaton":
        from fastgp.datasets import load_heaton_temperatures

        X, y, truth = load_heaton_temperatures()
        train, test = np.flatnonzero(~np.isnan(y)), np.flatnonzero(np.isnan(y))
        if n:
            pick = np.random.default_rng(0)
            train = np.sort(pick.choice(train, size=min(n, train.size), replace=False))
            test = np.sort(pick.choice(test, size=min(N_QUERY, test.size), replace=False))
        return X[train], y[train], X[test], truth[test]
    if name == "trend2d":
        X, y = trend2d(n)
        Xq, yq = trend2d(N_QUERY, seed=0)  # the same field, other points
        return X, y, Xq, yq
    if name == "ard8":
        from ._problems import ard_10d

        X, y = ard_10d(n, d=8)
        Xq, yq = ard_10d(N_HELD_OUT, seed=12345, d=8)
        return X, y, Xq, yq
    raise ValueError(f"unknown problem {name!r}")


def mean_kernel(nu, n_features=2):
    """C * Matern(nu) + WhiteKernel started at the problems' scale."""
    from sklearn.gaussian_process.kernels import Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    scales = 1.0 if n_features == 2 else np.ones(n_features)
    return (C(1.0, (1e-4, 1e4)) * Matern(scales, (1e-3, 1e3), nu=nu)
            + WhiteKernel(0.1, (1e-6, 10.0)))


def problem_data(name, n, seed=0):
    """(X, y, kernel) of a problem (module docstring)."""
    from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    if name == "matern2d":
        X, y = matern2d(n, seed)
        return X, y, C(1.0) * Matern(0.1, nu=1.5) + WhiteKernel(0.01)
    if name == "ard10":
        from ._problems import ard_10d

        X, y = ard_10d(n, seed)
        return X, y, C(1.0) * RBF(np.ones(10)) + WhiteKernel(1.0)
    raise ValueError(f"unknown problem {name!r}")


def held_out(name, n):
    """Held-out points of the same field (other inputs, the same function)."""
    if name == "matern2d":
        X, y = matern2d(N_HELD_OUT, seed=0)  # the field's seed; its own points
        return X, y
    from ._problems import ard_10d

    X, y = ard_10d(N_HELD_OUT, seed=12345)
    return X, y


def scores(mean, std, truth):
    """The competition's scores (../shared/data/README.md) of predictions."""
    from scipy.stats import norm

    z = (truth - mean) / std
    crps = std * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))
    h = 1.959963984540054 * std
    interval = (2 * h + 40 * (mean - h - truth) * (truth < mean - h)
                + 40 * (truth - mean - h) * (truth > mean + h))
    return {"MAE": float(np.mean(np.abs(mean - truth))),
            "RMSE": float(np.sqrt(np.mean((mean - truth) ** 2))),
            "CRPS": float(np.mean(crps)), "interval_score": float(np.mean(interval)),
            "coverage": float(np.mean(np.abs(truth - mean) <= h))}


# ---------------------------------------------------------------- children
def _quiet():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", UserWarning)


def _warm_up(solver="vecchia"):
    """Compile fastgp's routines for the problems' kernels (timed apart)."""
    from fastgp import GaussianProcessRegressor

    start = time.perf_counter()
    for name in ("matern2d", "ard10"):
        X, y, kernel = problem_data(name, 300)
        GaussianProcessRegressor(kernel, solver=solver, random_state=0).fit(X, y).predict(
            X[:5], return_std=True)
    return time.perf_counter() - start


def child_scale(spec):
    """One fit at N: each stage's time (module docstring, ``scale``)."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    warm = _warm_up()
    X, y, kernel = problem_data(spec["problem"], spec["n"])
    gpr = GaussianProcessRegressor(kernel, solver="vecchia", random_state=0,
                                   n_neighbors=spec["m"])
    with PeakMemory() as memory:
        start = time.perf_counter()
        gpr.fit(X, y)
        fit_s = time.perf_counter() - start
    # one layout at the fit's last length scales (a fit does not keep its own),
    # each stage timed, and loss+gradient at the optimum on it
    from fastgp._backend.covariance import make_covariance

    start = time.perf_counter()
    objective = gpr._fitted_solver.objective(
        make_covariance(gpr.kernel_, X), y[:, None], gpr._fitted_diag_add,
        gpr._fitted_draws)
    layout_s = time.perf_counter() - start
    theta = gpr.kernel_.theta
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        objective(theta)
        times.append(time.perf_counter() - t0)
    Xq = np.random.default_rng(7).uniform(X.min(0), X.max(0), size=(N_QUERY, X.shape[1]))
    t0 = time.perf_counter()
    gpr.predict(Xq, return_std=True)
    predict_s = time.perf_counter() - t0
    return {"fit_s": fit_s, "loss_grad_s": min(times), "loss_grad_times_s": times,
            "layout_s": layout_s, **{f"{k}_s": v for k, v in objective.timings.items()},
            "predict_s": predict_s, "n_query": N_QUERY, "warm_up_s": warm,
            "fit_peak_bytes": memory.peak_bytes, "fit_delta_bytes": memory.delta_bytes,
            "n_iter": int(gpr.n_iter_), "n_evaluations": int(gpr.n_evaluations_),
            "lml": float(gpr.log_marginal_likelihood_value_), "kernel": str(gpr.kernel_)}


def child_memory(spec):
    """The peak resident memory of one fit, without optimisation unless
    ``spec["optimise"]`` (the layout, the passes, the final model: the
    fit's largest arrays), beside fastgp.memory.vecchia_fit_bytes."""
    from fastgp import GaussianProcessRegressor
    from fastgp.memory import vecchia_fit_bytes

    _quiet()
    _warm_up()
    X, y, kernel = problem_data(spec["problem"], spec["n"])
    gpr = GaussianProcessRegressor(kernel, solver="vecchia", random_state=0,
                                   n_neighbors=spec["m"],
                                   optimizer="fmin_l_bfgs_b" if spec.get("optimise") else None)
    with PeakMemory() as memory:
        gpr.fit(X, y)
    return {"fit_delta_bytes": memory.delta_bytes, "fit_peak_bytes": memory.peak_bytes,
            "n_evaluations": int(gpr.n_evaluations_),
            "estimate_bytes": vecchia_fit_bytes(X.shape[0], X.shape[1], 1, spec["m"]),
            "method": memory.method}


def child_exact(spec):
    """The exact (Cholesky) fit of a problem: theta, value, held-out scores."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    X, y, kernel = problem_data(spec["problem"], spec["n"])
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(kernel, solver="cholesky", random_state=0).fit(X, y)
    fit_s = time.perf_counter() - start
    Xh, yh = held_out(spec["problem"], spec["n"])
    mean, std = gpr.predict(Xh, return_std=True)
    return {"theta": gpr.kernel_.theta.tolist(), "lml": float(gpr.log_marginal_likelihood_value_),
            "kernel": str(gpr.kernel_), "fit_s": fit_s, "n_iter": int(gpr.n_iter_),
            "scores": scores(mean, std, yh), "mean_std": float(np.mean(std))}


def child_accuracy(spec):
    """Vecchia fits at each m, scored by the exact likelihood (module docstring)."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    _warm_up()
    X, y, kernel = problem_data(spec["problem"], spec["n"])
    exact = GaussianProcessRegressor(kernel, solver="cholesky", optimizer=None)
    Xh, yh = held_out(spec["problem"], spec["n"])
    rows = []
    for m in spec["ms"]:
        start = time.perf_counter()
        gpr = GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=m,
                                       random_state=0).fit(X, y)
        fit_s = time.perf_counter() - start
        theta = gpr.kernel_.theta
        at = exact.set_params(kernel=gpr.kernel_).fit(X, y)
        mean, std = gpr.predict(Xh, return_std=True)
        rows.append({"m": m, "fit_s": fit_s, "n_evaluations": int(gpr.n_evaluations_),
                     "theta": theta.tolist(), "kernel": str(gpr.kernel_),
                     "vecchia_lml": float(gpr.log_marginal_likelihood_value_),
                     "exact_lml_at_vecchia_theta": float(at.log_marginal_likelihood_value_),
                     "scores": scores(mean, std, yh), "mean_std": float(np.mean(std))})
    return {"rows": rows}


def child_prediction(spec):
    """At the exact optimum: Vecchia's value for each m of ``ms`` and the
    held-out scores for each prediction neighbourhood of ``ms_predict``."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    _warm_up()
    X, y, kernel = problem_data(spec["problem"], spec["n"])
    kernel = kernel.clone_with_theta(np.asarray(spec["theta"]))
    Xh, yh = held_out(spec["problem"], spec["n"])
    rows = []
    for m in spec["ms"]:
        gpr = GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=m,
                                       optimizer=None, random_state=0).fit(X, y)
        row = {"m": m, "vecchia_lml": float(gpr.log_marginal_likelihood_value_),
               "predictions": []}
        for m_predict in spec["ms_predict"]:
            gpr.set_params(n_neighbors_predict=m_predict)
            start = time.perf_counter()
            mean, std = gpr.predict(Xh, return_std=True)
            row["predictions"].append({"m_predict": m_predict,
                                       "predict_s": time.perf_counter() - start,
                                       "scores": scores(mean, std, yh),
                                       "mean_std": float(np.mean(std))})
        rows.append(row)
    return {"rows": rows}


def child_crossover(spec):
    """One loss+gradient of each solver at N (the median of a few)."""
    from fastgp._backend.covariance import make_covariance
    from fastgp._engine.threads import threads_for
    from fastgp._solvers.base import Draws
    from fastgp._solvers.choice import make_solver
    from fastgp import GaussianProcessRegressor

    _quiet()
    _warm_up("cholesky")
    _warm_up("vecchia")
    n = spec["n"]
    X, y, kernel = problem_data("matern2d", n)
    out = {}
    for name in ("cholesky", "vecchia"):
        solver = make_solver(name, GaussianProcessRegressor(solver=name).get_params())
        objective = solver.objective(make_covariance(kernel, X), y[:, None],
                                     np.full(n, 1e-10), Draws(seed=0))
        with threads_for(n) as governor:
            governor.evaluate(objective, kernel.theta)
            times = []
            for _ in range(spec["repeats"]):
                start = time.perf_counter()
                governor.evaluate(objective, kernel.theta)
                times.append(time.perf_counter() - start)
        out[name] = {"median_s": float(np.median(times)), "times_s": times}
    return out


def child_gpboost_fastgp(spec):
    """fastgp's side of the GPBoost comparison: fit, predict, scores."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    _warm_up()
    X, y, kernel = problem_data("matern2d", spec["n"])
    Xq, yq = matern2d(N_QUERY, seed=0)
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=spec["m"],
                                   ordering=spec["ordering"], random_state=0).fit(X, y)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    mean, std = gpr.predict(Xq, return_std=True)
    return {"fit_s": fit_s, "predict_s": time.perf_counter() - start,
            "scores": scores(mean, std, yq), "kernel": str(gpr.kernel_),
            "n_evaluations": int(gpr.n_evaluations_)}


def child_gpboost(spec):
    """GPBoost's side: GPModel(gp_approx="vecchia"), Matern 1.5 and a nugget."""
    import gpboost

    X, y, _ = problem_data("matern2d", spec["n"])
    Xq, yq = matern2d(N_QUERY, seed=0)
    start = time.perf_counter()
    model = gpboost.GPModel(gp_coords=X, cov_function="matern", cov_fct_shape=1.5,
                            likelihood="gaussian", gp_approx="vecchia",
                            num_neighbors=spec["m"], vecchia_ordering="random",
                            num_parallel_threads=spec.get("threads", GPBOOST_THREADS),
                            seed=0)
    model.fit(y=y)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    pred = model.predict(gp_coords_pred=Xq, predict_var=True, predict_response=True)
    predict_s = time.perf_counter() - start
    mean, var = np.asarray(pred["mu"]), np.asarray(pred["var"])
    return {"fit_s": fit_s, "predict_s": predict_s, "scores": scores(mean, np.sqrt(var), yq),
            "cov_pars": np.asarray(model.get_cov_pars()).ravel().tolist(),
            "version": gpboost.__version__}


def child_heaton(spec):
    """The competition's simulated data (module docstring, ``heaton``)."""
    from sklearn.gaussian_process.kernels import Matern, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from fastgp import GaussianProcessRegressor
    from fastgp.datasets import load_heaton_temperatures

    _quiet()
    _warm_up()
    X, y, truth = load_heaton_temperatures()
    train = ~np.isnan(y)
    start = time.perf_counter()
    design = np.column_stack([np.ones(len(X)), X])
    coef, *_ = np.linalg.lstsq(design[train], y[train], rcond=None)
    trend = design @ coef
    kernel = (C(10.0) * Matern(1.0, nu=spec["nu"], length_scale_bounds=(1e-3, 1e3))
              + WhiteKernel(0.1, noise_level_bounds=(1e-4, 10.0)))
    gpr = GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=spec["m"],
                                   n_neighbors_predict=spec["m_predict"], random_state=0)
    gpr.fit(X[train], y[train] - trend[train])
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    mean, std = gpr.predict(X[~train], return_std=True)
    predict_s = time.perf_counter() - start
    return {"fit_s": fit_s, "predict_s": predict_s, "n_train": int(train.sum()),
            "n_test": int((~train).sum()), "kernel": str(gpr.kernel_),
            "trend": coef.tolist(), "n_evaluations": int(gpr.n_evaluations_),
            "scores": scores(mean + trend[~train], std, truth[~train]),
            "trend_only": scores(trend[~train], np.full((~train).sum(), np.std(y[train])),
                                 truth[~train])}


def _load_problem(path):
    """(X, y, X_test, y_test) as :func:`case_gpboost_mean` wrote them (GPBoost's
    environment has NumPy, not fastgp)."""
    with np.load(path) as data:
        return data["X"], data["y"], data["X_test"], data["y_test"]


def child_mean_fastgp(spec):
    """fastgp's side of ``gpboost-mean``: mean="linear" with the covariance,
    one fit per random ordering (``spec["seeds"]``) and one on fastgp's
    default ordering (maxmin). Where ``spec["gpboost_cov_pars"]`` holds
    GPBoost's estimates (one per seed), each random-ordering fit also
    reports its likelihood at them and its coefficients there (the
    covariance held at GPBoost's, fastgp's ordering): what separates a
    difference of the optimum from one of the approximation."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    _warm_up()
    X, y, Xq, yq = _load_problem(spec["data"])
    theirs = spec.get("gpboost_cov_pars") or [None] * len(spec["seeds"])
    fits = []
    for ordering, seed, cov_pars in ([("random", s, c) for s, c in zip(spec["seeds"], theirs)]
                                     + [("maxmin", 0, None)]):
        def fitted(kernel, **options):
            return GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=spec["m"],
                                            ordering=ordering, mean="linear",
                                            mean_method=spec["method"], random_state=seed,
                                            **options).fit(X, y)

        start = time.perf_counter()
        gpr = fitted(mean_kernel(spec["nu"]))
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        mean, std = gpr.predict(Xq, return_std=True)
        row = {"ordering": ordering, "seed": seed, "fit_s": fit_s,
               "predict_s": time.perf_counter() - start,
               "scores": scores(mean, std, yq), "kernel": str(gpr.kernel_),
               "cov_pars": _cov_pars(gpr.kernel_),
               "log_likelihood": float(gpr.log_marginal_likelihood_value_),
               "coef": gpr.mean_coef_.tolist(),
               "coef_se": np.sqrt(np.diagonal(gpr.mean_coef_cov_)).tolist(),
               "n_evaluations": int(gpr.n_evaluations_)}
        if cov_pars is not None:  # GPBoost's [nugget, variance, range]
            nugget, variance, scale = cov_pars
            at_theirs = fitted(gpr.kernel_.clone_with_theta(np.log([variance, scale, nugget])),
                               optimizer=None)
            row["at_gpboost"] = {"log_likelihood": float(
                at_theirs.log_marginal_likelihood_value_), "coef": at_theirs.mean_coef_.tolist()}
        fits.append(row)
    return {"fits": fits, "n_train": len(y), "n_test": len(yq)}


def _cov_pars(kernel):
    """GPBoost's [nugget, variance, range] of C * Matern + WhiteKernel."""
    variance, scale, nugget = np.exp(kernel.theta)
    return [float(nugget), float(variance), float(scale)]


def child_mean_gpboost(spec):
    """GPBoost's side of ``gpboost-mean``: the design [1, x] as fixed
    effects, the same Matern with a nugget on Vecchia's approximation, one
    fit per random ordering (GPBoost's ``seed``, ``spec["seeds"]``)."""
    import gpboost

    X, y, Xq, yq = _load_problem(spec["data"])
    design = np.column_stack([np.ones(len(X)), X])
    fits = []
    for seed in spec["seeds"]:
        start = time.perf_counter()
        model = gpboost.GPModel(gp_coords=X, cov_function="matern", cov_fct_shape=spec["nu"],
                                likelihood="gaussian", gp_approx="vecchia",
                                num_neighbors=spec["m"], vecchia_ordering="random",
                                num_parallel_threads=spec.get("threads", GPBOOST_THREADS),
                                seed=seed)
        model.fit(y=y, X=design)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        pred = model.predict(gp_coords_pred=Xq, X_pred=np.column_stack([np.ones(len(Xq)), Xq]),
                             predict_var=True, predict_response=True)
        predict_s = time.perf_counter() - start
        mean, var = np.asarray(pred["mu"]), np.asarray(pred["var"])
        coef = np.asarray(model.get_coef(std_err=True), dtype=float).reshape(-1, design.shape[1])
        fits.append({"ordering": "random", "seed": seed, "fit_s": fit_s, "predict_s": predict_s,
                     "scores": scores(mean, np.sqrt(var), yq),
                     "coef": coef[0].tolist(),
                     "coef_se": coef[1].tolist() if len(coef) > 1 else None,
                     "cov_pars": np.asarray(model.get_cov_pars(std_err=False),
                                            dtype=float).ravel().tolist(),
                     "log_likelihood": -float(model.get_current_neg_log_likelihood())})
    return {"fits": fits, "version": gpboost.__version__}


def child_predict_neighbours(spec):
    """One Vecchia fit, then the held-out scores for each
    ``n_neighbors_predict`` (module docstring, ``predict-neighbours``)."""
    from fastgp import GaussianProcessRegressor

    _quiet()
    _warm_up()
    X, y, Xq, yq = mean_problem(spec["problem"], spec["n"])
    mean = None if spec["problem"] == "ard8" else "linear"
    if mean:
        kernel = mean_kernel(spec["nu"])
    else:  # ard10's kernel on 8 inputs: C * RBF(8 length scales) + WhiteKernel
        from sklearn.gaussian_process.kernels import RBF, WhiteKernel
        from sklearn.gaussian_process.kernels import ConstantKernel as C

        kernel = C(1.0) * RBF(np.ones(X.shape[1])) + WhiteKernel(1.0)
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(kernel, solver="vecchia", n_neighbors=spec["m"],
                                   mean=mean, random_state=0).fit(X, y)
    rows = [{"fit_s": time.perf_counter() - start, "kernel": str(gpr.kernel_)}]
    for m_predict in spec["ms_predict"]:
        # predictions read the fitted solver (a parameter set after the fit
        # changes nothing): its neighbours per query point, set here
        gpr._fitted_solver.n_neighbors_predict = int(m_predict)
        start = time.perf_counter()
        pred_mean, std = gpr.predict(Xq, return_std=True)
        rows.append({"m_predict": m_predict, "predict_s": time.perf_counter() - start,
                     "scores": scores(pred_mean, std, yq)})
    return {"rows": rows, "n_train": len(y), "n_test": len(yq)}


CHILDREN = {"scale": child_scale, "exact": child_exact, "accuracy": child_accuracy,
            "prediction": child_prediction, "memory": child_memory,
            "crossover": child_crossover, "gpboost-fastgp": child_gpboost_fastgp,
            "gpboost": child_gpboost, "heaton": child_heaton,
            "mean-fastgp": child_mean_fastgp, "mean-gpboost": child_mean_gpboost,
            "predict-neighbours": child_predict_neighbours}


# ------------------------------------------------------------------ parent
def _run(kind, timeout_s=7200, python=None, threads=None, **spec):
    """One child (``kind`` of CHILDREN) in a fresh process; ``threads``: the
    child's thread count (Numba's, OpenMP's and OpenBLAS's; GPBoost's own in
    spec), else the machine's default."""
    env = None
    if threads is not None:
        spec["threads"] = int(threads)
        env = dict(os.environ, **{name: str(int(threads)) for name in THREAD_VARIABLES})
    result = run_in_subprocess("bench.bench_vecchia", dict(spec, kind=kind),
                               timeout_s=timeout_s, python=python, env=env)
    if result.get("status") != "ok":
        print(f"  {kind} {spec}: {result.get('status')}: {result.get('reason', '')}"[:400],
              flush=True)
    return result


def gpboost_unavailable(python=None):
    """None where ``python`` (default: this interpreter) can import gpboost,
    else why not (a short string): the comparison's skipped row."""
    python = python or sys.executable
    if not os.path.exists(python):
        return f"no Python interpreter at {python} (--gpboost-python)"
    check = "import importlib.util, sys; sys.exit(importlib.util.find_spec('gpboost') is None)"
    try:
        found = subprocess.run([python, "-c", check], capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python} did not run: {exc}"
    if found.returncode != 0:
        return ("gpboost is not installed there (python -m venv venv-gpboost && "
                "venv-gpboost/bin/pip install gpboost numpy scipy; then --gpboost-python "
                "venv-gpboost/bin/python)")
    return None


def gpboost_pair(n, m, ordering="random", threads=GPBOOST_THREADS, gpboost_python=None,
                 timeout_s=7200):
    """fastgp's and GPBoost's Vecchia fits of ``matern2d`` at N = ``n`` with m
    neighbours on ``threads`` threads, each in a fresh process on the same
    data (module docstring, ``gpboost``): {"n", "m", "threads", "n_query",
    "fastgp", "gpboost"}, the last two the children's results (GPBoost's
    marked skipped where ``gpboost_python`` has no gpboost)."""
    ours = _run("gpboost-fastgp", n=n, m=m, ordering=ordering, threads=threads,
                timeout_s=timeout_s)
    why_not = gpboost_unavailable(gpboost_python)
    theirs = (dict(status="skipped", reason=why_not) if why_not else
              _run("gpboost", n=n, m=m, threads=threads, python=gpboost_python,
                   timeout_s=timeout_s))
    return {"n": n, "m": m, "threads": threads, "n_query": N_QUERY, "fastgp": ours,
            "gpboost": theirs}


def _peak(result):
    """The fit's peak resident memory where measured, else the process's."""
    return result.get("fit_peak_bytes", result.get("peak_rss_bytes", 0)) / 1e9


def _exact_fit(problem, n):
    path = RESULTS / f"vecchia-exact-{problem}-{n}.json"
    if path.exists():
        return json.loads(path.read_text())
    result = _run("exact", problem=problem, n=n, timeout_s=4 * 3600)
    if result.get("status") == "ok":
        write_json(path, result)
    return result


def case_scale(args):
    rows = []
    for n in args.sizes:
        r = _run("scale", problem=args.problem, n=n, m=args.m)
        rows.append(r)
        if r.get("status") == "ok":
            print(f"{args.problem} N = {n:,}, m = {args.m}: ordering {r['ordering_s']:.1f} s, "
                  f"neighbours {r['neighbours_s']:.1f} s, relabelling {r['relabelling_s']:.1f} s, "
                  f"loss+gradient {r['loss_grad_s']:.2f} s, fit {r['fit_s']:.1f} s "
                  f"({r['n_evaluations']} evaluations), predict {N_QUERY:,} points "
                  f"{r['predict_s']:.2f} s, peak {_peak(r):.2f} GB; {r['kernel']}", flush=True)
    return rows


def case_accuracy(args):
    exact = _exact_fit(args.problem, args.sizes[0])
    if exact.get("status") != "ok":
        return {"exact": exact}
    print(f"{args.problem} N = {args.sizes[0]:,}: exact fit {exact['fit_s']:.0f} s, lml "
          f"{exact['lml']:.3f}, held-out RMSE {exact['scores']['RMSE']:.4f}, mean std "
          f"{exact['mean_std']:.4f}, coverage {exact['scores']['coverage']:.3f}", flush=True)
    result = _run("accuracy", problem=args.problem, n=args.sizes[0], ms=args.ms)
    for row in result.get("rows", []):
        s = row["scores"]
        print(f"  m = {row['m']:3d}: fit {row['fit_s']:6.1f} s; exact lml at its theta "
              f"{row['exact_lml_at_vecchia_theta'] - exact['lml']:+.3f} nats of the optimum; "
              f"Vecchia's value - exact there {row['vecchia_lml'] - row['exact_lml_at_vecchia_theta']:+.3f}; "
              f"RMSE {s['RMSE'] / exact['scores']['RMSE']:.4f} x exact, mean std "
              f"{row['mean_std'] / exact['mean_std']:.4f} x, coverage {s['coverage']:.3f}",
              flush=True)
    return {"exact": exact, "vecchia": result}


def case_prediction(args):
    exact = _exact_fit(args.problem, args.sizes[0])
    if exact.get("status") != "ok":
        return {"exact": exact}
    result = _run("prediction", problem=args.problem, n=args.sizes[0], ms=args.ms,
                  ms_predict=args.ms_predict, theta=exact["theta"])
    for row in result.get("rows", []):
        print(f"{args.problem} N = {args.sizes[0]:,} at the exact optimum, m = {row['m']}: "
              f"Vecchia's value - exact {row['vecchia_lml'] - exact['lml']:+.2f}", flush=True)
        for p in row["predictions"]:
            s = p["scores"]
            print(f"  predict on {p['m_predict']:4d}: RMSE {s['RMSE'] / exact['scores']['RMSE']:.4f}"
                  f" x exact, mean std {p['mean_std'] / exact['mean_std']:.4f} x, coverage "
                  f"{s['coverage']:.3f}, CRPS {s['CRPS']:.4f}, {N_HELD_OUT:,} points in "
                  f"{p['predict_s']:.2f} s", flush=True)
    return {"exact": exact, "vecchia": result}


def case_memory(args):
    rows = []
    for n in args.sizes:
        r = _run("memory", problem=args.problem, n=n, m=args.m, optimise=args.optimise)
        rows.append(dict(r, n=n))
        if r.get("status") == "ok":
            how = (f"with the optimiser, {r['n_evaluations']} evaluations" if args.optimise
                   else "no optimiser")
            print(f"{args.problem} N = {n:,}, m = {args.m}: fit ({how}) peak "
                  f"{r['fit_delta_bytes'] / 1e6:,.0f} MB above the process's, estimate "
                  f"{r['estimate_bytes'] / 1e6:,.0f} MB "
                  f"({r['estimate_bytes'] / max(r['fit_delta_bytes'], 1):.2f} x)", flush=True)
    return rows


def case_crossover(args):
    rows = []
    for n in args.sizes:
        r = _run("crossover", n=n, repeats=args.repeats)
        rows.append(dict(r, n=n))
        if r.get("status") == "ok":
            c, v = r["cholesky"]["median_s"], r["vecchia"]["median_s"]
            print(f"N = {n:6,}: loss+gradient cholesky {c:8.3f} s, vecchia (m = 30) "
                  f"{v:7.4f} s ({c / v:6.1f} x)", flush=True)
    return rows


def case_gpboost(args):
    rows = []
    for n in args.sizes:
        row = gpboost_pair(n, args.m, ordering=args.ordering,
                           gpboost_python=args.gpboost_python)
        rows.append(row)
        for name, r in (("fastgp", row["fastgp"]), ("GPBoost", row["gpboost"])):
            if r.get("status") == "ok":
                s = r["scores"]
                print(f"N = {n:,}, m = {args.m}, {name}: fit {r['fit_s']:.1f} s, predict "
                      f"{N_QUERY:,} {r['predict_s']:.2f} s, RMSE {s['RMSE']:.4f}, CRPS "
                      f"{s['CRPS']:.4f}, coverage {s['coverage']:.3f}, peak "
                      f"{_peak(r):.2f} GB", flush=True)
    return rows


def case_heaton(args):
    r = _run("heaton", m=args.m, m_predict=args.m_predict,
             nu=args.nu)
    if r.get("status") == "ok":
        s = r["scores"]
        print(f"Heaton simulated ({r['n_train']:,} train, {r['n_test']:,} held out), "
              f"Matern {args.nu}, m = {args.m}, predict on {args.m_predict}: fit "
              f"{r['fit_s']:.1f} s, predict {r['predict_s']:.1f} s; MAE {s['MAE']:.3f}, RMSE "
              f"{s['RMSE']:.3f}, CRPS {s['CRPS']:.3f}, interval score "
              f"{s['interval_score']:.3f}, coverage {s['coverage']:.3f}; {r['kernel']}",
              flush=True)
    return r


def case_gpboost_mean(args):
    n = args.sizes[0]
    # one copy of the data for both children, written here
    data = RESULTS / f"vecchia-gpboost-mean-{args.problem}-{n}.npz"
    data.parent.mkdir(parents=True, exist_ok=True)
    X, y, X_test, y_test = mean_problem(args.problem, n)
    np.savez(data, X=X, y=y, X_test=X_test, y_test=y_test)
    spec = dict(problem=args.problem, n=n, m=args.m, nu=args.nu, data=str(data),
                seeds=args.seeds)
    why_not = gpboost_unavailable(args.gpboost_python)
    theirs = (dict(status="skipped", reason=why_not) if why_not else
              _run("mean-gpboost", python=args.gpboost_python, threads=GPBOOST_THREADS,
                   **spec))
    if theirs.get("status") == "ok":
        spec["gpboost_cov_pars"] = [fit["cov_pars"] for fit in theirs["fits"]]
    else:
        print(f"GPBoost: {theirs.get('status')}: {theirs.get('reason', '')}", flush=True)
    ours = _run("mean-fastgp", method=args.mean_method, threads=GPBOOST_THREADS, **spec)
    print(f"{args.problem} N = {n or 'all'}, Matern {args.nu}, m = {args.m}:", flush=True)
    for name, r in (("fastgp", ours), ("GPBoost", theirs)):
        for fit in r.get("fits", []) if r.get("status") == "ok" else []:
            _print_mean_fit(name, fit)
    summary = {name: _mean_summary(r["fits"]) for name, r in (("fastgp", ours),
                                                               ("gpboost", theirs))
               if r.get("status") == "ok"}
    for name, row in summary.items():
        print(f"  {name} over the random orderings: fit {row['fit_s']:.1f} s, RMSE "
              f"{row['RMSE']:.4f}, CRPS {row['CRPS']:.4f}; coefficients "
              + ", ".join(f"{c:.4f} [{lo:.4f}, {hi:.4f}]" for c, lo, hi in
                          zip(row["coef"], row["coef_min"], row["coef_max"])), flush=True)
    if len(summary) == 2:
        print(f"  GPBoost's fit time / fastgp's (random orderings): "
              f"{summary['gpboost']['fit_s'] / summary['fastgp']['fit_s']:.1f}", flush=True)
    return {"fastgp": ours, "gpboost": theirs, "summary": summary}


def _print_mean_fit(name, fit):
    """One fit's line of ``gpboost-mean``."""
    s = fit["scores"]
    coef = ", ".join(f"{c:.4f}" + (f" ({e:.4f})" if e is not None else "")
                     for c, e in zip(fit["coef"], fit["coef_se"] or [None] * len(fit["coef"])))
    nugget, variance, scale = fit["cov_pars"]
    line = (f"  {name}, {fit['ordering']} ordering {fit['seed']}: fit {fit['fit_s']:.1f} s, "
            f"predict {fit['predict_s']:.2f} s; RMSE {s['RMSE']:.4f}, CRPS {s['CRPS']:.4f}, "
            f"coverage {s['coverage']:.3f}; coefficients (standard errors) {coef}; variance "
            f"{variance:.4g}, range {scale:.4g}, nugget {nugget:.4g}; log-likelihood "
            f"{fit['log_likelihood']:.2f}")
    if "at_gpboost" in fit:
        there = fit["at_gpboost"]
        line += (f"; at GPBoost's covariance: log-likelihood {there['log_likelihood']:.2f}, "
                 "coefficients " + ", ".join(f"{c:.4f}" for c in there["coef"]))
    print(line, flush=True)


def _mean_summary(fits):
    """The random orderings' mean fit time, RMSE and CRPS, and each
    coefficient's mean, least and greatest."""
    fits = [fit for fit in fits if fit["ordering"] == "random"]
    coef = np.array([fit["coef"] for fit in fits])
    return {"fit_s": float(np.mean([fit["fit_s"] for fit in fits])),
            "RMSE": float(np.mean([fit["scores"]["RMSE"] for fit in fits])),
            "CRPS": float(np.mean([fit["scores"]["CRPS"] for fit in fits])),
            "coef": coef.mean(axis=0).tolist(), "coef_min": coef.min(axis=0).tolist(),
            "coef_max": coef.max(axis=0).tolist()}


def case_predict_neighbours(args):
    r = _run("predict-neighbours", problem=args.problem, n=args.sizes[0], m=args.m,
             nu=args.nu, ms_predict=args.ms_predict)
    if r.get("status") == "ok":
        fit = r["rows"][0]
        print(f"{args.problem} N = {r['n_train']:,}, m = {args.m}: fit {fit['fit_s']:.1f} s; "
              f"{fit['kernel']}", flush=True)
        for row in r["rows"][1:]:
            s = row["scores"]
            print(f"  predict {r['n_test']:,} on {row['m_predict']:4d}: RMSE {s['RMSE']:.4f}, "
                  f"CRPS {s['CRPS']:.4f}, coverage {s['coverage']:.3f}, "
                  f"{row['predict_s']:.2f} s", flush=True)
    return r


CASES = {"scale": case_scale, "accuracy": case_accuracy, "prediction": case_prediction,
         "memory": case_memory,
         "crossover": case_crossover,
         "gpboost": case_gpboost, "heaton": case_heaton,
         "gpboost-mean": case_gpboost_mean, "predict-neighbours": case_predict_neighbours}


def _int_list(text):
    return [int(float(v)) for v in text.split(",") if v.strip()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_vecchia",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--problem", choices=["matern2d", "ard10", "heaton", "trend2d", "ard8"],
                        default="matern2d",
                        help="matern2d, ard10 (scale, accuracy, prediction, memory); heaton, "
                             "trend2d (gpboost-mean, predict-neighbours), ard8 "
                             "(predict-neighbours)")
    parser.add_argument("--mean-method", choices=["profile", "reml"], default="profile",
                        help="fastgp's mean_method (gpboost-mean; profile: GPBoost's)")
    parser.add_argument("--n", "--sizes", dest="sizes", type=_int_list, default=None,
                        help="N (comma-separated for several)")
    parser.add_argument("--m", type=int, default=30, help="n_neighbors")
    parser.add_argument("--seeds", type=_int_list, default=[0, 1, 2],
                        help="the random orderings' seeds (gpboost-mean)")
    parser.add_argument("--m-predict", type=int, default=60,
                        help="n_neighbors_predict (heaton)")
    parser.add_argument("--ms", type=_int_list, default=[10, 20, 30, 40],
                        help="n_neighbors values (accuracy, prediction)")
    parser.add_argument("--ms-predict", type=_int_list, default=[30, 60, 120],
                        help="n_neighbors_predict values (prediction)")
    parser.add_argument("--nu", type=float, default=0.5,
                        help="the Matern's nu (heaton, gpboost-mean, predict-neighbours)")
    parser.add_argument("--ordering", choices=["maxmin", "random"], default="random",
                        help="fastgp's ordering (gpboost)")
    parser.add_argument("--optimise", action="store_true",
                        help="memory: fit with the optimiser (default: without)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gpboost-python", default=None,
                        help="the Python of GPBoost's own environment (default: this one)")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = {"scale": [1_000_000], "accuracy": [10_000], "prediction": [10_000],
                      "memory": [100_000, 1_000_000],
                      "crossover": [1000, 2000, 4000, 8000],
                      "gpboost": [100_000, 1_000_000], "heaton": [0],
                      "gpboost-mean": [0 if args.problem == "heaton" else 100_000],
                      "predict-neighbours": [0 if args.problem == "heaton"
                                             else 100_000]}[args.case]
    return args


def main(argv=None):
    if argv is None and len(sys.argv) == 2 and sys.argv[1].startswith("{"):
        spec = json.loads(sys.argv[1])  # a child: one case, its result to spec["out"]
        result = CHILDREN[spec["kind"]](spec)
        # the process's peak resident memory (the warm-up's small fits included)
        result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        write_json(spec["out"], result)
        return 0
    args = parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    result = CASES[args.case](args)
    write_json(RESULTS / f"vecchia-{args.case}.json",
               {"command": "python -m bench.bench_vecchia " + " ".join(
                   sys.argv[1:] if argv is None else argv),
                "started": started, "environment": environment(), "result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main())

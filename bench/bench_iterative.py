"""The matrix-free solver against the Cholesky path: accuracy, time, memory.

    python -m bench.bench_iterative --n 10000                     # accuracy, time, memory
    python -m bench.bench_iterative --n 100000 --cases scale       # loss+gradient at 1e5
    python -m bench.bench_iterative --n 2000 --problems 1d         # a quick look
    python -m bench.bench_iterative --n 100000 --cases subsetfit --problems 1d
    python -m bench.bench_iterative --n 100000 --cases products    # the time model's costs

Cases (each problem of bench/_problems.py: ``1d`` is C * RBF + White on
1-D data, ``ard10`` C * RBF(10 length scales) + White):

- ``accuracy``: both solvers fit from the same start; the iterative fit's
  hyperparameters are scored by the exact log marginal likelihood against the
  Cholesky optimum (target: within 1 nat), and both models predict on 500
  new points (targets: mean within 0.1 noise standard deviation, standard
  deviation within 5 %). Reports the fits' wall times too. The iterative
  fit's per-evaluation report (CG iterations, residual) is appended to
  bench/results/iterative-progress.log while it runs; the Cholesky optimum
  is saved beside the results, and ``--reuse-cholesky`` takes it instead of
  refitting (a rerun with other solver options).
- ``prediction``: both solvers' models at the Cholesky optimum (the saved
  one with ``--reuse-cholesky``, else a Cholesky fit), ``optimizer=None``:
  the same prediction errors as ``accuracy``, from the solves alone.
- ``estimator``: at the Cholesky optimum saved by ``accuracy`` or
  ``prediction``, the iterative objective's value and gradient against the
  exact ones, for probe seeds 0 .. ``--seeds`` - 1: the estimator's error
  where the optimiser ends.
- ``time``: one loss+gradient at the problem's start (``--at optimum``: at
  the saved Cholesky optimum), median of
  ``--repeats`` after a warm-up, Cholesky and iterative side by side in one
  process (target: iterative at most 0.5 x), with the CG iterations.
- ``memory``: one loss+gradient of each solver in a fresh process; peak
  resident memory above the process's baseline, as a multiple of 8 N^2
  (target at N = 10,000: iterative at most 0.05).
- ``scale``: the iterative loss+gradient alone, in a fresh process: time and
  peak memory (target at N = 100,000: at most 1 GB above baseline).
- ``subsetfit``: the large-N recipe of Wang et al. (NeurIPS 2019): an exact
  (Cholesky) fit on a random subset of ``--subset`` points (10,000), then
  the iterative fit on all N started from the subset's hyperparameters; wall
  time of each, the iterative fit's evaluations, and both models' RMSE on
  2,000 held-out points of the same problem (noise standard deviation 0.01
  for ``1d``). One fresh process.
- ``products``: the two passes an evaluation is made of, timed once each
  after a warm-up at N in a fresh process: one K V with T + t = 1 +
  ``--n-probes`` columns (a CG iteration's product) and one gradient pass
  over T + t column pairs and ``--rank`` symmetric columns (the most the
  preconditioner's trace factor has). Reported per entry of K's lower
  triangle (N (N + 1) / 2), the figures of the time model at larger N: an
  evaluation costs about (CG iterations) x K V + the gradient pass.

Solver options: ``--cg-tol``, ``--n-probes``, ``--rank``, ``--max-cg-iter``
(default: the estimator's). Use a quiet machine for the long cases. Writes
bench/results/iterative.json.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import (MB, REPO_ROOT, PeakMemory, available_memory_bytes, environment,
                       run_in_subprocess, write_json)
from ._problems import ALPHA, make_problem

CASES = ("accuracy", "prediction", "estimator", "time", "memory", "scale", "subsetfit", "products")
PROBLEMS = ("1d", "ard10")


def _options(spec):
    from fastgp._solvers.iterative.system import SolverOptions
    return SolverOptions(cg_tol=spec["cg_tol"], max_cg_iter=spec["max_cg_iter"],
                         n_probes=spec["n_probes"], preconditioner_rank=spec["rank"])


def _objectives(spec):
    """(X, y, kernel, {solver: objective}) for the spec's problem."""
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.workspace import Workspace
    from fastgp._solvers.iterative.objective import IterativeNegLogMarginalLikelihood
    from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

    problem = make_problem(spec["problem"], spec["n"], seed=0)
    X, y, kernel = problem.X, problem.Y, problem.kernel
    n = len(y)
    covariance = make_covariance(kernel, np.ascontiguousarray(X, dtype=np.float64))
    diag_add = np.full(n, ALPHA)
    made = {
        "cholesky": lambda: NegLogMarginalLikelihood(covariance, y[:, None], diag_add,
                                                     Workspace(n)),
        "iterative": lambda: IterativeNegLogMarginalLikelihood(
            covariance, y[:, None], diag_add, _options(spec), seed=0),
    }
    return X, y, kernel, made


def _estimator(kernel, solver, spec):
    from fastgp import GaussianProcessRegressor
    return GaussianProcessRegressor(kernel, solver=solver, random_state=0,
                                    cg_tol=spec["cg_tol"], n_probes=spec["n_probes"],
                                    preconditioner_rank=spec["rank"],
                                    max_cg_iter=spec["max_cg_iter"])


# ----------------------------------------------------------------- children
def _cholesky_fit(spec, kernel, X, y):
    """The Cholesky fit of the accuracy case: (model, fit_s, evaluations).
    With ``reuse_cholesky``, a previous run's optimum (``cholesky_cache``)
    is refitted with ``optimizer=None`` instead: one factorisation, not a
    fit, when only the iterative options changed."""
    cache = Path(spec["cholesky_cache"])
    if spec.get("reuse_cholesky") and cache.exists():
        saved = json.loads(cache.read_text())
        model = _estimator(kernel.clone_with_theta(np.array(saved["theta"])),
                           "cholesky", spec).set_params(optimizer=None).fit(X, y)
        return model, saved["fit_s"], saved["evaluations"]
    start = time.perf_counter()
    model = _estimator(kernel, "cholesky", spec).fit(X, y)
    fit_s = time.perf_counter() - start
    cache.write_text(json.dumps({"theta": model.kernel_.theta.tolist(), "fit_s": fit_s,
                                 "evaluations": int(model.n_evaluations_),
                                 "kernel": str(model.kernel_)}))
    return model, fit_s, int(model.n_evaluations_)


def child_accuracy(spec):
    import contextlib
    X, y, kernel, _ = _objectives(spec)
    # the iterative fit's verbose report (CG per evaluation) goes to a log
    # that can be followed while the case runs
    with open(spec["progress_log"], "a") as log, contextlib.redirect_stdout(log):
        exact, exact_s, exact_evals = _cholesky_fit(spec, kernel, X, y)
        print(f"Cholesky fit: {exact.kernel_} ({exact_s:.1f} s)", flush=True)
        start = time.perf_counter()
        iterative = _estimator(kernel, "iterative", spec).set_params(verbose=True).fit(X, y)
        iterative_s = time.perf_counter() - start
        print(f"iterative fit: {iterative.kernel_} ({iterative_s:.1f} s)", flush=True)
    scored = float(exact.log_marginal_likelihood(iterative.kernel_.theta))
    optimum = float(exact.log_marginal_likelihood(exact.kernel_.theta))
    return {
        "lml_cholesky_optimum": optimum,
        "lml_exact_at_iterative_theta": scored,
        "lml_gap_nats": optimum - scored,
        "kernel_cholesky": str(exact.kernel_), "kernel_iterative": str(iterative.kernel_),
        "theta_cholesky": exact.kernel_.theta.tolist(),
        "theta_iterative": iterative.kernel_.theta.tolist(),
        **_prediction_errors(spec, exact, iterative),
        "fit_s": {"cholesky": exact_s, "iterative": iterative_s},
        "evaluations": {"cholesky": exact_evals, "iterative": iterative.n_evaluations_},
    }


def _prediction_errors(spec, exact, iterative):
    """Both models' predictions on 500 new points: the largest mean
    difference in noise standard deviations of ``exact`` and the largest
    relative difference of the standard deviations."""
    Xq = make_problem(spec["problem"], 500, seed=1).X
    mean0, std0 = exact.predict(Xq, return_std=True)
    start = time.perf_counter()
    mean, std = iterative.predict(Xq, return_std=True)
    predict_s = time.perf_counter() - start
    noise_sd = float(np.sqrt(exact.kernel_.k2.noise_level + ALPHA))
    return {"mean_error_noise_sd": float(np.max(np.abs(mean - mean0)) / noise_sd),
            "std_relative_error": float(np.max(np.abs(std / std0 - 1.0))),
            "predict_s_iterative": predict_s}


def child_prediction(spec):
    """Both solvers' models at the Cholesky optimum (optimizer=None): the
    prediction's own error, apart from the fitted hyperparameters'."""
    X, y, kernel, _ = _objectives(spec)
    exact, _, _ = _cholesky_fit(spec, kernel, X, y)
    start = time.perf_counter()
    iterative = _estimator(exact.kernel_, "iterative", spec).set_params(
        optimizer=None).fit(X, y)
    return {"kernel": str(exact.kernel_), "final_solve_s": time.perf_counter() - start,
            **_prediction_errors(spec, exact, iterative)}


def _cached_optimum(spec):
    cache = Path(spec["cholesky_cache"])
    if not cache.exists():
        raise SystemExit(f"no saved Cholesky optimum at {cache}: run --cases accuracy or "
                         "prediction at this problem and N first")
    return np.array(json.loads(cache.read_text())["theta"])


def child_estimator(spec):
    """The estimates' error at the Cholesky optimum, one objective per seed:
    the value's against the exact log marginal likelihood and the
    gradient's against the exact gradient (about zero there)."""
    X, y, kernel, made = _objectives(spec)
    theta = _cached_optimum(spec)
    exact = _estimator(kernel.clone_with_theta(theta), "cholesky", spec).set_params(
        optimizer=None).fit(X, y)
    value0, grad0 = exact.log_marginal_likelihood(theta, eval_gradient=True)
    out = {"exact_gradient_norm": float(np.linalg.norm(grad0)), "seeds": []}
    from fastgp._solvers.iterative.objective import IterativeNegLogMarginalLikelihood
    objective0 = made["iterative"]()
    for seed in range(spec["seeds"]):
        objective = IterativeNegLogMarginalLikelihood(objective0.covariance, objective0.Y,
                                                      objective0.diag_add, _options(spec),
                                                      seed=seed)
        start = time.perf_counter()
        value, grad = objective(theta)           # the negative log likelihood
        error = -np.asarray(grad) - grad0
        out["seeds"].append({"seed": seed, "value_error_nats": float(-value - value0),
                             "gradient_error_norm": float(np.linalg.norm(error)),
                             "gradient_error_max": float(np.max(np.abs(error))),
                             "cg_iterations": objective.last_cg.n_iterations,
                             "time_s": time.perf_counter() - start})
    return out


def child_time(spec):
    _, _, kernel, made = _objectives(spec)
    theta = _cached_optimum(spec) if spec.get("at") == "optimum" else kernel.theta
    out = {}
    for solver in ("cholesky", "iterative"):
        objective = made[solver]()
        objective(theta)  # warm-up: compiles, allocates the workspace
        times = []
        for _ in range(spec["repeats"]):
            start = time.perf_counter()
            objective(theta)
            times.append(time.perf_counter() - start)
        out[solver] = {"median_s": float(np.median(times)), "times_s": times}
        if solver == "iterative":
            out[solver]["cg_iterations"] = objective.last_cg.n_iterations
            out[solver]["cg_residual"] = objective.last_cg.max_residual
    out["ratio"] = out["iterative"]["median_s"] / out["cholesky"]["median_s"]
    out["at"] = spec.get("at", "start")
    return out


def child_memory(spec):
    _, _, kernel, made = _objectives(spec)
    small = dict(spec, n=200)
    made_small = _objectives(small)[3]
    made_small[spec["solver"]]()(kernel.theta)  # compile outside the measurement
    with PeakMemory() as peak:
        start = time.perf_counter()
        objective = made[spec["solver"]]()
        objective(kernel.theta)
        elapsed = time.perf_counter() - start
    out = {"memory": peak.as_dict(spec["n"]), "time_s": elapsed}
    if spec["solver"] == "iterative":
        out["cg_iterations"] = objective.last_cg.n_iterations
        out["cg_residual"] = objective.last_cg.max_residual
    return out


def child_subsetfit(spec):
    from fastgp import GaussianProcessRegressor

    problem = make_problem(spec["problem"], spec["n"], seed=0)
    X, y = problem.X, problem.Y
    held_out = make_problem(spec["problem"], 2000, seed=1)
    subset = np.random.default_rng(0).choice(len(y), size=min(spec["subset"], len(y)),
                                             replace=False)
    start = time.perf_counter()
    exact = GaussianProcessRegressor(problem.kernel, solver="cholesky").fit(X[subset],
                                                                             y[subset])
    subset_s = time.perf_counter() - start
    start = time.perf_counter()
    full = _estimator(exact.kernel_, "iterative", spec).fit(X, y)
    full_s = time.perf_counter() - start

    def rmse(model):
        return float(np.sqrt(np.mean((model.predict(held_out.X) - held_out.Y) ** 2)))

    return {"subset": int(len(subset)), "subset_fit_s": subset_s, "full_fit_s": full_s,
            "kernel_subset": str(exact.kernel_), "kernel_full": str(full.kernel_),
            "evaluations_full": int(full.n_evaluations_),
            "rmse_subset": rmse(exact), "rmse_full": rmse(full),
            "lml_full": float(full.log_marginal_likelihood_value_)}


def child_products(spec):
    from fastgp._linalg.blas_pool import release_blas_workers
    from fastgp._backend.covariance import make_covariance

    problem = make_problem(spec["problem"], spec["n"], seed=0)
    n = spec["n"]
    covariance = make_covariance(problem.kernel, np.ascontiguousarray(problem.X))
    theta = problem.kernel.theta
    rng = np.random.default_rng(0)
    c = 1 + spec["n_probes"]
    V = rng.standard_normal((n, c))
    left = np.asfortranarray(V)
    right = np.asfortranarray(rng.standard_normal((n, c)))
    S = np.asfortranarray(rng.standard_normal((n, spec["rank"])))
    small = make_covariance(problem.kernel, np.ascontiguousarray(problem.X[:600]))
    small.matmat(theta, V[:600])  # compile outside the timing
    small.grad_bilinear(theta, left[:600], right[:600], S[:600], -1.0)

    def timed(call):
        release_blas_workers()  # as the objective does before each pass
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    entries = n * (n + 1) / 2
    kv = timed(lambda: covariance.matmat(theta, V))
    grad = timed(lambda: covariance.grad_bilinear(theta, left, right, S, -1.0))
    return {"columns": c, "rank": spec["rank"], "kv_s": kv, "grad_s": grad,
            "kv_ns_per_entry": kv / entries * 1e9, "grad_ns_per_entry": grad / entries * 1e9}


CHILDREN = {"accuracy": child_accuracy, "prediction": child_prediction,
            "estimator": child_estimator, "time": child_time,
            "memory": child_memory, "subsetfit": child_subsetfit, "products": child_products}


def run_child(spec):
    result = CHILDREN[spec["child"]](spec)
    Path(spec["out"]).write_text(json.dumps(result))


# ------------------------------------------------------------------- parent
def _spawn(spec, timeout_s):
    guard = 0.9 * (available_memory_bytes() or 0) or None
    return run_in_subprocess("bench.bench_iterative", spec, timeout_s=timeout_s,
                             memory_limit_bytes=guard)


def run(case, problem, args):
    spec = dict(problem=problem, n=args.n, cg_tol=args.cg_tol, n_probes=args.n_probes,
                rank=args.rank, max_cg_iter=args.max_cg_iter, repeats=args.repeats)
    if case in ("accuracy", "prediction", "estimator", "time"):
        results = args.out.parent
        result = _spawn(dict(spec, child=case, reuse_cholesky=args.reuse_cholesky,
                             cholesky_cache=str(results / f"cholesky-{problem}-{args.n}.json"),
                             progress_log=str(results / "iterative-progress.log"),
                             at=args.at, seeds=args.seeds),
                        args.timeout)
    elif case == "products":
        result = _spawn(dict(spec, child=case), args.timeout)
    elif case == "subsetfit":
        result = _spawn(dict(spec, child=case, subset=args.subset), args.timeout)
    elif case == "memory":
        result = {solver: _spawn(dict(spec, child="memory", solver=solver), args.timeout)
                  for solver in ("cholesky", "iterative")}
    else:  # scale: the iterative path alone
        result = _spawn(dict(spec, child="memory", solver="iterative"), args.timeout)
    return dict(case=case, problem=problem, n=args.n, result=result)


def _line(r):
    res = r["result"]
    head = f"{r['case']:8s} {r['problem']:6s} N = {r['n']:,}: "
    if r["case"] == "memory":
        parts = []
        for solver, one in res.items():
            if one.get("status") != "ok":
                parts.append(f"{solver} {one.get('status')}: {one.get('reason', '')}")
            else:
                parts.append(f"{solver} {one['memory']['delta_mb']:.1f} MB "
                             f"({one['memory']['multiple_of_8n2']:.4f} x 8N^2)")
        return head + "; ".join(parts)
    if res.get("status") != "ok":
        return head + f"{res.get('status')}: {res.get('reason', '')}"
    if r["case"] == "accuracy":
        return head + (f"LML gap {res['lml_gap_nats']:.3f} nats (target <= 1), mean error "
                       f"{res['mean_error_noise_sd']:.3f} noise sd (<= 0.1), std error "
                       f"{100 * res['std_relative_error']:.2f} % (<= 5 %); fits "
                       f"{res['fit_s']['cholesky']:.1f} s / {res['fit_s']['iterative']:.1f} s")
    if r["case"] == "estimator":
        per_seed = "; ".join(f"seed {e['seed']}: value {e['value_error_nats']:+.2f} nats, "
                             f"gradient error norm {e['gradient_error_norm']:.1f} "
                             f"(max {e['gradient_error_max']:.1f}), {e['cg_iterations']} CG"
                             for e in res["seeds"])
        return head + (f"at the Cholesky optimum (exact gradient norm "
                       f"{res['exact_gradient_norm']:.2f}): {per_seed}")
    if r["case"] == "prediction":
        return head + (f"at the Cholesky optimum: mean error {res['mean_error_noise_sd']:.2e} "
                       f"noise sd (<= 0.1), std error {100 * res['std_relative_error']:.3f} % "
                       f"(<= 5 %); final solve {res['final_solve_s']:.1f} s, predict "
                       f"{res['predict_s_iterative']:.1f} s")
    if r["case"] == "subsetfit":
        return head + (f"exact fit on {res['subset']:,} points {res['subset_fit_s']:.1f} s, "
                       f"then the iterative fit on all {res['full_fit_s']:.1f} s "
                       f"({res['evaluations_full']} evaluations); held-out RMSE "
                       f"{res['rmse_subset']:.5f} (subset) / {res['rmse_full']:.5f} (all)")
    if r["case"] == "products":
        return head + (f"K V ({res['columns']} columns) {res['kv_s']:.2f} s = "
                       f"{res['kv_ns_per_entry']:.3f} ns per lower entry; gradient pass "
                       f"({res['columns']} pairs + {res['rank']} symmetric columns) "
                       f"{res['grad_s']:.2f} s = {res['grad_ns_per_entry']:.3f} ns")
    if r["case"] == "time":
        return head + (f"loss+grad at the {res['at']}: Cholesky "
                       f"{res['cholesky']['median_s']:.3f} s, iterative "
                       f"{res['iterative']['median_s']:.3f} s ({res['ratio']:.2f} x, target "
                       f"<= 0.5; {res['iterative']['cg_iterations']} CG iterations)")
    return head + (f"iterative loss+grad {res['time_s']:.1f} s, "
                   f"{res['memory']['delta_mb']:.0f} MB above baseline (target <= 1024 MB), "
                   f"{res['cg_iterations']} CG iterations")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].startswith("{"):  # a child: one case
        run_child(json.loads(argv[0]))
        return 0
    from fastgp._solvers.iterative.system import SolverOptions
    defaults = SolverOptions()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="training samples N")
    parser.add_argument("--cases", default="accuracy,time,memory",
                        help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--problems", default=",".join(PROBLEMS),
                        help=f"comma-separated, of {', '.join(PROBLEMS)}")
    parser.add_argument("--cg-tol", type=float, default=defaults.cg_tol)
    parser.add_argument("--n-probes", type=int, default=defaults.n_probes)
    parser.add_argument("--rank", type=int, default=defaults.preconditioner_rank)
    parser.add_argument("--max-cg-iter", type=int, default=defaults.max_cg_iter)
    parser.add_argument("--repeats", type=int, default=3, help="timed loss+gradients")
    parser.add_argument("--subset", type=int, default=10_000,
                        help="subset of the exact fit (subsetfit)")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per case")
    parser.add_argument("--at", choices=["start", "optimum"], default="start",
                        help="time: at the problem's start, or at the saved Cholesky optimum")
    parser.add_argument("--seeds", type=int, default=3, help="estimator: probe seeds")
    parser.add_argument("--reuse-cholesky", action="store_true",
                        help="accuracy, prediction: take the Cholesky optimum of an "
                             "earlier run at the same problem and N (saved beside --out) "
                             "instead of refitting")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/iterative.json")
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    problems = [p for p in args.problems.split(",") if p]
    if set(cases) - set(CASES) or set(problems) - set(PROBLEMS):
        parser.error(f"cases from {CASES}, problems from {PROBLEMS}")
    results = []
    for case in cases:
        for problem in problems:
            r = run(case, problem, args)
            print(_line(r), flush=True)
            results.append(r)
    write_json(args.out, dict(question=__doc__.splitlines()[0], cases=results,
                              options=vars(args) | {"out": str(args.out)},
                              environment=environment()))
    print(f"\nwrote {args.out} ({MB:.0f}-byte MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

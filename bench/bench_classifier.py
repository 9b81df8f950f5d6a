"""GaussianProcessClassifier: one approximate log marginal likelihood with
its gradient, and a whole fit, against scikit-learn's: time and peak memory.

    python -m bench.bench_classifier                       # N = 1,000 and 2,000
    python -m bench.bench_classifier --sizes 5000 --fit-max-iter 3
    python -m bench.bench_classifier --sizes 200 --repeats 1   # a quick check

Problem: binary labels on two features, x uniform on [-3, 3]^2,
y = [sin(x_1) + x_2 / 2 + 0.3 noise > 0], kernel C(1) * RBF([1, 1]) (three
hyperparameters) at its initial value, where both libraries run the same
Newton iterations (Rasmussen & Williams 2006, Alg. 3.1 and 5.1).

Every case runs in its own process (bench/_measure.py): the library is
imported and compiled first; the model is built (fit with optimizer=None,
which keeps its N x N factor, outside the measurement); then the peak
resident memory of the first log_marginal_likelihood(theta,
eval_gradient=True) above the memory just before is read, and the median
time of ``--repeats`` more. The "fit" case measures a whole fit (data
included) with L-BFGS-B capped at ``--fit-max-iter`` iterations for both
libraries (the same callable optimizer), its N x N factor kept.

Writes bench/results/classifier.json.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import (REPO_ROOT, PeakMemory, available_memory_bytes, environment,
                       run_in_subprocess, write_json)
from ._problems import PROBLEMS, binary_2d
from ._report import format_table

LIBRARIES = ("fastgp", "sklearn")


def _kernel():
    spec = PROBLEMS["gpc"]
    return spec["kernel"](spec["n_features"])


def _estimator(library):
    if library == "fastgp":
        from fastgp import GaussianProcessClassifier
    else:
        from sklearn.gaussian_process import GaussianProcessClassifier
    return GaussianProcessClassifier


def _capped_optimizer(max_iter):
    import scipy.optimize

    def optimizer(obj_func, initial_theta, bounds):
        res = scipy.optimize.minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True,
                                      bounds=bounds, options={"maxiter": max_iter})
        return res.x, res.fun
    return optimizer


def run_case(spec):
    """One case in this process; returns its result (a dict)."""
    library, kind, n = spec["library"], spec["kind"], int(spec["n"])
    Estimator = _estimator(library)
    start = time.perf_counter()
    X_small, y_small = binary_2d(40, seed=1)  # imports and Numba's compilation
    Estimator(_kernel(), optimizer=None).fit(X_small, y_small).log_marginal_likelihood(
        _kernel().theta, eval_gradient=True)
    result = dict(library=library, kind=kind, n=n, warm_up_s=time.perf_counter() - start)
    if kind == "fit":
        optimizer = _capped_optimizer(int(spec["max_iter"]))
        with PeakMemory() as mem:
            X, y = binary_2d(n)
            start = time.perf_counter()
            model = Estimator(_kernel(), optimizer=optimizer).fit(X, y)
            result["fit_s"] = time.perf_counter() - start
        result["value"] = float(model.log_marginal_likelihood_value_)
        result["memory"] = mem.as_dict(n)
        return result
    X, y = binary_2d(n)
    model = Estimator(_kernel(), optimizer=None).fit(X, y)
    theta = model.kernel_.theta
    with PeakMemory() as mem:
        start = time.perf_counter()
        value, grad = model.log_marginal_likelihood(theta, eval_gradient=True)
        first = time.perf_counter() - start
    times = [first]
    for _ in range(int(spec["repeats"])):
        start = time.perf_counter()
        model.log_marginal_likelihood(theta, eval_gradient=True)
        times.append(time.perf_counter() - start)
    result.update(value=float(value), grad=np.asarray(grad).tolist(),
                  memory=mem.as_dict(n), times_s=times,
                  median_s=float(np.median(times[1:] if len(times) > 1 else times)))
    return result


def _case(library, kind, n, repeats, max_iter):
    spec = dict(library=library, kind=kind, n=n, repeats=repeats, max_iter=max_iter)
    guard = 0.9 * (available_memory_bytes() or 0) or None
    return dict(spec, **run_in_subprocess("bench.bench_classifier", spec, timeout_s=7200,
                                          memory_limit_bytes=guard))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("{"):  # a case, in the process run_in_subprocess made
        spec = json.loads(argv[0])
        write_json(Path(spec["out"]), run_case(spec))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000", help="comma-separated N")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed loss+gradient calls after the first")
    parser.add_argument("--fit-max-iter", type=int, default=3,
                        help="L-BFGS-B iterations of the fit case (0: no fit case)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/classifier.json")
    args = parser.parse_args(argv)

    sizes = [int(s) for s in args.sizes.split(",") if s]
    cases = []
    for n in sizes:
        for library in LIBRARIES:
            cases.append(_case(library, "loss_grad", n, args.repeats, args.fit_max_iter))
            if args.fit_max_iter:
                cases.append(_case(library, "fit", n, args.repeats, args.fit_max_iter))

    rows = []
    by = {(c["library"], c["kind"], c["n"]): c for c in cases}
    for c in cases:
        if c["status"] != "ok":
            rows.append([c["library"], c["kind"], f"{c['n']:,}", "-", "-", "-",
                         c["status"] + ": " + c.get("reason", "")[:60]])
            continue
        seconds = c["median_s"] if c["kind"] == "loss_grad" else c["fit_s"]
        other = by.get(("sklearn", c["kind"], c["n"]))
        ratio = ""
        if c["library"] == "fastgp" and other and other["status"] == "ok":
            theirs = other["median_s"] if c["kind"] == "loss_grad" else other["fit_s"]
            ratio = (f"{theirs / seconds:.1f}x faster, "
                     f"{other['memory']['delta_mb'] / c['memory']['delta_mb']:.1f}x less memory")
        rows.append([c["library"], c["kind"], f"{c['n']:,}", f"{seconds:.3f}",
                     f"{c['memory']['delta_mb']:.1f}", f"{c['memory']['multiple_of_8n2']:.2f}",
                     ratio])
    print(format_table(["library", "case", "N", "time (s)", "peak above baseline (MB)",
                        "x 8N^2", "fastgp vs scikit-learn"], rows))
    write_json(args.out, dict(question=__doc__.splitlines()[0], cases=cases,
                              environment=environment()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

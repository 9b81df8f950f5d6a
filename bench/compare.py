"""How does fastgp compare with the LAPACK floor, scikit-learn, GPy, GPyTorch
and JAX in time and memory per loss+gradient, as N grows?

    python -m bench.compare            # the full comparison (tens of minutes)
    python -m bench.compare --quick    # N in {1,000, 2,000}: a few minutes
    python -m bench.compare --peers fastgp,sklearn --max-n 5000
    python -m bench.compare --largest-n verify   # also search the largest N
    python -m bench.compare --peers fastgp,sklearn --problems gpc --fit-n 0
    python -m bench.compare --problems "" --vecchia-sizes 100000 \
        --gpboost-python venv-gpboost/bin/python    # past one buffer: GPBoost

For each problem (``1d``: x standard normal, y = sin(x) + 0.01 noise, C*RBF
+ White; ``ard10``: 10-D inputs, one length scale per dimension; ``gplvm``:
Y standard normal (N, 12), Q = 2; ``gpc``, only when asked for: binary
classification on two features, fastgp's GaussianProcessClassifier against
scikit-learn's, the Laplace approximation's log marginal likelihood and
gradient) and each N, every library runs in its own
fresh process: its import and compilation first (timed apart), then the peak
resident memory of building the data plus one loss+gradient, above the
process's memory just before, then the median of interleaved timed rounds of
loss+gradient and loss. fastgp's process also times SciPy's dpotrf and
dpotrf + dpotri on the same K (the floor; not for ``gpc``, whose problem
says why in bench/_problems.py). A full fit at one N (2,000 by default;
``1d``, ``ard10`` and ``gpc``) from the same start with the same L-BFGS-B driver
gives wall time, evaluations and the final log marginal likelihood.

Past one buffer (``--vecchia-sizes``, default none): for each N,
fastgp's ``solver="vecchia"`` against GPBoost's ``GPModel(gp_approx=
"vecchia")``, bench/bench_vecchia.py's ``gpboost`` case (its children, run
the same way): the same 2-D Matern 1.5 field, C * Matern(1.5) + White
against GPBoost's Matern 1.5 with a nugget, ``--vecchia-m`` neighbours
(default 20) and two threads for both, a random ordering for both, each
library in its own fresh process (always, even with ``--in-process``),
scored on 10,000 held-out points: fit and predict time, RMSE, CRPS, 95 %
coverage, the process's peak resident memory, and GPBoost's fit time over
fastgp's. GPBoost runs under ``--gpboost-python``, the interpreter of an
environment of its own (``python -m venv venv-gpboost &&
venv-gpboost/bin/pip install gpboost numpy scipy``; default: this one).
``--problems ""`` runs this part alone.

A peer that is not installed is reported as skipped (GPBoost too, where
``--gpboost-python`` has no gpboost); so is a case whose
estimated memory exceeds what the machine has free, and a process that grows
past 90 % of the free memory is killed and reported (a per-process guard).

Writes docs/comparison.md (tables, ratios, targets met or not),
docs/comparison.json (raw results with versions, threads, machine, git
revision) and docs/img/comparison_*.png (log-log plots; needs matplotlib).
"""

import argparse
import math
import sys
import time
from pathlib import Path

from ._measure import (
    MB,
    REPO_ROOT,
    available_memory_bytes,
    environment,
    run_in_subprocess,
    write_json,
)
from ._problems import PROBLEMS, n_theta
from .bench_vecchia import gpboost_pair
from .peers import get_adapter, library_for

__all__ = ["main", "parse_args", "plan_cases", "run_comparison", "run_vecchia"]

REGRESSION_PEERS = ["fastgp", "fastgp-iterative", "sklearn", "gpy", "gpytorch-exact",
                    "gpytorch", "jax"]
DEFAULT_SIZES = [1000, 2000, 5000, 10000]
QUICK_SIZES = [1000, 2000]
GPLVM_SIZES = [1000, 2000, 5000]
QUICK_GPLVM_SIZES = [1000]
#: neighbours of both libraries' Vecchia fits (--vecchia-m)
VECCHIA_M = 20
#: share of the free memory a case may be estimated to use / may grow to
ESTIMATE_SHARE, GUARD_SHARE = 0.85, 0.90


def _int_list(text):
    return [int(float(v)) for v in text.split(",") if v.strip()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare",
        description="fastgp against the LAPACK floor and its peers; writes "
                    "docs/comparison.md, docs/comparison.json, docs/img/*.png.")
    parser.add_argument("--quick", action="store_true",
                        help="N in {1000, 2000}, GPLVM at 1000, fit at 1000, fewer "
                             "repeats: a few minutes")
    parser.add_argument("--sizes", type=_int_list, default=None,
                        help="comma-separated N for the regression problems "
                             f"(default {DEFAULT_SIZES})")
    parser.add_argument("--gplvm-sizes", type=_int_list, default=None,
                        help=f"N for the GPLVM rows (default {GPLVM_SIZES})")
    parser.add_argument("--max-n", type=int, default=None,
                        help="drop every size above this (not --vecchia-sizes)")
    parser.add_argument("--vecchia-sizes", type=_int_list, default=[],
                        help="N of the past-one-buffer rows, fastgp's Vecchia against "
                             "GPBoost's (default: none)")
    parser.add_argument("--vecchia-m", type=int, default=VECCHIA_M,
                        help=f"neighbours of both Vecchia fits (default {VECCHIA_M})")
    parser.add_argument("--gpboost-python", default=None,
                        help="the Python of GPBoost's own environment (default: this "
                             "one; skipped where it has no gpboost)")
    parser.add_argument("--problems", default="1d,ard10,gplvm",
                        help="comma-separated from 1d, ard10, gplvm, seattle, gpc "
                             "(binary classification: fastgp and sklearn only); \"\": "
                             "none (with --vecchia-sizes, that part alone)")
    parser.add_argument("--peers", default=",".join(REGRESSION_PEERS),
                        help="comma-separated from " + ", ".join(REGRESSION_PEERS)
                             + " (GPLVM rows use fastgp, gpy, jax; gpc rows fastgp, sklearn)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed rounds per case (default: 7 up to N = 1000, 5 up "
                             "to 2000, 3 up to 5000, 2 above; peers at most 3)")
    parser.add_argument("--fit-n", type=int, default=None,
                        help="N of the full-fit comparison (default 2000, quick 1000; "
                             "0: no fits)")
    parser.add_argument("--fit-max-iter", type=int, default=None,
                        help="cap the fits' L-BFGS-B iterations (default: SciPy's, as "
                             "scikit-learn; the per-case --timeout still applies)")
    parser.add_argument("--largest-n", choices=["estimate", "verify"], default=None,
                        help="estimate the largest N at which one loss+gradient fits in "
                             "the free memory (1-D problem) from the measured memory per "
                             "8 N^2, and with 'verify' run it there (long: one fastgp "
                             "loss+gradient at N = 45,000 is about three dpotrf's)")
    parser.add_argument("--largest-n-timeout", type=float, default=7200.0)
    parser.add_argument("--largest-n-cap", type=int, default=None,
                        help="never try an N above this in the largest-N search")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds per case before it is stopped")
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "docs",
                        help="where comparison.md, comparison.json and img/ go")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--in-process", action="store_true",
                        help="run every case in this process (for the smoke test and "
                             "debugging: memory figures are then not per process)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", default=None,
                        help="a sentence printed at the top of comparison.md (the "
                             "machine's state, for example)")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="run nothing: render comparison.md and the plots again from "
                             "a saved comparison.json")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    if args.gplvm_sizes is None:
        args.gplvm_sizes = QUICK_GPLVM_SIZES if args.quick else GPLVM_SIZES
    if args.fit_n is None:
        args.fit_n = 1000 if args.quick else 2000
    if args.max_n is not None:
        args.sizes = [n for n in args.sizes if n <= args.max_n]
        args.gplvm_sizes = [n for n in args.gplvm_sizes if n <= args.max_n]
        if args.fit_n > args.max_n:
            args.fit_n = max([n for n in args.sizes] or [0])
    args.problems = [p for p in args.problems.split(",") if p]
    args.peers = [p for p in args.peers.split(",") if p]
    for p in args.problems:
        if p not in PROBLEMS:
            parser.error(f"unknown problem {p!r}; choose from {sorted(PROBLEMS)}")
    for p in args.peers:
        if p not in REGRESSION_PEERS:
            parser.error(f"unknown peer {p!r}; choose from {REGRESSION_PEERS}")
    return args


def repeats_for(n, library, override=None):
    """Timed rounds: fewer at large N, and at most 3 for the slower peers."""
    if override is not None:
        return override
    r = 7 if n <= 1000 else 5 if n <= 2000 else 3 if n <= 5000 else 2
    return r if library == "fastgp" else min(r, 3)


def _library_for(peer, problem):
    """The adapter name of ``peer`` on ``problem`` (GPLVM and classifier rows
    have their own)."""
    return library_for(peer, problem)


def _skip(spec, reason):
    return dict(spec, status="skipped", reason=reason)


def plan_cases(args):
    """Every case of the run as a spec dict; unavailable libraries and cases
    estimated not to fit in memory come back already marked skipped."""
    cases = []
    for problem in args.problems:
        sizes = args.gplvm_sizes if problem == "gplvm" else args.sizes
        d = PROBLEMS[problem]["n_features"]
        p = n_theta(problem)
        for peer in args.peers:
            library = _library_for(peer, problem)
            if library is None:
                continue
            adapter = get_adapter(library)
            if problem not in adapter.problems:
                continue
            why_not = adapter.unavailable()
            kinds = [("loss_grad", n) for n in sizes]
            if args.fit_n and problem in ("1d", "ard10", "gpc"):
                kinds.append(("fit", args.fit_n))
            for kind, n in kinds:
                spec = dict(library=library, problem=problem, n=n, kind=kind,
                            seed=args.seed, max_iter=args.fit_max_iter,
                            repeats=repeats_for(n, peer, args.repeats) if kind == "loss_grad" else 0,
                            with_floor=(peer == "fastgp" and kind == "loss_grad"
                                        and "no_floor" not in PROBLEMS[problem]),
                            estimate_mb=adapter.estimate_bytes(problem, n, d, p) / MB)
                cases.append(_skip(spec, why_not) if why_not else spec)
    return cases


def _run_one(spec, args, in_process):
    available = available_memory_bytes()
    if available is not None and spec["estimate_mb"] * MB > ESTIMATE_SHARE * available:
        return _skip(spec, f"estimated {spec['estimate_mb'] / 1024:.1f} GB > "
                           f"{ESTIMATE_SHARE:.0%} of the {available / 2**30:.1f} GB free")
    start = time.perf_counter()
    if in_process:
        from ._worker import run_case

        try:
            result = dict(run_case(spec), status="ok", memory_note="in-process")
        except Exception as exc:  # a failing peer is a row, not a crash
            result = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    else:
        limit = GUARD_SHARE * available if available else None
        result = run_in_subprocess("bench._worker", spec, timeout_s=args.timeout,
                                   memory_limit_bytes=limit)
    result = dict(spec, **result)
    result["process_wall_s"] = time.perf_counter() - start
    return result


def run_vecchia(args):
    """The past-one-buffer rows: for each N of ``--vecchia-sizes``, fastgp's
    and GPBoost's Vecchia fits, each in a fresh process
    (:func:`bench.bench_vecchia.gpboost_pair`)."""
    rows = []
    for n in args.vecchia_sizes:
        row = gpboost_pair(n, args.vecchia_m, gpboost_python=args.gpboost_python,
                           timeout_s=args.timeout)
        rows.append(row)
        for library in ("fastgp", "gpboost"):
            _print_vecchia(n, library, row[library])
    return rows


def _print_vecchia(n, library, r):
    label = f"{library + '-vecchia':>15} matern2d N={n:>6} fit+pred "
    if r.get("status") != "ok":
        print(f"{label} {r.get('status')}: {r.get('reason', '')}", flush=True)
        return
    print(f"{label} fit {r['fit_s']:.3g} s  predict {r['predict_s']:.3g} s  RMSE "
          f"{r['scores']['RMSE']:.4f}  peak {r.get('peak_rss_bytes', 0) / MB:.0f} MB",
          flush=True)


def _print_case(r):
    label = f"{r['library']:>15} {r['problem']:>6} N={r['n']:>6} {r['kind']:<9}"
    if r["status"] != "ok":
        print(f"{label} {r['status']}: {r.get('reason', '')}", flush=True)
        return
    mem = r.get("memory", {})
    text = f"peak {mem.get('delta_mb', float('nan')):8.1f} MB ({mem.get('multiple_of_8n2', float('nan')):5.2f} x 8N^2)"
    if r["kind"] == "loss_grad" and "time" in r:
        t = r["time"]
        text += f"  loss+grad {t['loss_grad']['median_s']:.4g} s  loss {t['loss']['median_s']:.4g} s"
        if "floor-potrf-potri" in t:
            text += f"  floor {t['floor-potrf-potri']['median_s']:.4g} s"
    if r["kind"] == "fit":
        f = r["fit"]
        text += f"  fit {f['wall_s']:.3g} s, {f['n_evaluations']} evals, NLML {f['final_nlml']:.6g}"
    print(f"{label} {text}", flush=True)


def largest_n(args, results):
    """Largest N of one loss+gradient on the 1-D problem within the free
    memory, per library: estimated from the measured peak per 8 N^2 at the
    largest N that ran, then (``verify``) run there, 10 % smaller on failure."""
    rows = []
    for peer in args.peers:
        if "1d" not in args.problems:
            break
        ok = [r for r in results if r["library"] == peer and r["problem"] == "1d"
              and r["kind"] == "loss_grad" and r["status"] == "ok"]
        if not ok:
            rows.append(dict(library=peer, status="skipped",
                             reason="no successful 1-D case to extrapolate from"))
            continue
        ref = max(ok, key=lambda r: r["n"])
        multiple = ref["memory"]["multiple_of_8n2"]
        available = available_memory_bytes() or 0
        usable = ESTIMATE_SHARE * available - ref["memory"]["baseline_mb"] * MB
        n_est = int(math.sqrt(max(usable, 0) / (8.0 * multiple)) // 100 * 100)
        if args.largest_n_cap:
            n_est = min(n_est, args.largest_n_cap)
        row = dict(library=peer, status="estimated", n_estimated=n_est,
                   capped=bool(args.largest_n_cap and n_est == args.largest_n_cap),
                   from_n=ref["n"], multiple_of_8n2=multiple,
                   available_gb=available / 2**30)
        if args.largest_n == "verify" and n_est > ref["n"]:
            n_try = n_est
            for _ in range(3):
                spec = dict(library=peer, problem="1d", n=n_try, kind="loss_grad",
                            seed=args.seed, repeats=0, with_floor=False,
                            estimate_mb=0.0)
                guard = GUARD_SHARE * (available_memory_bytes() or available)
                res = run_in_subprocess("bench._worker", spec,
                                        timeout_s=args.largest_n_timeout,
                                        memory_limit_bytes=guard)
                print(f"largest N {peer:>15} N={n_try}: {res['status']} "
                      f"{res.get('reason', '')}", flush=True)
                if res["status"] == "ok":
                    row.update(status="verified", n_verified=n_try,
                               first_call_s=res["first_call_s"],
                               peak_mb=res["memory"]["delta_mb"])
                    break
                row.setdefault("failures", []).append(
                    dict(n=n_try, status=res["status"], reason=res.get("reason")))
                n_try = int(n_try * 0.9 // 100 * 100)
        rows.append(row)
    return rows


def run_comparison(args):
    """Run every planned case and return the results document (a dict)."""
    env = environment()
    cases = plan_cases(args)
    print(f"fastgp comparison: {len(cases)} cases; {env['cpu_model']}, "
          f"{env['cpu_count']} CPUs, {env['memory_available_gb']:.1f} GB free; "
          f"numba threads {env['numba_threads']}", flush=True)
    results = []
    for spec in cases:
        r = spec if spec.get("status") == "skipped" else _run_one(spec, args, args.in_process)
        results.append(r)
        _print_case(r)
    doc = dict(
        command="python -m bench.compare " + " ".join(sys.argv[1:] if args.argv is None
                                                      else args.argv),
        quick=bool(args.quick),
        in_process=bool(args.in_process),
        settings=dict(sizes=args.sizes, gplvm_sizes=args.gplvm_sizes, fit_n=args.fit_n,
                      problems=args.problems, peers=args.peers, seed=args.seed,
                      vecchia_sizes=args.vecchia_sizes, vecchia_m=args.vecchia_m),
        environment=env,
        cases=results,
    )
    if args.vecchia_sizes:
        doc["vecchia"] = run_vecchia(args)
    if args.largest_n:
        doc["largest_n"] = largest_n(args, results)
    return doc


def main(argv=None):
    args = parse_args(argv)
    args.argv = argv
    if args.from_json is not None:
        import json

        doc = json.loads(Path(args.from_json).read_text())
    else:
        doc = run_comparison(args)
    if args.note:
        doc["note"] = args.note
    from ._report import evaluate_targets, write_markdown

    doc["targets"] = evaluate_targets(doc)
    out_dir = Path(args.out_dir)
    json_path = write_json(out_dir / "comparison.json", doc)
    images = []
    if not args.no_plots:
        try:
            from ._plots import write_plots
        except ImportError as exc:
            print(f"no plots: {exc} (pip install .[bench])")
        else:
            images = write_plots(doc, out_dir / "img")
    md_path = write_markdown(doc, out_dir / "comparison.md", images)
    print(f"wrote {md_path}, {json_path}" + "".join(f", {p}" for p in images))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Past N = 16,000, where OpenBLAS's dpotrf can crash, does fastgp fit, how fast, in what memory?

    python -m bench.bench_large_n --sizes 12000,20000,30000,45000 --unset-coretype
    python -m bench.bench_large_n --sizes 3000,6000                  # a quick look
    python -m bench.bench_large_n --sizes 12000 --cases fastgp --block 768   # another block
    python -m bench.bench_large_n --sizes 16000 --cases lapack,fastgp --factor-only \\
        --lapack-always --unset-coretype                            # the crash check

For each size, each case runs in its own process, so that a crash is
reported as one ("crashed: signal 11 (SIGSEGV)") instead of ending the
benchmark:

- ``lapack``: scipy.linalg.lapack's dpotrf then dpotri, in place, on an
  N x N kernel matrix (RBF on sorted uniform inputs plus 1e-2 on the
  diagonal, filled by column blocks). Only below N = 16,000, where OpenBLAS
  is known to survive, unless ``--lapack-always``.
- ``fastgp``: fastgp._linalg.lapack's cholesky_in_place then cho_inverse_in_place on
  the same matrix (the path every fit takes).
- ``gpr``: fastgp.GaussianProcessRegressor(C * RBF + White, optimizer=None)
  .fit on 1-d data (fill, factor, solve; the factor kept as ``L_``).
- ``lml``: one loss+gradient as an optimiser step evaluates it, in the fit's
  one workspace: a fit of the same model whose optimiser (a callable, as
  scikit-learn's contract allows) makes one evaluation with gradient at the
  start and returns it; the evaluation is timed alone, the peak covers the
  whole fit (the evaluation, then the final factor in the same buffer).
  ``gpr`` and ``lml`` each run after a small warm-up fit that compiles Numba.

Time is wall time of one run; peak memory is the peak resident set above the
resident set just before the case (bench/_measure.py, PeakMemory), as a
multiple of 8 N^2 bytes. The lml row's memory is above the fitted model,
which already holds L_ (8 N^2) where both ran in one process; in their own
processes each peaks at one buffer. ``--unset-coretype`` removes
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE from the children's environment:
OpenBLAS then picks its kernels for the processor, as on a user's machine
(the "kernels" column says which it picked). Use a quiet machine: each large
case keeps every core busy for minutes. Writes bench/results/large_n.json.
"""

import argparse
import json
import math
import os
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import (REPO_ROOT, PeakMemory, available_memory_bytes,
                       environment, run_in_subprocess, write_json)

CASES = ("lapack", "fastgp", "gpr", "lml")
#: Below this order OpenBLAS's dpotrf and dpotri are known to survive with two
#: threads on the processors where its dsyrk fails (docs/reliability.md).
LAPACK_SAFE_BELOW = 16_000
_OPENBLAS_TUNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


# ----------------------------------------------------------------- children
def _fill_kernel_matrix(B, seed=0, length_scale=1.0, noise=1e-2, block=512):
    """Write an RBF kernel matrix of sorted uniform inputs on [0, 10] plus
    ``noise`` on the diagonal into F-ordered ``B`` (n, n), column block by
    column block, in place (no temporary beyond the inputs)."""
    n = B.shape[0]
    x = np.sort(np.random.default_rng(seed).uniform(0.0, 10.0, n))
    for j0 in range(0, n, block):
        j1 = min(n, j0 + block)
        columns = B[:, j0:j1]
        np.subtract.outer(x, x[j0:j1], out=columns)
        columns /= length_scale
        np.square(columns, out=columns)
        columns *= -0.5
        np.exp(columns, out=columns)
    B[np.diag_indices(n)] += noise


def _blas_kernels():
    from threadpoolctl import threadpool_info

    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS)
    return [{k: info.get(k) for k in ("version", "num_threads", "architecture")}
            for info in threadpool_info() if info.get("internal_api") == "openblas"]


def _lapack_step(routine, **overwrite):
    """scipy's ``routine`` on the lower triangle of B in place."""
    def step(B):
        _, info = routine(B, lower=1, **overwrite)
        if info != 0:
            raise RuntimeError(f"{routine.__name__}: info {info}")
    return step


def _run_factor_inverse(spec):
    """The ``lapack`` and ``fastgp`` cases: fill, factor, (invert), timed."""
    from scipy.linalg import lapack

    from fastgp._linalg.lapack import cho_inverse_in_place, cholesky_in_place

    n = spec["n"]
    steps = {"lapack": [("factor_s", _lapack_step(lapack.dpotrf, overwrite_a=1)),
                        ("inverse_s", _lapack_step(lapack.dpotri, overwrite_c=1))],
             "fastgp": [("factor_s", cholesky_in_place),
                        ("inverse_s", cho_inverse_in_place)]}[spec["case"]]
    if spec.get("factor_only"):
        steps = steps[:1]
    result = {}
    with PeakMemory() as mem:
        B = np.empty((n, n), order="F")
        _fill_kernel_matrix(B)
        for key, step in steps:
            start = time.perf_counter()
            step(B)
            result[key] = time.perf_counter() - start
    result["time_s"] = result["factor_s"] + result.get("inverse_s", 0.0)
    result["memory"] = mem.as_dict(n)
    result["check"] = float(B[n - 1, n - 1])  # a number that depends on every step
    return result


def _gpr_data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0.0, 10.0, (n, 1)), axis=0)
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def _model(optimizer):
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from fastgp import GaussianProcessRegressor

    return GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.01),
                                    optimizer=optimizer)


def _timed_fit(optimizer, n):
    """A warm-up fit at N = 64 (Numba compiles), then the fit at ``n``:
    (result dict with warm_up_s, fit_s and memory)."""
    start = time.perf_counter()
    _model(optimizer).fit(*_gpr_data(64))
    result = {"warm_up_s": time.perf_counter() - start}
    X, y = _gpr_data(n)
    with PeakMemory() as mem:
        start = time.perf_counter()
        _model(optimizer).fit(X, y)
        result["fit_s"] = time.perf_counter() - start
    result["memory"] = mem.as_dict(n)
    return result


def _run_gpr(spec):
    """The ``gpr`` case: a fit without optimiser."""
    result = _timed_fit(None, spec["n"])
    result["time_s"] = result["fit_s"]
    return result


def _run_lml(spec):
    """The ``lml`` case: one loss+gradient in the fit's workspace (a fit whose
    optimiser evaluates once at the start)."""
    step = {}

    def one_evaluation(obj_func, theta0, bounds):
        start = time.perf_counter()
        value, grad = obj_func(theta0, eval_gradient=True)
        step.update(lml_grad_s=time.perf_counter() - start, nlml=float(value),
                    nlml_grad=np.asarray(grad).tolist())
        return theta0, value

    result = _timed_fit(one_evaluation, spec["n"])  # the warm-up's step is overwritten
    result.update(step, time_s=step["lml_grad_s"])
    return result


def run_child(spec):
    """Run one case (``spec``: case, n, factor_only, block, out) in this process."""
    from fastgp._linalg import blocked as blocked_lapack
    from fastgp._linalg import lapack as linalg

    if spec.get("block"):
        blocked_lapack.DEFAULT_BLOCK = int(spec["block"])
    runner = {"gpr": _run_gpr, "lml": _run_lml}.get(spec["case"], _run_factor_inverse)
    result = dict(case=spec["case"], n=spec["n"], **runner(spec))
    result["blas"] = _blas_kernels()
    result["block"] = blocked_lapack.DEFAULT_BLOCK
    result["blocked_min_n"] = linalg.BLOCKED_MIN_N
    write_json(spec["out"], result)


# ------------------------------------------------------------------- parent
def _child_environment(unset_coretype):
    env = dict(os.environ)
    if unset_coretype:
        for name in _OPENBLAS_TUNING:
            env.pop(name, None)
    return env


def _describe_failure(result):
    """A crash as "crashed: signal 11 (SIGSEGV)"; other failures as they came."""
    match = re.match(r"exit code (-?\d+)", result.get("reason", ""))
    if result["status"] == "error" and match and int(match.group(1)) < 0:
        number = -int(match.group(1))
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown"
        return f"crashed: signal {number} ({name})"
    return f"{result['status']}: {result.get('reason', '')}"


def run_case(case, n, factor_only, unset_coretype, timeout_s, block=None):
    spec = dict(case=case, n=n, factor_only=factor_only, block=block)
    guard = 0.9 * (available_memory_bytes() or 0) or None
    result = run_in_subprocess("bench.bench_large_n", spec, timeout_s=timeout_s,
                               memory_limit_bytes=guard,
                               env=_child_environment(unset_coretype))
    result.update(case=case, n=n, factor_only=factor_only)
    if result["status"] != "ok":
        result["failure"] = _describe_failure(result)
    return result


def _cell(x, digits=2):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _row(r, floor):
    kernels = ", ".join(sorted({b.get("architecture") or "?" for b in r.get("blas", [])}))
    if r["status"] != "ok":
        return [f"{r['n']:,}", r["case"], r["failure"], "-", "-", "-", "-", "-"]
    if r["case"] == "gpr":
        return [f"{r['n']:,}", "fit, optimizer=None", "ok", _cell(r["time_s"]), "-", "-",
                _cell(r["memory"]["multiple_of_8n2"]), kernels]
    if r["case"] == "lml":
        return [f"{r['n']:,}", "one loss+gradient", "ok", _cell(r["time_s"]),
                f"the whole fit around it {_cell(r['fit_s'])}", "-",
                _cell(r["memory"]["multiple_of_8n2"]), kernels]
    label = "LAPACK dpotrf" if r["case"] == "lapack" else "fastgp._linalg.lapack factor"
    if not r.get("factor_only"):
        label += " + dpotri" if r["case"] == "lapack" else " + inverse"
    ratio = r["time_s"] / floor if floor else None
    parts = f"factor {_cell(r['factor_s'])}, inverse {_cell(r.get('inverse_s'))}"
    if r["case"] == "fastgp":
        parts += f" (block {r['block']} from N = {r['blocked_min_n']:,})"
    return [f"{r['n']:,}", label, "ok", _cell(r["time_s"]), parts,
            _cell(ratio), _cell(r["memory"]["multiple_of_8n2"]), kernels]


def markdown_table(results):
    """The results as a Markdown table; "x floor" is the time over LAPACK's
    at the same N, or over the N^3 extrapolation of LAPACK's at the largest
    size where it ran."""
    measured = {r["n"]: r["time_s"] for r in results
                if r["case"] == "lapack" and r["status"] == "ok"}
    headers = ["N", "case", "status", "time (s)", "parts (s)", "x floor",
               "peak / 8N^2", "kernels"]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in results:
        floor = measured.get(r["n"])
        if floor is None and measured:
            base = max(measured)
            floor = measured[base] * (r["n"] / base) ** 3
        lines.append("| " + " | ".join(_row(r, floor)) + " |")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 1 and argv[0].startswith("{"):  # a child: one case
        run_child(json.loads(argv[0]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="12000,20000,30000,45000",
                        help="comma-separated N")
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--unset-coretype", action="store_true",
                        help="run the children without OPENBLAS_CORETYPE and "
                             "OPENBLAS_L2_SIZE (the user's configuration)")
    parser.add_argument("--lapack-always", action="store_true",
                        help=f"run LAPACK's own routines at N >= {LAPACK_SAFE_BELOW:,} too "
                             "(they may crash: that is reported)")
    parser.add_argument("--factor-only", action="store_true",
                        help="lapack and fastgp cases: the factor alone")
    parser.add_argument("--block", type=int, default=None,
                        help="order of fastgp's diagonal blocks (default: "
                             "fastgp._linalg.blocked.DEFAULT_BLOCK)")
    parser.add_argument("--timeout", type=float, default=7200.0,
                        help="seconds per case")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/large_n.json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {CASES}")

    results = []
    for n in sizes:
        for case in cases:
            if case == "lapack" and n >= LAPACK_SAFE_BELOW and not args.lapack_always:
                continue
            r = run_case(case, n, args.factor_only, args.unset_coretype, args.timeout,
                         args.block)
            print(f"N = {n:,} {case}: {r.get('failure') or _cell(r['time_s']) + ' s'}",
                  flush=True)
            results.append(r)
    print()
    print(markdown_table(results))
    write_json(args.out, dict(question=__doc__.splitlines()[0], cases=results,
                              unset_coretype=args.unset_coretype,
                              environment=environment()))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

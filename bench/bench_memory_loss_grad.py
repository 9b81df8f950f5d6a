"""How much memory above the process's baseline does one fastgp loss+gradient
take at N = 10,000, and a whole fit (the factor kept for predict included),
against the target of 1.15 x 8 N^2 bytes (920 MB), and against scikit-learn?

    python -m bench.bench_memory_loss_grad                 # N = 10,000; sklearn at 3,000
    python -m bench.bench_memory_loss_grad --sklearn-n 10000   # sklearn at 10k: ~10 GB
    python -m bench.bench_memory_loss_grad --n 2000 --sklearn-n 1000 --fit-max-iter 3

Problem: x standard normal (N, 1), y = sin(x) + 0.01 noise, C*RBF + White
at scikit-learn's default start. Each case runs in its own process: the peak
resident memory of building the data plus the case, minus the resident memory
just before (imports and Numba's compilation happen before and are excluded;
see bench/_measure.py). scikit-learn at N = 10,000 needs about 10 GB (its
(N, N, 3) gradient tensor, K^-1, alpha alpha^T, ...), so by default it runs at
a smaller N beside fastgp at the same N, and the ratio is reported; the guard
kills a process that grows past 90 % of the free memory.

Writes bench/results/memory_loss_grad.json.
"""

import argparse
import sys
from pathlib import Path

from ._measure import (REPO_ROOT, available_memory_bytes, environment,
                       run_in_subprocess, write_json)
from ._report import format_table

TARGET = 1.15


def _case(library, n, kind, max_iter=None):
    spec = dict(library=library, problem="1d", n=n, kind=kind, repeats=0, max_iter=max_iter)
    guard = 0.9 * (available_memory_bytes() or 0) or None
    result = dict(spec, **run_in_subprocess("bench._worker", spec, timeout_s=7200,
                                            memory_limit_bytes=guard))
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--sklearn-n", type=int, default=3_000,
                        help="N of scikit-learn's case (fastgp also runs there); 0: none")
    parser.add_argument("--no-fit", action="store_true", help="skip the whole fit")
    parser.add_argument("--fit-max-iter", type=int, default=None,
                        help="cap the fit's L-BFGS-B iterations (the peak does not grow "
                             "with iterations: the workspace is reused)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/memory_loss_grad.json")
    args = parser.parse_args(argv)

    cases = [_case("fastgp", args.n, "loss_grad")]
    if not args.no_fit:
        cases.append(_case("fastgp", args.n, "fit", args.fit_max_iter))
    if args.sklearn_n:
        if args.sklearn_n != args.n:
            cases.append(_case("fastgp", args.sklearn_n, "loss_grad"))
        cases.append(_case("sklearn", args.sklearn_n, "loss_grad"))

    rows = []
    for r in cases:
        if r["status"] != "ok":
            rows.append([r["library"], r["kind"], f"{r['n']:,}", "-", "-", "-", r["status"] + ": " + r.get("reason", "")])
            continue
        m = r["memory"]
        met = "yes" if m["multiple_of_8n2"] <= TARGET else "no"
        rows.append([r["library"], r["kind"], f"{r['n']:,}", f"{m['delta_mb']:.1f}",
                     f"{m['multiple_of_8n2']:.3f}", f"{8 * r['n']**2 / 2**20:.1f}",
                     met if r["library"] == "fastgp" else ""])
    print(format_table(["library", "case", "N", "peak above baseline (MB)", "x 8N^2",
                        "8N^2 (MB)", f"<= {TARGET} x 8N^2"], rows))
    ok = {(r["library"], r["n"]): r for r in cases if r["status"] == "ok" and r["kind"] == "loss_grad"}
    ratio = None
    if ("sklearn", args.sklearn_n) in ok and ("fastgp", args.sklearn_n) in ok:
        ratio = (ok[("sklearn", args.sklearn_n)]["memory"]["delta_mb"]
                 / ok[("fastgp", args.sklearn_n)]["memory"]["delta_mb"])
        print(f"scikit-learn / fastgp peak memory at N = {args.sklearn_n:,}: {ratio:.1f}x")
    write_json(args.out, dict(question=__doc__.splitlines()[0], cases=cases,
                              sklearn_over_fastgp=ratio, target_multiple=TARGET,
                              environment=environment()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

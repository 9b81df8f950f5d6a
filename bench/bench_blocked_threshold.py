"""From which N should the factor and inverse take the blocked path?

    python -m bench.bench_blocked_threshold                       # N = 3,000 to 12,000
    python -m bench.bench_blocked_threshold --sizes 5000 --repeats 9 --block 1024

fastgp._linalg.lapack factors and inverts through OpenBLAS's own dpotrf and dpotri
below ``fastgp._linalg.lapack.BLOCKED_MIN_N`` and through fastgp._linalg.blocked
(reference LAPACK's blocked algorithms over dgemm, dtrsm and dtrmm) from it on,
because OpenBLAS's threaded dsyrk inside dpotrf and dpotri crashes on large
matrices on some processors (docs/reliability.md, "Large N and OpenBLAS's
threaded dsyrk"). The threshold should sit where the blocked path is needed,
not where it merely works: below the crash it should cost nothing. For each
size, one process times, in interleaved rounds (median), both paths on the
same N x N kernel matrix (bench/bench_large_n.py's RBF on sorted uniform
inputs plus 1e-2 on the diagonal): LAPACK's dpotrf and dpotri through
scipy.linalg.lapack, and the blocked factor and inverse, each in place on a
copy. Keep the sizes below 15,500, where OpenBLAS's own routines are known to
survive with two threads (run ``--unset-coretype`` children of
bench/bench_large_n.py for the crash itself). Writes
bench/results/blocked_threshold.json.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, interleaved_medians, write_json
from ._report import format_table
from .bench_large_n import LAPACK_SAFE_BELOW, _fill_kernel_matrix

#: The four timed steps, each in place on the buffer its setup fills.
STEPS = ("lapack factor", "lapack inverse", "blocked factor", "blocked inverse")


def measure(n, repeats, block):
    """Interleaved medians (seconds) of STEPS at order ``n``."""
    from scipy.linalg import lapack

    from fastgp._linalg import blocked as blocked_lapack

    K = np.empty((n, n), order="F")
    _fill_kernel_matrix(K)
    L = K.copy(order="F")
    _, info = lapack.dpotrf(L, lower=1, overwrite_a=1)
    if info != 0:
        raise RuntimeError(f"dpotrf: info {info}")
    B = np.empty_like(K, order="F")

    def load(source):
        return lambda: np.copyto(B, source)

    def lapack_step(routine, **overwrite):
        def step():
            _, info = routine(B, lower=1, **overwrite)
            if info != 0:
                raise RuntimeError(f"{routine.__name__}: info {info}")
        return step

    def blocked_step(routine):
        def step():
            info = routine(B, block)
            if info != 0:
                raise RuntimeError(f"{routine.__name__}: info {info}")
        return step

    cases = {
        "lapack factor": (load(K), lapack_step(lapack.dpotrf, overwrite_a=1)),
        "lapack inverse": (load(L), lapack_step(lapack.dpotri, overwrite_c=1)),
        "blocked factor": (load(K), blocked_step(blocked_lapack.cholesky_lower)),
        "blocked inverse": (load(L), blocked_step(blocked_lapack.inverse_from_cholesky_lower)),
    }
    timings = interleaved_medians(cases, repeats=repeats, warmup=1)
    return {step: timings[step]["median_s"] for step in STEPS}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_blocked_threshold",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3000,5000,8000,12000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--block", type=int, default=None,
                        help="diagonal block order (default: blocked_lapack.DEFAULT_BLOCK)")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "bench/results/blocked_threshold.json")
    args = parser.parse_args(argv)

    from fastgp._linalg import blocked as blocked_lapack
    from fastgp._linalg import lapack as linalg

    block = blocked_lapack.DEFAULT_BLOCK if args.block is None else args.block
    sizes = [int(s) for s in args.sizes.split(",")]
    unsafe = [n for n in sizes if n >= LAPACK_SAFE_BELOW]
    if unsafe:
        parser.error(f"sizes {unsafe} reach N = {LAPACK_SAFE_BELOW:,}, where OpenBLAS's "
                     "own dpotrf and dpotri can crash this process")
    rows, results = [], []
    for n in sizes:
        med = measure(n, args.repeats, block)
        lapack_s = med["lapack factor"] + med["lapack inverse"]
        blocked_s = med["blocked factor"] + med["blocked inverse"]
        path = "blocked" if n >= linalg.BLOCKED_MIN_N else "lapack"
        rows.append([f"{n:,}", *(f"{med[s] * 1e3:.0f}" for s in STEPS),
                     f"{med['blocked factor'] / med['lapack factor']:.3f}",
                     f"{med['blocked inverse'] / med['lapack inverse']:.3f}",
                     f"{blocked_s / lapack_s:.3f}", path])
        results.append(dict(n=n, median_s=med, blocked_over_lapack=blocked_s / lapack_s,
                            fastgp_path=path))
        print(f"N={n}: " + ", ".join(f"{s} {med[s] * 1e3:.0f} ms" for s in STEPS), flush=True)
    print()
    print(format_table(["N", *(f"{s} (ms)" for s in STEPS), "factor ratio", "inverse ratio",
                        "blocked / lapack", "fastgp takes"], rows))
    write_json(args.out, dict(environment=environment(), repeats=args.repeats, block=block,
                              blocked_min_n=linalg.BLOCKED_MIN_N, results=results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

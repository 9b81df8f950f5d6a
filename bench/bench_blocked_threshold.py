"""What do the factor and inverse cost as a fit runs them (fixed tiles of
single-threaded BLAS), against OpenBLAS's own threaded routines?

    python -m bench.bench_blocked_threshold                       # N = 3,000 to 12,000
    python -m bench.bench_blocked_threshold --sizes 500,1000,2000 --repeats 9
    python -m bench.bench_blocked_threshold --sizes 5000 --repeats 9 --block 1024

Outside a fit fastgp._linalg.lapack factors and inverts through OpenBLAS's
own dpotrf and dpotri below ``fastgp._linalg.lapack.BLOCKED_MIN_N`` and
through fastgp._linalg.blocked (reference LAPACK's blocked algorithms over
dgemm, dtrsm and dtrmm) from it on, because OpenBLAS's threaded dsyrk inside
dpotrf and dpotri crashes on large matrices on some processors
(docs/reliability.md, "Large N and OpenBLAS's threaded dsyrk"); inside a fit
it takes the blocked path at every order, as fixed tiles of single-threaded
BLAS on fastgp's own threads, so that the bits do not depend on the thread
count
(fastgp._linalg.tiles). For each size, one process times, in interleaved
rounds (median), three ways on the same N x N kernel matrix
(bench/bench_large_n.py's RBF on sorted uniform inputs plus 1e-2 on the
diagonal), each in place on a copy: LAPACK's dpotrf and dpotri through
scipy.linalg.lapack on BLAS's threads ("lapack", what fastgp ran before its
tiles), the same on one BLAS thread ("lapack 1", what the tiles would cost without
threads), and the blocked factor and inverse as a fit runs them: BLAS on
one thread, the tiles on every core ("tiled"), with the blocks a fit uses
(``--block`` sets one order for all of them). OpenBLAS's workers spin for
about a tenth of a second after each threaded call, on the cores whatever
runs next needs; inside a fit nothing calls OpenBLAS threaded and the Numba
passes keep the cores busy between the LAPACK steps, so the tiled factor
runs after 0.2 s of untimed tiled work on the same matrix. Keep the sizes
below 15,500, where OpenBLAS's own routines are known to
survive with two threads (run ``--unset-coretype`` children of
bench/bench_large_n.py for the crash itself). Writes
bench/results/blocked_threshold.json.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, interleaved_medians, write_json
from ._report import format_table
from .bench_large_n import LAPACK_SAFE_BELOW, _fill_kernel_matrix

#: The timed steps, each in place on the buffer its setup fills.
STEPS = ("lapack factor", "lapack inverse", "lapack 1 factor", "lapack 1 inverse",
         "tiled factor", "tiled inverse")


def measure(n, repeats, block, width):
    """Interleaved medians (seconds) of STEPS at order ``n``; the tiles on
    ``width`` threads."""
    from scipy.linalg import lapack
    from threadpoolctl import ThreadpoolController

    from fastgp._linalg import blocked as blocked_lapack
    from fastgp._linalg import tiles

    K = np.empty((n, n), order="F")
    _fill_kernel_matrix(K)
    L = K.copy(order="F")
    _, info = lapack.dpotrf(L, lower=1, overwrite_a=1)
    if info != 0:
        raise RuntimeError(f"dpotrf: info {info}")
    B = np.empty_like(K, order="F")
    controller = ThreadpoolController()  # found once: its search costs milliseconds

    def load(source):
        return lambda: np.copyto(B, source)

    def lapack_step(routine, threads=None, **overwrite):
        def step():
            with controller.limit(limits=threads, user_api="blas"):
                _, info = routine(B, lower=1, **overwrite)
            if info != 0:
                raise RuntimeError(f"{routine.__name__}: info {info}")
        return step

    def settle():
        """Untimed tiled work for 0.2 s: OpenBLAS's spinning workers stop,
        the cores stay busy (the module docstring)."""
        start = time.perf_counter()
        while time.perf_counter() - start < 0.2:
            np.copyto(B, K)
            tiled_step(blocked_lapack.cholesky_lower)()
        np.copyto(B, K)

    def tiled_step(routine):
        def step():
            previous = tiles.set_width(width)
            try:
                with controller.limit(limits=1, user_api="blas"):
                    info = routine(B, block)
            finally:
                tiles.set_width(previous)
            if info != 0:
                raise RuntimeError(f"{routine.__name__}: info {info}")
        return step

    cases = {
        "lapack factor": (load(K), lapack_step(lapack.dpotrf, overwrite_a=1)),
        "lapack inverse": (load(L), lapack_step(lapack.dpotri, overwrite_c=1)),
        "lapack 1 factor": (load(K), lapack_step(lapack.dpotrf, 1, overwrite_a=1)),
        "lapack 1 inverse": (load(L), lapack_step(lapack.dpotri, 1, overwrite_c=1)),
        "tiled factor": (settle, tiled_step(blocked_lapack.cholesky_lower)),
        "tiled inverse": (load(L), tiled_step(blocked_lapack.inverse_from_cholesky_lower)),
    }
    timings = interleaved_medians(cases, repeats=repeats, warmup=1)
    return {step: timings[step]["median_s"] for step in STEPS}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_blocked_threshold",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3000,5000,8000,12000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--block", type=int, default=None,
                        help="one diagonal block order for the factor, the triangular inverse "
                             "and the Gram step (default: the orders a fit uses)")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "bench/results/blocked_threshold.json")
    args = parser.parse_args(argv)

    from fastgp._linalg import lapack as linalg

    block = args.block
    sizes = [int(s) for s in args.sizes.split(",")]
    unsafe = [n for n in sizes if n >= LAPACK_SAFE_BELOW]
    if unsafe:
        parser.error(f"sizes {unsafe} reach N = {LAPACK_SAFE_BELOW:,}, where OpenBLAS's "
                     "own dpotrf and dpotri can crash this process")
    width = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rows, results = [], []
    for n in sizes:
        med = measure(n, args.repeats, block, width)
        lapack_s = med["lapack factor"] + med["lapack inverse"]
        single_s = med["lapack 1 factor"] + med["lapack 1 inverse"]
        tiled_s = med["tiled factor"] + med["tiled inverse"]
        path = "tiled"  # inside a fit, at every order (fastgp._linalg.lapack)
        rows.append([f"{n:,}", *(f"{med[s] * 1e3:.0f}" for s in STEPS),
                     f"{single_s / lapack_s:.3f}", f"{tiled_s / lapack_s:.3f}", path])
        results.append(dict(n=n, median_s=med, single_over_lapack=single_s / lapack_s,
                            tiled_over_lapack=tiled_s / lapack_s, fastgp_path=path))
        print(f"N={n}: " + ", ".join(f"{s} {med[s] * 1e3:.1f} ms" for s in STEPS), flush=True)
    print()
    print(format_table(["N", *(f"{s} (ms)" for s in STEPS), "lapack 1 / lapack",
                        "tiled / lapack", "fastgp takes"], rows))
    write_json(args.out, dict(environment=environment(), repeats=args.repeats, block=block,
                              tile_threads=width,
                              blocked_min_n=linalg.BLOCKED_MIN_N, results=results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

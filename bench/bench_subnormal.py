"""Is LAPACK slower on the Seattle matrix than on a synthetic one of the same
size, by how much, and is it the subnormal numbers?

    python -m bench.bench_subnormal                 # N = 8,759 (a few minutes)
    python -m bench.bench_subnormal --n 2000        # a quick check

The Seattle kernel (``bench/_problems.py``: C * Matern(nu=1.5) + WhiteKernel,
time in hours) has a length scale of about a day across a year of hours, so
most of K's entries are tiny: exp(-sqrt(3) r / l) reaches 1e-275 at the far
corner. Products of two such numbers in the factorisation's updates fall
below 2.2e-308, where the processor computes with subnormal numbers, many
times more slowly than with normal ones.

For three matrices of the same N, each in this process, one after another:

- ``seattle start``: the Seattle K at the benchmark's start (C = 100,
  length scale 24 h, noise 1);
- ``seattle fitted``: at the optimum fastgp reaches (C = 12.3^2, length
  scale 21.3 h, noise 1e-6: the fit of bench/bench_seattle.py);
- ``synthetic 1d``: the 1-D problem of bench/_problems.py (x standard
  normal, C * RBF + White at 1.0), the matrix of bench.compare;

it times SciPy's dpotrf then dpotri (one call each, as a fit makes them),
counts the subnormal entries of K, of its factor L and of K^-1, and repeats
the two calls on a copy of K whose entries below ``--flush-below`` in
absolute value are set to zero ("flushed"), reporting how much that changes
log|K| and K^-1. If the flushed matrix is fast and the answers agree, the
subnormals are the cause. Writes bench/results/subnormal.json.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, write_json
from ._problems import ALPHA, make_problem
from ._report import format_table

#: The optimum of the full Seattle fit (bench/bench_seattle.py): C, length scale, noise.
SEATTLE_FITTED = (12.3 ** 2, 21.3, 1e-6)

#: Smallest positive normal float64.
TINY = np.finfo(np.float64).tiny


def subnormal_count(A, lower_only=True):
    """Entries of A (its lower triangle) that are nonzero and below TINY."""
    part = np.tril(A) if lower_only else A
    magnitude = np.abs(part)
    return int(np.count_nonzero((magnitude > 0) & (magnitude < TINY)))


def factor_and_invert(K):
    """(seconds of dpotrf, seconds of dpotri, log|K|, subnormals in L, in
    K^-1, K^-1's lower triangle) on a Fortran copy of K."""
    from scipy.linalg import lapack

    B = np.array(K, order="F")
    start = time.perf_counter()
    L, info = lapack.dpotrf(B, lower=1, overwrite_a=1, clean=0)
    t_factor = time.perf_counter() - start
    if info != 0:
        raise RuntimeError(f"dpotrf failed: info = {info}")
    log_det = 2.0 * np.log(np.diag(L)).sum()
    in_factor = subnormal_count(L)
    start = time.perf_counter()
    Kinv, info = lapack.dpotri(L, lower=1, overwrite_c=1)
    t_inverse = time.perf_counter() - start
    if info != 0:
        raise RuntimeError(f"dpotri failed: info = {info}")
    return t_factor, t_inverse, log_det, in_factor, subnormal_count(Kinv), np.tril(Kinv)


def matrices(n):
    """{name: K (n, n)} for the three cases (module docstring)."""
    seattle = make_problem("seattle", n)
    c, length, noise = SEATTLE_FITTED
    fitted = seattle.kernel.clone_with_theta(np.log([c, length, noise]))
    synthetic = make_problem("1d", n)
    out = {}
    for name, kernel, X in (("seattle start", seattle.kernel, seattle.X),
                            ("seattle fitted", fitted, seattle.X),
                            ("synthetic 1d", synthetic.kernel, synthetic.X)):
        K = kernel(X)
        K[np.diag_indices_from(K)] += ALPHA
        out[name] = K
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_subnormal",
                                     description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--n", type=int, default=8759)
    parser.add_argument("--flush-below", type=float, default=2.0 ** -500,
                        help="zero the entries of K below this magnitude (default 2^-500)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/subnormal.json")
    args = parser.parse_args(argv)

    rows, results = [], []
    for name, K in matrices(args.n).items():
        in_K = subnormal_count(K)
        t_f, t_i, log_det, in_L, in_inv, Kinv = factor_and_invert(K)
        K[np.abs(K) < args.flush_below] = 0.0
        f_f, f_i, f_log_det, f_in_L, f_in_inv, f_Kinv = factor_and_invert(K)
        scale = np.abs(Kinv).max()
        inv_change = float(np.abs(f_Kinv - Kinv).max() / scale)
        del Kinv, f_Kinv
        result = dict(matrix=name, n=args.n, dpotrf_s=t_f, dpotri_s=t_i,
                      subnormal_K=in_K, subnormal_L=in_L, subnormal_Kinv=in_inv,
                      flushed_dpotrf_s=f_f, flushed_dpotri_s=f_i,
                      flushed_subnormal_L=f_in_L, flushed_subnormal_Kinv=f_in_inv,
                      log_det=log_det, log_det_change=f_log_det - log_det,
                      Kinv_relative_change=inv_change)
        results.append(result)
        rows.append([name, f"{t_f:.2f}", f"{t_i:.2f}", f"{in_K:,}", f"{in_L:,}",
                     f"{in_inv:,}", f"{f_f:.2f}", f"{f_i:.2f}", f"{f_in_L:,}",
                     f"{f_log_det - log_det:.1e}", f"{inv_change:.1e}"])
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in result.items()
                                      if k not in ("matrix", "n")), flush=True)
    print()
    print(" ".join(__doc__.split("\n\n")[0].split()))
    print(f"N = {args.n}; flushed: entries below {args.flush_below:.3g} set to zero")
    print(format_table(["matrix", "dpotrf (s)", "dpotri (s)", "subnormal in K", "in L",
                        "in K^-1", "flushed dpotrf (s)", "flushed dpotri (s)",
                        "flushed: in L", "log|K| change", "K^-1 change (rel.)"], rows))
    write_json(args.out, dict(environment=environment(), n=args.n,
                              flush_below=args.flush_below, results=results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does a GPLVM fit at N = 10,000 stay within one N x N buffer, and what does an iteration cost beside LAPACK's own factor and inverse?

    python -m bench.bench_gplvm_memory                       # the issue's case, N = 10,000
    python -m bench.bench_gplvm_memory --n 2000 --iterations 20   # a quick check

The GPLVM issue's motivating case: Y standard normal of shape (N, 12), Q = 2
latent dimensions started at PCA, ``ConstantKernel * RBF(two length scales) +
WhiteKernel`` started at 1.0, 100 L-BFGS-B iterations (tolerance 1e-12, so the
iteration count, not convergence, ends the run). A user's reverse-mode
autodiff GPLVM ran out of 32 GB on it. Reported:

- wall time of the fit, iterations and objective evaluations;
- peak resident memory above the process's resident memory before the data
  were made (imports and Numba's compilation are done earlier, by a small
  warm-up fit), as MB and as a multiple of 8 N^2 bytes; the issue's target is
  at most 1.2;
- time per iteration and per evaluation beside scipy's dpotrf + dpotri on an
  N x N matrix in the same process (the LAPACK floor: one evaluation is one
  dpotrf, one dpotri and O(N^2) passes);
- the final negative log marginal likelihood, the fitted kernel, versions,
  thread counts and git revision (bench/_measure.environment).

The measurement runs in this process, so run nothing else in it. It writes
bench/results/gplvm_memory_N<n>.json. At N = 10,000 on 2 cores expect about
15-20 s per evaluation (three Choleskys' worth of LAPACK), so about half an
hour for the whole run: run it on an otherwise idle machine.
"""

import argparse
import gc
import time
import warnings

import numpy as np
from scipy.linalg import lapack
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from ._measure import MB, REPO_ROOT, PeakMemory, environment, write_json

N_FEATURES = 12
N_COMPONENTS = 2


def kernel():
    return C(1.0) * RBF(np.ones(N_COMPONENTS)) + WhiteKernel(1.0)


def make_data(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, N_FEATURES))


def lapack_floor(n, repeats, seed=1):
    """Median seconds of dpotrf and of dpotri, in place, on an N x N SPD matrix
    (a kernel matrix, so the conditioning is that of the fit's)."""
    from fastgp._backend.covariance import make_covariance

    X = np.random.default_rng(seed).standard_normal((n, N_COMPONENTS))
    k = kernel()
    cov = make_covariance(k, X)
    B = np.empty((n, n), order="F")
    potrf, potri = [], []
    for _ in range(repeats):
        cov.fill_lower(k.theta, np.full(n, 1e-10), B)
        t0 = time.perf_counter()
        _, info = lapack.dpotrf(B, lower=1, overwrite_a=1, clean=0)
        t1 = time.perf_counter()
        _, info2 = lapack.dpotri(B, lower=1, overwrite_c=1)
        t2 = time.perf_counter()
        if info or info2:
            raise RuntimeError(f"LAPACK failed: dpotrf {info}, dpotri {info2}")
        potrf.append(t1 - t0)
        potri.append(t2 - t1)
    del B
    gc.collect()
    return {"dpotrf_s": float(np.median(potrf)), "dpotri_s": float(np.median(potri)),
            "dpotrf_plus_dpotri_s": float(np.median(np.add(potrf, potri)))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--floor-repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    n = args.n

    from fastgp import GPLVM

    # compile (or load from Numba's cache) outside the measurement
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        GPLVM(N_COMPONENTS, kernel=kernel(), max_iter=3).fit(make_data(300, seed=9))
    gc.collect()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        with PeakMemory() as memory:
            Y = make_data(n)
            start = time.perf_counter()
            gplvm = GPLVM(N_COMPONENTS, kernel=kernel(), max_iter=args.iterations,
                          tol=1e-12).fit(Y)
            wall = time.perf_counter() - start
    n_iter, n_evaluations = gplvm.n_iter_, gplvm.n_evaluations_
    value, fitted_kernel = -gplvm.log_marginal_likelihood_value_, gplvm.kernel_
    del gplvm  # its factor L_ is N x N: free it before the floor's own buffer
    gc.collect()
    floor = lapack_floor(n, args.floor_repeats)
    per_iteration = wall / max(n_iter, 1)
    per_evaluation = wall / max(n_evaluations, 1)
    result = {
        "question": __doc__.splitlines()[0],
        "n": n, "n_features": N_FEATURES, "n_components": N_COMPONENTS,
        "iterations_asked": args.iterations,
        "fit": {
            "wall_s": wall, "n_iter": n_iter, "n_evaluations": n_evaluations,
            "per_iteration_s": per_iteration, "per_evaluation_s": per_evaluation,
            "neg_log_marginal_likelihood": value,
            "kernel": repr(fitted_kernel),
            "warnings": [str(w.message)[:300] for w in caught],
        },
        "memory": {**memory.as_dict(n), "target_multiple_of_8n2": 1.2,
                   "workspace_mb": 8.0 * n * n / MB},
        "lapack_floor": floor,
        "per_evaluation_over_floor": per_evaluation / floor["dpotrf_plus_dpotri_s"],
        "environment": environment(),
    }
    out = args.out or REPO_ROOT / "bench" / "results" / f"gplvm_memory_N{n}.json"
    write_json(out, result)
    m = result["memory"]
    print(f"GPLVM fit, N = {n:,}, D = {N_FEATURES}, Q = {N_COMPONENTS}: "
          f"{wall:.1f} s wall, {n_iter} iterations, {n_evaluations} evaluations")
    print(f"  peak memory above the pre-data baseline: {m['delta_mb']:.0f} MB = "
          f"{m['multiple_of_8n2']:.3f} x 8 N^2 (target <= 1.2; 8 N^2 = "
          f"{m['workspace_mb']:.0f} MB; {m['method']})")
    print(f"  per iteration {per_iteration:.3f} s, per evaluation {per_evaluation:.3f} s; "
          f"scipy dpotrf + dpotri {floor['dpotrf_plus_dpotri_s']:.3f} s "
          f"(ratio {result['per_evaluation_over_floor']:.2f})")
    print(f"  final -log p(Y|X) {result['fit']['neg_log_marginal_likelihood']:.6g}, "
          f"kernel {fitted_kernel}")
    print(f"  written to {out}")
    return result


if __name__ == "__main__":
    main()

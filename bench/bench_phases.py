"""Where does one loss+gradient spend its time, phase by phase, against LAPACK's dpotrf + dpotri?

    python -m bench.bench_phases                          # 1d, ard10, gplvm at N = 2,000; Mauna Loa
    python -m bench.bench_phases --problems gplvm --n 2000 --repeats 9

For each problem, one process times (median of interleaved rounds) the phases
of one evaluation as fastgp runs them in its one N x N buffer: the fill of K's
lower triangle, the factor (fastgp._linalg.lapack.cholesky_in_place), the solve
A = K^-1 Y (dpotrs), the inverse (cho_inverse_in_place) and the fused
gradient pass (the regression's theta trace; the GPLVM's theta and latent
trace in one pass), then the whole objective call, and beside them the floor:
SciPy's own dpotrf then dpotri on a copy of the same K. Problems: ``1d``,
``ard10`` and ``gplvm`` of bench/_problems.py at ``--n``, and ``mauna``: the
Mauna Loa CO2 series shipped with fastgp (N = 2,225) with Rasmussen &
Williams' 11-hyperparameter kernel (``fastgp.cli.mauna_loa_kernel``), the
main job's kernel. Writes bench/results/phases.json.

The Numba phases (fill, pass) are timed as the objective runs them: with
OpenBLAS's workers asleep (fastgp._linalg.blas_pool.release_blas_workers, called
before each, untimed). Timed right after a LAPACK call, as the rounds would
otherwise do, they would share the cores with spinning workers and read
about twice their time inside a loss+gradient.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ._measure import REPO_ROOT, environment, write_json
from ._problems import ALPHA, make_problem
from ._report import format_table

PHASES = ["fill", "factor", "solve", "inverse", "pass"]
NUMBA_PHASES = ("fill", "pass")


def _mauna_problem():
    from fastgp.cli import mauna_loa_kernel
    from fastgp.datasets import load_mauna_loa_co2

    X, y = load_mauna_loa_co2()
    return X, (y - y.mean())[:, None], mauna_loa_kernel(), False


def _setup(name, n):
    """(phase callables, whole-evaluation callable, floor callable) for one
    problem; every phase works on the same Fortran-ordered buffer."""
    from scipy.linalg import lapack

    from fastgp._linalg import lapack as linalg
    from fastgp._backend.covariance import make_covariance
    from fastgp._backend.latent import LatentCovariance
    from fastgp._solvers.workspace import Workspace
    from fastgp._solvers.cholesky.latent import LatentNegLogMarginalLikelihood
    from fastgp._solvers.latent_density import lower_latent_kernel
    from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

    if name == "mauna":
        X, Y, kernel, latent = _mauna_problem()
    else:
        problem = make_problem(name, n)
        X, Y, kernel, latent = problem.X, problem.Y, problem.kernel, problem.latent
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    n = len(X)
    theta = kernel.theta
    diag_add = np.full(n, ALPHA)
    if latent:
        program = lower_latent_kernel(kernel, X.shape[1])
        covariance = LatentCovariance(kernel, program, X)
        objective = LatentNegLogMarginalLikelihood(kernel, Y, X.shape[1], ALPHA,
                                                   Workspace(n))
        z = objective.pack(X, theta)
        whole = lambda: objective(z)  # noqa: E731
        grad_pass = lambda B, A: covariance.grad_latent(theta, B, A)  # noqa: E731
    else:
        covariance = make_covariance(kernel, X)
        objective = NegLogMarginalLikelihood(covariance, Y, ALPHA, Workspace(n))
        whole = lambda: objective(theta)  # noqa: E731
        grad_pass = lambda B, A: covariance.grad_trace(theta, B, A)  # noqa: E731

    B = np.empty((n, n), order="F")
    covariance.fill_lower(theta, diag_add, B)
    K = B.copy(order="F")
    state = {}

    def fill():
        covariance.fill_lower(theta, diag_add, B)

    def factor():
        linalg.cholesky_in_place(B)

    def solve():
        state["A"] = linalg.cho_solve_factor(B, Y)

    def inverse():
        linalg.cho_inverse_in_place(B)

    def gradient():
        grad_pass(B, state["A"])

    def floor():
        C = K.copy(order="F")
        start = time.perf_counter()
        L, info = lapack.dpotrf(C, lower=1, overwrite_a=1)
        L, info2 = lapack.dpotri(L, lower=1, overwrite_c=1)
        elapsed = time.perf_counter() - start
        assert info == 0 and info2 == 0
        return elapsed

    return n, dict(zip(PHASES, [fill, factor, solve, inverse, gradient])), whole, floor


def _time(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(name, n, repeats):
    n, phases, whole, floor = _setup(name, n)
    whole()  # compile and warm
    for phase in phases.values():
        phase()
    from fastgp._linalg.blas_pool import release_blas_workers

    times = {key: [] for key in [*PHASES, "loss+grad", "floor"]}
    for _ in range(repeats):  # interleaved rounds
        for key, phase in phases.items():
            if key in NUMBA_PHASES:
                release_blas_workers()
            times[key].append(_time(phase))
        times["loss+grad"].append(_time(whole))
        times["floor"].append(floor())
    return n, {key: statistics.median(values) for key, values in times.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.bench_phases",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="1d,ard10,gplvm,mauna")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench/results/phases.json")
    args = parser.parse_args(argv)

    rows, results = [], []
    for name in args.problems.split(","):
        n, med = measure(name, args.n, args.repeats)
        parts = sum(med[key] for key in PHASES)
        rows.append([name, f"{n:,}", *(f"{med[key] * 1e3:.1f}" for key in PHASES),
                     f"{parts * 1e3:.1f}", f"{med['loss+grad'] * 1e3:.1f}",
                     f"{med['floor'] * 1e3:.1f}", f"{med['loss+grad'] / med['floor']:.2f}"])
        results.append(dict(problem=name, n=n, median_s=med))
        print(f"{name} N={n}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items()),
              flush=True)
    print()
    print(format_table(["problem", "N", *(f"{p} (ms)" for p in PHASES), "sum (ms)",
                        "loss+grad (ms)", "floor (ms)", "loss+grad / floor"], rows))
    write_json(args.out, dict(environment=environment(), repeats=args.repeats,
                              results=results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

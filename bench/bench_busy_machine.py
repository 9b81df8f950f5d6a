"""Does a loss+gradient at N = 1,500 stay within 1.5x (median) and 3x (worst of ten) of its quiet single-thread time while another process runs a 2-thread OpenBLAS loop, with quiet figures unchanged by fastgp's thread policy?

    python -m bench.bench_busy_machine                 # N = 1,500, ten calls per case
    python -m bench.bench_busy_machine --n 500 --repeats 3
    python -m bench.bench_busy_machine --fits 1000,2500 --repeats 3   # whole fits

The question of a shared machine: another fastgp fit, or any NumPy/SciPy job,
keeps cores busy, and a library that starts as many threads as there are
cores (Numba's and OpenBLAS's pools) waits for time slices on every call.
fastgp's policy (fastgp._engine.threads) gives each evaluation only the idle
cores, read from the scheduler's run queue before the call.

Problem: bench/_problems.py's "1d" (x standard normal, y = sin(x) + 0.01
noise, C*RBF + White at theta = 0). One loss+gradient is
fastgp._solvers.cholesky.objective.NegLogMarginalLikelihood with one reused workspace, called
inside fastgp._engine.threads.threads_for as the fit core calls it, with the
policy on (FASTGP_ADAPTIVE_THREADS=1) or off (the default: the user's
thread settings throughout). Cases, in this order:

1. quiet, one thread (Numba and BLAS limited to 1): the reference time;
2. quiet, the default threads, policy off and on (unchanged on a quiet
   machine: the policy must cost nothing there);
3. busy: a competitor process (OPENBLAS_NUM_THREADS=2) runs dgemm, dpotrf and
   dpotri on a 1,000 x 1,000 matrix in a loop; the default threads, policy
   off and on.

4. the operating system's floor: the same single-threaded NumPy dgemm loop
   (not fastgp) quiet and under the same competitor. On two cores the
   scheduler places the competitor's two threads and one more as two on
   one core and one on the other, so any single-threaded computation gets
   about half a core; a 1-thread fastgp evaluation cannot do better.

``--fits N1,N2``: whole fits instead, the question a user meets. A 2-D ARD
problem (bench/_problems.py's "ard10" cut to its first two dimensions,
C*RBF(two length scales) + White, ``n_restarts_optimizer=3``, random_state
0) at each N, each fit in a fresh process (its compilation loaded from the
cache by a warm-up fit first), under the 2-thread competitor, with the
policy on and off in turn (FASTGP_ADAPTIVE_THREADS), ``--repeats``
alternations; the fits' wall times, and quiet ones for scale.

Each case makes one untimed warm-up call and then ``--repeats`` timed calls;
the table gives the median and the worst, and each as a multiple of the
quiet single-thread median. Run it on an otherwise quiet machine: other load
is counted as the competitor's.

Writes bench/results/busy_machine.json.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ._measure import REPO_ROOT, environment, write_json
from ._problems import ALPHA, make_problem
from ._report import format_table

#: The competing process: a 2-thread OpenBLAS loop (matrix size in argv[1]).
COMPETITOR = r"""
import sys
import numpy as np
import scipy.linalg.lapack as lapack
n = int(sys.argv[1])
rng = np.random.default_rng(0)
A = rng.standard_normal((n, n))
K = A @ A.T + n * np.eye(n)
print("ready", flush=True)
while True:
    A @ A                                   # dgemm
    L = lapack.dpotrf(K, lower=1)[0]
    lapack.dpotri(L, lower=1)
"""


def start_competitor(size, threads=2):
    """The competitor process, started and running its loop."""
    import os

    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    proc = subprocess.Popen([sys.executable, "-c", COMPETITOR, str(size)], env=env,
                            stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError("the competitor process did not start")
    time.sleep(0.5)  # let its loop settle
    return proc


def time_calls(objective, theta, n, repeats, adaptive):
    """Seconds of ``repeats`` loss+gradient calls (after one warm-up), each
    run as the fit core runs it: inside threads_for, through its governor,
    with the policy on (``FASTGP_ADAPTIVE_THREADS=1``) where ``adaptive``."""
    import os

    from fastgp._engine.threads import ADAPTIVE_ENV, threads_for

    seconds = []
    before = os.environ.get(ADAPTIVE_ENV)
    os.environ[ADAPTIVE_ENV] = "1" if adaptive else "0"
    try:
        with threads_for(n) as governor:
            governor.evaluate(objective, theta)
            for _ in range(repeats):
                start = time.perf_counter()
                governor.evaluate(objective, theta)
                seconds.append(time.perf_counter() - start)
    finally:
        if before is None:
            del os.environ[ADAPTIVE_ENV]
        else:
            os.environ[ADAPTIVE_ENV] = before
    return seconds


def time_reference_loop(repeats, size=600, products=10):
    """Seconds of ``repeats`` rounds of ``products`` single-threaded dgemm
    calls on a ``size`` x ``size`` matrix: a computation that is not fastgp's,
    to show what the scheduler gives one thread."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    A = np.random.default_rng(0).standard_normal((size, size))
    seconds = []
    with threadpool_limits(limits=1, user_api="blas"):
        A @ A
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(products):
                A @ A
            seconds.append(time.perf_counter() - start)
    return seconds


#: One fit of --fits, in a fresh process (N in argv[1]); prints its seconds.
FIT = r"""
import sys, time, warnings
import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel, ConstantKernel as C
from fastgp import GaussianProcessRegressor
from bench._problems import ard_10d
n = int(sys.argv[1])
X, y = ard_10d(n, seed=0, d=2)
kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(1.0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    GaussianProcessRegressor(kernel, random_state=0).fit(X[:300], y[:300])  # warm-up
    start = time.perf_counter()
    gpr = GaussianProcessRegressor(kernel, n_restarts_optimizer=3, random_state=0).fit(X, y)
print(time.perf_counter() - start, gpr.log_marginal_likelihood_value_, flush=True)
"""


def time_fits(sizes, repeats, competitor_size, competitor_threads):
    """{case: [seconds, ...]} of whole fits (module docstring, ``--fits``)."""
    import os

    def fit(n, adaptive):
        env = dict(os.environ, FASTGP_ADAPTIVE_THREADS="1" if adaptive else "0")
        done = subprocess.run([sys.executable, "-c", FIT, str(n)], env=env, cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True)
        seconds, value = done.stdout.split()
        return float(seconds), float(value)

    cases = {}

    def record(name, n, adaptive):
        seconds, value = fit(n, adaptive)
        cases.setdefault(name, []).append((seconds, value))
        print(f"{name}: {seconds:.2f} s, log marginal likelihood {value:.6f}", flush=True)

    for n in sizes:
        for _ in range(repeats):
            record(f"N = {n}, quiet, policy on", n, True)
        competitor = start_competitor(competitor_size, competitor_threads)
        try:
            for _ in range(repeats):
                for adaptive in (True, False):
                    record(f"N = {n}, busy, policy {'on' if adaptive else 'off'}", n, adaptive)
        finally:
            competitor.kill()
            competitor.wait()
    return cases


def main_fits(args):
    cases = time_fits(args.fits, args.repeats, args.competitor_size, args.competitor_threads)
    rows = [[name, ", ".join(f"{s:.2f}" for s, _ in runs),
             f"{statistics.median(s for s, _ in runs):.2f}",
             f"{runs[0][1]:.6f}"] for name, runs in cases.items()]
    print("whole fits (s), 2-D ARD with 3 restarts, beside a "
          f"{args.competitor_threads}-thread OpenBLAS competitor")
    print(format_table(["case", "fits (s)", "median (s)", "log marginal likelihood"], rows))
    write_json(args.out.with_name("busy_machine_fits.json"),
               dict(environment=environment(), repeats=args.repeats,
                    competitor_threads=args.competitor_threads,
                    cases={name: [dict(seconds=s, lml=v) for s, v in runs]
                           for name, runs in cases.items()}))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_500)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--competitor-size", type=int, default=1_000)
    parser.add_argument("--competitor-threads", type=int, default=2)
    parser.add_argument("--fits", type=lambda text: [int(v) for v in text.split(",")],
                        default=None, help="time whole fits at these N instead")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "bench/results/busy_machine.json")
    args = parser.parse_args(argv)
    if args.fits:
        return main_fits(args)

    import numba
    from threadpoolctl import threadpool_limits

    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.workspace import Workspace
    from fastgp._solvers.cholesky.objective import NegLogMarginalLikelihood

    problem = make_problem("1d", args.n)
    objective = NegLogMarginalLikelihood(make_covariance(problem.kernel, problem.X),
                                         problem.Y, ALPHA, Workspace(problem.n))
    theta = problem.theta0
    objective(theta)  # compile (or load) the jitted passes

    cases = {}
    user_threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            cases["quiet, 1 thread"] = time_calls(objective, theta, args.n, args.repeats,
                                                  adaptive=False)
    finally:
        numba.set_num_threads(user_threads)
    cases["quiet, default threads, policy off"] = time_calls(
        objective, theta, args.n, args.repeats, adaptive=False)
    cases["quiet, default threads, policy on"] = time_calls(
        objective, theta, args.n, args.repeats, adaptive=True)
    reference_loop = {"quiet": time_reference_loop(args.repeats)}
    competitor = start_competitor(args.competitor_size, args.competitor_threads)
    try:
        reference_loop["busy"] = time_reference_loop(args.repeats)
        cases["busy, default threads, policy off"] = time_calls(
            objective, theta, args.n, args.repeats, adaptive=False)
        cases["busy, default threads, policy on"] = time_calls(
            objective, theta, args.n, args.repeats, adaptive=True)
    finally:
        competitor.kill()
        competitor.wait()

    reference = statistics.median(cases["quiet, 1 thread"])
    summary, rows = {}, []
    for name, seconds in cases.items():
        median, worst = statistics.median(seconds), max(seconds)
        summary[name] = dict(median_s=median, worst_s=worst, seconds=seconds,
                             median_ratio=median / reference, worst_ratio=worst / reference)
        rows.append([name, f"{median:.4f}", f"{worst:.4f}", f"{median / reference:.2f}",
                     f"{worst / reference:.2f}"])
    loop_quiet = statistics.median(reference_loop["quiet"])
    floor = dict(median_ratio=statistics.median(reference_loop["busy"]) / loop_quiet,
                 worst_ratio=max(reference_loop["busy"]) / loop_quiet,
                 seconds=reference_loop)
    rows.append(["OS floor: 1-thread dgemm loop (not fastgp), busy / quiet", "", "",
                 f"{floor['median_ratio']:.2f}", f"{floor['worst_ratio']:.2f}"])
    busy = summary["busy, default threads, policy on"]
    met = busy["median_ratio"] <= 1.5 and busy["worst_ratio"] <= 3.0
    print(__doc__.splitlines()[0])
    print(f"N = {args.n}, {args.repeats} calls per case, Numba threads {user_threads}, "
          f"competitor: {args.competitor_threads}-thread OpenBLAS on "
          f"{args.competitor_size} x {args.competitor_size}")
    print(format_table(["case", "median (s)", "worst (s)", "median / quiet 1-thread",
                        "worst / quiet 1-thread"], rows))
    print(f"busy, policy on: median {busy['median_ratio']:.2f}x (target <= 1.5), worst "
          f"{busy['worst_ratio']:.2f}x (target <= 3): {'met' if met else 'NOT met'}; "
          f"a single-threaded loop that is not fastgp's gets {floor['median_ratio']:.2f}x")
    write_json(args.out, dict(environment=environment(), n=args.n, repeats=args.repeats,
                              competitor_size=args.competitor_size,
                              competitor_threads=args.competitor_threads,
                              cases=summary, target_met=met, single_thread_floor=floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The GPU path on one card, side by side with GPyTorch and JAX: is it right,
how fast and how lean, and how far does it reach?

    python -m bench.bench_device --out OUT            # on a machine with a GPU
    python -m bench.bench_device --reference          # here, on the CPU (once)

Needs an NVIDIA GPU, CuPy, nvmath-python and numba-cuda (docs/gpu.md); the
peers need torch with gpytorch, and jax. Every case runs in its own process
(its device memory, its peak), in this order, each with a time limit and
only while the whole run's ``--budget`` lasts; every result is appended to
OUT/device.jsonl as it comes, so a run cut short keeps what it measured.

- ``check``: the GPU path against the CPU path's values (the reference file
  bench/results/device_reference.npz, written by ``--reference`` with the
  CPU path on the same seeded data): the regressor's log marginal
  likelihood, its gradient and predictions (mean, standard deviation) at
  fixed hyperparameters, and the GPLVM's value and gradients (latent points
  and theta), at N = 2,000 and 20,000 (1-D C*RBF+White, 10-D ARD
  C*RBF+White, the GPLVM's 12 features and 2 latent dimensions). Reported:
  the largest relative error of each (target 1e-9), and the compile time of
  the kernels (the first evaluation).
- ``fastgp``: one loss+gradient at N = 40,000 (1-D), warm, the median of
  three, its phases (fill, factor, solve, inverse, pass) timed apart, and
  the peak of CuPy's pool over a fit's evaluation (target: 1.1 x 8 N^2 +
  256 MB); in the same process the device floor: cuSOLVER's dpotrf and
  dpotri on the same buffer (dpotri refuses from N = 46,341).
- ``gpytorch``, ``jax``: the same loss+gradient by GPyTorch (Cholesky mode)
  and JAX (``jit(value_and_grad)``), first call and warm; their peaks.
- ``size``: one loss+gradient at N = 120,000.
- ``gplvm``: a GPLVM fit at N = 10,000 (D = 12, Q = 2).
- ``ard``: the 10-D ARD problem fitted exactly at N = 50,000, within the time
  left (evaluations, seconds per evaluation, the fit's time or its
  projection).

Prints a table at the end. Peak device memory is CuPy's pool (every array
fastgp allocates, cuSOLVER's workspaces included); cuBLAS's own workspace
(32 MiB on Hopper) lies outside it.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

#: FASTGP_BENCH_DEVICE_SMALL=1: every size shrunk to a few dozen points, for
#: a dry run of this script under numba-cuda's simulator (no GPU).
SMALL = os.environ.get("FASTGP_BENCH_DEVICE_SMALL") == "1"

REFERENCE = REPO / "bench" / "results" / (
    "device_reference_small.npz" if SMALL else "device_reference.npz")

#: (case, seconds it may take) in the order they run.
CASES = (("env", 60), ("check", 240), ("fastgp", 180), ("gpytorch", 150), ("jax", 200),
         ("size", 240), ("gplvm", 100), ("ard", 600))

#: Sizes of the correctness check, of the timing, of the largest case and
#: of the two fits.
CHECK_SIZES = (40, 70) if SMALL else (2000, 20000)
TIMING_N = 64 if SMALL else 40000
SIZE_N = 80 if SMALL else 120000
GPLVM_N = 50 if SMALL else 10000
ARD_N = 60 if SMALL else 50000


# ------------------------------------------------------------ problems
def regression_problem(name, n):
    """(X, y, kernel at the checked hyperparameters, X_query (200, d))."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from bench._problems import ard_10d, sin_1d

    X, y = (sin_1d if name == "1d" else ard_10d)(n, seed=0)
    d = X.shape[1]
    length_scales = 0.8 + 0.4 * np.arange(d) / max(d - 1, 1)
    kernel = C(1.3) * RBF(length_scales if d > 1 else 0.9) + WhiteKernel(1e-2)
    X_query = np.random.default_rng(1).standard_normal((200, d))
    return X, y, kernel, X_query


def gplvm_problem(n):
    """(Y (n, 12), z: the PCA start and the kernel's theta, kernel)."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from bench._problems import gplvm_data

    X0, Y = gplvm_data(n, seed=0)
    kernel = C(1.0) * RBF([1.0, 1.2]) + WhiteKernel(0.5)
    return Y, np.concatenate([X0.ravel(), kernel.theta]), kernel


def regression_answers(name, n, device):
    """value, gradient, mean, std of the regressor at fixed theta."""
    from fastgp import GaussianProcessRegressor

    X, y, kernel, X_query = regression_problem(name, n)
    gpr = GaussianProcessRegressor(kernel, optimizer=None, solver="cholesky",
                                   device=device).fit(X, y)
    value, grad = gpr.log_marginal_likelihood(kernel.theta, eval_gradient=True)
    mean, std = gpr.predict(X_query, return_std=True)
    return {"value": np.array(value), "grad": grad, "mean": mean, "std": std}


def gplvm_answers(n, device):
    """value and gradient of the GPLVM's objective at its start."""
    from fastgp._solvers.choice import exact_solver

    Y, z, kernel = gplvm_problem(n)
    solver = exact_solver(device)
    objective = solver.latent_objective(kernel, Y, 2, 1e-8)
    with solver.evaluation_context(n) as place:
        value, grad = place.evaluate(objective, z)
    return {"value": np.array(value), "grad_x": grad[:-kernel.n_dims],
            "grad_theta": grad[-kernel.n_dims:]}


def write_reference():
    """The CPU path's answers for ``check`` (run here, once: minutes at
    N = 20,000 on two cores)."""
    arrays = {}
    for n in CHECK_SIZES:
        for name in ("1d", "ard10"):
            for key, value in regression_answers(name, n, "cpu").items():
                arrays[f"{name}_{n}_{key}"] = value
            print(f"reference {name} {n}", flush=True)
        for key, value in gplvm_answers(n, "cpu").items():
            arrays[f"gplvm_{n}_{key}"] = value
        print(f"reference gplvm {n}", flush=True)
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(REFERENCE, **arrays)


# ---------------------------------------------------------- measuring
class PoolPeak:
    """CuPy's allocator, wrapped: the largest ``used_bytes`` of its pool
    since :meth:`reset` (every CuPy array and workspace fastgp holds)."""

    def __init__(self, cupy):
        self.pool = cupy.get_default_memory_pool()
        self.peak = 0
        cupy.cuda.set_allocator(self.malloc)

    def malloc(self, size):
        memory = self.pool.malloc(size)
        self.peak = max(self.peak, self.pool.used_bytes())
        return memory

    def reset(self):
        self.peak = self.pool.used_bytes()


def _sync():
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _timed(function, *args):
    _sync()
    start = time.perf_counter()
    result = function(*args)
    _sync()
    return time.perf_counter() - start, result


def _relative(got, expected):
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    scale = max(float(np.max(np.abs(expected))), 1e-300)
    return float(np.max(np.abs(got - expected)) / scale)


# --------------------------------------------------------------- cases
def case_env():
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    free, total = cupy.cuda.runtime.memGetInfo()
    import numba_cuda
    import nvmath

    return {"gpu": props["name"].decode(), "free_gb": free / 1e9, "total_gb": total / 1e9,
            "numpy": np.__version__, "cupy": cupy.__version__,
            "nvmath": nvmath.__version__, "numba_cuda": numba_cuda.__version__}


def case_check():
    reference = np.load(REFERENCE)
    out = {}
    start = time.perf_counter()
    for n in CHECK_SIZES:
        for name in ("1d", "ard10"):
            t0 = time.perf_counter()
            got = regression_answers(name, n, "cuda")
            out[f"{name}_{n}"] = {key: _relative(value, reference[f"{name}_{n}_{key}"])
                                  for key, value in got.items()}
            out[f"{name}_{n}"]["seconds"] = time.perf_counter() - t0
            if n == CHECK_SIZES[0] and name == "1d":
                out["first_fit_with_compilation_s"] = time.perf_counter() - start
        t0 = time.perf_counter()
        got = gplvm_answers(n, "cuda")
        out[f"gplvm_{n}"] = {key: _relative(value, reference[f"gplvm_{n}_{key}"])
                             for key, value in got.items()}
        out[f"gplvm_{n}"]["seconds"] = time.perf_counter() - t0
    out["worst"] = max(v for case in out.values() if isinstance(case, dict)
                       for k, v in case.items() if k != "seconds")
    return out


def _objective(n, device="cuda"):
    from fastgp._backend.covariance import make_covariance
    from fastgp._solvers.choice import exact_solver

    from bench._problems import make_problem

    problem = make_problem("1d", n)
    solver = exact_solver(device)
    objective = solver.objective(make_covariance(problem.kernel, problem.X),
                                 problem.Y, np.full(n, 1e-10), None)
    return solver, objective, problem.kernel.theta


def case_fastgp():
    import cupy

    from fastgp._linalg.device_blocked import cho_inverse_in_place, cho_solve, cholesky_in_place

    n = TIMING_N
    peak = PoolPeak(cupy)
    solver, objective, theta = _objective(n)
    out = {"n": n, "buffer_gb": 8 * n * n / 1e9}
    with solver.evaluation_context(n) as place:
        peak.reset()
        first, _ = _timed(place.evaluate, objective, theta)
        times = [_timed(place.evaluate, objective, theta)[0] for _ in range(3)]
        out.update(first_s=first, loss_grad_s=sorted(times)[1], loss_grad_all_s=times,
                   peak_bytes=peak.peak, peak_x8N2=peak.peak / (8 * n * n),
                   peak_target_bytes=1.1 * 8 * n * n + 256e6)
        # the phases, on the same buffer
        tiles, B = solver.device.tiles, objective.workspace.buffer()
        covariance, diag = objective.covariance, objective._diag
        out["fill_s"], _ = _timed(covariance.fill_lower, theta, diag, B)
        out["factor_s"], _ = _timed(cholesky_in_place, tiles, B)
        out["solve_s"], A = _timed(cho_solve, tiles, B, objective._Y)
        out["inverse_s"], _ = _timed(cho_inverse_in_place, tiles, B, solver.block)
        out["pass_s"], _ = _timed(covariance.grad_trace, theta, B, A)
        # the floor: cuSOLVER's dpotrf and dpotri on the same buffer
        covariance.fill_lower(theta, diag, B)
        out["floor_potrf_s"], _ = _timed(cholesky_in_place, tiles, B)
        info = tiles.info_vector(1)
        try:
            out["floor_potri_s"], _ = _timed(tiles.potri, B, info, 0)
            out["floor_s"] = out["floor_potrf_s"] + out["floor_potri_s"]
            out["ratio_to_floor"] = out["loss_grad_s"] / out["floor_s"]
        except Exception as exc:  # noqa: BLE001 - recorded, the rest goes on
            out["floor_potri_error"] = repr(exc)
    return out


def _gpytorch_loss(n):
    import gpytorch
    import torch

    from bench._problems import sin_1d

    X, y = sin_1d(n, seed=0)
    Xt = torch.tensor(X, device="cuda", dtype=torch.float64)
    yt = torch.tensor(y, device="cuda", dtype=torch.float64)

    class Model(gpytorch.models.ExactGP):
        def __init__(self, likelihood):
            super().__init__(Xt, yt, likelihood)
            self.mean = gpytorch.means.ZeroMean()
            self.covar = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean(x), self.covar(x))

    likelihood = gpytorch.likelihoods.GaussianLikelihood().cuda().double()
    model = Model(likelihood).cuda().double()
    model.covar.outputscale = 1.0
    model.covar.base_kernel.lengthscale = 1.0
    likelihood.noise = 1.0
    model.train()
    likelihood.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)

    def loss_grad():
        model.zero_grad()
        loss = -mll(model(Xt), yt) * n
        loss.backward()
        torch.cuda.synchronize()
        return float(loss)

    return torch, gpytorch, loss_grad


def case_gpytorch():
    n = TIMING_N
    torch, gpytorch, loss_grad = _gpytorch_loss(n)
    times = []
    with gpytorch.settings.max_cholesky_size(10**9), gpytorch.settings.cholesky_max_tries(6):
        for _ in range(3):
            torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
            value = loss_grad()
            times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated()
    return {"n": n, "first_s": times[0], "loss_grad_s": min(times[1:]), "value": value,
            "peak_bytes": peak, "peak_x8N2": peak / (8 * n * n), "gpytorch": gpytorch.__version__}


def case_jax():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    from bench._problems import sin_1d

    n = TIMING_N
    X, y = sin_1d(n, seed=0)
    x, yj = jnp.asarray(X[:, 0]), jnp.asarray(y)
    index = jnp.arange(n)

    def nll(log_params):
        scale, length, noise = jnp.exp(log_params)
        d = (x[:, None] - x[None, :]) / length
        K = (scale * jnp.exp(-0.5 * d * d)).at[index, index].add(noise + 1e-10)
        L = jnp.linalg.cholesky(K)
        a = cho_solve((L, True), yj)
        return (0.5 * yj @ a + jnp.sum(jnp.log(jnp.diag(L)))
                + 0.5 * n * math.log(2 * math.pi))

    f = jax.jit(jax.value_and_grad(nll))
    p = jnp.zeros(3)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        value, grad = f(p)
        grad.block_until_ready()
        times.append(time.perf_counter() - start)
    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use", 0)
    return {"n": n, "first_s": times[0], "loss_grad_s": min(times[1:]), "value": float(value),
            "peak_bytes": peak, "peak_x8N2": peak / (8 * n * n), "jax": jax.__version__}


def case_size():
    import cupy

    n = SIZE_N
    peak = PoolPeak(cupy)
    solver, objective, theta = _objective(n)
    with solver.evaluation_context(n) as place:
        seconds, (value, grad) = _timed(place.evaluate, objective, theta)
    return {"n": n, "loss_grad_s": seconds, "finite": bool(np.isfinite(value)),
            "value": float(value), "peak_bytes": peak.peak, "peak_x8N2": peak.peak / (8 * n * n)}


def case_gplvm(budget):
    import warnings

    from fastgp import GPLVM

    from bench._problems import gplvm_data

    _, Y = gplvm_data(GPLVM_N, seed=0)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = GPLVM(n_components=2, device="cuda", random_state=0,
                      max_time=max(10.0, budget - 20.0)).fit(Y)
    return {"n": GPLVM_N, "fit_s": time.perf_counter() - start, "n_iter": int(model.n_iter_),
            "n_evaluations": int(model.n_evaluations_),
            "lml": float(model.log_marginal_likelihood_value_),
            "warnings": [str(w.message)[:200] for w in caught]}


def case_ard(budget):
    import warnings

    from fastgp import GaussianProcessRegressor

    from bench._problems import make_problem

    problem = make_problem("ard10", ARD_N)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpr = GaussianProcessRegressor(problem.kernel, device="cuda",
                                       max_time=max(10.0, budget - 30.0)).fit(problem.X,
                                                                              problem.Y.ravel())
    seconds = time.perf_counter() - start
    return {"n": ARD_N, "fit_s": seconds, "n_iter": int(gpr.n_iter_),
            "n_evaluations": int(gpr.n_evaluations_),
            "seconds_per_evaluation": seconds / max(gpr.n_evaluations_, 1),
            "lml": float(gpr.log_marginal_likelihood_value_), "kernel": str(gpr.kernel_),
            "warnings": [str(w.message)[:200] for w in caught]}


def run_case(name, budget):
    functions = {"env": case_env, "check": case_check, "fastgp": case_fastgp,
                 "gpytorch": case_gpytorch, "jax": case_jax, "size": case_size,
                 "gplvm": lambda: case_gplvm(budget), "ard": lambda: case_ard(budget)}
    if SMALL:  # the simulator runs every thread in Python: few of them
        from fastgp._solvers.cuda import CudaSolver

        CudaSolver.threads, CudaSolver.block = 8, 8
    start = time.perf_counter()
    result = functions[name]()
    result["case"] = name
    result["wall_s"] = time.perf_counter() - start
    return result


# ------------------------------------------------------------- runner
def _peer_env():
    """The environment of a peer's process: without a carried site folder
    (the image's own NumPy, which torch and jax were built with)."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and p != os.environ.get("FASTGP_CARRIED_SITE")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [str(REPO)])
    return env


def run_all(out_dir, budget, cases):
    out_dir.mkdir(parents=True, exist_ok=True)
    journal = out_dir / "device.jsonl"
    start = time.perf_counter()
    results = []
    for name, limit in CASES:
        if cases and name not in cases:
            continue
        left = budget - (time.perf_counter() - start)
        if left < 20:
            results.append({"case": name, "skipped": f"{left:.0f} s of the budget left"})
            continue
        timeout = min(limit, left)
        env = _peer_env() if name in ("gpytorch", "jax") else dict(os.environ)
        command = [sys.executable, "-m", "bench.bench_device", "--case", name,
                   "--budget", str(timeout)]
        try:
            done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=timeout)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            result = (json.loads(lines[-1]) if lines else
                      {"case": name, "error": done.stderr[-3000:], "rc": done.returncode})
        except subprocess.TimeoutExpired as exc:
            result = {"case": name, "error": f"timed out after {timeout:.0f} s",
                      "stdout": (exc.stdout or "")[-1500:] if isinstance(exc.stdout, str)
                      else ""}
        results.append(result)
        with open(journal, "a") as f:
            f.write(json.dumps(result) + "\n")
        print(json.dumps(result)[:1500], flush=True)
    _summary(results)
    return results


def _summary(results):
    by = {r["case"]: r for r in results}
    fast, torch_, jax_ = by.get("fastgp", {}), by.get("gpytorch", {}), by.get("jax", {})
    print("\ncase        loss+grad s   peak x 8N^2   note")
    for name, r in (("fastgp", fast), ("gpytorch", torch_), ("jax", jax_),
                    ("size", by.get("size", {}))):
        print(f"{name:10s}  {r.get('loss_grad_s', float('nan')):10.3f}   "
              f"{r.get('peak_x8N2', float('nan')):10.3f}   {r.get('error', '')[:60]}")
    if fast.get("floor_s"):
        print(f"floor (dpotrf + dpotri) {fast['floor_s']:.3f} s; fastgp / floor "
              f"{fast['ratio_to_floor']:.3f}")
    check = by.get("check", {})
    if "worst" in check:
        print(f"largest relative difference from the CPU path: {check['worst']:.2e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "device")
    parser.add_argument("--budget", type=float, default=450.0)
    parser.add_argument("--case", default=None, help="run one case here (internal)")
    parser.add_argument("--cases", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--reference", action="store_true",
                        help="write the CPU path's reference answers")
    args = parser.parse_args(argv)
    if args.reference:
        write_reference()
        return 0
    if args.case:
        print(json.dumps(run_case(args.case, args.budget), default=float), flush=True)
        return 0
    run_all(args.out, args.budget, [c for c in args.cases.split(",") if c])
    return 0


if __name__ == "__main__":
    sys.exit(main())

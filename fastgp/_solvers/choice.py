"""Which solver a regression fit takes: the estimator's ``solver`` parameter
resolved against the kernel and the memory available (docs/design.md,
"Solvers"), and the solvers by name.

The one place that knows every solver: the estimator names one
(:func:`make_solver`) or lets :func:`choose_solver` pick, and a memory
refusal names the other solvers that would fit (:func:`fit_remedies`).

The ``device`` parameter picks where the exact path runs: "cpu" (the
Cholesky solver in host memory) or a CUDA device (:mod:`.cuda`, the same
plan with its buffer in the GPU's memory). The approximate solvers run on
the CPU only, and ``solver="auto"`` never moves a fit to a GPU by itself: a
GPU fit is asked for by name (docs/gpu.md says why).
"""

import dataclasses
import functools
import importlib.util

from .._user_warnings import warn_user
from ..memory import fits_in_memory, format_bytes
from .base import FitDescription
from .cholesky import CholeskySolver
from .cuda import CudaSolver
from .cuda.device import parse_device
from .iterative import IterativeSolver
from .vecchia import VecchiaSolver

__all__ = ["SOLVERS", "make_solver", "exact_solver", "choose_solver", "fit_remedies",
           "fit_description"]

#: The solvers by the estimator's ``solver`` value.
SOLVERS = {solver.name: solver for solver in (CholeskySolver, IterativeSolver,
                                              VecchiaSolver)}

#: What a refusal says of each solver that would fit instead.
_ALTERNATIVES = {
    "vecchia": "Vecchia's nearest-neighbour approximation",
    "iterative": "matrix-free conjugate gradients",
}


def make_solver(name, params):
    """The solver called ``name``, built from the estimator's
    ``get_params()``: the exact path on the estimator's ``device`` where it
    names a GPU."""
    if name == "cholesky" and _on_gpu(params):
        return CudaSolver.from_params(params)
    return SOLVERS[name].from_params(params)


def _on_gpu(params):
    return parse_device(params.get("device", "cpu"))[0] == "cuda"


def exact_solver(device="cpu"):
    """The exact solver of the GPLVM and the Laplace classifier: the
    Cholesky path in one N x N buffer, in host memory or on ``device``."""
    return make_solver("cholesky", {"device": device})


def check_device(requested, params):
    """A ValueError where ``solver=requested`` cannot run on the estimator's
    ``device`` (the approximate solvers run on the CPU only)."""
    if _on_gpu(params) and requested not in ("auto", "cholesky"):
        raise ValueError(
            f'solver="{requested}" runs on the CPU only; with device="{params["device"]}" '
            'the fit runs the exact path on the GPU: use solver="cholesky" (or "auto"), '
            'or device="cpu".')


@functools.lru_cache(maxsize=1)
def gpu_present():
    """Whether this process could run the GPU path: the extra installed and
    a CUDA GPU found (looked for once per process, only when asked)."""
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


#: solver="auto" keeps the exact Cholesky path up to this many samples (if its
#: buffer fits) and takes Vecchia's approximation past it. Measured on the
#: 2-core benchmark machine (docs/benchmarks.md, "Which solver when"): one exact
#: loss+gradient costs 7.2 s at N = 8,000 and grows as N^3 (about 14 s here,
#: a fit of some 40 evaluations ten minutes), against 0.04 s for Vecchia's at
#: m = 30, whose optimum there is within a nat of the exact one in 2-D. A
#: size, not a measured time, so that the choice (and so every result) does
#: not depend on how busy the machine is.
AUTO_CHOLESKY_MAX_SAMPLES = 10_000

#: From this many input dimensions solver="auto"'s warning says that
#: Vecchia's neighbours may condition poorly (docs/solvers.md).
MANY_FEATURES = 5


def vecchia_seconds(n_samples, n_neighbors, n_theta):
    """A rough time of one Vecchia loss+gradient on 2 cores: measured 3.6 s
    at N = 10^6, m = 30 and 3 hyperparameters (docs/benchmarks.md,
    "Past one buffer: Vecchia against GPBoost"), scaled by N, by m^3 (each point's factor)
    and by n_theta + 1 (the kernel's values and derivatives)."""
    return 3.6e-6 * n_samples * (n_neighbors / 30) ** 3 * (n_theta + 1) / 4


def choose_solver(requested, params, covariance, kernel, problem):
    """The :class:`~fastgp._solvers.base.Solver` a fit runs.

    requested : "auto" or a name in :data:`SOLVERS` (the estimator's
        parameter)
    params : dict, the estimator's ``get_params()``
    covariance : the backend over the training inputs (``is_fast``)
    kernel : the kernel, named in messages
    problem : fastgp._solvers.base.Problem

    "auto" keeps the Cholesky path where the kernel is off the fast path,
    or where there are at most :data:`AUTO_CHOLESKY_MAX_SAMPLES` samples
    and its buffer fits the machine's memory budget (even once the other
    fits running now release theirs: :func:`fastgp.memory.fits_in_memory`);
    otherwise it takes Vecchia's approximation, with a UserWarning that says
    why, where Vecchia's estimate fits (else the Cholesky path, whose
    refusal names the remedies). The chosen solver then accepts the kernel
    (a ValueError for a kernel it cannot run, a SlowKernelWarning for one
    off the fast path on the Cholesky path).
    """
    check_device(requested, params)
    if requested != "auto":
        solver = make_solver(requested, params)
    elif _on_gpu(params):
        solver = make_solver("cholesky", params)  # a GPU fit is exact
    else:
        solver = _auto(params, problem)
    solver.accept(covariance, kernel)
    return solver


def _auto(params, problem):
    cholesky = make_solver("cholesky", params)
    if not problem.fast:
        return cholesky
    dense_bytes = cholesky.fit_bytes(problem)
    fits, reading = fits_in_memory(dense_bytes)
    small = problem.n_samples <= AUTO_CHOLESKY_MAX_SAMPLES
    if fits and small:
        return cholesky
    vecchia = make_solver("vecchia", params)
    if not fits_in_memory(vecchia.fit_bytes(problem))[0]:
        return cholesky
    n = problem.n_samples
    why = (f"N = {n:,} samples is past {AUTO_CHOLESKY_MAX_SAMPLES:,}, where one exact "
           f"evaluation costs about N^3 = {n ** 3:.1e} flops (dpotrf and dpotri; about "
           f"{n ** 3 / 7e10:.0f} s on 2 cores)" if not small else
           f"the Cholesky path needs about {format_bytes(dense_bytes)} for N = {n:,} "
           f"samples, but only {format_bytes(reading.available)} is available to it "
           f"({reading.source})")
    if not small and not fits:
        why += (f", and its buffer needs {format_bytes(dense_bytes)} where "
                f"{format_bytes(reading.available)} is available ({reading.source})")
    many = ""
    if problem.n_features >= MANY_FEATURES:
        many = (f" With {problem.n_features} input dimensions nearest neighbours are far "
                "apart, and for a smooth function of many inputs the approximation can be "
                "poor (docs/solvers.md: on 10-D ARD at N = 10,000 its fits ended 630 to 6,900 "
                'nats below the exact optimum); solver="iterative" may serve better.')
    m = vecchia.n_neighbors
    seconds = vecchia_seconds(n, m, problem.n_theta)
    warn_user(
        f'solver="auto" chose the Vecchia solver: {why}. Vecchia\'s approximation '
        f"conditions each point on its {m} nearest earlier points "
        f"(n_neighbors), in O(N m^3) time (one loss+gradient about {seconds:.2g} s on 2 "
        f"cores) and about "
        f"{format_bytes(vecchia.fit_bytes(problem))} here; its likelihood approaches the "
        f"exact one as n_neighbors grows.{many} Pass solver=\"cholesky\" (exact) or another "
        "solver to choose yourself.", UserWarning)
    return vecchia


def fit_remedies(solver, params, problem):
    """What a memory refusal of ``solver``'s fit tells the user: its own
    remedies, the first one first, then every other solver that runs the
    kernel with its estimate ('use solver="iterative" (matrix-free conjugate
    gradients, about 38.0 MB here)')."""
    own = solver.remedies(problem)
    others = []
    if problem.fast and not _on_gpu(params):
        for name, description in _ALTERNATIVES.items():
            if name != solver.name:
                needed = make_solver(name, params).fit_bytes(problem)
                others.append(f'use solver="{name}" ({description}, about '
                              f"{format_bytes(needed)} here)")
    return own[:1] + others + own[1:]


def fit_description(solver, params, problem):
    """What the notice of a long fit (fastgp._fit.clock) says of a
    regression fit: the solver and the sizes, its time per evaluation
    (:attr:`Solver.fit_time_factor`), and Vecchia's approximation as the
    faster way (with its estimated time per evaluation, named only where it
    is under a quarter of the measured one) for the other solvers on the
    fast path."""
    return dataclasses.replace(_described(solver, params, problem),
                               time_factor=solver.fit_time_factor)


def _described(solver, params, problem):
    n = problem.n_samples
    where = f" on {solver.device_name}" if isinstance(solver, CudaSolver) else ""
    what = (f'solver "{solver.name}"{where}, N = {n:,} samples, {problem.n_theta} '
            f"hyperparameters")
    if not problem.fast:
        return FitDescription(what, "a kernel on fastgp's fast path "
                                    "(fastgp.kernels.fast_path(kernel, X) names the part "
                                    "that keeps this one off)")
    if solver.name == "vecchia" or where:
        return FitDescription(what)
    if solver.name == "cholesky" and gpu_present():
        return FitDescription(what, 'device="cuda" (the same exact fit on the GPU found '
                                    "here, with its buffer in the GPU's memory; "
                                    "docs/gpu.md)")
    m = make_solver("vecchia", params).n_neighbors
    seconds = vecchia_seconds(n, m, problem.n_theta)
    return FitDescription(
        what, f'solver="vecchia" (Vecchia\'s nearest-neighbour approximation with '
              f"n_neighbors={m}, about {seconds:.2g} s per evaluation on 2 "
              "cores; docs/solvers.md)", seconds)

"""One benchmark case in a fresh process: ``python -m bench._worker SPEC``.

SPEC is a JSON object:

- ``library``: an adapter name of :mod:`bench.peers`;
- ``problem``, ``n``, ``seed``: the problem (:mod:`bench._problems`);
- ``kind``: ``"loss_grad"`` (peak memory of the first loss+gradient, then
  ``repeats`` interleaved timed rounds of loss+gradient and loss, each after
  the adapter's untimed ``between_calls``, plus the LAPACK floor when
  ``with_floor``) or ``"fit"`` (one full fit: wall time,
  evaluations, final loss, peak memory; ``max_iter`` caps the L-BFGS-B
  iterations);
- ``repeats``: timed rounds after the first call (0: memory only);
- ``out``: where to write the result (JSON).

The peak memory is measured around building the problem's data and the first
call, above the resident memory just before (see :class:`bench._measure.
PeakMemory`); the library's import and its compilation (Numba, XLA) run
before, in :meth:`~bench.peers.Adapter.warm_up`, and are timed apart.
"""

import json
import sys
import time

import numpy as np

from ._measure import PeakMemory, environment, interleaved_medians, write_json
from ._problems import make_problem
from .peers import Floor, get_adapter, library_for


def run_case(spec):
    """Run the case ``spec`` (see the module docstring) in this process."""
    library, kind = spec["library"], spec["kind"]
    n, problem_name = int(spec["n"]), spec["problem"]
    adapter = get_adapter(library)()
    start = time.perf_counter()
    adapter.warm_up(problem_name, n)
    warm_up_s = time.perf_counter() - start

    result = dict(library=library, problem=problem_name, n=n, kind=kind,
                  warm_up_s=warm_up_s)
    if kind == "loss_grad":
        with PeakMemory() as mem:
            problem = make_problem(problem_name, n, spec.get("seed", 0))
            adapter.prepare(problem)
            z0 = adapter.start()
            start = time.perf_counter()
            value, grad = adapter.loss_grad(z0)
            result["first_call_s"] = time.perf_counter() - start
        n = result["n"] = problem.n
        result["memory"] = mem.as_dict(n)
        grad = np.asarray(grad, dtype=np.float64)
        result["value"] = float(value)
        result["grad_theta"] = grad[-problem.theta0.size:].tolist()
        result["grad_norm"] = float(np.linalg.norm(grad))
        repeats = int(spec.get("repeats", 0))
        if repeats > 0:
            cases = {"loss_grad": lambda: adapter.loss_grad(z0),
                     "loss": lambda: adapter.loss(z0)}
            if adapter.between_calls is not None:
                cases = {key: (adapter.between_calls, fn) for key, fn in cases.items()}
            if spec.get("with_floor"):
                cases.update(Floor(problem).cases())
            # the first call above was the warm-up at this size
            result["time"] = interleaved_medians(cases, repeats=repeats, warmup=0)
    elif kind == "fit":
        with PeakMemory() as mem:
            problem = make_problem(problem_name, n, spec.get("seed", 0))
            adapter.prepare(problem)
            fit = adapter.fit(spec.get("max_iter"))
        n = result["n"] = problem.n
        result["memory"] = mem.as_dict(n)
        result["fit"] = fit
        reference_name = library_for("fastgp", problem_name)
        if library != reference_name and not problem.latent:
            # quality on one yardstick: fastgp's loss at this library's optimum
            reference = get_adapter(reference_name)()
            reference.prepare(problem)
            fit["reference_nlml"] = float(reference.loss(np.asarray(fit["theta"])))
        else:
            fit["reference_nlml"] = fit["final_nlml"]
    else:
        raise ValueError(f"unknown kind {kind!r}")
    result["threads"] = _threads()
    if spec.get("with_env"):
        result["environment"] = environment()
    return result


def _threads():
    """Thread pools loaded in this process (BLAS, OpenMP: threadpoolctl) and
    the thread counts of Numba and, where loaded, torch."""
    out = {}
    try:
        from threadpoolctl import threadpool_info

        out["pools"] = [{k: info.get(k) for k in ("internal_api", "num_threads", "version")}
                        for info in threadpool_info()]
    except ImportError:  # pragma: no cover
        pass
    if "numba" in sys.modules:
        out["numba"] = sys.modules["numba"].get_num_threads()
    if "torch" in sys.modules:
        out["torch"] = sys.modules["torch"].get_num_threads()
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(argv[0])
    result = run_case(spec)
    write_json(spec["out"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

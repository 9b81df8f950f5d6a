"""Which solver a regression fit takes: the estimator's ``solver`` parameter
resolved against the kernel and the memory available (docs/design.md,
"Solvers"), and the solvers by name.

The one place that knows every solver: the estimator names one
(:func:`make_solver`) or lets :func:`choose_solver` pick, and a memory
refusal names the other solvers that would fit (:func:`fit_remedies`).
"""

from .._user_warnings import warn_user
from ..memory import fits_in_memory, format_bytes
from .cholesky import CholeskySolver
from .iterative import IterativeSolver
from .vecchia import VecchiaSolver

__all__ = ["SOLVERS", "make_solver", "choose_solver", "fit_remedies"]

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
    ``get_params()``."""
    return SOLVERS[name].from_params(params)


def choose_solver(requested, params, covariance, kernel, problem):
    """The :class:`~fastgp._solvers.base.Solver` a fit runs.

    requested : "auto" or a name in :data:`SOLVERS` (the estimator's
        parameter)
    params : dict, the estimator's ``get_params()``
    covariance : the backend over the training inputs (``is_fast``)
    kernel : the kernel, named in messages
    problem : fastgp._solvers.base.Problem

    "auto" takes the iterative path, with a UserWarning giving both
    estimates, where the kernel is on the fast path and the Cholesky path's
    estimate does not fit the machine's memory budget (even once the other
    fits running now release theirs: :func:`fastgp.memory.fits_in_memory`)
    but the iterative one's does; otherwise the Cholesky path (whose refusal,
    where nothing fits, names the remedies). The chosen solver then accepts
    the kernel (a ValueError for a kernel it cannot run, a SlowKernelWarning
    for one off the fast path on the Cholesky path).
    """
    if requested != "auto":
        solver = make_solver(requested, params)
    else:
        solver = _auto(params, problem)
    solver.accept(covariance, kernel)
    return solver


def _auto(params, problem):
    cholesky = make_solver("cholesky", params)
    if not problem.fast:
        return cholesky
    dense_bytes = cholesky.fit_bytes(problem)
    iterative = make_solver("iterative", params)
    iterative_bytes = iterative.fit_bytes(problem)
    fits, reading = fits_in_memory(dense_bytes)
    if fits or not fits_in_memory(iterative_bytes)[0]:
        return cholesky
    warn_user(
        f'solver="auto" chose the iterative solver: the Cholesky path needs about '
        f"{format_bytes(dense_bytes)} for N = {problem.n_samples:,} samples, but only "
        f"{format_bytes(reading.available)} is available to it ({reading.source}); the "
        f"matrix-free path needs about {format_bytes(iterative_bytes)}. Its likelihood "
        'is a stochastic estimate; pass solver="cholesky" or solver="iterative" to '
        "choose yourself.", UserWarning)
    return iterative


def fit_remedies(solver, params, problem):
    """What a memory refusal of ``solver``'s fit tells the user: its own
    remedies, the first one first, then every other solver that runs the
    kernel with its estimate ('use solver="iterative" (matrix-free conjugate
    gradients, about 38.0 MB here)')."""
    own = solver.remedies(problem)
    others = []
    if problem.fast:
        for name, description in _ALTERNATIVES.items():
            if name != solver.name:
                needed = make_solver(name, params).fit_bytes(problem)
                others.append(f'use solver="{name}" ({description}, about '
                              f"{format_bytes(needed)} here)")
    return own[:1] + others + own[1:]

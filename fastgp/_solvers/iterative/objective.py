"""The negative log marginal likelihood and its gradient without an N x N
matrix: the matrix-free path's objective (docs/design.md, "The matrix-free
path"; Gardner et al. 2018; Wang et al. 2019).

For K~ = k(X, X; theta) + diag(alpha), targets Y (N, T) and t probes
z_i = L_k e_i + D^1/2 g_i ~ N(0, P) (:mod:`fastgp._solvers.iterative.preconditioner`), one
batched preconditioned CG solves K~ [A, U] = [Y, Z] and

    L        ~ 1/2 tr(Y^T A) + T/2 (log|P| + (1/t) sum_i SLQ_i) + N T/2 log(2 pi)
    dL/dth_p ~ 1/2 (T tr(P^-1 dK_p)
                    + T/t sum_i (u_i - P^-1 z_i)^T dK_p (P^-1 z_i)
                    - sum_c a_c^T dK_p a_c)

SLQ_i is the Lanczos quadrature of z_i^T P^-1/2 log(P^-1/2 K~ P^-1/2) P^-1/2 z_i
from the CG scalars of column z_i (:func:`fastgp._solvers.iterative.krylov.lanczos_quadrature`),
an estimate of log|P^-1 K~| whose mean over probes is unbiased up to the
quadrature's error. The trace tr(K~^-1 dK) is split into tr(P^-1 dK), exact
by the Woodbury identity (the kernel's diagonal derivative and k bilinear
forms), and tr((K~^-1 - P^-1) dK), estimated from the probes: unbiased because
E[z z^T] = P (Hutchinson 1990 with P-distributed probes), and with a variance
that vanishes as P approaches K~ (the preconditioner as a control variate).
Every bilinear form of the gradient is one backend ``grad_bilinear`` pass:
t + T column pairs and the k columns of the symmetric trace factor
S = D^-1 L_k C_L^-T, C = C_L C_L^T (written over L_k:
:meth:`fastgp._solvers.iterative.preconditioner.PivotedCholeskyPreconditioner.into_trace_factor`).

The standard normal draws e_i, g_i are made once per objective from its seed,
so the objective is one deterministic function of theta for the whole fit.

With a mean (docs/design.md, "A mean estimated with the covariance";
:mod:`fastgp._solvers.mean`) the same batched CG solves p more columns, the
orthonormal basis Q: K~ [A_y, G, U] = [Y, Q, Z]. The GLS is a Cholesky
factor of C = Q^T G (with a rank check), A = A_y - G beta the residuals'
dual coefficients, and the trace and bilinear forms are those of the
residuals: the profile likelihood's gradient as it stands. The restricted
one (REML) adds -T tr(F^T dK F), F = G C^-1/2 (n, p), as p more columns of
the pass's symmetric operand beside S (the same -T scale).

Trial points. A line search's trial point can land where the preconditioner
holds far less of K~ than anywhere the fit has been (a length scale shorter
than its rank can follow, a much smaller noise level), and CG there may run
to ``max_cg_iter``: at N = 3,000 one such trial took 34 of
a fit's 35 s, and the line search then stepped back anyway. So an evaluation
within :data:`TRIAL_RADIUS` (log scale, every coordinate) of the last one
whose CG converged may run at most :data:`TRIAL_CG_FACTOR` times that one's
iterations (at least :data:`TRIAL_CG_FLOOR`); one that needs more is
abandoned and answers ``(inf, zeros)``, as where K~ is not positive
definite, so the optimiser steps back (a shorter step lands nearer, where
CG needs fewer iterations) and :func:`fastgp._optimize.minimize.minimize_theta`'s
retries apply. The first evaluation, any evaluation far from the last
converged one (a restart's start) and the final model's solve run up to
``max_cg_iter``.
"""

import math

import numpy as np

from ..._linalg.lapack import release_blas_before_pass
from ...exceptions import NotPositiveDefiniteError
from ..base import GuardedObjective, KeptModel, PointFailed, regression_targets
from .diagonal import diagonal_gradient
from .distributed import for_fit
from .krylov import lanczos_quadrature
from .system import KernelSystem

__all__ = ["IterativeNegLogMarginalLikelihood", "ProbeDraws", "final_model"]

_LOG_2PI = math.log(2.0 * math.pi)

#: A trial point's CG may run this many times the iterations of the last
#: evaluation that converged (module docstring, "Trial points") ...
TRIAL_CG_FACTOR = 4
#: ... and at least this many ...
TRIAL_CG_FLOOR = 50
#: ... when it lies within this distance of that evaluation's theta (the
#: largest coordinate difference, log scale). L-BFGS-B's first step has
#: length one; a restart's random start is usually farther.
TRIAL_RADIUS = 2.0


class TrialAbandoned(PointFailed):
    """A trial point's CG needed more iterations than its cap (module
    docstring, "Trial points"); the objective answers inf."""


class ProbeDraws:
    """The standard normal draws behind the probes, made once.

    E : ndarray (k_max, t), G : ndarray (n, t), float64, from
    ``numpy.random.default_rng(seed)`` (E first, then G).
    """

    def __init__(self, n_samples, rank, n_probes, seed):
        rng = np.random.default_rng(seed)
        self.E = rng.standard_normal((int(min(rank, n_samples)), int(n_probes)))
        self.G = rng.standard_normal((int(n_samples), int(n_probes)))


class IterativeNegLogMarginalLikelihood(GuardedObjective):
    """``f(theta) -> (L, dL/dtheta)`` estimated matrix-free, for
    ``scipy.optimize.minimize(jac=True)``.

    Parameters
    ----------
    covariance : FastCovariance
        Backend with ``matmat``, ``grad_bilinear``, ``cross``, ``diag``; on
        the fast path it is wrapped once here
        (:func:`fastgp._solvers.iterative.distributed.for_fit`), so that its products
        run on joblib's workers while a cluster backend is active, with the
        training inputs sent once for the objective's life.
    Y : ndarray (n_samples, n_targets)
        Targets (normalised if the estimator normalises).
    diag_add : ndarray (n_samples,)
        The estimator's alpha.
    options : fastgp._solvers.iterative.system.SolverOptions
    seed : int
        Seeds the probes' draws (:class:`ProbeDraws`).
    verbose : bool
        Print CG's iterations and final residual after each evaluation.
    mean : fastgp._solvers.mean.MeanTerm or None
        A mean whose coefficients are profiled out (module docstring).

    Attributes
    ----------
    n_evaluations : int
    n_solves : int
        Batched CG solves (one per evaluation, and the fit's last step).
    n_unconverged : int
        Solves that stopped short of ``options.cg_tol`` at ``max_cg_iter``.
    n_abandoned : int
        Trial points abandoned at their iteration cap (module docstring,
        "Trial points"); each answered inf.
    worst_residual : float
        Largest relative residual at which CG stopped short of its tolerance
        (0.0 if it never did).
    last_cg : CGResult or None, the latest solve

    Where K~ is not positive definite (CG or the quadrature finds a
    non-positive curvature) or a value is not finite, the call returns
    ``(inf, zeros)``, as :class:`fastgp._solvers.cholesky.objective.NegLogMarginalLikelihood`.
    """

    def __init__(self, covariance, Y, diag_add, options, seed, verbose=False, mean=None):
        self.covariance = for_fit(covariance)
        self.Y, self.diag_add = regression_targets(Y, diag_add)
        self.mean = mean
        self._gls = self._G = None  # the mean's GLS and K~^-1 Q at the last solve
        self.options = options
        self.draws = ProbeDraws(len(self.Y), options.preconditioner_rank,
                                options.n_probes, seed)
        self.verbose = bool(verbose)
        self.n_evaluations = 0
        self.n_solves = 0
        self.n_unconverged = 0
        self.n_abandoned = 0
        self.worst_residual = 0.0
        self._converged_at = None  # (theta, CG iterations) of the last converged solve
        self.last_cg = None

    @property
    def n_samples(self):
        return self.Y.shape[0]

    def _trial_cap(self, theta):
        """CG's iteration cap at theta (module docstring, "Trial points")."""
        full = self.options.max_cg_iter
        if self._converged_at is None:
            return full
        reference, iterations = self._converged_at
        if np.max(np.abs(theta - reference), initial=0.0) > TRIAL_RADIUS:
            return full
        return min(full, max(TRIAL_CG_FLOOR, TRIAL_CG_FACTOR * iterations))

    def _solve(self, theta, trial=True):
        """(system, A (n, T), U (n, t), Z (n, t), value) at theta. With
        ``trial``, CG runs to :meth:`_trial_cap` and TrialAbandoned is raised
        where it stops there short of its tolerance."""
        system = KernelSystem(self.covariance, theta, self.diag_add, self.options)
        Z = system.preconditioner.probes(self.draws.E, self.draws.G)
        n, T = self.Y.shape
        cap = self._trial_cap(theta) if trial else self.options.max_cg_iter
        if self.mean is not None:
            return self._solve_with_mean(system, Z, cap)
        cg = system.solve(np.hstack([self.Y, Z]), max_iter=cap)
        self._record(theta, cg, system, cap)
        t = Z.shape[1]
        quadrature = lanczos_quadrature(cg, range(T, T + t))
        log_det = system.preconditioner.log_det + float(np.mean(quadrature))
        A, U = cg.X[:, :T], cg.X[:, T:]
        value = (0.5 * float(np.einsum("ik,ik->", self.Y, A)) + 0.5 * T * log_det
                 + 0.5 * n * T * _LOG_2PI)
        return system, A, U, Z, value

    def _solve_with_mean(self, system, Z, cap):
        """:meth:`_solve` with the mean's p columns beside the targets
        (module docstring): A is the residuals' K~^-1 E."""
        n, T = self.Y.shape
        p, t = self.mean.p, Z.shape[1]
        cg = system.solve(np.hstack([self.Y, self.mean.Q, Z]), max_iter=cap)
        self._record(system.theta, cg, system, cap)
        quadrature = lanczos_quadrature(cg, range(T + p, T + p + t))
        log_det = system.preconditioner.log_det + float(np.mean(quadrature))
        self._G = cg.X[:, T:T + p]
        self._gls = self.mean.solved(self._G, cg.X[:, :T], self.Y)
        A, U = self._gls.residual, cg.X[:, T + p:]
        E = self.Y - self.mean.Q @ self._gls.beta
        value = (0.5 * float(np.einsum("ik,ik->", E, A)) + 0.5 * T * log_det
                 + 0.5 * n * T * _LOG_2PI + self.mean.restricted_value(self._gls, T))
        return system, A, U, Z, value

    def _record(self, theta, cg, system, cap):
        """Count the solve, print it where verbose, and raise TrialAbandoned
        where a trial point's CG stopped at its cap (module docstring)."""
        self.last_cg = cg
        self.n_solves += 1
        if self.verbose:
            print(f"      CG {cg.n_iterations} iterations, relative residual "
                  f"{cg.max_residual:.2e} (tol {cg.tol:.1e}), preconditioner rank "
                  f"{system.preconditioner.rank}", flush=True)
        if cg.converged:
            self._converged_at = (theta.copy(), cg.n_iterations)
        elif cap < self.options.max_cg_iter:
            self.n_abandoned += 1
            if self.verbose:
                print(f"      trial point abandoned at {cap} CG iterations (the last "
                      f"converged solve's x {TRIAL_CG_FACTOR}): the objective answers inf",
                      flush=True)
            raise TrialAbandoned(cap)
        else:
            self.n_unconverged += 1
            self.worst_residual = max(self.worst_residual, cg.max_residual)

    def _gradient(self, theta, system, A, U, Z):
        """Module docstring: tr(K~^-1 dK) = tr(P^-1 dK) + tr((K~^-1 - P^-1) dK),
        the first exact (Woodbury, the kernel's diagonal derivative), the
        second from the probes, whose variance vanishes as P nears K~."""
        T, t = A.shape[1], U.shape[1]
        if self.covariance.n_theta == 0:
            return np.zeros(0)
        P = system.preconditioner
        n = U.shape[0]
        # the pass's pairs, written in place: [T/t (U - W), A] and [W, -A];
        # F-ordered: the pass reads their transposes (copied otherwise)
        left = np.empty((n, t + T), order="F")
        right = np.empty((n, t + T), order="F")
        right[:, :t] = P.solve(Z)                          # W = P^-1 z_i
        np.subtract(U, right[:, :t], out=left[:, :t])
        left[:, :t] *= T / t
        left[:, t:] = A
        np.negative(A, out=right[:, t:])
        diagonal = diagonal_gradient(self.covariance.kernel, theta, self.covariance.X)
        exact_diagonal = T * (P.D ** -1 @ diagonal)
        # tr(P^-1 dK) = sum_i dK_ii / D_i - tr(S^T dK S), S in L's memory
        # (P is spent: this system is the evaluation's own)
        S = P.into_trace_factor()
        if self.mean is not None and self.mean.restricted:
            # REML: tr(P dK) = tr(K~^-1 dK) - tr(F^T dK F), F = G C^-1/2 (module
            # docstring), p more columns of the symmetric operand at -T
            S = np.asfortranarray(np.hstack([S, self._gls.scaled(self._G)]))
        release_blas_before_pass()  # as KernelSystem.matmat: the pass needs every core
        return 0.5 * (exact_diagonal
                      + self.covariance.grad_bilinear(theta, left, right, S, -T))

    def evaluate(self, theta, with_gradient=True):
        """(value, gradient or None) at theta; raises NotPositiveDefiniteError."""
        theta = np.asarray(theta, dtype=np.float64)
        system, A, U, Z, value = self._solve(theta)
        grad = self._gradient(theta, system, A, U, Z) if with_gradient else None
        return value, grad

    def final(self, theta):
        """The kept model at theta: (A (n, T), value, system); raises
        NotPositiveDefiniteError."""
        system, A, _, _, value = self._solve(np.asarray(theta, dtype=np.float64),
                                             trial=False)
        return A, value, system

    def kept_mean(self):
        """The mean's coefficients at the last solve (None without a mean)."""
        return None if self.mean is None else self.mean.kept(self._gls, self._G)


def final_model(objective, point, messages):
    """The matrix-free path's kept model at ``point`` (the solver's
    ``final``): a :class:`~fastgp._solvers.base.KeptModel` with no N x N
    factor (L None) and the system (K~ with its preconditioner) as its state,
    for prediction.

    Raises numpy.linalg.LinAlgError (K~ not positive definite) and
    ValueError (the value or A not finite) with ``messages``' texts.
    """
    try:
        A, value, system = objective.final(point)
    except (NotPositiveDefiniteError, PointFailed) as exc:  # PointFailed: a mean's GLS
        raise np.linalg.LinAlgError(messages.not_positive_definite(0.0), str(exc)) from exc
    if not (math.isfinite(value) and np.all(np.isfinite(A))):
        raise ValueError(messages.overflow())
    return KeptModel(A=A, value=float(value), jitter=0.0, L=None, state=system,
                     mean=objective.kept_mean())

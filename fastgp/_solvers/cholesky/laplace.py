"""The binary Laplace approximation of Gaussian-process classification, in one
N x N buffer (docs/design.md, "The Laplace classifier in one buffer").

Rasmussen & Williams (2006), Algorithms 3.1 (the posterior mode by Newton's
method), 3.2 (predictions) and 5.1 (the gradient of the approximate log
marginal likelihood), for labels y in {0, 1}, the logistic likelihood
p(y_i | f_i) = sigma(t_i f_i), t_i = 2 y_i - 1, and K = k(X, X; theta):

    pi = sigma(f),  W = diag(pi (1 - pi)),  B = I + W^1/2 K W^1/2 = L L^T
    log q(y | X, theta) = -1/2 a^T f + sum_i log sigma(t_i f_i) - sum_i log L_ii   (eq. 3.32)

The buffer plan for one evaluation at theta:

1. K is filled once (lower triangle, the backend's pass) and mirrored into
   the strict upper triangle, its diagonal kept as a vector. K does not
   change during Newton's iterations, so the strict upper triangle keeps it
   for every product by K (:func:`fastgp._linalg.lapack.symmetric_matvec`, one
   dsymv over the stored triangle): no kernel is recomputed and no second
   N x N is made.
2. Each Newton step (Alg. 3.1 lines 4-8) writes B = I + W^1/2 K W^1/2 into
   the lower triangle from the upper one and factors it in place. From
   :data:`FLOAT32_MIN_N` points on, the early steps write and factor B in
   float32 instead, in a float32 view that lies inside the lower triangle
   (:func:`fastgp._linalg.lapack.float32_lower_view`), and the last two (at
   least) in float64 (:meth:`LaplaceObjective.newton`).
3. The gradient (Alg. 5.1): dpotri in place turns the lower triangle into
   B^-1; diag((K^-1 + W)^-1) = (1 - diag(B^-1)) / W; one product by K from
   the upper triangle; the lower triangle is scaled to
   R = W^1/2 B^-1 W^1/2 (line 7), then updated by the rank-two term of the
   implicit part, and one fused pass of the backend reduces it against
   dK/dtheta recomputed on the fly. No (N, N, n_theta) tensor, no R, C or
   W^1/2 K beside the buffer.

Classes: :class:`LaplaceObjective` (value and gradient for the optimiser,
and the factor a fitted model keeps). The predictions (Alg. 3.2) are
:mod:`fastgp._solvers.laplace_predictive`'s.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ...exceptions import NotPositiveDefiniteError
from ..._linalg.lapack import (
    cho_inverse_in_place,
    cho_solve_factor,
    cho_solve_float32,
    cholesky_float32_in_place,
    cholesky_in_place,
    cholesky_with_jitter,
    float32_lower_view,
    release_blas_before_pass,
    symmetric_matvec,
)
from ..base import GuardedObjective, PointFailed

__all__ = ["LaplaceObjective", "LaplaceMode", "NEWTON_TOL",
           "FLOAT32_MIN_N", "FLOAT32_SWITCH", "FLOAT32_RESERVE", "REFINE_STEPS",
           "REFINE_TOL"]

#: Newton's iterations stop when the approximate log marginal likelihood rises
#: by less than this (absolute), scikit-learn's criterion.
NEWTON_TOL = 1e-10

#: From this many training points on (read at call time), Newton's early
#: iterations factor B in float32 (spotrf, about twice as fast as dpotrf) in
#: a float32 view of the buffer's lower triangle, and only the last ones in
#: float64 (docs/gpc.md, "Float32 early iterations"). Below it every
#: iteration is float64, as scikit-learn's. Measured on two cores: no gain
#: at N = 700 to 1,000, one loss+gradient 13 % faster at 1,500, 16 % at 2,000.
FLOAT32_MIN_N = 1024

#: The float32 iterations end after the first one where log q (its
#: log-determinant from the float32 factor) rises by less than this. Their
#: log q is off by a few 1e-3 (measured: 2e-3 at N = 3,000), well below it,
#: so the switch never waits for a change that float32 cannot see.
FLOAT32_SWITCH = 0.1

#: The switch's iterative refinement: at most this many steps, and accepted
#: where the relative residual falls below REFINE_TOL (float64's own solve
#: reaches about cond(B) x 1e-16; 1e-10 admits cond(B) up to about 1e6).
REFINE_STEPS = 10
REFINE_TOL = 1e-10

#: The float32 iterations stop at the latest this many iterations before
#: ``max_iter``, so that a run that reaches ``max_iter`` ends in float64.
FLOAT32_RESERVE = 50

#: Most columns per block of the triangle-wise passes below; a block is also
#: at most N / 32 columns wide (and at least 16), so that their temporaries,
#: a few N x block arrays, stay below a sixteenth of the N x N buffer.
BLOCK = 128


# ---------------------------------------------------------------- triangles
def _blocks(n):
    block = max(16, min(BLOCK, n // 32))
    for j0 in range(0, n, block):
        yield j0, min(n, j0 + block)


def mirror_lower_to_upper(B):
    """Copy the strict lower triangle of square ``B`` (F-contiguous) into its
    strict upper triangle, so that both hold the symmetric matrix; column
    blocks, no N x N temporary."""
    n = B.shape[0]
    for j0, j1 in _blocks(n):
        B[j0:j1, j1:] = B[j1:, j0:j1].T
        D = B[j0:j1, j0:j1]
        upper = np.triu_indices(j1 - j0, 1)
        D[upper] = D.T[upper]


def fill_B_from_upper(B, s, kdiag, jitter=0.0):
    """Write the lower triangle of I (1 + jitter) + diag(s) K diag(s) into
    ``B``, reading K's off-diagonal entries from B's strict upper triangle
    (left as it is) and its diagonal from ``kdiag`` (Alg. 3.1 line 5)."""
    n = B.shape[0]
    for j0, j1 in _blocks(n):
        below = B[j1:, j0:j1]  # K[j1:, j0:j1] scaled by rows, then by columns
        np.multiply(B[j0:j1, j1:].T, s[j1:, None], out=below)
        below *= s[j0:j1]
        D = B[j0:j1, j0:j1]
        rows, cols = np.tril_indices(j1 - j0, -1)
        D[rows, cols] = D[cols, rows] * s[j0 + rows] * s[j0 + cols]
        idx = np.arange(j0, j1)
        D[idx - j0, idx - j0] = 1.0 + jitter + s[idx] ** 2 * kdiag[idx]


def fill_B32_from_upper(B, B32, s, kdiag):
    """Write the lower triangle of I + diag(s) K diag(s) into ``B32``, the
    float32 view :func:`fastgp._linalg.lapack.float32_lower_view` of ``B``'s lower
    triangle, reading K's off-diagonal entries from B's strict upper
    triangle (left as it is) and its diagonal from ``kdiag``. Only B32's
    lower triangle is written (its upper triangle overlaps K). The entries'
    relative error is a few float32 roundings (below 3e-7)."""
    n = B.shape[0]
    s32 = s.astype(np.float32)
    for j0, j1 in _blocks(n):
        below = B32[j1:, j0:j1]  # rows scaled in float64, columns in float32
        np.multiply(B[j0:j1, j1:].T, s[j1:, None], out=below, casting="same_kind")
        below *= s32[j0:j1]
        D = B[j0:j1, j0:j1]
        D32 = B32[j0:j1, j0:j1]
        rows, cols = np.tril_indices(j1 - j0, -1)
        D32[rows, cols] = D[cols, rows] * s[j0 + rows] * s[j0 + cols]
        idx = np.arange(j0, j1)
        D32[idx - j0, idx - j0] = 1.0 + s[idx] ** 2 * kdiag[idx]


def _scale_lower(B, s):
    """B[i, j] *= s_i s_j on the lower triangle's column blocks (the strict
    upper part of each diagonal block is scaled too; callers no longer need
    it)."""
    n = B.shape[0]
    for j0, j1 in _blocks(n):
        block = B[j0:, j0:j1]
        block *= s[j0:, None]
        block *= s[j0:j1]


def _rank_two_update_lower(B, u, g):
    """B -= u g^T + g u^T on the lower triangle's column blocks (as
    :func:`_scale_lower`, the strict upper part of diagonal blocks too)."""
    n = B.shape[0]
    for j0, j1 in _blocks(n):
        block = B[j0:, j0:j1]
        block -= np.outer(u[j0:], g[j0:j1])
        block -= np.outer(g[j0:], u[j0:j1])


def _log_likelihood(t, f):
    """sum_i log sigma(t_i f_i) = -sum_i log(1 + exp(-t_i f_i)), without
    overflow."""
    return -float(np.sum(np.logaddexp(0.0, -t * f)))


# ---------------------------------------------------------------- the mode
@dataclass
class LaplaceMode:
    """Newton's result at one theta (Alg. 3.1), in scikit-learn's
    convention: ``value`` is the approximate log marginal likelihood of the
    iteration before the one where it stopped rising (or of the last), while
    pi, W_sr, a and f are from the last iteration (pi and W_sr at the f it
    started from, a and f after its step); the workspace's lower triangle
    holds the factor of B at W_sr, its strict upper triangle K.
    ``n_float32`` of the ``n_iterations`` factored B in float32.

    Arrays of shape (n,) float64.
    """

    value: float
    f: np.ndarray
    pi: np.ndarray
    W_sr: np.ndarray
    a: np.ndarray
    n_iterations: int
    jitter: float = 0.0
    n_float32: int = 0


class LaplaceObjective(GuardedObjective):
    """``f(theta) -> (-log q(y|X,theta), -d log q/d theta)`` for the
    optimiser, and the factor that a fitted binary classifier keeps.

    Parameters
    ----------
    covariance : FastCovariance or KernelObjectCovariance
        Fills K (lower triangle) and reduces the gradient trace
        (:mod:`fastgp._backend.covariance`).
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}.
    workspace : fastgp._solvers.workspace.Workspace
        The one N x N buffer; overwritten by every call.
    max_iter : int
        Newton iterations per evaluation (scikit-learn's ``max_iter_predict``).
    warm_start : bool
        Start Newton's iterations from the last mode found (``f_cached``)
        instead of f = 0, as scikit-learn's ``warm_start``.
    f_cached : ndarray of shape (n_samples,) or None
        The mode to warm-start from (updated by every evaluation).

    Where B is not positive definite or a value is not finite, the call
    returns ``(inf, zeros)``, the answer that makes the line search back off.
    """

    def __init__(self, covariance, y, workspace, max_iter=100, warm_start=False,
                 f_cached=None):
        self.covariance = covariance
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.t = 2.0 * self.y - 1.0
        self.workspace = workspace
        self.max_iter = int(max_iter)
        self.warm_start = bool(warm_start)
        self.f_cached = f_cached
        self.n_evaluations = 0
        self.mode = None
        self._kdiag = None

    @property
    def n_samples(self):
        return self.y.shape[0]

    # ------------------------------------------------------------ Alg. 3.1
    def _fill_K(self, theta, B):
        """K into both triangles of B (lower by the backend's pass, mirrored
        into the upper); its diagonal kept apart, since B's diagonal is
        overwritten by every Newton step."""
        n = self.n_samples
        self.covariance.fill_lower(theta, np.zeros(n), B)
        self._kdiag = np.array(np.diagonal(B))
        mirror_lower_to_upper(B)

    def _start(self):
        if (self.warm_start and self.f_cached is not None
                and self.f_cached.shape == self.y.shape):
            return np.array(self.f_cached, dtype=np.float64), True
        return np.zeros(self.n_samples), False

    @staticmethod
    def _factor_float32(B, s, kdiag):
        """B = I + W^1/2 K W^1/2 written into the float32 view of B's lower
        triangle and factored there (spotrf); the view, or None where float32
        finds B not positive definite (the float64 iterations then take over
        and say what they find)."""
        B32 = float32_lower_view(B)
        fill_B32_from_upper(B, B32, s, kdiag)
        try:
            return cholesky_float32_in_place(B32)
        except NotPositiveDefiniteError:
            return None

    def _refine(self, B, B32, s, r, c):
        """The float64 solution of B c = r, B = I + W^1/2 K W^1/2 at ``s``,
        from the float32 factor's ``c`` by iterative refinement (Higham 2002,
        "Accuracy and Stability of Numerical Algorithms", ch. 12): residuals
        in float64 (K from the buffer's upper triangle, one dsymv each),
        corrections from the float32 factor ``B32``. Stops where the
        residual no longer falls fourfold, at the rounding of the float64
        residual (about cond(B) x 1e-16, as dpotrs's own solution). Returns
        c (n,), or None unless the residual fell below
        :data:`REFINE_TOL` x max|r| within :data:`REFINE_STEPS` steps."""
        kdiag = self._kdiag
        scale = float(np.max(np.abs(r))) if r.size else 0.0
        best = math.inf
        for _ in range(REFINE_STEPS):
            residual = r - c - s * symmetric_matvec(B, s * c, lower=False, diag=kdiag)
            size = float(np.max(np.abs(residual))) if residual.size else 0.0
            if not size < 0.25 * best:  # at rounding, or not converging (nan)
                break
            best = size
            c = c + cho_solve_float32(B32, residual)
        return c if best <= REFINE_TOL * scale else None

    def newton(self, theta, factor=None):
        """The posterior mode at ``theta`` (Alg. 3.1), K filled into the
        workspace first. ``factor(B, s, kdiag)`` writes and factors B in the
        lower triangle and returns the jitter it added (default: no jitter;
        NotPositiveDefiniteError propagates). Returns a :class:`LaplaceMode`.

        From :data:`FLOAT32_MIN_N` training points on, a cold start's early
        iterations factor B in float32 (docs/gpc.md, "Float32 early
        iterations"): inexact Newton steps, which still converge, until log q
        rises by less than :data:`FLOAT32_SWITCH`. That last step is made
        exact by iterative refinement (:meth:`_refine`; where it fails, a
        float64 iteration redoes the step and its value is not kept), and
        the float64 iterations run scikit-learn's loop from there: every
        value compared with NEWTON_TOL or returned, and the factor the
        gradient uses, come from float64 factors at iterates of exact Newton
        steps (two float64 iterations at least)."""
        B = self.workspace.buffer()
        self._fill_K(theta, B)
        kdiag = self._kdiag
        if factor is None:
            def factor(B, s, kdiag):
                fill_B_from_upper(B, s, kdiag)
                cholesky_in_place(B)
                return 0.0
        f, warm = self._start()
        single = not warm and self.n_samples >= FLOAT32_MIN_N
        previous = -math.inf
        jitter = 0.0
        n_iter = n_single = 0
        restart = False  # this float64 iteration's value is not kept
        for n_iter in range(1, self.max_iter + 1):
            f_start = f
            pi = expit(f)                                   # line 4
            W = pi * (1.0 - pi)
            s = np.sqrt(W)
            B32 = None
            if single and n_iter <= self.max_iter - FLOAT32_RESERVE:
                B32 = self._factor_float32(B, s, kdiag)
            if B32 is not None:                             # line 5 in float32
                L, solve = B32, lambda v: cho_solve_float32(B32, v)
            else:                                           # line 5: B = L L^T
                if single:  # float32 failed or ran out of iterations
                    single, previous, restart = False, -math.inf, True
                jitter = max(jitter, factor(B, s, kdiag))
                L, solve = B, lambda v: cho_solve_factor(B, v[:, None])[:, 0]
            b = W * f + (self.y - pi)                       # line 6
            r = s * symmetric_matvec(B, b, lower=False, diag=kdiag)
            c = solve(r)
            a = b - s * c                                   # line 7
            f = symmetric_matvec(B, a, lower=False, diag=kdiag)  # line 8
            value = (-0.5 * float(a @ f) + _log_likelihood(self.t, f)   # line 10,
                     - float(np.sum(np.log(np.diagonal(L), dtype=np.float64))))  # eq. 3.32
            if single:
                n_single += 1
                if value - previous >= FLOAT32_SWITCH:      # false for nan too
                    previous = value
                    continue
                single, previous = False, -math.inf
                c = self._refine(B, B32, s, r, c) if math.isfinite(value) else None
                if c is None:  # float64 redoes this step, its value not kept
                    f, restart = f_start, True
                else:  # this step made exact: float64 iterations from here
                    a = b - s * c
                    f = symmetric_matvec(B, a, lower=False, diag=kdiag)
                continue
            if not math.isfinite(value):
                previous = value
                break
            if restart:
                restart = False
                continue
            if value - previous < NEWTON_TOL:
                break
            previous = value
        self.f_cached = f
        self.mode = LaplaceMode(value=previous, f=f, pi=pi, W_sr=s, a=a,
                                n_iterations=n_iter, jitter=jitter,
                                n_float32=n_single)
        return self.mode

    # ------------------------------------------------------------ Alg. 5.1
    def _gradient(self, theta, mode):
        """d log q / d theta (n_theta,) at the mode (Alg. 5.1 lines 7-15),
        from the workspace as :meth:`newton` left it."""
        B = self.workspace.buffer()
        kdiag, s, pi, a = self._kdiag, mode.W_sr, mode.pi, mode.a
        g = self.y - mode.pi                                 # grad log p(y|f)
        cho_inverse_in_place(B)                              # lower: B^-1
        # Line 9 / eq. 5.23: d log q / d f_i = -1/2 [(K^-1 + W)^-1]_ii dW_ii/df_i,
        # with (K^-1 + W)^-1 = W^-1 - W^-1/2 B^-1 W^-1/2 (matrix inversion
        # lemma, B = I + W^1/2 K W^1/2) and dW_ii/df_i = W_ii (1 - 2 pi_i) for
        # the logistic likelihood, so W_ii cancels (no division by a W that
        # underflows to 0).
        s2 = -0.5 * (1.0 - np.diagonal(B)) * (1.0 - 2.0 * pi)
        Ks2 = symmetric_matvec(B, s2, lower=False, diag=kdiag)  # last use of K
        _scale_lower(B, s)                                   # line 7: R
        # Lines 13-15: s2^T (b - K R b), b = dK g, is u^T dK g with
        # u = s2 - R K s2 (K and R symmetric).
        u = s2 - symmetric_matvec(B, Ks2, lower=True)
        # Lines 11-12 and 15 in one trace: d log q / d theta_p
        #   = 1/2 a^T dK a - 1/2 tr(R dK) + u^T dK g
        #   = -1/2 sum_ij (R - u g^T - g u^T - a a^T)_ij dK_ij,
        # reduced by the backend's fused pass (W = Kinv - A A^T with T = 1).
        _rank_two_update_lower(B, u, g)
        release_blas_before_pass()  # after dpotri and the dsymv: the pass needs every core
        return -0.5 * self.covariance.grad_trace(theta, B, a[:, None])

    # ----------------------------------------------------------- the calls
    def value_at(self, theta):
        """-log q(y|X, theta) alone (no gradient); raises
        NotPositiveDefiniteError where B is not positive definite."""
        return -self.newton(theta).value

    def value_and_grad_at(self, theta):
        """(-log q, -d log q/d theta (n_theta,)); raises as :meth:`value_at`
        (the guard is GuardedObjective's)."""
        mode = self.newton(theta)
        if not math.isfinite(mode.value):
            raise PointFailed  # before the gradient's dpotri
        return -mode.value, -self._gradient(theta, mode)

    def factor_with_jitter(self, theta, max_relative_jitter=1e-6):
        """The model a fit keeps (for :func:`fastgp._solvers.kept_factor.final_factor`):
        Newton's mode at ``theta`` with each B factored by
        :func:`fastgp._linalg.lapack.cholesky_with_jitter` (jitter on B's diagonal
        where it is not numerically positive definite).

        Returns (L, A, value, jitter): L the workspace buffer whose lower
        triangle holds the factor of B at the mode (strict upper triangle:
        K, zeroed by the caller), A = (y - pi)[:, None] (the latent mean's
        coefficients, Alg. 3.2 line 4), value = -log q, jitter the largest
        added. :attr:`mode` holds pi, W_sr and f. Raises
        NotPositiveDefiniteError or NonFiniteMatrixError (linalg's).
        """
        def factor(B, s, kdiag):
            return cholesky_with_jitter(
                lambda buffer, jitter: fill_B_from_upper(buffer, s, kdiag, jitter),
                B, max_relative_jitter=max_relative_jitter)

        mode = self.newton(np.asarray(theta, dtype=np.float64), factor)
        A = (self.y - mode.pi)[:, None]
        return self.workspace.buffer(), A, -mode.value, mode.jitter

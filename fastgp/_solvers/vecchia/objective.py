"""Vecchia's negative log-likelihood and its exact gradient: the Vecchia
solver's objective (docs/design.md, "Vecchia's approximation").

For an ordering of the N training points and, for each position i, the set
c(i) of at most m nearest points among the earlier positions,

    -log p(y) ~ -sum_i log p(y_i | y_c(i))                  (Vecchia 1988)

each term a Gaussian conditional density computed from one small block of
the kernel (the backend's ``vecchia_partials`` and ``vecchia_total``: the
engine's Vecchia pass, one Cholesky factor per block, the gradient by the
trace identity on the block).
The ordering (maxmin by default: Guinness 2018) and the conditioning sets are
found once, in the inputs divided by the kernel's length scales
(:mod:`.scaling`), and the samples relabelled for memory locality
(:class:`.neighbours.SpatialLayout`); the objective is then one smooth
function of theta, as L-BFGS-B wants. Its sums over blocks run here or on a
cluster's workers (:mod:`.distributed`), with the same bits.
:meth:`VecchiaNegLogLikelihood.relayout` finds them again at new length
scales, between optimiser runs.

With m = N - 1 every earlier point is a neighbour and the product of the
conditionals is the exact likelihood: the value and the gradient are the
Cholesky path's.

With a mean (docs/design.md, "A mean estimated with the covariance";
:mod:`fastgp._solvers.mean`) the rows carry [Y, Q] (Q the orthonormal
basis): one pass of the inverse factor's rows gives every row's residuals r
and variance v, so the whitened U^T [Y, Q] = r / sqrt(v), from which the GLS
is a QR (U^T Q is the whitened basis: K~^-1 = U U^T) and the value follows
without another pass (r is linear in the targets). The gradient is the
likelihood pass on the residuals E = Y - Q beta (the profile likelihood's:
beta is optimal, so held fixed). REML adds T/2 d log|C|: with C = Q^T U U^T Q
and F = Q C^-1/2 (with C held fixed), d log|C| = d tr(F^T U U^T F), the
data term of the pass on F's columns; the pass on [E, sqrt(T) F] counts
(T + p)/2 d sum log v, and a pass on one zero column (1/2 d sum log v) takes
the p/2 too many back out: two passes where the profile takes one.

A fitted model keeps its last layout (:class:`KeptLayout`, in the kept
state) and ``log_marginal_likelihood(theta)`` evaluates on it while the
inputs, the length scales it was found at, m, the ordering and its seed
are the fit's, instead of finding it again.
"""

import hashlib
import math
import time

import numpy as np

from ..._backend.covariance import make_covariance
from ..._linalg.lapack import exact_sum
from ...exceptions import NotPositiveDefiniteError
from ..base import GuardedObjective, KeptModel, PointFailed, regression_targets
from .distributed import VecchiaRows, VecchiaSums
from .neighbours import SpatialLayout, ordered_neighbours
from .ordering import maxmin_order, random_order
from .scaling import length_scales, scaled_inputs, stale

__all__ = ["VecchiaNegLogLikelihood", "VecchiaState", "KeptLayout", "final_model"]


class _NotPositiveDefinite(NotPositiveDefiniteError):
    """Some blocks of Vecchia's approximation are not positive definite."""

    def __init__(self, n_bad, n):
        self.order = n_bad
        np.linalg.LinAlgError.__init__(
            self, f"{n_bad} of the {n} conditional blocks of Vecchia's approximation are "
                  "not positive definite")


class KeptLayout:
    """A fit's last layout (the rows' points, conditioning sets and the
    relabelling), and what it was found from: ``key`` = (a digest of the
    inputs' bytes and shape, the length scales' bytes, m, ordering, seed).
    Pickled without its arrays (an N x m table has no place in a model
    file); one unpickled finds the layout again when it is next needed.

    point (N,), nbrs (N, m), sigma (N,) int64: as
    :class:`.neighbours.SpatialLayout`'s.
    """

    def __init__(self, key, point, nbrs, sigma):
        self.key = key
        self.point, self.nbrs, self.sigma = point, nbrs, sigma

    def matches(self, key):
        return self.point is not None and self.key == key

    def __getstate__(self):
        return {"key": self.key, "point": None, "nbrs": None, "sigma": None}


class VecchiaState:
    """What a fitted Vecchia model's predictions reuse: the length scales its
    neighbours are found at, and the training inputs divided by them
    (a cKDTree on them is made on first use and kept); and the fit's last
    layout (:class:`KeptLayout` or None), which
    ``log_marginal_likelihood(theta)`` reuses."""

    def __init__(self, scales, X_scaled, layout=None):
        self.scales = np.asarray(scales, dtype=np.float64)
        self.X_scaled = X_scaled
        self.tree = None
        self.layout = layout


class VecchiaNegLogLikelihood(GuardedObjective):
    """``f(theta) -> (L, dL/dtheta)``, Vecchia's negative log-likelihood, for
    ``scipy.optimize.minimize(jac=True)``.

    Parameters
    ----------
    covariance : FastCovariance over the training inputs X (n, d), in the
        estimator's sample order
    Y : ndarray (n, T); diag_add : ndarray (n,), alpha
    n_neighbors : int, the conditioning sets' size m
    ordering : "maxmin" or "random"
    seed : int, the ordering's draws (the approximate maxmin's subsets, or
        the random ordering)
    scales : ndarray (d,) or None, the length scales of the first layout;
        None: the kernel's at its own hyperparameters
    verbose : bool, print each layout's time per stage
    mean : fastgp._solvers.mean.MeanTerm or None, a mean whose coefficients
        are profiled out (module docstring)
    kept_layout : KeptLayout or None, a fitted model's layout, taken instead
        of finding one where it was found from the same inputs, length
        scales, m, ordering and seed

    Attributes
    ----------
    n_evaluations : int
    n_layouts : int, how many times the ordering and neighbours were found
    scales : ndarray (d,), the length scales of the current layout
    timings : dict, seconds of the latest layout's stages ("ordering",
        "neighbours", "relabelling")

    Where some block is not positive definite, or a value is not finite, the
    call answers ``(inf, zeros)``, as every objective does.
    """

    def __init__(self, covariance, Y, diag_add, n_neighbors, ordering, seed, scales=None,
                 verbose=False, mean=None, kept_layout=None):
        self.kernel = covariance.kernel
        self.X = np.ascontiguousarray(covariance.X, dtype=np.float64)
        self.Y, self.diag_add = regression_targets(Y, diag_add)
        self.n_neighbors = int(n_neighbors)
        self.ordering = ordering
        self.seed = seed
        self.mean = mean
        self._gls = self._G = None  # the mean's GLS and K~^-1 Q at the last point
        self.n_evaluations = 0
        self.n_layouts = 0
        self.verbose = bool(verbose)
        scales = (self._scales_at(self.kernel.theta) if scales is None
                  else np.asarray(scales, dtype=np.float64))
        if kept_layout is not None and kept_layout.matches(self._layout_key(scales)):
            self.scales = scales
            self._adopt(kept_layout.point, kept_layout.nbrs, kept_layout.sigma)
        else:
            self._layout(scales)

    @property
    def n_samples(self):
        return self.Y.shape[0]

    # ------------------------------------------------------------- layout
    def _scales_at(self, theta):
        return length_scales(self.kernel.clone_with_theta(np.asarray(theta, dtype=np.float64)),
                             self.X.shape[1])

    def relayout(self, theta):
        """Find the ordering and the conditioning sets in the inputs scaled
        by the length scales at ``theta``, and relabel the samples."""
        self._layout(self._scales_at(theta))

    def _layout(self, scales):
        # the previous layout's rows go first, so that two layouts never
        # coexist (fastgp.memory.vecchia_fit_bytes counts one)
        self._sums = self._points = self._neighbours = self._sigma = None
        self.scales = scales
        Xs = scaled_inputs(self.X, scales)
        n = self.n_samples
        m = min(self.n_neighbors, max(n - 1, 1))
        start = time.perf_counter()
        perm = (maxmin_order(Xs, random_state=self.seed) if self.ordering == "maxmin"
                else random_order(n, self.seed))
        ordered = time.perf_counter()
        neighbours = ordered_neighbours(Xs, perm, m)
        found = time.perf_counter()
        layout = SpatialLayout(Xs, perm, neighbours)
        self.timings = {"ordering": ordered - start, "neighbours": found - ordered,
                        "relabelling": time.perf_counter() - found}
        self._adopt(layout.point, layout.nbrs, layout.sigma)
        self.n_layouts += 1
        if self.verbose:
            print(f"      Vecchia layout {self.n_layouts} at length scales "
                  f"{np.array2string(scales, precision=3)}: {self.ordering} ordering "
                  f"{self.timings['ordering']:.2f} s, {m} neighbours "
                  f"{self.timings['neighbours']:.2f} s, relabelling "
                  f"{self.timings['relabelling']:.2f} s", flush=True)

    def _adopt(self, point, nbrs, sigma):
        """Take a layout: the rows' points (N,), conditioning sets (N, m) and
        the relabelling sigma (N,), and the passes' rows over them (the
        targets with the mean's basis beside them, where there is one)."""
        self._points, self._neighbours, self._sigma = point, nbrs, sigma
        targets = self.Y if self.mean is None else np.hstack([self.Y, self.mean.Q])
        self._sums = VecchiaSums(VecchiaRows(
            make_covariance(self.kernel, np.ascontiguousarray(self.X[sigma]), warn=False),
            np.ascontiguousarray(targets[sigma]),
            np.ascontiguousarray(self.diag_add[sigma]), point, nbrs))

    def _layout_key(self, scales):
        """What identifies a layout (:class:`KeptLayout`)."""
        digest = hashlib.blake2b(self.X.data, digest_size=16).hexdigest()
        return (digest, self.X.shape, np.asarray(scales, dtype=np.float64).tobytes(),
                self.n_neighbors, self.ordering, self.seed)

    def kept_layout(self):
        """The current layout as a fitted model keeps it."""
        return KeptLayout(self._layout_key(self.scales), self._points, self._neighbours,
                          self._sigma)

    def needs_relayout(self, theta):
        """Whether the length scales at ``theta`` have moved far enough from
        the layout's that the neighbours should be found again
        (:func:`.scaling.stale`)."""
        return stale(self.scales, self._scales_at(theta))

    # ------------------------------------------------------------ values
    def evaluate(self, theta, want_grad=True):
        """(nll, grad or None) at theta; raises NotPositiveDefiniteError
        where a block is not positive definite."""
        if self.mean is not None:
            return self._evaluate_with_mean(theta, want_grad)
        nll, grad, n_bad = self._sums.terms(theta, want_grad=want_grad)
        if n_bad:
            raise _NotPositiveDefinite(n_bad, self.n_samples)
        if not math.isfinite(nll):
            raise PointFailed
        return nll, grad

    def _terms(self, theta, Y):
        """The gradient of the likelihood pass on targets Y (rows' labels)."""
        _, grad, n_bad = self._sums.terms(theta, want_grad=True, Y=Y)
        if n_bad:
            raise _NotPositiveDefinite(n_bad, self.n_samples)
        return grad

    def _rows_gls(self, theta):
        """(b, v, r, gls): the rows of the inverse factor for the rows'
        [Y, Q] and the GLS from them (U^T [Y, Q] = r / sqrt(v), row by row:
        module docstring); raises NotPositiveDefiniteError. The rows' b
        (N x m) is not kept past the caller."""
        b, v, r, n_bad = self._sums.weight_rows(theta)
        if n_bad:
            raise _NotPositiveDefinite(n_bad, self.n_samples)
        T = self.Y.shape[1]
        white = r / np.sqrt(v)[:, None]
        self._gls = self.mean.whitened(white[:, T:], white[:, :T])
        return b, v, r, self._gls

    def _evaluate_with_mean(self, theta, want_grad):
        """:meth:`evaluate` with the mean profiled out (module docstring)."""
        _, v, _, gls = self._rows_gls(theta)
        T, p = self.Y.shape[1], self.mean.p
        nll = (0.5 * T * exact_sum(np.log(2.0 * math.pi * v))
               + 0.5 * exact_sum((gls.residual * gls.residual).ravel())
               + self.mean.restricted_value(gls, T))
        if not math.isfinite(nll):
            raise PointFailed
        if not want_grad:
            return nll, None
        rows = self._sums.rows.Y
        E = rows[:, :T] - rows[:, T:] @ gls.beta
        if not self.mean.restricted:
            return nll, self._terms(theta, E)
        F = math.sqrt(T) * gls.scaled(rows[:, T:])
        grad = (self._terms(theta, np.hstack([E, F]))
                - p * self._terms(theta, np.zeros((self.n_samples, 1))))
        return nll, grad

    def dual(self, theta):
        """Vecchia's K~^-1 Y (n, T) in the estimator's sample order (with a
        mean, K~^-1 E of the residuals at theta's GLS, and K~^-1 Q kept for
        :meth:`kept_mean`); raises NotPositiveDefiniteError."""
        if self.mean is not None:
            b, v, r, gls = self._rows_gls(theta)
            T = self.Y.shape[1]
            r_e = r[:, :T] - r[:, T:] @ gls.beta  # r is linear in the targets
            A = self._sums.dual_of_rows(b, v, np.ascontiguousarray(np.hstack([r_e, r[:, T:]])))
        else:
            A, n_bad = self._sums.dual(theta)
            if n_bad:
                raise _NotPositiveDefinite(n_bad, self.n_samples)
        out = np.empty_like(A)
        out[self._sigma] = A
        if self.mean is None:
            return out
        self._G = out[:, T:]
        return np.ascontiguousarray(out[:, :T])

    def kept_mean(self):
        """The mean's coefficients at the last :meth:`dual` (None without a
        mean)."""
        return None if self.mean is None else self.mean.kept(self._gls, self._G)

    def for_worker(self):
        """A copy for one optimiser run elsewhere (a joblib task): the same
        read-only layout, its own count of evaluations."""
        copy = type(self).__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.n_evaluations = 0
        return copy


def final_model(objective, theta, messages):
    """The Vecchia solver's kept model at ``theta``: a
    :class:`~fastgp._solvers.base.KeptModel` with no N x N factor (L None),
    A = Vecchia's K~^-1 Y, and the training inputs scaled by the length
    scales at ``theta`` as its state (the predictions' neighbours are found
    there).

    Raises numpy.linalg.LinAlgError (a block not positive definite) and
    ValueError (the value or A not finite) with ``messages``' texts.
    """
    try:
        value, _ = objective.evaluate(theta, want_grad=False)
        A = objective.dual(theta)
    except NotPositiveDefiniteError as exc:
        raise np.linalg.LinAlgError(messages.not_positive_definite(0.0), str(exc)) from exc
    except PointFailed:
        raise ValueError(messages.overflow()) from None
    if not (math.isfinite(value) and np.all(np.isfinite(A))):
        raise ValueError(messages.overflow())
    scales = objective._scales_at(theta)
    return KeptModel(A=A, value=float(value), jitter=0.0, L=None,
                     state=VecchiaState(scales, scaled_inputs(objective.X, scales),
                                        layout=objective.kept_layout()),
                     mean=objective.kept_mean())

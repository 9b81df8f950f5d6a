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
"""

import math
import time

import numpy as np

from ..._backend.covariance import make_covariance
from ...exceptions import NotPositiveDefiniteError
from ..base import GuardedObjective, KeptModel, PointFailed, regression_targets
from .distributed import VecchiaRows, VecchiaSums
from .neighbours import SpatialLayout, ordered_neighbours
from .ordering import maxmin_order, random_order
from .scaling import length_scales, scaled_inputs, stale

__all__ = ["VecchiaNegLogLikelihood", "VecchiaState", "final_model"]


class _NotPositiveDefinite(NotPositiveDefiniteError):
    """Some blocks of Vecchia's approximation are not positive definite."""

    def __init__(self, n_bad, n):
        self.order = n_bad
        np.linalg.LinAlgError.__init__(
            self, f"{n_bad} of the {n} conditional blocks of Vecchia's approximation are "
                  "not positive definite")


class VecchiaState:
    """What a fitted Vecchia model's predictions reuse: the length scales its
    neighbours are found at, and the training inputs divided by them
    (a cKDTree on them is made on first use and kept)."""

    def __init__(self, scales, X_scaled):
        self.scales = np.asarray(scales, dtype=np.float64)
        self.X_scaled = X_scaled
        self.tree = None


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
                 verbose=False):
        self.kernel = covariance.kernel
        self.X = np.ascontiguousarray(covariance.X, dtype=np.float64)
        self.Y, self.diag_add = regression_targets(Y, diag_add)
        self.n_neighbors = int(n_neighbors)
        self.ordering = ordering
        self.seed = seed
        self.n_evaluations = 0
        self.n_layouts = 0
        self.verbose = bool(verbose)
        self._layout(self._scales_at(self.kernel.theta) if scales is None
                     else np.asarray(scales, dtype=np.float64))

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
        self._points, self._neighbours = layout.point, layout.nbrs
        self._sigma = layout.sigma
        self._sums = VecchiaSums(VecchiaRows(
            make_covariance(self.kernel, layout.take(self.X), warn=False),
            layout.take(self.Y), layout.take(self.diag_add), layout.point, layout.nbrs))
        self.n_layouts += 1
        if self.verbose:
            print(f"      Vecchia layout {self.n_layouts} at length scales "
                  f"{np.array2string(scales, precision=3)}: {self.ordering} ordering "
                  f"{self.timings['ordering']:.2f} s, {m} neighbours "
                  f"{self.timings['neighbours']:.2f} s, relabelling "
                  f"{self.timings['relabelling']:.2f} s", flush=True)

    def needs_relayout(self, theta):
        """Whether the length scales at ``theta`` have moved far enough from
        the layout's that the neighbours should be found again
        (:func:`.scaling.stale`)."""
        return stale(self.scales, self._scales_at(theta))

    # ------------------------------------------------------------ values
    def evaluate(self, theta, want_grad=True):
        """(nll, grad or None) at theta; raises NotPositiveDefiniteError
        where a block is not positive definite."""
        nll, grad, n_bad = self._sums.terms(theta, want_grad=want_grad)
        if n_bad:
            raise _NotPositiveDefinite(n_bad, self.n_samples)
        if not math.isfinite(nll):
            raise PointFailed
        return nll, grad

    def dual(self, theta):
        """Vecchia's K~^-1 Y (n, T) in the estimator's sample order; raises
        NotPositiveDefiniteError."""
        A, n_bad = self._sums.dual(theta)
        if n_bad:
            raise _NotPositiveDefinite(n_bad, self.n_samples)
        out = np.empty_like(A)
        out[self._sigma] = A
        return out

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
                     state=VecchiaState(scales, scaled_inputs(objective.X, scales)))

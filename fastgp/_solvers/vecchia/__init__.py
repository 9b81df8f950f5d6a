"""Vecchia's nearest-neighbour approximation with its exact gradient
(docs/design.md, "Vecchia's approximation"): past one N x N buffer, O(N m^3)
time and O(N m) memory per evaluation, a sum over independent blocks.

=================  ============================================================
``ordering.py``    the maxmin (Guinness 2018) and random orderings
``neighbours.py``  the ordered conditioning sets, and the samples relabelled
                   for memory locality
``scaling.py``     the length-scaled space the neighbours are found in
``objective.py``   the negative log-likelihood and gradient, the kept model
``predict.py``     predictions: each query point on its nearest training
                   points, or all jointly on the union of theirs
``reference.py``   a dense NumPy reference of the same conditional densities
                   (for tests)
=================  ============================================================
"""

import numpy as np

from ...memory import estimates
from ..base import Draws, Solver, require_fast_path
from .objective import VecchiaNegLogLikelihood, final_model
from .predict import JOINT_MAX_POINTS, predict_joint, predict_vecchia

__all__ = ["VecchiaSolver", "JOINT_MAX_POINTS"]


#: n_neighbors_predict=None conditions each query point on this many times
#: n_neighbors training points, and on at least
#: :data:`PREDICT_NEIGHBOURS_BEYOND_PLANE` where the inputs have more than
#: :data:`PLANE` dimensions (:func:`default_predict_neighbours`).
PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR = 2

#: Measured after fits on 30 neighbours (docs/benchmarks.md, "Neighbours for
#: prediction"; bench/bench_vecchia.py, case predict-neighbours): on the
#: Heaton et al. temperatures (2-D, 105,569 points) and a 2-D field with a
#: trend (100,000), 60 prediction neighbours gave a held-out RMSE within
#: 0.04 % of 140's at a fifth to a sixth of the time; on an 8-D function
#: (100,000), 140 gave an RMSE 30 % below 60's (0.0146 against 0.0208) for
#: 2.7 x the time, as Katzfuss, Guinness and Lawrence (2022) predict on 140
#: after fitting on 30: the screening that makes a few neighbours enough
#: weakens as the dimension grows.
PLANE = 2
PREDICT_NEIGHBOURS_BEYOND_PLANE = 140


def default_predict_neighbours(n_neighbors, n_features):
    """n_neighbors_predict=None's value: 2 x ``n_neighbors`` for inputs of
    at most two dimensions, and at least 140 above."""
    m = PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR * int(n_neighbors)
    return m if n_features <= PLANE else max(m, PREDICT_NEIGHBOURS_BEYOND_PLANE)


class VecchiaSolver(Solver):
    """Vecchia's approximation of the regression's likelihood.

    n_neighbors : int, the conditioning sets' size m of the fit
    n_neighbors_predict : int or None, the neighbours of each query point
        (None: :func:`default_predict_neighbours` for the inputs' dimension)
    ordering : "maxmin" or "random"
    """

    name = "vecchia"
    restarts_in_workers = True
    #: The optimiser runs again after each relayout of the neighbours, and
    #: the orderings and neighbour searches take time of their own.
    #: Measured (bench/bench_fit_notice.py; docs/benchmarks.md, "Long fits:
    #: the notice against the fit"): the default fit of a noisy 2-D problem
    #: with 4 hyperparameters took 49 to 50 evaluations at 300,000 and 10^6
    #: samples, and 192 s at 10^6 where its first evaluation took 2.7 s: 71
    #: first evaluations' time, 2.8 x the 25 evaluations that fits of 4
    #: hyperparameters typically take.
    fit_time_factor = 2.8

    def __init__(self, n_neighbors, n_neighbors_predict, ordering):
        self.n_neighbors = int(n_neighbors)
        self.n_neighbors_predict = (None if n_neighbors_predict is None
                                    else int(n_neighbors_predict))
        self.ordering = ordering

    @classmethod
    def from_params(cls, params):
        m = int(params["n_neighbors"])
        return cls(m, params["n_neighbors_predict"], params["ordering"])

    def predict_neighbours(self, n_features):
        """The neighbours of each query point for inputs of ``n_features``
        dimensions."""
        if self.n_neighbors_predict is not None:
            return self.n_neighbors_predict
        return default_predict_neighbours(self.n_neighbors, n_features)

    @classmethod
    def accept(cls, covariance, kernel):
        require_fast_path(covariance, kernel, 'solver="vecchia"',
                          "Vecchia's blocks are evaluated from the lowered kernel",
                          'solver="cholesky"')

    # ---------------------------------------------------------------- fit
    def fit_bytes(self, problem):
        return estimates.vecchia_fit_bytes(problem.n_samples, problem.n_features,
                                           problem.n_targets, self.n_neighbors)

    def remedies(self, problem):
        return ["fit on fewer samples (a random subset, or average neighbouring points)",
                "use fewer neighbours (n_neighbors)",
                "use a machine with more memory"]

    def draw(self, rng):
        # the ordering's draws: one integer from the fit's RandomState, before
        # the restarts' starts are drawn
        return Draws(seed=int(rng.randint(np.iinfo(np.int32).max)))

    def objective(self, covariance, Y, diag_add, draws, verbose=False, mean=None, kept=None):
        # draws.scales: after a fit (replay), the length scales its last
        # layout was found at; kept: the fitted state, whose layout is taken
        # where it was found there (the same inputs, m, ordering and seed)
        return VecchiaNegLogLikelihood(covariance, Y, diag_add, self.n_neighbors,
                                       self.ordering, draws.seed, draws.scales,
                                       verbose=verbose, mean=mean,
                                       kept_layout=getattr(kept, "layout", None))

    def replay(self, objective, draws):
        return Draws(seed=objective.seed, scales=objective.scales)

    def final(self, objective, theta, messages):
        return final_model(objective, theta, messages)

    def update(self, objective, theta):
        if objective.needs_relayout(theta):
            objective.relayout(theta)
            return True
        return False

    # ----------------------------------------------------- outside a fit
    def evaluation_bytes(self, problem, eval_gradient):
        return self.fit_bytes(problem)

    def predict(self, fitted, X_query, want):
        n = len(fitted.A)
        m_predict = self.predict_neighbours(X_query.shape[1])
        if want == "cov":
            return self.outside_fit(n, predict_joint, fitted, X_query, m_predict)
        return self.outside_fit(n, predict_vecchia, fitted, X_query, m_predict, want)

    def predict_cov_bytes(self, n_train, n_query, n_targets, n_features):
        return estimates.vecchia_predict_cov_bytes(n_train, n_query, n_targets,
                                                   self.predict_neighbours(n_features))

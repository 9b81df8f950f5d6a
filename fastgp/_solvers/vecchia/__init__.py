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
#: n_neighbors training points.
PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR = 2


class VecchiaSolver(Solver):
    """Vecchia's approximation of the regression's likelihood.

    n_neighbors : int, the conditioning sets' size m of the fit
    n_neighbors_predict : int, the neighbours of each query point
    ordering : "maxmin" or "random"
    """

    name = "vecchia"
    restarts_in_workers = True

    def __init__(self, n_neighbors, n_neighbors_predict, ordering):
        self.n_neighbors = int(n_neighbors)
        self.n_neighbors_predict = int(n_neighbors_predict)
        self.ordering = ordering

    @classmethod
    def from_params(cls, params):
        m = int(params["n_neighbors"])
        m_predict = params["n_neighbors_predict"]
        # None: twice the fit's neighbours. Measured at the exact optimum of 2-D
        # Matern 1.5 at N = 10,000, m = 30 (docs/benchmarks.md, "Neighbours
        # for prediction"): held-out RMSE 1.0035 x the exact GP's on 30
        # neighbours, 1.0008 x on 60, 1.0001 x on 120, for 0.07, 0.23 and 0.52 s
        # per 2,000 points
        return cls(m, PREDICT_NEIGHBOURS_PER_FIT_NEIGHBOUR * m if m_predict is None
                   else int(m_predict), params["ordering"])

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
        if want == "cov":
            return self.outside_fit(n, predict_joint, fitted, X_query, self.n_neighbors_predict)
        return self.outside_fit(n, predict_vecchia, fitted, X_query, self.n_neighbors_predict,
                             want)

    def predict_cov_bytes(self, n_train, n_query, n_targets):
        return estimates.vecchia_predict_cov_bytes(n_train, n_query, n_targets,
                                                   self.n_neighbors_predict)

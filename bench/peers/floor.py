"""The floor: SciPy's own LAPACK on the same matrix fastgp factors.

One loss+gradient needs at least a Cholesky factorisation (dpotrf, n^3/3
flops) and the inverse from it (dpotri, 2 n^3/3): fastgp's time is compared
with ``dpotrf + dpotri``, its loss alone with ``dpotrf``, both on K at the same
theta, measured in the same process in interleaved rounds.
"""

import numpy as np
from scipy.linalg import lapack

from .._problems import ALPHA

__all__ = ["Floor"]


class Floor:
    """K of ``problem`` at ``theta`` (n, n) F-contiguous, and a work buffer
    that every timed call overwrites (2 x 8 n^2 bytes in all)."""

    def __init__(self, problem, theta=None):
        theta = problem.theta0 if theta is None else theta
        K = problem.kernel.clone_with_theta(theta)(problem.X)
        K[np.diag_indices_from(K)] += ALPHA
        self.K = np.asfortranarray(K)
        del K
        self.work = np.empty_like(self.K, order="F")

    def _reset(self):
        np.copyto(self.work, self.K)

    def potrf(self):
        _, info = lapack.dpotrf(self.work, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotrf info={info}")

    def potrf_potri(self):
        self.potrf()
        _, info = lapack.dpotri(self.work, lower=1, overwrite_c=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotri info={info}")

    def cases(self):
        """Timing cases for :func:`bench._measure.interleaved_medians`: the
        copy into the work buffer is the untimed setup."""
        return {"floor-potrf": (self._reset, self.potrf),
                "floor-potrf-potri": (self._reset, self.potrf_potri)}

"""The backend's door to Vecchia's passes (docs/design.md, "Vecchia's
approximation"): the methods of :class:`VecchiaMethods`, which
:class:`fastgp._backend.covariance.FastCovariance` has, through
:mod:`fastgp._engine.vecchia_passes`: the likelihood's and gradient's
partial sums per position block, the sparse inverse factor's rows, the dual
coefficients and the predictions on each query point's neighbours.
"""

from .._engine import vecchia_passes as vecchia_jitted
from .._engine.config import parallel_region
from .inputs import kernel_input

__all__ = ["VecchiaMethods"]


class VecchiaMethods:
    """Vecchia's methods of the fast-path backend (module docstring); a class
    that has them holds ``program`` and ``X_T`` (d, n)."""

    @staticmethod
    def vecchia_blocks(n_rows):
        """How many position blocks Vecchia's passes cut n_rows rows into (a
        function of n_rows alone)."""
        return vecchia_jitted.position_blocks(int(n_rows)).size - 1

    def vecchia_partials(self, theta, Y, diag_add, points, neighbours, want_grad=True,
                         blocks=None):
        """The partial sums of Vecchia's negative log-likelihood and its
        theta-gradient per position block, over the rows (points[i] after its
        conditioning set neighbours[i]) of these training inputs
        (docs/design.md, "Vecchia's approximation";
        :func:`fastgp._engine.vecchia_passes.vecchia_partials`).

        Y (n, T); diag_add (n,); points (r,) int64; neighbours (r, m) int64,
        -1 padded; blocks (first, last) of :meth:`vecchia_blocks` (r) or None
        for all. Returns (partial (blocks, 1 + n_theta or 1), flags
        (blocks,) int64): a block's bits whichever range it is computed in."""
        with parallel_region():
            return vecchia_jitted.vecchia_partials(
                self.X_T, Y, diag_add, points, neighbours, *self.program.args(theta),
                self.program.n_theta, want_grad=want_grad, blocks=blocks)

    def vecchia_total(self, partial, flags, want_grad=True):
        """(nll, grad or None, n_bad) from every block's partial sums and
        flags (:meth:`vecchia_partials`, concatenated in block order)."""
        return vecchia_jitted.vecchia_total(partial, flags, self.program.n_theta, want_grad)

    def vecchia_weight_rows(self, theta, Y, diag_add, points, neighbours, blocks=None):
        """The rows (b, v, r) of Vecchia's sparse inverse Cholesky factor for
        the position blocks ``blocks`` (None: all), and n_bad
        (:func:`fastgp._engine.vecchia_passes.vecchia_weight_rows`)."""
        with parallel_region():
            return vecchia_jitted.vecchia_weight_rows(
                self.X_T, Y, diag_add, points, neighbours, *self.program.args(theta),
                blocks=blocks)

    @staticmethod
    def vecchia_dual(points, neighbours, b, v, r, n_samples):
        """Vecchia's K~^-1 Y (n_samples, T) from every row's (b, v, r), in
        row order (one serial pass)."""
        return vecchia_jitted.vecchia_dual_from_rows(points, neighbours, b, v, r, n_samples)

    def vecchia_predict(self, theta, X_query, Y, diag_add, neighbours):
        """The conditional mean (m, T) and latent variance (m,) of each query
        point given its training neighbours (m, m') int64 (-1 padded), and
        n_bad (NaN rows where a block was not positive definite)."""
        with parallel_region():
            return vecchia_jitted.vecchia_predict(
                self.X_T, kernel_input(X_query), Y, diag_add, neighbours,
                *self.program.args(theta))

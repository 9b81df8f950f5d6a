"""The backend's products of the kernel with vectors (docs/design.md,
"Products with vectors"): the methods of :class:`ProductMethods`, which
:class:`fastgp._backend.covariance.FastCovariance` has, through the passes
of :mod:`fastgp._engine.product_passes`. They store no N x N array and
serve the matrix-free solver and the Laplace classifier's Newton steps.

===========================  ==================================================
``matmat``                   (K + diag(alpha)) V for a block of vectors V
``dmatmat``                  dK/dtheta_p V for every hyperparameter p
``grad_bilinear``            tr(P^T dK/dtheta_p Q) (+ s tr(S^T dK_p S))
``cross_matmat``             k(X*, X) V for prediction without k(X, X*)
``rows_product``, ...        their shares on a cluster's workers
===========================  ==================================================
"""

import numpy as np

from .._engine import product_passes as product_jitted
from .._engine.config import parallel_region
from .._engine.interpreter import engine_table
from .inputs import kernel_input

__all__ = ["ProductMethods", "vector_block", "finish_matmat"]


class ProductMethods:
    """The product methods of the fast-path backend (module docstring); a
    class that has them holds ``program``, ``X_T`` (d, n), ``X`` and
    ``bounds`` (:class:`fastgp._backend.covariance.FastCovariance`)."""

    _pairs = None  # the symmetric product's schedule, made on first use

    def _product(self, theta, X_query_T, on_diagonal, n_theta, V, row_offset=0):
        """The product pass: ``out[p] = k(X, X_query)^T V`` (n_theta = 0,
        p = 0) or ``dk/dtheta_p (X, X_query)^T V``; out (max(n_theta, 1), m, t).
        X_query_T (d, m) as :func:`kernel_input` gives it. on_diagonal:
        X_query is X[row_offset:row_offset + m]."""
        p = self.program
        V2 = vector_block(V, self.X.shape[0])
        out = np.empty((max(n_theta, 1), X_query_T.shape[1], V2.shape[1]))
        with parallel_region():
            product_jitted.kernel_matmat(engine_table(p.ops), self.X_T, X_query_T,
                                         on_diagonal, row_offset, *p.args(theta), n_theta, V2, out)
        return out

    def rows_product(self, theta, start, stop, n_theta, V):
        """Rows [start, stop) of K V (n_theta = 0; (1, stop - start, t), the
        white noise on the diagonal included, no diag_add) or of dK/dtheta_p V
        for every p ((n_theta, stop - start, t)); V (n, t). The same bits as
        those rows of ``dmatmat``: each output row is one pass iteration's, in
        a fixed order (docs/design.md, "Products on a cluster"). ``matmat``
        sums in another order (each lower-triangle entry once) and agrees to
        rounding; its rows on a cluster come from
        :meth:`symmetric_rows_product`."""
        return self._product(theta, kernel_input(self.X[start:stop]), True, n_theta, V,
                             row_offset=start)

    def bilinear_partials(self, theta, P, Q, first, last, S=None, s_scale=1.0):
        """The partial sums of ``grad_bilinear`` over the column blocks
        [first, last) of ``self.bounds``: (last - first, n_theta), one row per
        block; ``grad_bilinear`` is the sum of all blocks' rows in block order.
        P, Q (n, t); S (n, k) or None."""
        pr = self.program
        n = self.X.shape[0]
        S_T = np.empty((0, n)) if S is None else vector_block(S, n, transposed=True)
        partial = np.empty((last - first, pr.n_theta))
        with parallel_region():
            product_jitted.grad_bilinear_lower(
                engine_table(pr.ops), self.X_T, *pr.args(theta), pr.n_theta,
                vector_block(P, n, transposed=True), vector_block(Q, n, transposed=True),
                S_T, float(s_scale), self.bounds[first:last + 1], partial)
        return partial

    def matmat(self, theta, V, diag_add=None):
        """(K + diag(diag_add)) V, K = k(X, X) with the white-noise diagonal
        (what ``fill_lower`` writes). V (n,) or (n, t); result has V's shape.
        Each entry of K's lower triangle is evaluated once
        (:func:`fastgp._engine.product_passes.kernel_matmat_symmetric`)."""
        p = self.program
        n = self.X_T.shape[1]
        V2 = vector_block(V, n)
        out_T = np.empty((V2.shape[1], n))
        with parallel_region():
            product_jitted.kernel_matmat_symmetric(
                engine_table(p.ops), self.X_T, *self.pair_schedule(), *p.args(theta),
                np.ascontiguousarray(V2.T), out_T)
        return finish_matmat(np.ascontiguousarray(out_T.T), V, diag_add)

    def pair_schedule(self):
        """(bounds (B + 1,), rounds) of the symmetric K V
        (:func:`fastgp._engine.product_passes.pair_schedule`; made once)."""
        if self._pairs is None:
            self._pairs = product_jitted.pair_schedule(self.X_T.shape[1])
        return self._pairs

    def symmetric_rows_product(self, theta, first_block, last_block, V):
        """The rows of K V (no diag_add) in the blocks [first_block,
        last_block) of :meth:`pair_schedule`, with ``matmat``'s bits, computed
        alone (a cluster worker's share: docs/design.md, "Products on a
        cluster"); (rows, t) for V (n, t)."""
        p = self.program
        n = self.X_T.shape[1]
        V2 = vector_block(V, n)
        bounds, rounds = self.pair_schedule()
        out_T = np.empty((V2.shape[1], n))
        with parallel_region():
            product_jitted.kernel_matmat_symmetric_rows(
                engine_table(p.ops), self.X_T, bounds, rounds, int(first_block),
                int(last_block), *p.args(theta), np.ascontiguousarray(V2.T), out_T)
        return np.ascontiguousarray(out_T[:, bounds[first_block]:bounds[last_block]].T)

    def dmatmat(self, theta, V):
        """dK/dtheta_p V for every p: (n_theta, n, t), or (n_theta, n) for a
        vector V (n,); theta on the log scale, as ``kernel.theta``."""
        out = self._product(theta, self.X_T, True, self.n_theta, V)
        return out[:, :, 0] if np.ndim(V) == 1 else out

    def grad_bilinear(self, theta, P, Q, S=None, s_scale=1.0):
        """tr(P^T dK/dtheta_p Q) + s_scale tr(S^T dK/dtheta_p S) for every p,
        (n_theta,); P, Q (n, t), S (n, k) or None (no second term; an
        F-contiguous S is read without a copy). One pass over the lower
        triangle; a column of S costs half a column pair of P and Q."""
        return self.bilinear_partials(theta, P, Q, 0, self.bounds.size - 1, S,
                                      s_scale).sum(axis=0)

    def cross_matmat(self, theta, X_query, V):
        """k(X_query, X) V (m, t), or (m,) for a vector V (n,); no white
        noise, as ``cross``; no (n, m) array."""
        out = self._product(theta, kernel_input(X_query), False, 0, V)[0]
        return out[:, 0] if np.ndim(V) == 1 else out


def vector_block(V, n, transposed=False):
    """V (n,) or (n, t) as a C-contiguous float64 (n, t) block, or, if
    ``transposed``, its transpose as a C-contiguous (t, n) block (not a copy
    where V is F-contiguous)."""
    V = np.asarray(V, dtype=np.float64)
    if V.ndim not in (1, 2) or V.shape[0] != n:
        raise ValueError(f"expected an array of shape ({n},) or ({n}, t), got {V.shape}")
    V = V.reshape(n, -1)
    return np.ascontiguousarray(V.T if transposed else V)


def finish_matmat(KV, V, diag_add):
    """Add diag(diag_add) V to the product KV (n, t) and give it V's shape."""
    if diag_add is not None:
        KV += np.asarray(diag_add, dtype=np.float64)[:, None] * np.reshape(V, (KV.shape[0], -1))
    return KV[:, 0] if np.ndim(V) == 1 else KV

"""Vecchia's sums over blocks on joblib's workers (docs/design.md, "Vecchia's
approximation"; docs/cluster.md): while a joblib backend whose workers may
sit on other machines is active (:func:`fastgp._solvers.workers.tasks_on_workers`),
the likelihood's and the inverse factor's passes run as joblib tasks over
fixed groups of position blocks; otherwise on Numba's threads here.

The rows (the relabelled inputs, targets and alpha, each row's point and
conditioning set) travel to each worker once per layout, under its token
(:mod:`fastgp._solvers.workers`); each task then carries theta and its range
of blocks, and answers with those blocks' partial sums (or the rows of the
inverse factor). The groups are a function of N alone and the caller
concatenates the blocks' partial sums in block order and sums them as the
in-process pass does: a cluster fit gives the in-process fit's bits.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..workers import TaskDispatcher, tasks_on_workers

__all__ = ["VecchiaRows", "VecchiaSums", "TASKS"]

#: Tasks per pass on a cluster (fewer where there are fewer blocks).
TASKS = 8


@dataclass(eq=False)
class VecchiaRows:
    """What a Vecchia pass reads: the backend over the relabelled training
    inputs (n, d), the targets Y (n, T) and alpha (n,) in the same labels,
    and each row's point (r,) and conditioning set (r, m). Compared by
    identity (its fields are arrays)."""

    covariance: Any
    Y: np.ndarray
    diag_add: np.ndarray
    points: np.ndarray
    neighbours: np.ndarray

    @property
    def n_samples(self):
        return self.Y.shape[0]

    def partials(self, theta, want_grad, Y, first, last):
        """The blocks [first, last)'s partial sums and flags, of the targets
        ``Y`` (n, T') in the rows' labels, or of the rows' own where None."""
        return self.covariance.vecchia_partials(theta, self.Y if Y is None else Y,
                                                self.diag_add, self.points,
                                                self.neighbours, want_grad=want_grad,
                                                blocks=(first, last))

    def weight_rows(self, theta, first, last):
        """The blocks [first, last)'s rows (b, v, r) and n_bad."""
        return self.covariance.vecchia_weight_rows(theta, self.Y, self.diag_add,
                                                   self.points, self.neighbours,
                                                   blocks=(first, last))


def _ship(rows):
    """The rows without their arrays (pickles small), and the arrays."""
    covariance = object.__new__(type(rows.covariance))
    covariance.__dict__.update(rows.covariance.__dict__)
    covariance.X = None
    return (VecchiaRows(covariance, None, None, None, None),
            (rows.covariance.X, rows.Y, rows.diag_add, rows.points, rows.neighbours))


def _receive(light, arrays):
    """The rows in a worker, their arrays attached."""
    X, light.Y, light.diag_add, light.points, light.neighbours = arrays
    light.covariance.X = X  # as the passes read it (FastCovariance.X's setter)
    return light


def _joined(arrays):
    """The arrays concatenated; the one array itself where there is one (the
    in-process pass: no copy of its N x m weights)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


class VecchiaSums:
    """The objective's passes over the rows, here or on joblib's workers
    (module docstring), with the same bits either way."""

    def __init__(self, rows):
        self.rows = rows
        n_blocks = rows.covariance.vecchia_blocks(len(rows.points))
        self.n_blocks = n_blocks
        n_tasks = max(1, min(TASKS, n_blocks))
        edges = [(g * n_blocks) // n_tasks for g in range(n_tasks + 1)]
        self.groups = [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
        self.dispatcher = TaskDispatcher(rows, _ship, _receive)

    def _over_blocks(self, method, *args):
        """[(part, ...)] of ``method(*args, first, last)`` over the groups of
        blocks, in block order: one call here, or one task per group."""
        if not tasks_on_workers():
            return [getattr(self.rows, method)(*args, 0, self.n_blocks)]
        return self.dispatcher.map(method, [(*args, a, b) for a, b in self.groups])

    def terms(self, theta, want_grad=True, Y=None):
        """(nll, grad or None, n_bad), as ``FastCovariance.vecchia_total``
        gives it from every block's partial sums, of the targets ``Y`` (n, T')
        in the rows' labels (sent with every task), or of the rows' own
        where None."""
        parts = self._over_blocks("partials", np.asarray(theta, dtype=np.float64),
                                  bool(want_grad), Y)
        partial = _joined([p for p, _ in parts])
        flags = _joined([f for _, f in parts])
        return self.rows.covariance.vecchia_total(partial, flags, want_grad)

    def weight_rows(self, theta):
        """(b (n, m), v (n,), r (n, T), n_bad): every row's factor of U, of
        the rows' own targets, in row order (b, v, r None where n_bad > 0)."""
        parts = self._over_blocks("weight_rows", np.asarray(theta, dtype=np.float64))
        n_bad = sum(part[3] for part in parts)
        if n_bad:
            return None, None, None, n_bad
        b, v, r = (_joined([part[k] for part in parts]) for k in range(3))
        return b, v, r, 0

    def dual_of_rows(self, b, v, r):
        """U U^T Y (n, T') in the rows' labels from the rows of
        :meth:`weight_rows`, for any residuals r (n, T') of theirs (r is
        linear in the targets: Y's columns combined give r's combined)."""
        return self.rows.covariance.vecchia_dual(self.rows.points, self.rows.neighbours,
                                                 b, v, r, self.n_samples)

    def dual(self, theta):
        """(A (n, T) = U U^T Y in the rows' labels, or None, n_bad)."""
        b, v, r, n_bad = self.weight_rows(theta)
        if n_bad:
            return None, n_bad
        return self.dual_of_rows(b, v, r), 0

    @property
    def n_samples(self):
        return self.rows.n_samples

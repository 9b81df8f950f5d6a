"""The matrix-free solver's products on joblib's workers (docs/design.md,
"Products on a cluster"; docs/cluster.md).

:class:`WorkerProducts` wraps the fast-path backend
(:class:`fastgp._backend.covariance.FastCovariance`) of one fit. While a joblib
backend whose workers may sit on other machines is active (dask, ray, a
custom one: :func:`products_in_workers`), its four product methods run as
joblib tasks over fixed blocks of rows; otherwise (no
``joblib.parallel_config``, loky, multiprocessing, threading, sequential)
they run on
Numba threads in this process, exactly as the wrapped backend. Everything
else (``cross``, ``diag``, the attributes the preconditioner reads) is the
wrapped backend's, in this process.

- **The local run's bits.** Every output row of ``dmatmat`` and
  ``cross_matmat`` is one pass iteration's sum in a fixed order over the
  columns, whichever rows share its task; ``matmat``'s tasks are groups of
  the symmetric product's row blocks, each replaying its blocks' share of
  the in-process sums in their order
  (``FastCovariance.symmetric_rows_product``); ``grad_bilinear`` sums the partial
  sums of :func:`fastgp._engine.passes.column_blocks` (fixed by N) in block
  order, wherever each block ran. A cluster run therefore gives the in-process
  run's bits, where the workers' CPUs run Numba's code as this one's does.
- **Fixed blocks.** ``block_rows`` (default :func:`default_block_rows`, a
  function of N alone) sets the tasks of a product; the number of workers sets
  only how many run at once.
- **The training inputs travel once per fit** (:mod:`fastgp._solvers.workers`,
  the mechanism Vecchia's solver shares). The first product of a fit sends X
  and the kernel program with its tasks; each worker process keeps them
  under the fit's token (the last ``CACHED_FITS`` fits). Later tasks carry
  the token, the block's bounds, theta and the vectors; a worker that does
  not hold the token (a new worker, a restarted one) answers so and its
  tasks go again with X. Per product the vectors go out (joblib's dask
  backend scatters each array argument of a call once, so every worker
  fetches it once) and the blocks' rows come back.
"""

import numpy as np

from ..workers import CACHED_FITS, TaskDispatcher, Traffic, tasks_on_workers, worker_counts

__all__ = ["WorkerProducts", "Traffic", "products_in_workers", "default_block_rows",
           "worker_counts", "for_fit", "CACHED_FITS"]

#: Rows per task above 8 x this many samples; below, N / 8 rows (8 tasks).
DEFAULT_BLOCK_ROWS = 4096

#: Tasks of a product below 8 x DEFAULT_BLOCK_ROWS samples.
MIN_TASKS = 8

#: Whether the active joblib backend sends the products to its workers
#: (:func:`fastgp._solvers.workers.tasks_on_workers`).
products_in_workers = tasks_on_workers


def default_block_rows(n_samples):
    """Rows per task: N / 8 (rounded up) up to 8 x DEFAULT_BLOCK_ROWS samples,
    then DEFAULT_BLOCK_ROWS; a function of N alone."""
    return max(1, min(DEFAULT_BLOCK_ROWS, -(-int(n_samples) // MIN_TASKS)))


def row_blocks(n_rows, block_rows):
    """Boundaries (n_blocks + 1,) int64 of consecutive blocks of
    ``block_rows`` rows (the last one shorter)."""
    bounds = np.arange(0, n_rows, max(1, int(block_rows)), dtype=np.int64)
    return np.append(bounds, np.int64(n_rows))


def _ship(covariance):
    """The backend without its X (pickles small), and X as its own array."""
    shipped = object.__new__(type(covariance))
    shipped.__dict__.update(covariance.__dict__)
    shipped.X = None
    return shipped, (covariance.X,)


def _receive(shipped, arrays):
    """The backend in a worker, its X set as the passes read it
    (FastCovariance.X's setter)."""
    shipped.X = arrays[0]
    return shipped


# --------------------------------------------------------------- caller side
class WorkerProducts:
    """A fast-path backend whose products run on joblib's workers while a
    non-local joblib backend is active (module docstring).

    Parameters
    ----------
    covariance : FastCovariance
        The fit's backend over the training inputs X (n, d); not copied.
    block_rows : int or None
        Rows of K per task (None: :func:`default_block_rows`); sets the tasks,
        never the results.
    always : bool
        Send the products to joblib whatever backend is active (tests; with
        the threading backend the protocol runs in this process).

    Attributes
    ----------
    token : str, names this fit's inputs in the workers
    traffic : Traffic, counted since construction
    """

    def __init__(self, covariance, block_rows=None, always=False):
        self.covariance = covariance
        n = covariance.X.shape[0]
        self.block_rows = default_block_rows(n) if block_rows is None else int(block_rows)
        self.always = bool(always)
        self.dispatcher = TaskDispatcher(covariance, _ship, _receive)
        n_tasks = row_blocks(n, self.block_rows).size - 1
        self._column_groups = _group_column_blocks(covariance.bounds, n_tasks)
        self._pair_block_groups = _group_column_blocks(covariance.pair_schedule()[0], n_tasks)

    def __getattr__(self, name):
        # everything but the products is the wrapped backend's (in this process)
        if name in ("covariance", "dispatcher"):
            raise AttributeError(name)
        return getattr(self.covariance, name)

    @property
    def token(self):
        return self.dispatcher.token

    @property
    def traffic(self):
        return self.dispatcher.traffic

    # ----------------------------------------------------------- products
    def _in_workers(self):
        return self.always or products_in_workers()

    def matmat(self, theta, V, diag_add=None):
        """(K + diag(diag_add)) V as ``FastCovariance.matmat`` (the same bits),
        one task per group of its row blocks."""
        if not self._in_workers():
            return self.covariance.matmat(theta, V, diag_add=diag_add)
        V2 = _block(V, self.X.shape[0])
        theta = np.asarray(theta, dtype=np.float64)
        KV = np.concatenate(self._map("symmetric_rows_product",
                                      [(theta, int(first), int(last), V2)
                                       for first, last in self._pair_block_groups]))
        if diag_add is not None:
            KV += np.asarray(diag_add, dtype=np.float64)[:, None] * V2
        return KV[:, 0] if np.ndim(V) == 1 else KV

    def dmatmat(self, theta, V):
        """dK/dtheta_p V for every p, as ``FastCovariance.dmatmat``."""
        if not self._in_workers():
            return self.covariance.dmatmat(theta, V)
        V2 = _block(V, self.X.shape[0])
        out = np.concatenate(self._rows("rows_product", theta, self.n_theta, V2), axis=1)
        return out[:, :, 0] if np.ndim(V) == 1 else out

    def grad_bilinear(self, theta, P, Q, S=None, s_scale=1.0):
        """tr(P^T dK/dtheta_p Q) + s_scale tr(S^T dK/dtheta_p S) for every p,
        as ``FastCovariance.grad_bilinear``: the column blocks' partial sums,
        added in block order."""
        if not self._in_workers():
            return self.covariance.grad_bilinear(theta, P, Q, S, s_scale)
        n = self.X.shape[0]
        P2, Q2 = _block(P, n), _block(Q, n)
        # F-ordered: each worker's pass reads S's transpose without a copy
        S2 = None if S is None else np.asfortranarray(np.asarray(S, dtype=np.float64))
        theta = np.asarray(theta, dtype=np.float64)
        calls = [(theta, P2, Q2, int(first), int(last), S2, float(s_scale))
                 for first, last in self._column_groups]
        parts = self._map("bilinear_partials", calls)
        return np.concatenate(parts).sum(axis=0)

    def cross_matmat(self, theta, X_query, V):
        """k(X_query, X) V as ``FastCovariance.cross_matmat``, over blocks of
        query rows (each block's rows travel with its task)."""
        if not self._in_workers():
            return self.covariance.cross_matmat(theta, X_query, V)
        Xq = np.ascontiguousarray(X_query, dtype=np.float64)
        V2 = _block(V, self.X.shape[0])
        theta = np.asarray(theta, dtype=np.float64)
        bounds = row_blocks(len(Xq), self.block_rows)
        calls = [(theta, Xq[a:b], V2) for a, b in zip(bounds[:-1], bounds[1:])]
        out = np.concatenate(self._map("cross_matmat", calls))
        return out[:, 0] if np.ndim(V) == 1 else out

    def _rows(self, method, theta, n_theta, V2):
        theta = np.asarray(theta, dtype=np.float64)
        bounds = row_blocks(self.X.shape[0], self.block_rows)
        return self._map(method, [(theta, int(a), int(b), n_theta, V2)
                                  for a, b in zip(bounds[:-1], bounds[1:])])

    def _map(self, method, calls):
        return self._dispatch(method, calls)

    def _dispatch(self, method, calls):
        """``method(*call)`` of the fit's backend for each call, as joblib
        tasks (:class:`fastgp._solvers.workers.TaskDispatcher`)."""
        return self.dispatcher.map(method, calls)


def _group_column_blocks(bounds, n_groups):
    """[first, last) ranges of consecutive column blocks (``bounds`` from
    :func:`fastgp._engine.passes.column_blocks`, equal area), ``n_groups``
    of them at most, as equal in count as can be."""
    n_blocks = bounds.size - 1
    n_groups = max(1, min(int(n_groups), n_blocks))
    edges = [(g * n_blocks) // n_groups for g in range(n_groups + 1)]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _block(V, n):
    V = np.asarray(V, dtype=np.float64)
    if V.ndim not in (1, 2) or V.shape[0] != n:
        raise ValueError(f"expected an array of shape ({n},) or ({n}, t), got {V.shape}")
    return np.ascontiguousarray(V.reshape(n, -1))


def for_fit(covariance):
    """``covariance`` as the matrix-free path's backend of one fit: wrapped
    in :class:`WorkerProducts` on the fast path (idempotent), else itself."""
    if getattr(covariance, "is_fast", False) and not isinstance(covariance, WorkerProducts):
        return WorkerProducts(covariance)
    return covariance

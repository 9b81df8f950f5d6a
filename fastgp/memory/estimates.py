"""Every estimate of fastgp's peak memory: the bytes an operation will
allocate, computed from its sizes before anything is allocated (docs/design.md
names the buffers each counts). Pure arithmetic: nothing here reads the
machine."""

__all__ = [
    "fit_bytes",
    "iterative_fit_bytes",
    "iterative_predict_cov_bytes",
    "vecchia_fit_bytes",
    "vecchia_predict_cov_bytes",
    "gplvm_fit_bytes",
    "laplace_fit_bytes",
    "log_marginal_likelihood_bytes",
    "predict_cov_bytes",
    "sample_y_bytes",
    "device_fit_bytes",
    "device_gplvm_fit_bytes",
    "device_largest_n",
]

_F8 = 8  # bytes per float64

#: What every operation allocates whatever N: scikit-learn's validation, the
#: kernel objects, SciPy's optimiser state. Measured at about 50 kB with
#: tracemalloc; 1 MiB leaves room.
_FIXED = 2**20


def fit_bytes(n_samples, n_features, n_targets, n_theta, fast=True):
    """Estimate the peak extra bytes of a fit (docs/design.md, "One N x N buffer").

    Fast path: the N x N workspace plus O(N (d + T)) vectors (X and y copies,
    A = K^-1 y, the diagonal). General path (a kernel object fastgp cannot
    lower): scikit-learn's kernel call also returns K (N x N) and its
    (N, N, n_theta) gradient, and the trace needs a full W and A A^T.

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_features : int
        Input dimensions d.
    n_targets : int
        Target columns T.
    n_theta : int
        Free hyperparameters.
    fast : bool, default=True
        Whether the kernel is on fastgp's fast path.

    Returns
    -------
    int
        Bytes.
    """
    n = int(n_samples)
    total = _FIXED + _F8 * n * n + _F8 * n * (2 * int(n_features) + 4 * int(n_targets) + 4)
    if not fast:
        total += _F8 * n * n * (int(n_theta) + 3)
    return total


#: What a matrix-free fit's process touches beside NumPy's arrays (OpenBLAS's
#: per-thread buffers, Numba's and OpenMP's thread stacks): one 10-D ARD
#: loss+gradient at N = 10,000 peaked 7.4 MiB above NumPy's own peak
#: (docs/benchmarks.md, "Memory estimates against measured peaks").
_ITERATIVE_FIXED = 8 * 2**20


def iterative_fit_bytes(n_samples, n_features, n_targets, n_probes, rank):
    """Estimate the peak extra bytes of a matrix-free fit or evaluation.

    O(N (k + t + d)) and no N x N array (docs/design.md, "The matrix-free
    path"): batched CG over c = T + t columns holds the preconditioner's
    factor (k columns) and about 14 c (solution, residual, preconditioned
    residual, direction, product, right-hand sides, the active columns'
    copies and their transposes, the probes and their draws); the
    gradient's pass needs less (its trace factor in the factor's memory, two
    (N, c) operands, CG's solutions). Plus X and y copies, the diagonals,
    and 8 MiB for what a process touches beside NumPy's arrays (BLAS and
    thread buffers).

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_features : int
        Input dimensions d.
    n_targets : int
        Target columns T.
    n_probes : int
        Probe vectors t.
    rank : int
        Preconditioner rank k.

    Returns
    -------
    int
        Bytes.
    """
    n = int(n_samples)
    c = int(n_targets) + int(n_probes)
    k = int(rank)
    return _ITERATIVE_FIXED + _F8 * n * (k + 14 * c + 2 * int(n_features) + 8)


def gplvm_fit_bytes(n_samples, n_features, n_components, n_blocks):
    """Estimate the peak extra bytes of a GPLVM fit.

    The N x N workspace, the latent pass's ``n_blocks`` per-block N x Q
    partial sums (:func:`fastgp._backend.latent.latent_blocks`), O(N (D + Q))
    vectors (the data's copies, A, the SVD of the PCA start, the optimiser's
    vectors and L-BFGS's ten correction pairs over N Q + P unknowns), and
    8 MiB of fixed cost (measured: a fit at N = 2,000, D = 12 peaked 9 MiB
    above its workspace, bench/bench_gplvm_memory.py).

    Parameters
    ----------
    n_samples : int
        Rows N of the data.
    n_features : int
        Features D.
    n_components : int
        Latent dimensions Q.
    n_blocks : int
        Column blocks of the latent pass.

    Returns
    -------
    int
        Bytes.
    """
    n, d, q = int(n_samples), int(n_features), int(n_components)
    return 8 * 2**20 + _F8 * (n * n + int(n_blocks) * n * q + n * (6 * d + 30 * q + 4))


def laplace_fit_bytes(model_sizes, n_features, n_theta, fast=True, n_parallel=1):
    """Estimate the peak extra bytes of a GaussianProcessClassifier fit.

    docs/design.md, "The Laplace classifier in one buffer". One binary
    model per entry of ``model_sizes`` (its number of samples), each keeping
    its N x N factor (``L_``, the buffer its fit worked in), so
    all of them are alive at the end; while they are fitted, the models in
    flight add O(N (d + 1)) vectors and column-block temporaries of
    N x 256 floats, and on the general path (a kernel object fastgp cannot
    lower) scikit-learn's (N, N, n_theta) gradient tensor and three N x N
    matrices each. With ``n_parallel`` > 1 (joblib workers), each model in
    flight is also sent back to the parent as a copy of its factor.

    Parameters
    ----------
    model_sizes : sequence of int
        Training samples of each binary model (N for a binary problem; N per
        class for one-vs-rest; the two classes' samples per pair for
        one-vs-one).
    n_features : int
        Input dimensions d.
    n_theta : int
        Free hyperparameters of one model.
    fast : bool, default=True
        Whether the kernel is on fastgp's fast path.
    n_parallel : int, default=1
        Models fitted at once.

    Returns
    -------
    int
        Bytes.
    """
    sizes = [int(n) for n in model_sizes]
    largest = max(sizes, default=0)
    in_flight = min(max(int(n_parallel), 1), max(len(sizes), 1))
    working = _F8 * largest * (2 * int(n_features) + 24 + 2 * 256)
    if not fast:
        working += _F8 * largest * largest * (int(n_theta) + 3)
    if in_flight > 1:
        working += _F8 * largest * largest
    return _FIXED + sum(_F8 * n * n for n in sizes) + in_flight * working


def log_marginal_likelihood_bytes(n_samples, n_targets, n_theta, eval_gradient, fast=True):
    """Estimate the peak extra bytes of one ``log_marginal_likelihood(theta)``.

    Its own N x N workspace (the fitted ``L_`` is left alone) plus, on the
    general path with a gradient, scikit-learn's tensor and temporaries.

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_targets : int
        Target columns T.
    n_theta : int
        Free hyperparameters.
    eval_gradient : bool
        Whether the gradient is asked for.
    fast : bool, default=True
        Whether the kernel is on fastgp's fast path.

    Returns
    -------
    int
        Bytes.
    """
    # a fit's estimate without its copy of X; without a gradient, the general
    # path needs no tensor either
    return fit_bytes(n_samples, 0, n_targets, n_theta, fast=fast or not eval_gradient)


def predict_cov_bytes(n_train, n_query, n_targets):
    """Estimate the peak extra bytes of ``predict(X, return_cov=True)``.

    On m query points: the (n_train, m) cross-covariance solved in place, the
    (m, m) prior covariance, the (m, m) product V^T V, and the
    (m, m, n_targets) result.

    Parameters
    ----------
    n_train : int
        Training samples of the model (0 for the prior).
    n_query : int
        Query points m.
    n_targets : int
        Target columns.

    Returns
    -------
    int
        Bytes.
    """
    n, m, t = int(n_train), int(n_query), int(n_targets)
    return _FIXED + _F8 * (n * m + 2 * m * m + m * m * t + 4 * m * t)


#: m x m arrays that NumPy's ``multivariate_normal`` holds at once for one
#: target (sample_y's draws): its copy of the covariance; numpy.linalg.svd's
#: LAPACK buffer (its input's copy, u, vt and dgesdd's work array for all
#: singular vectors, at least 7 m x m by LAPACK's documentation of dgesdd)
#: and the u and vh it returns; 14 in all. tracemalloc sees about 6 of them
#: (the LAPACK buffer is not NumPy's): the covariance's copy, u and vh, and
#: after the SVD the check that u s vh reproduces the covariance.
_SVD_DRAW_ARRAYS = 14


def sample_y_bytes(n_train, n_query, n_targets, n_draws, predict_bytes=None):
    """Estimate the peak extra bytes of ``sample_y``.

    The larger of the predictive covariance's own peak
    (:func:`predict_cov_bytes`, or a solver's estimate of it) and what
    follows it, once its temporaries are freed: the (m, m, n_targets)
    covariance beside NumPy's ``multivariate_normal`` for one target at a
    time, which takes an SVD of the covariance (14 m x m: its copy, LAPACK's
    buffers and work array, u and vh) and returns (m, n_draws).

    Parameters
    ----------
    n_train : int
        Training samples of the model (0 for the prior).
    n_query : int
        Query points m.
    n_targets : int
        Target columns.
    n_draws : int
        Draws per query point.
    predict_bytes : int or None
        The prediction's own estimate (a fitted model's solver:
        :func:`iterative_predict_cov_bytes`, :func:`vecchia_predict_cov_bytes`);
        None: :func:`predict_cov_bytes`, the Cholesky path's and the prior's.

    Returns
    -------
    int
        Bytes.
    """
    m, t = int(n_query), int(n_targets)
    if predict_bytes is None:
        predict_bytes = predict_cov_bytes(n_train, n_query, n_targets)
    drawing = _FIXED + _F8 * (m * m * (t + _SVD_DRAW_ARRAYS) + 2 * m * int(n_draws) * t
                              + 4 * m * t)
    return max(int(predict_bytes), drawing)


#: Arrays of (n_train, m) that the matrix-free covariance's batched CG holds
#: at its peak: the right-hand sides k(X, X*), CG's solution, residual,
#: preconditioned residual and direction, and one step's temporaries (the
#: active columns' direction and residual, the product K~ P and its
#: contiguous operand, the scaled updates, the preconditioner's solve and
#: its correction); measured 11.5 to 12.5 at N = 1,000 to 3,000, m = 20 to
#: 400 (fastgp._solvers.iterative.krylov.batched_cg).
_ITERATIVE_PREDICT_ARRAYS = 14


def iterative_predict_cov_bytes(n_train, n_query, n_targets, rank, max_cg_iter):
    """Estimate the peak extra bytes of a matrix-free joint prediction.

    ``predict(X, return_cov=True)`` on ``n_query`` points solves
    K~ V = k(X, X*) by batched CG with one column per query point: 14
    (n_train, m) arrays, CG's scalars per step and column
    (2 max_cg_iter m), the preconditioner (n_train x rank) where it is
    built again (after unpickling), and :func:`predict_cov_bytes`'s m x m
    parts with two more for the symmetrised reduction.

    Parameters
    ----------
    n_train, n_query, n_targets : int
        The model's training samples, the query points m and the target
        columns, as :func:`predict_cov_bytes` takes them.
    rank : int
        The preconditioner's rank (``preconditioner_rank``).
    max_cg_iter : int
        CG's iteration limit (``max_cg_iter``).

    Returns
    -------
    int
        Bytes.
    """
    n, m, k = int(n_train), int(n_query), int(rank)
    words = (_ITERATIVE_PREDICT_ARRAYS * n * m + n * (k + 2) + 2 * int(max_cg_iter) * m
             + 2 * m * m)
    return predict_cov_bytes(0, n_query, n_targets) + _F8 * words


#: What a Vecchia fit's process touches beside its arrays whatever N: the
#: per-thread blocks of the passes, cKDTree's own nodes for small N, SciPy's
#: optimiser state.
_VECCHIA_FIXED = 8 * 2**20
#: The neighbour search's query rows per cKDTree call
#: (fastgp._solvers.vecchia.neighbours.CHUNK), its step's growth (GROWTH)
#: and the positions it searches by brute force (BRUTE_BELOW).
_VECCHIA_QUERY_ROWS = 1 << 16
_VECCHIA_GROWTH = 1.5
_VECCHIA_BRUTE_BELOW = 512
#: Orderings of more points are approximate maxmin, with its update pairs
#: (fastgp._solvers.vecchia.ordering.EXACT_BELOW).
_VECCHIA_EXACT_BELOW = 20_000
#: The resident memory of a fit exceeds what NumPy allocated by up to a
#: fifth: the C library keeps freed temporaries' pages (measured: 155 MB
#: resident against a traced peak of 124 MB at N = 100,000, m = 30; more
#: resident peaks: docs/benchmarks.md, "Memory estimates against measured peaks").
_VECCHIA_RESIDENT_SHARE = 1.2


def vecchia_fit_bytes(n_samples, n_features, n_targets, n_neighbors):
    """Estimate the peak extra bytes of a Vecchia fit or evaluation.

    O(N (m + d + T)) and no N x N array (docs/design.md, "Vecchia's
    approximation"). Counted in 8-byte words, the fit's stages one at a
    time (each frees its temporaries before the next) beside what lives
    throughout (the inputs in the user's order as the estimator, the
    backend and the objective keep them and scaled by the length scales,
    the targets and a normalised copy, alpha, the ordering:
    4 d + 2 T + 3 a sample); the largest stage is:

    - the ordering: for N above 20,000, the approximate maxmin's update
      pairs and their copies, 45 words a sample in 2-D and 90 more for each
      further dimension (measured: 45 for uniform 2-D inputs, 730 for
      standard normal 10-D ones; the pairs grow with how uneven the inputs'
      density is, so inputs more clustered than those can take more);
    - the neighbour search: the conditioning sets (N x m indices), the
      ordered inputs and two cKDTrees, with the temporaries of one query
      (distances, indices, their counts and the kept entries, about
      3.5 q + 6 m words a row for q = 1.65 m + 4 neighbours asked, on at
      most 65,536 rows and a third of N) or of the brute-force search of the
      first 512 positions (its (512, 512, d) differences), whichever is
      larger;
    - the relabelled layout and the final model: the conditioning sets in
      their search and relabelled copies (with the relabelling's
      temporaries, three (65,536, m) blocks), the relabelled inputs and
      targets, the positions, the final step's weights (N x m), the
      residuals, A = K~^-1 Y and its reordered copy (2 m + 2 d + 5 T + 7);

    all times 1.2 for the pages the C library keeps of freed temporaries,
    plus 8 MiB of fixed cost.

    Parameters
    ----------
    n_samples : int
        Training samples N.
    n_features : int
        Input dimensions d.
    n_targets : int
        Target columns T.
    n_neighbors : int
        The conditioning sets' size m.

    Returns
    -------
    int
        Bytes.
    """
    n, d, t = int(n_samples), int(n_features), int(n_targets)
    m = min(int(n_neighbors), max(n - 1, 1))
    throughout = n * (4 * d + 2 * t + 3)
    ordering = (n * 45 * (2 * max(d, 2) - 3) if n > _VECCHIA_EXACT_BELOW
                else n * (d + 2))
    rows = min(_VECCHIA_QUERY_ROWS, -(-n * (_VECCHIA_GROWTH - 1) // _VECCHIA_GROWTH))
    asked = 1.65 * m + 4
    brute = min(n, max(_VECCHIA_BRUTE_BELOW, m + 1))
    search = n * (m + d + 4) + max(rows * (3.5 * asked + 6 * m), brute * brute * (2 * d + 3))
    layout = (n * (2 * m + 2 * d + 5 * t + 7)
              + min(n, _VECCHIA_QUERY_ROWS) * 3 * m)
    words = throughout + max(ordering, search, layout)
    return int(_VECCHIA_FIXED + _F8 * _VECCHIA_RESIDENT_SHARE * words)


def vecchia_predict_cov_bytes(n_train, n_query, n_targets, n_neighbors):
    """Estimate the peak extra bytes of a Vecchia model's joint prediction.

    ``predict(X, return_cov=True)`` on ``n_query`` points: the dense factor
    of the kernel on the union of their ``n_neighbors`` nearest training
    points (at most N of them) and :func:`predict_cov_bytes` on it.

    Parameters
    ----------
    n_train : int
        Training samples of the model.
    n_query : int
        Query points m.
    n_targets : int
        Target columns.
    n_neighbors : int
        Neighbours of each query point.

    Returns
    -------
    int
        Bytes.
    """
    union = min(int(n_train), int(n_query) * int(n_neighbors))
    return _F8 * union * union + predict_cov_bytes(union, n_query, n_targets)


#: What a device fit holds beside its arrays whatever N: cuBLAS's workspace
#: for its handle (32 MiB on Hopper), cuSOLVER's for its diagonal-block calls
#: (order <= the block, a few MiB) and the memory pool's rounding of each
#: allocation (512 bytes). The CUDA context itself is outside the free
#: memory the check reads.
_DEVICE_FIXED = 64 * 2**20

#: cuSOLVER's dpotrf on the whole buffer asks for a workspace that grows with
#: N^2: 1.6 MB at N = 20,000, 9.8 MB at 50,000, 39 MB at 100,000 (measured on
#: an H200, 4.9e-4 of the buffer); counted as a thousandth of it.
_POTRF_WORKSPACE_SHARE = 1e-3


def device_fit_bytes(n_samples, n_features, n_targets, n_theta):
    """Estimate the peak bytes of device memory of an exact fit on a GPU
    (docs/design.md, "The GPU path"): the N x N buffer and cuSOLVER's
    workspace for its factor, the inputs, targets, A and alpha (N (d + 2 T
    + 1) floats), the gradient pass's per-column partial sums (N n_theta),
    and the fixed allowance of cuBLAS's and cuSOLVER's handles.

    Returns
    -------
    int
        Bytes.
    """
    n = int(n_samples)
    buffer = _F8 * n * n
    return (_DEVICE_FIXED + int(buffer * (1.0 + _POTRF_WORKSPACE_SHARE))
            + _F8 * n * (int(n_features) + 2 * int(n_targets) + max(int(n_theta), 1) + 2))


def device_gplvm_fit_bytes(n_samples, n_features, n_components, n_theta):
    """Estimate the peak bytes of device memory of a GPLVM fit on a GPU: as
    :func:`device_fit_bytes` with D outputs and Q inputs, plus the latent
    pass's per-point partial sums (N Q).

    Returns
    -------
    int
        Bytes.
    """
    n = int(n_samples)
    return (device_fit_bytes(n, n_components, n_features, n_theta)
            + _F8 * n * max(int(n_components), 1))


def device_largest_n(available, n_features, n_targets, n_theta):
    """The largest N whose :func:`device_fit_bytes` is within ``available``
    bytes (0 if none): what a refusal tells the user."""
    lo, hi = 0, 1
    while device_fit_bytes(hi, n_features, n_targets, n_theta) <= available:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if device_fit_bytes(mid, n_features, n_targets, n_theta) <= available:
            lo = mid
        else:
            hi = mid
    return lo

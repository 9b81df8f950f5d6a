"""The GPU's passes over one N x N buffer in device memory: the fill, the
fused gradient passes and the cross-covariance (docs/design.md, "The GPU
path"), each a numba-cuda kernel around the engine's one interpreter
(:mod:`.cuda_retarget`).

One kernel shape serves them all, a *column pass*: thread block ``c`` of a
grid of one block per column owns column ``c`` of the matrix it writes or
reads (F-ordered, so a column is contiguous), and its threads take the rows
``i`` of that column in turn (thread t the rows r0 + t, r0 + t + blockDim,
...), each entry one interpreter call on one point pair:

==============  ============================  =================================
kind            rows of column c              per entry (w: its weight)
==============  ============================  =================================
FILL            i >= c (lower triangle)       M[i, c] = k(x_c, x_i) (+ diag_add)
CROSS           every training row            M[i, c] = k(q_c, x_i)
GRAD            i >= c                        theta_out[c] += w dK/dtheta,
                                              w = c_ic (T M[i, c] - A_i . A_c)
GRAD_FULL       every row (M symmetric)       theta_out[c] += w dK/dtheta,
                                              x_out[c] += w dk(x_c, x_i)/dx_c,
                                              w = T M[i, c] - A_i . A_c
GRAD_CROSS      every training row            x_out[c] += M[i, c] dk(q_c, x_i)/dq_c
==============  ============================  =================================

(c_ic = 2 off the diagonal, 1 on it: an entry of the lower triangle stands
for itself and its mirror, as on the CPU.) A block reduces its threads' sums
in shared memory by a fixed tree, so every output row has one owner and one
order of summation: the same data give the same bits on every run, and the
caller adds the per-column partial sums of theta in column order
(Rasmussen & Williams 2006, eq. 5.9; Lawrence 2005, sec. 3, for the latent
points). ``MIRROR`` copies a lower triangle into the strict upper one (the
latent pass reads whole columns of K^-1).

Each kernel is compiled for the program's stack depth, theta count and input
dimension (the sizes of the per-thread scratch, which CUDA needs as
constants) and for its kind (so that a fill carries no derivative code), on
first use, and kept for the process (:func:`column_pass`).
"""

import functools

import numba
import numpy as np
from numba import cuda, float64

from .cuda_retarget import eval_tile
from .interpreter import D_THETA, D_X1, VALUES

__all__ = ["FILL", "CROSS", "GRAD", "GRAD_FULL", "GRAD_CROSS", "THREADS", "column_pass",
           "mirror_lower", "launch", "SIMULATED", "device_context"]

FILL, CROSS, GRAD, GRAD_FULL, GRAD_CROSS = 0, 1, 2, 3, 4

#: Whether numba-cuda runs kernels in its simulator (NUMBA_ENABLE_CUDASIM=1,
#: read when Numba is imported): the GPU path's tests on a machine without
#: one, on host arrays.
SIMULATED = bool(numba.config.ENABLE_CUDASIM)


def device_context(index):
    """The context in which numba-cuda launches on GPU ``index`` (the
    simulator's only device where it runs)."""
    return cuda.gpus[0 if SIMULATED else index]

#: Threads per block (a power of two: the shared-memory tree halves it).
THREADS = 256

#: The engine table the interpreter's signature carries (unread on the device).
_NO_TABLE = np.zeros(1, dtype=np.int64)


def _mode(kind):
    if kind in (FILL, CROSS):
        return VALUES
    if kind == GRAD:
        return D_THETA
    if kind == GRAD_FULL:
        return D_THETA | D_X1
    return D_X1


@functools.lru_cache(maxsize=None)
def column_pass(kind, stack_depth, n_theta, n_dims):
    """The compiled column pass of ``kind`` (module docstring) for programs
    of ``stack_depth`` values, ``n_theta`` free hyperparameters and inputs of
    ``n_dims`` dimensions.

    Its arguments: ``table`` (:data:`_NO_TABLE`); X1 (d, n1) the points of
    the columns, X2 (d, n2) those of the rows, float64 C-contiguous (the
    inputs transposed, as on the CPU); ops, op_float, params,
    theta_of_param: the KernelProgram's arrays, params natural scale;
    diag_add (n2,) (FILL); M (n2, n_columns) float64 F-ordered, written
    (FILL, CROSS) or read (the others); A_T (T, n2) float64 C-contiguous
    (GRAD, GRAD_FULL); theta_out (n_columns, max(n_theta, 1)) and x_out
    (n_columns, max(n_dims, 1)) float64, overwritten (row c by block c).
    Launch with one block per column and at most :data:`THREADS` threads
    (a power of two).
    """
    mode = np.int64(_mode(kind))
    depth = max(int(stack_depth), 1)
    rows = max(int(n_theta), 1)
    dims = max(int(n_dims), 1)
    want_theta = kind in (GRAD, GRAD_FULL)
    want_x = kind in (GRAD_FULL, GRAD_CROSS)
    lower = kind in (FILL, GRAD)
    training = kind in (FILL, GRAD, GRAD_FULL)  # the columns' points are the rows'
    one = np.int64(1)
    no_diagonal = np.int64(-1)

    def kernel(table, X1, X2, ops, op_float, params, theta_of_param, diag_add, M, A_T,
               theta_out, x_out):
        c = cuda.blockIdx.x
        t = cuda.threadIdx.x
        step = cuda.blockDim.x
        n2 = X2.shape[1]
        V = cuda.local.array((depth, 1), float64)
        G = cuda.local.array((rows, 1), float64)
        D1 = cuda.local.array((depth, dims, 1), float64)
        D2 = cuda.local.array((depth, dims, 1), float64)
        Wk = cuda.local.array((4, 1), float64)
        acc = cuda.local.array(rows, float64)
        acc_x = cuda.local.array(dims, float64)
        for p in range(rows):
            acc[p] = 0.0
        for q in range(dims):
            acc_x[q] = 0.0
        T = A_T.shape[0]
        start = c if lower else 0
        for i in range(start + t, n2, step):
            diag_t = np.int64(0) if (training and i == c) else no_diagonal
            eval_tile(table, X1, np.int64(c), one, X2, np.int64(i), diag_t, ops, op_float,
                      params, theta_of_param, mode, V, G, D1, D2, Wk)
            if kind == FILL:
                value = V[0, 0]
                if i == c:
                    value += diag_add[c]
                M[i, c] = value
            elif kind == CROSS:
                M[i, c] = V[0, 0]
            else:
                if kind == GRAD_CROSS:
                    w = M[i, c]
                else:
                    aa = 0.0
                    for q in range(T):
                        aa += A_T[q, i] * A_T[q, c]
                    w = T * M[i, c] - aa
                    if kind == GRAD and i != c:
                        w *= 2.0
                if want_theta:
                    for p in range(n_theta):
                        acc[p] += w * G[p, 0]
                if want_x:
                    for q in range(n_dims):
                        acc_x[q] += w * D1[0, q, 0]
        if want_theta:
            for p in range(n_theta):
                total = _block_sum(acc[p], t, step)
                if t == 0:
                    theta_out[c, p] = total
        if want_x:
            for q in range(n_dims):
                total = _block_sum(acc_x[q], t, step)
                if t == 0:
                    x_out[c, q] = total

    return cuda.jit(kernel)


@cuda.jit(device=True)
def _block_sum(value, t, step):
    """The sum of ``value`` over the block's ``step`` threads (a power of
    two), by a fixed tree in shared memory; every thread returns it."""
    shared = cuda.shared.array(THREADS, float64)
    shared[t] = value
    cuda.syncthreads()
    half = step // 2
    while half > 0:
        if t < half:
            shared[t] += shared[t + half]
        cuda.syncthreads()
        half //= 2
    total = shared[0]
    cuda.syncthreads()  # before the next sum overwrites the array
    return total


@cuda.jit
def _mirror_lower(M):
    c = cuda.blockIdx.x
    n = M.shape[0]
    for i in range(c + 1 + cuda.threadIdx.x, n, cuda.blockDim.x):
        M[c, i] = M[i, c]


def mirror_lower(M, threads=THREADS):
    """Copy the strict lower triangle of the square device array ``M``
    (F-ordered) into its strict upper triangle (one block per column)."""
    n = M.shape[0]
    if n > 1:
        _mirror_lower[n, threads](M)


def launch(kind, program_sizes, n_columns, args, threads=THREADS):
    """Run :func:`column_pass` of ``kind`` for ``program_sizes`` =
    (stack_depth, n_theta, n_dims) on ``n_columns`` columns with ``args``
    (its arguments after the table); ``threads`` a power of two, at most
    :data:`THREADS`."""
    if threads > THREADS or threads & (threads - 1):
        raise ValueError(f"threads per block must be a power of two <= {THREADS}")
    if n_columns == 0:
        return
    column_pass(kind, *program_sizes)[n_columns, threads](_NO_TABLE, *args)

"""The tile calls (:mod:`.tile_calls`) on an NVIDIA GPU: CuPy arrays, cuBLAS
and cuSOLVER through nvmath-python's raw bindings on device pointers.

Each method is one binding call (two for the LAPACK-style ones: the
workspace query, cached, and the routine) with its arguments worked out
by :mod:`.tile_calls`' checks and two pointer rules:

- a matrix is passed as ``A.data.ptr`` (CuPy's pointer to the view's first
  element, offset included) with the leading dimension that
  :func:`fastgp._linalg.tile_calls.layout` reads from its column stride;
- ``info[slot]`` is ``info.data.ptr + 4 slot`` (an int32 on the device).

cuBLAS's scalars are host pointers (the handle's pointer mode is set to
HOST): the address of a 0-d NumPy float64 array held for the call.
cuBLAS's dtrmm is out of place, C = alpha op(A) B; passing B as C too gives
BLAS's in-place dtrmm (cuBLAS documents it). cuSOLVER's workspaces are CuPy
allocations (so all device memory goes through CuPy's pool), one device
buffer grown to the largest size any call has asked for and reused, and
one host buffer likewise for the 64-bit API's host workspace; their sizes
are asked once per routine and (order, leading dimension) and cached.

cupy and nvmath are imported when a :class:`CudaTiles` is made, not when
this module is, so that it imports where neither is installed; tests pass
stand-ins for both (``xp``, ``cublas``, ``cusolver``) and check every
argument of every call without a GPU.
"""

import weakref

import numpy as np

from .tile_calls import (gemm_shape, info_slot, layout, operation, side, square_order,
                         syrk_shape, triangular_shape)

__all__ = ["CudaTiles", "device_pointer", "CUSOLVER_ELEMENT_LIMIT"]

LOWER = 0          # cublasFillMode_t CUBLAS_FILL_MODE_LOWER
NON_UNIT = 0       # cublasDiagType_t CUBLAS_DIAG_NON_UNIT
POINTER_HOST = 0   # cublasPointerMode_t CUBLAS_POINTER_MODE_HOST
CUDA_R_64F = 1     # cudaDataType_t for float64 data and computation

#: cuSOLVER's dpotri, Xtrtri and dlauum answer INVALID_VALUE for matrices of
#: 2^31 elements or more (from N = 46,341 for a whole buffer); :class:`CudaTiles`
#: refuses such calls up front where n x ld reaches it. Its dpotrf and Xpotrf
#: were measured to work in place up to N = 100,000.
CUSOLVER_ELEMENT_LIMIT = 2**31


def device_pointer(A, name="A"):
    """The device address of ``A``'s first element (``A.data.ptr``), which
    must be 8-byte aligned for float64; ValueError otherwise."""
    ptr = int(A.data.ptr)
    if ptr % 8:
        raise ValueError(f"{name}'s device pointer {ptr:#x} is not 8-byte aligned")
    return ptr


def _matrix(A, name):
    """(pointer, leading dimension) of the checked matrix ``A``."""
    _, _, ld = layout(A, name)
    return device_pointer(A, name), ld


def _scalar(value):
    """A 0-d float64 host array whose address cuBLAS reads ``value`` from."""
    return np.array(value, dtype=np.float64)


def _destroy(cublas, cusolver, cublas_handle, solver_handle, params):
    """Release the handles (called once, by :meth:`CudaTiles.close` or when
    the object is collected)."""
    if params is not None:
        cusolver.destroy_params(params)
    cusolver.destroy(solver_handle)
    cublas.destroy(cublas_handle)


class CudaTiles:
    """The tile calls on CuPy Fortran-ordered float64 arrays of the current
    device, on CuPy's current stream (the methods are described in
    :mod:`fastgp._linalg.tile_calls`).

    Make one per device and thread, under the device's context (the handles
    belong to the device current at construction), and :meth:`close` it (or
    use it in a ``with`` block) to release its cuBLAS and cuSOLVER handles
    before the workspaces go. Every call is queued on the stream that is
    CuPy's current stream when it is made: the handles follow it, so that
    the calls, CuPy's own kernels and CuPy's pool (which hands freed memory
    to the next allocation on the same stream) stay in one order.

    Parameters
    ----------
    xp : module, optional
        The array module, ``cupy`` by default (imported here).
    cublas, cusolver : module, optional
        The binding modules, ``nvmath.bindings.cublas`` and
        ``nvmath.bindings.cusolverDn`` by default (imported here): anything
        with their functions of the same signatures.
    """

    def __init__(self, xp=None, cublas=None, cusolver=None):
        if xp is None:
            import cupy as xp
        if cublas is None or cusolver is None:
            from nvmath.bindings import cublas as default_cublas
            from nvmath.bindings import cusolverDn as default_cusolver
            cublas = default_cublas if cublas is None else cublas
            cusolver = default_cusolver if cusolver is None else cusolver
        self.xp, self._cublas, self._cusolver = xp, cublas, cusolver
        self._blas = cublas.create()
        self._solver = cusolver.create()
        self._params = None  # cusolverDnParams_t, made for xpotrf on first use
        cublas.set_pointer_mode(self._blas, POINTER_HOST)
        self._stream = None
        self._sizes = {}  # (routine, n, ld) -> workspace sizes
        self._device_work = None
        self._host_work = np.empty(0, dtype=np.uint8)
        self._finalize(None)

    # ------------------------------------------------------------ lifetime
    def _finalize(self, params):
        """Release the handles (and ``params``) when this object goes; not at
        the interpreter's exit, where CUDA's context may already be gone."""
        self._release = weakref.finalize(self, _destroy, self._cublas, self._cusolver,
                                         self._blas, self._solver, params)
        self._release.atexit = False

    def close(self):
        """Release the cuBLAS and cuSOLVER handles (once; later calls fail)."""
        self._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def workspace_bytes(self):
        """Bytes of the cuSOLVER device workspace held (the largest any call
        has asked for so far); cuBLAS's own workspace is not counted."""
        return 0 if self._device_work is None else int(self._device_work.nbytes)

    def _bound(self):
        """The cuBLAS handle, both handles set to CuPy's current stream."""
        stream = int(self.xp.cuda.get_current_stream().ptr)
        if stream != self._stream:
            self._cublas.set_stream(self._blas, stream)
            self._cusolver.set_stream(self._solver, stream)
            self._stream = stream
        return self._blas

    # ------------------------------------------------------------ arrays
    def empty(self, shape):
        return self.xp.empty(shape, dtype=self.xp.float64, order="F")

    def array(self, Y):
        return self.xp.array(Y, dtype=self.xp.float64, order="F", copy=True)

    def info_vector(self, count):
        return self.xp.zeros(int(count), dtype=self.xp.int32)

    def to_host(self, x):
        return self.xp.asnumpy(x)

    def synchronize(self):
        self.xp.cuda.get_current_stream().synchronize()

    # ------------------------------------------------------------ cuBLAS
    def gemm(self, trans_a, trans_b, alpha, A, B, beta, C):
        m, n, k = gemm_shape(trans_a, trans_b, A, B, C)
        if m and n:
            handle, a, b = self._bound(), _scalar(alpha), _scalar(beta)
            self._cublas.dgemm(handle, operation(trans_a), operation(trans_b), m, n, k,
                               a.ctypes.data, *_matrix(A, "A"), *_matrix(B, "B"),
                               b.ctypes.data, *_matrix(C, "C"))

    def syrk(self, trans, alpha, A, beta, C):
        n, k = syrk_shape(trans, A, C)
        if n:
            handle, a, b = self._bound(), _scalar(alpha), _scalar(beta)
            self._cublas.dsyrk(handle, LOWER, operation(trans), n, k, a.ctypes.data,
                               *_matrix(A, "A"), b.ctypes.data, *_matrix(C, "C"))

    def trsm(self, letter, trans, alpha, A, B):
        m, n = triangular_shape(letter, A, B)
        if m and n:
            handle, a = self._bound(), _scalar(alpha)
            self._cublas.dtrsm(handle, side(letter), LOWER, operation(trans), NON_UNIT,
                               m, n, a.ctypes.data, *_matrix(A, "A"), *_matrix(B, "B"))

    def trmm(self, letter, trans, alpha, A, B):
        m, n = triangular_shape(letter, A, B)
        if m and n:
            handle, a, out = self._bound(), _scalar(alpha), _matrix(B, "B")
            self._cublas.dtrmm(handle, side(letter), LOWER, operation(trans), NON_UNIT,
                               m, n, a.ctypes.data, *_matrix(A, "A"), *out, *out)

    # ------------------------------------------------------------ cuSOLVER
    def _square(self, A, info, slot, routine=None):
        """(n, pointer, ld, info pointer) of the square ``A`` and
        ``info[slot]``; for ``routine`` (dpotri, Xtrtri, dlauum) ValueError
        where n x ld reaches :data:`CUSOLVER_ELEMENT_LIMIT`."""
        n = square_order(A)
        ptr, ld = _matrix(A, "A")
        if routine is not None and n * ld >= CUSOLVER_ELEMENT_LIMIT:
            raise ValueError(f"cuSOLVER's {routine} refuses a matrix of order {n} with "
                             f"leading dimension {ld} (2^31 elements or more)")
        return n, ptr, ld, int(info.data.ptr) + info_slot(info, slot)

    def _work(self, key, query):
        """(device address, device bytes, host address, host bytes) of the
        workspaces for ``key`` (routine, n, ld): ``query()`` gives the two
        sizes, asked once per key; each buffer grows to the largest size
        asked for and is reused."""
        if key not in self._sizes:
            self._sizes[key] = tuple(int(size) for size in query())
        device_bytes, host_bytes = self._sizes[key]
        if self._device_work is None or self._device_work.nbytes < device_bytes:
            self._device_work = None  # back to the pool before the larger one
            self._device_work = self.xp.empty(max(device_bytes, 8), dtype=self.xp.uint8)
        if self._host_work.nbytes < host_bytes:
            self._host_work = np.empty(host_bytes, dtype=np.uint8)
        return (int(self._device_work.data.ptr), device_bytes,
                self._host_work.ctypes.data, host_bytes)

    def _legacy(self, name, A, info, slot, limited=False):
        """cuSOLVER's 32-bit d<name> (lower) on the square ``A``: its
        workspace query (in float64 elements), then the routine."""
        self._bound()
        n, ptr, ld, info_ptr = self._square(A, info, slot, f"d{name}" if limited else None)
        if n == 0:
            return
        size = getattr(self._cusolver, f"d{name}_buffer_size")
        work, device_bytes, _, _ = self._work(
            (name, n, ld), lambda: (8 * size(self._solver, LOWER, n, ptr, ld), 0))
        getattr(self._cusolver, f"d{name}")(self._solver, LOWER, n, ptr, ld, work,
                                             device_bytes // 8, info_ptr)

    def potrf(self, A, info, slot):
        self._legacy("potrf", A, info, slot)

    def lauum(self, A, info, slot):
        self._legacy("lauum", A, info, slot, limited=True)

    def potri(self, A, info, slot):
        self._legacy("potri", A, info, slot, limited=True)

    def trtri(self, A, info, slot):
        self._bound()
        n, ptr, ld, info_ptr = self._square(A, info, slot, "Xtrtri")
        if n == 0:
            return
        solver = self._solver
        work = self._work(("trtri", n, ld), lambda: self._cusolver.xtrtri_buffer_size(
            solver, LOWER, NON_UNIT, n, CUDA_R_64F, ptr, ld))
        self._cusolver.xtrtri(solver, LOWER, NON_UNIT, n, CUDA_R_64F, ptr, ld, *work,
                              info_ptr)

    def xpotrf(self, A, info, slot):
        self._bound()
        n, ptr, ld, info_ptr = self._square(A, info, slot)
        if n == 0:
            return
        if self._params is None:
            self._params = self._cusolver.create_params()
            self._release.detach()
            self._finalize(self._params)
        solver, params = self._solver, self._params
        work = self._work(("xpotrf", n, ld), lambda: self._cusolver.xpotrf_buffer_size(
            solver, params, LOWER, n, CUDA_R_64F, ptr, ld, CUDA_R_64F))
        self._cusolver.xpotrf(solver, params, LOWER, n, CUDA_R_64F, ptr, ld, CUDA_R_64F,
                              *work, info_ptr)

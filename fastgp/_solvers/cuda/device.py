"""Which NVIDIA GPU a fit runs on, what it needs there, and the clear error
where it cannot (docs/gpu.md, "Install").

The estimators' ``device`` parameter is ``"cpu"`` (the default), ``"cuda"``
(GPU 0) or ``"cuda:<index>"``. :func:`resolve_device` turns a CUDA name into
a :class:`Device` when a fit starts, after checking, in this order, that the
GPU extra is installed (CuPy for arrays and the memory pool, nvmath-python
for cuBLAS and cuSOLVER, numba-cuda for the kernels: ``pip install
"fastgp[cuda]"``), that it imports under this NumPy, and that the GPU exists.

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, set before Numba
is imported) a CUDA device is simulated on the host: NumPy arrays, the
blocked linear algebra through its host stand-in
(:class:`fastgp._linalg.host_tiles.HostTiles`), the kernels in the
simulator. That is how CI tests the GPU path without a GPU; it is slow, and
meant for small problems only.
"""

import functools
import importlib
import importlib.util
import os
import re
from contextlib import contextmanager

import numpy as np

from ..._linalg.host_tiles import HostTiles
from ...exceptions import DeviceUnavailableError
from ...memory import available_memory

__all__ = ["DEVICE_PATTERN", "parse_device", "Device", "resolve_device", "EXTRA",
           "host_input", "portable_state", "restored_state", "PortableState"]

#: DLPack's device types of memory on a CUDA GPU (kDLCUDA, kDLCUDAHost,
#: kDLCUDAManaged).
_DLPACK_CUDA = (2, 3, 13)

#: What the ``device`` parameter accepts.
DEVICE_PATTERN = re.compile(r"cpu|cuda(:[0-9]+)?")

#: How a user installs the GPU path.
EXTRA = 'pip install "fastgp[cuda]"'

#: The packages the GPU path imports, and why (named in the error where one
#: is missing).
PACKAGES = (
    ("cupy", "CuPy (device arrays, the memory pool)"),
    ("nvmath", "nvmath-python (cuBLAS and cuSOLVER on device pointers)"),
    ("numba_cuda", "numba-cuda (the kernels)"),
)


def parse_device(name):
    """(kind, index) of a ``device`` value: ("cpu", None) or ("cuda", k).
    Raises ValueError for anything else."""
    if not isinstance(name, str) or DEVICE_PATTERN.fullmatch(name) is None:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<index>'; got {name!r}")
    if name == "cpu":
        return "cpu", None
    return "cuda", int(name.partition(":")[2] or 0)


def _installed(module):
    """Whether ``module`` can be imported here (looked up, not imported)."""
    return importlib.util.find_spec(module) is not None


def _missing_packages():
    return [why for module, why in PACKAGES if not _installed(module)]


def simulator_requested():
    """Whether numba-cuda's simulator is asked for (NUMBA_ENABLE_CUDASIM=1,
    which Numba reads when it is imported)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _import_gpu_stack(simulated):
    """(cupy or None, CudaTiles or None, the device backend module) where
    the extra imports; DeviceUnavailableError naming what is missing or
    broken otherwise. Simulated: the backend alone (numba's simulator)."""
    if simulated:
        return None, None, importlib.import_module("fastgp._backend.device_covariance")
    missing = _missing_packages()
    if missing:
        raise DeviceUnavailableError(
            f"device='cuda' needs the GPU extra, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {EXTRA} "
            "(docs/gpu.md). Everything else runs as before on device='cpu'.")
    try:
        cupy = importlib.import_module("cupy")
        tiles = importlib.import_module("fastgp._linalg.cuda_tiles").CudaTiles
        backend = importlib.import_module("fastgp._backend.device_covariance")
    except AttributeError as exc:  # numba-cuda 0.30 names np.row_stack, gone in NumPy 2.5
        raise DeviceUnavailableError(
            f"the GPU extra does not import under NumPy {np.__version__} ({exc}): "
            f"numba-cuda needs numpy<2.5; {EXTRA} installs a NumPy it works with "
            "(docs/gpu.md).") from exc
    except ImportError as exc:
        raise DeviceUnavailableError(
            f"the GPU extra is installed but does not import ({exc}); reinstall it with "
            f"{EXTRA} for your CUDA version (docs/gpu.md).") from exc
    return cupy, tiles, backend


class Device:
    """One CUDA device as a fit uses it.

    Attributes
    ----------
    index : int, the GPU's number (CUDA's order)
    simulated : bool, numba-cuda's simulator on the host (tests)
    xp : the array module of its arrays (cupy; numpy when simulated)
    tiles : the blocked linear algebra's tile calls on it
        (:mod:`fastgp._linalg.device_blocked`)
    name : str, "cuda:<index>"
    """

    def __init__(self, index, simulated=None):
        self.index = int(index)
        self.simulated = simulator_requested() if simulated is None else bool(simulated)
        self.name = f"cuda:{self.index}"
        cupy, tiles, self.backend = _import_gpu_stack(self.simulated)
        if self.simulated:
            self._cupy = None
            self.xp = np
            self.tiles = HostTiles()
            self.label = f"{self.name} (numba-cuda's simulator on the host)"
            return
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise DeviceUnavailableError(
                f"device='{self.name}' but CUDA finds no GPU here ({exc}); use "
                "device='cpu', or a machine with an NVIDIA GPU and its driver.") from exc
        if self.index >= count:
            raise DeviceUnavailableError(
                f"device='{self.name}' but this machine has {count} CUDA GPU"
                f"{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1}).")
        self._cupy = cupy
        self.xp = cupy
        with cupy.cuda.Device(self.index):
            self.tiles = tiles(cupy)
            properties = cupy.cuda.runtime.getDeviceProperties(self.index)
        gpu = properties["name"]
        self.label = f"{self.name} ({gpu.decode() if isinstance(gpu, bytes) else gpu})"

    @contextmanager
    def active(self):
        """Make this GPU the current one for CuPy and numba-cuda."""
        if self._cupy is None:
            with self.backend.kernel_context(self.index):
                yield self
            return
        with self._cupy.cuda.Device(self.index), self.backend.kernel_context(self.index):
            yield self

    def free_bytes(self):
        """Device memory a fit may use now (bytes), and where that was read:
        the driver's free memory plus the blocks CuPy's pool holds free.
        Simulated: the host's available memory."""
        if self._cupy is None:
            reading = available_memory()
            return (reading.available if reading is not None else 2**62,
                    f"{self.label}: the host's available memory")
        with self._cupy.cuda.Device(self.index):
            free, total = self._cupy.cuda.runtime.memGetInfo()
            pooled = self._cupy.get_default_memory_pool().free_bytes()
        return free + pooled, (f"free memory of {self.label}, {total / 2**30:.1f} GiB "
                               "in all")

    def release_cached(self):
        """Hand the memory pool's unused blocks back to the driver (after a
        fit, or a fit that failed), so that other programs see it free."""
        if self._cupy is not None:
            with self._cupy.cuda.Device(self.index):
                self._cupy.get_default_memory_pool().free_all_blocks()

    def to_host(self, array):
        """A NumPy array of a device array (the array itself when simulated)."""
        get = getattr(array, "get", None)
        return get() if get is not None else np.asarray(array)

    def synchronize(self):
        self.tiles.synchronize()

    @contextmanager
    def memory_peak(self):
        """Yield a dict whose ``"device"`` is set, when the block ends, to
        the peak of the memory pool's bytes in use inside it above those in
        use on entry (CuPy's allocator wrapped for the block; 0 when
        simulated: the arrays are then the host's)."""
        result = {"device": 0}
        if self._cupy is None:
            yield result
            return
        cupy = self._cupy
        pool = cupy.get_default_memory_pool()
        start = pool.used_bytes()
        peak = [start]

        def malloc(size):
            memory = pool.malloc(size)
            peak[0] = max(peak[0], pool.used_bytes())
            return memory

        cupy.cuda.set_allocator(malloc)
        try:
            yield result
        finally:
            cupy.cuda.set_allocator(pool.malloc)
            result["device"] = peak[0] - start


def host_input(x):
    """``x`` in host memory where it lies on a GPU (a CuPy array, a torch
    CUDA tensor: anything with ``__cuda_array_interface__`` or a CUDA
    DLPack device), one copy of its numbers; anything else as it is. The
    estimators validate and keep their inputs and targets (N x d and N x T
    numbers) on the host; only the N x N buffer needs the device."""
    on_gpu = hasattr(x, "__cuda_array_interface__")
    if not on_gpu and hasattr(x, "__dlpack_device__"):
        on_gpu = x.__dlpack_device__()[0] in _DLPACK_CUDA
    if not on_gpu:
        return x
    if not _installed("cupy"):
        raise DeviceUnavailableError(
            f"the input is an array on a GPU ({type(x).__name__}), and reading it needs "
            f"CuPy: {EXTRA}, or pass a NumPy array.")
    cupy = importlib.import_module("cupy")
    array = (cupy.asarray(x) if hasattr(x, "__cuda_array_interface__")
             else cupy.from_dlpack(x))
    return array.get()


class HostCopy:
    """A device array pickled as a host copy (:func:`portable_state`)."""

    def __init__(self, array, device):
        self.array = np.asarray(array.get())
        self.device = device


def portable_state(state, device):
    """A fitted estimator's ``__getstate__`` dict with every array on the GPU
    (``L_``) replaced by a :class:`HostCopy` (8 N^2 bytes on the host)."""
    return {name: (HostCopy(value, device) if hasattr(value, "__cuda_array_interface__")
                   else value) for name, value in state.items()}


def restored_state(state):
    """The inverse of :func:`portable_state`: each HostCopy back on its GPU,
    or DeviceUnavailableError naming the remedies where there is none."""
    restored = {}
    for name, value in state.items():
        if isinstance(value, HostCopy):
            try:
                device = resolve_device(value.device)
            except DeviceUnavailableError as exc:
                raise DeviceUnavailableError(
                    f"this model was fitted on {value.device} and keeps its N x N factor "
                    f"there; loading it needs a GPU with the GPU extra ({exc}). Load it "
                    "where one is, or fit it again with device='cpu'.") from exc
            with device.active():
                value = device.xp.asarray(value.array, order="F")
        restored[name] = value
    return restored


class PortableState:
    """An estimator's pickling (a mixin before scikit-learn's BaseEstimator):
    a factor fitted on a GPU travels as a host copy and goes back to its GPU
    on load (:func:`portable_state`, :func:`restored_state`)."""

    def __getstate__(self):
        state = super().__getstate__()
        device = getattr(state.get("_fitted_solver"), "device_name", None)
        return state if device is None else portable_state(state, device)

    def __setstate__(self, state):
        super().__setstate__(restored_state(state))


@functools.lru_cache(maxsize=None)
def _device(index):
    return Device(index)


def resolve_device(name):
    """The :class:`Device` of a CUDA ``device`` value (one per GPU and
    process); DeviceUnavailableError where the GPU path cannot run, naming
    what is missing."""
    kind, index = parse_device(name)
    if kind != "cuda":
        raise ValueError(f"{name!r} is not a CUDA device")
    return _device(index)

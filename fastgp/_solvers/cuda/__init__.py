"""The exact path in one N x N buffer in an NVIDIA GPU's memory
(docs/design.md, "The GPU path"; docs/gpu.md): the solver behind
``device="cuda"`` for the regressor and the GPLVM.

================  =============================================================
``device.py``     which GPU, what the GPU extra needs, and the errors where
                  it cannot run
``workspace.py``  the one N x N buffer in device memory
``objective.py``  the regression's and the GPLVM's objectives on the device
================  =============================================================

Everything else is shared with the CPU's exact path: the kept factor
(:mod:`fastgp._solvers.kept_factor`), the predictions from a factor
(:mod:`fastgp._solvers.predictive`), the GPLVM's predictive density
(:mod:`fastgp._solvers.latent_density`); the device's linear algebra is
:mod:`fastgp._linalg.device_blocked`'s, its kernels the backend's
(:mod:`fastgp._backend.device_covariance`).
"""

import functools
import weakref
from contextlib import contextmanager

import numpy as np

from ..._linalg.device_blocked import DEFAULT_BLOCK, cho_solve, solve_lower_in_place
from ...exceptions import InsufficientMemoryError
from ...memory import estimates, refusal
from ..base import MemoryNeed, Solver, host_memory_peak, require_fast_path
from ..kept_factor import final_factor
from ..latent_density import PredictiveNegLogDensity, lower_latent_kernel
from ..predictive import predict_mean_cov, predict_mean_var
from .device import parse_device, resolve_device
from .objective import DeviceLatentObjective, DeviceNegLogMarginalLikelihood
from .workspace import DeviceWorkspace

__all__ = ["CudaSolver"]


class _Place:
    """What :meth:`CudaSolver.evaluation_context` yields: ``evaluate(f, *a)``
    runs f on the active GPU, and turns the device running out of memory
    into an InsufficientMemoryError that names the device and the remedies."""

    def __init__(self, solver):
        self.solver = solver

    def evaluate(self, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except InsufficientMemoryError:
            raise
        except MemoryError as exc:  # CuPy's OutOfMemoryError is one
            raise self.solver.out_of_memory(exc) from exc


class CudaSolver(Solver):
    """The exact regression (and GPLVM) with the buffer on a GPU: the CPU
    Cholesky path's plan, on the device.

    device_name : str, "cuda" or "cuda:<index>" (the estimator's ``device``)
    block : int, the blocked inverse's block order
    """

    name = "cholesky"
    restarts_in_workers = False
    #: The blocked inverse's block order, and the passes' threads per block
    #: (the tests under the simulator take small ones, to run the blocked and
    #: multi-row paths on small problems).
    block = DEFAULT_BLOCK
    threads = 256  # fastgp._engine.cuda_passes.THREADS, its largest

    def __init__(self, device_name):
        kind, index = parse_device(device_name)
        if kind != "cuda":
            raise ValueError(f"CudaSolver runs on a CUDA device, not {device_name!r}")
        self.device_name = f"cuda:{index}"

    @classmethod
    def from_params(cls, params):
        return cls(params["device"])

    @property
    def device(self):
        """The :class:`~fastgp._solvers.cuda.device.Device` (resolved on
        first use: DeviceUnavailableError where the GPU path cannot run)."""
        return resolve_device(self.device_name)

    @classmethod
    def accept(cls, covariance, kernel):
        require_fast_path(covariance, kernel, "device='cuda'",
                          "the GPU evaluates the lowered kernel", "device='cpu'")

    # ---------------------------------------------------------------- fit
    def fit_bytes(self, problem):
        """The host's share: the inputs, targets and A, O(N (d + T))."""
        n = problem.n_samples
        return 2**20 + 8 * n * (2 * problem.n_features + 4 * problem.n_targets + 4)

    def fit_memory(self, problem):
        return MemoryNeed(host=self.fit_bytes(problem), device=estimates.device_fit_bytes(
            problem.n_samples, problem.n_features, problem.n_targets, problem.n_theta))

    def remedies(self, problem):
        largest = self._largest(problem.n_features, problem.n_targets, problem.n_theta)
        return [f"fit on at most N = {largest:,} samples (what fits on {self.device_name} "
                "now)", "use a GPU with more memory",
                "use device=\"cpu\" with solver=\"vecchia\" (Vecchia's approximation, "
                "O(N m) memory)"]

    def _largest(self, n_features, n_targets, n_theta):
        free, _ = self.device.free_bytes()
        return estimates.device_largest_n(free, n_features, n_targets, n_theta)

    def check_device_memory(self, needed_bytes, n_samples, operation, remedies):
        free, source = self.device.free_bytes()
        if needed_bytes > free:
            raise refusal(needed_bytes, free, source, n_samples=n_samples,
                          operation=operation, remedies=remedies)

    def out_of_memory(self, exc):
        """The InsufficientMemoryError of a device allocation that failed
        mid-fit (``exc``, CuPy's)."""
        free, source = self.device.free_bytes()
        needed = int(getattr(exc, "size", 0) or 0)
        return refusal(needed, free, source, n_samples=0,
                       operation=f"an allocation on {self.device_name}",
                       size="the fit in progress",
                       remedies=["fit on fewer samples",
                                 "free the GPU's memory held elsewhere (other models' "
                                 "L_, other processes)"])

    def _covariance(self, kernel, X, program=None):
        device = self.device
        return device.backend.DeviceCovariance(kernel, X, device.xp, program=program,
                                               threads=self.threads)

    def _workspace(self, n):
        return _track(DeviceWorkspace(self.device, n, self.check_device_memory), self)

    def accept_mean(self, mean):
        if mean is not None:
            raise ValueError(
                "A mean estimated with the covariance (mean=...) runs on the CPU only: "
                "its generalised least squares works in the CPU objectives' solves "
                "(docs/design.md, \"A mean estimated with the covariance\"). Use "
                "device=\"cpu\" (solver \"cholesky\", \"vecchia\" or \"iterative\"), "
                "or fit without a mean.")

    def objective(self, covariance, Y, diag_add, draws, verbose=False, mean=None, kept=None):
        self.accept_mean(mean)
        device = self.device
        with device.active():
            covariance = self._covariance(covariance.kernel, covariance.X,
                                          covariance.program)
            return DeviceNegLogMarginalLikelihood(device, covariance, Y, diag_add,
                                                  self._workspace(len(Y)), self.block)

    @contextmanager
    def _on_device(self, n_samples):
        device = self.device
        try:
            with device.active():
                yield _Place(self)
        except BaseException:
            _release_workspaces(self)
            raise
        finally:
            device.release_cached()

    def evaluation_context(self, n_samples):
        """Every evaluation on the GPU, which is made current; its pool's
        unused blocks go back to the driver when the context ends, and where
        the work inside raised, the fit's buffers are dropped first (a fit
        that failed releases the device memory it held)."""
        return self._on_device(n_samples)

    def final(self, objective, theta, messages):
        return final_factor(objective, theta, messages)

    @contextmanager
    def memory_peak(self):
        with host_memory_peak() as host, self.device.memory_peak() as device:
            result = dict(host)
            yield result
        result.update(host=host["host"], device=device["device"])

    # ----------------------------------------------------- outside a fit
    def evaluation_bytes(self, problem, eval_gradient):
        return self.fit_bytes(problem)

    def predict(self, fitted, X_query, want):
        device = self.device
        with self.evaluation_context(len(fitted.A)) as place:
            covariance = self._covariance(fitted.kernel, fitted.X)
            A = device.xp.asarray(fitted.A)
            solve = functools.partial(solve_lower_in_place, device.tiles)
            if want == "cov":
                return place.evaluate(predict_mean_cov, covariance, fitted.kernel.theta,
                                      fitted.L, A, X_query, solve_lower=solve,
                                      to_host=device.to_host)
            return place.evaluate(predict_mean_var, covariance, fitted.kernel.theta,
                                  fitted.L, A, X_query, want == "var", solve_lower=solve,
                                  xp=device.xp, to_host=device.to_host)

    def predict_cov_bytes(self, n_train, n_query, n_targets, n_features):
        # the host's: the (m, m) result and the prior's; the (n, m) block
        # lies on the device, counted as the CPU path counts it (an upper
        # bound where the device is the host: the simulator)
        return estimates.predict_cov_bytes(n_train, n_query, n_targets)

    # ------------------------------------------------ the other estimators
    def latent_objective(self, kernel, Y, n_components, diag_add):
        device = self.device
        program = lower_latent_kernel(kernel, n_components)
        with device.active():
            covariance = self._covariance(kernel, np.zeros((len(Y), n_components)), program)
            return DeviceLatentObjective(device, covariance, Y, diag_add,
                                         self._workspace(len(Y)), self.block)

    def latent_fit_memory(self, n_samples, n_features, n_components, objective):
        n = n_samples
        return MemoryNeed(host=2**20 + 8 * n * (6 * n_features + 30 * n_components + 4),
                          device=estimates.device_gplvm_fit_bytes(
                              n, n_features, n_components, objective.n_theta))

    def latent_density(self, kernel, X_train, L, A, Y_new):
        device = self.device
        with device.active():
            covariance = self._covariance(kernel, X_train,
                                          lower_latent_kernel(kernel, X_train.shape[1]))
        return PredictiveNegLogDensity(
            covariance, kernel.theta, L, A, Y_new,
            functools.partial(cho_solve, device.tiles), xp=device.xp,
            to_host=device.to_host)

    def predict_from_factor(self, kernel, X_train, L, A, X_query, want_var):
        device = self.device
        with self.evaluation_context(len(A)) as place:
            covariance = self._covariance(kernel, X_train)
            return place.evaluate(
                predict_mean_var, covariance, kernel.theta, L, device.xp.asarray(A), X_query,
                want_var, solve_lower=functools.partial(solve_lower_in_place, device.tiles),
                xp=device.xp, to_host=device.to_host)

    def laplace_objective(self, covariance, y, max_iter, warm_start, f_cached=None):
        raise ValueError("the Laplace classifier runs on the CPU only (its Newton steps "
                         "use the kept upper triangle and float32 views of the buffer: "
                         "docs/gpu.md)")


#: The live workspaces of each solver object, so that a failed fit can drop
#: its device buffer before the memory pool hands blocks back (weak on both
#: sides: a fitted solver is pickled with its estimator, this is not).
_WORKSPACES = weakref.WeakKeyDictionary()


def _track(workspace, solver):
    _WORKSPACES.setdefault(solver, weakref.WeakSet()).add(workspace)
    return workspace


def _release_workspaces(solver):
    for workspace in list(_WORKSPACES.pop(solver, ())):
        workspace.release()

"""The four covariance backends answer the same questions the same way
(tests/_conformance.py): the fast path, its latent subclass, the kernel
object's fallback, and the fast path's products sent to joblib's workers."""

from _conformance import BackendConformance

from fastgp._backend.covariance import FastCovariance, KernelObjectCovariance, make_covariance
from fastgp._backend.latent import LatentCovariance
from fastgp._backend.lowering import lower_kernel
from fastgp._solvers.iterative.distributed import WorkerProducts


class TestFastCovariance(BackendConformance):
    def make(self, kernel, X):
        backend = make_covariance(kernel, X)
        assert isinstance(backend, FastCovariance)
        return backend


class TestLatentCovariance(BackendConformance):
    def make(self, kernel, X):
        return LatentCovariance(kernel, lower_kernel(kernel, X.shape[1]), X)


class TestKernelObjectCovariance(BackendConformance):
    def make(self, kernel, X):
        return KernelObjectCovariance(kernel, X)


class TestWorkerProducts(BackendConformance):
    """Every product sent through joblib's machinery (always=True), here on
    its default in-process backend."""

    def make(self, kernel, X):
        return WorkerProducts(make_covariance(kernel, X), block_rows=7, always=True)

"""GPyTorch: an ExactGP with a zero mean, ScaleKernel(RBFKernel or
MaternKernel(nu=1.5)) and a GaussianLikelihood, float64 on the CPU; the loss is
``-ExactMarginalLogLikelihood * n`` and its gradient comes from autograd.

Every positive parameter is constrained through ``exp`` (``Positive(transform=
torch.exp, inv_transform=torch.log)``), so GPyTorch's raw parameters are
exactly scikit-learn's log-space ``theta`` and the noise may go below
GPyTorch's default floor of 1e-4 as in the other libraries.

Two modes:

- ``gpytorch-exact``: ``gpytorch.settings.max_cholesky_size(10**9)``: Cholesky
  at every size, the exact loss and gradient;
- ``gpytorch``: GPyTorch's defaults: Cholesky up to n = 800, above it
  preconditioned conjugate gradients with stochastic Lanczos quadrature for
  the log determinant, so value and gradient are estimates (the comparison
  shows how far they land from the exact ones).
"""


import numpy as np

from ._base import Adapter

__all__ = ["GPyTorchExact", "GPyTorchDefault"]


def _build(problem):
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    pos = dict(transform=torch.exp, inv_transform=torch.log)
    d = problem.n_features
    ard = d if problem.name in ("ard10", "gplvm") else None
    if problem.name == "seattle":
        base = gpytorch.kernels.MaternKernel(
            nu=1.5, ard_num_dims=ard, lengthscale_constraint=gpytorch.constraints.Positive(**pos))
    else:
        base = gpytorch.kernels.RBFKernel(
            ard_num_dims=ard, lengthscale_constraint=gpytorch.constraints.Positive(**pos))
    covar = gpytorch.kernels.ScaleKernel(
        base, outputscale_constraint=gpytorch.constraints.Positive(**pos))
    likelihood = gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.Positive(**pos))

    X = torch.as_tensor(problem.X)
    y = torch.as_tensor(problem.Y)

    class Model(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = covar

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = Model().double()
    model.train()
    likelihood.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    raw = [covar.raw_outputscale, base.raw_lengthscale, likelihood.noise_covar.raw_noise]
    return model, mll, X, y, raw


class GPyTorchExact(Adapter):
    name = "gpytorch-exact"
    package = "gpytorch"
    cholesky_size = 10**9

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 10 + 400e6

    def _settings(self):
        import contextlib

        import gpytorch

        stack = contextlib.ExitStack()
        if self.cholesky_size is not None:
            stack.enter_context(gpytorch.settings.max_cholesky_size(self.cholesky_size))
        return stack

    def prepare(self, problem):
        self.problem = problem
        self.model, self.mll, self.X, self.y, self.raw = _build(problem)
        self.sizes = [p.numel() for p in self.raw]

    def _set(self, theta):
        import torch

        theta = np.asarray(theta, dtype=np.float64)
        offset = 0
        with torch.no_grad():
            for p, size in zip(self.raw, self.sizes):
                p.copy_(torch.as_tensor(theta[offset:offset + size]).reshape(p.shape))
                offset += size

    def _loss(self):
        return -self.mll(self.model(self.X), self.y) * self.problem.n

    def loss_grad(self, theta):
        self._set(theta)
        for p in self.raw:
            p.grad = None
        with self._settings():
            loss = self._loss()
            loss.backward()
        grad = np.concatenate([p.grad.detach().numpy().ravel() for p in self.raw])
        return float(loss.detach()), grad

    def loss(self, theta):
        import torch

        self._set(theta)
        with self._settings(), torch.no_grad():
            return float(self._loss())


class GPyTorchDefault(GPyTorchExact):
    name = "gpytorch"
    cholesky_size = None

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        return 8.0 * n * n * 8 + 400e6



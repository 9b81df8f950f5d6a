"""The benchmark problems: seeded data, the kernel and its start, in one place
so that every library sees the same numbers.

A problem is described by a small JSON-able dict (``name``, ``n``, ``seed``),
so a fresh worker process can rebuild exactly the same data. All kernels are
scikit-learn kernel objects; ``theta`` is their log-space vector and every
peer adapter maps it to its own parametrisation.

- ``"1d"``: x ~ N(0, 1) (n, 1), y = sin(x) + 0.01 eps; ConstantKernel * RBF +
  WhiteKernel started at scikit-learn's defaults (all 1.0): the start a user
  who writes ``C() * RBF() + WhiteKernel()`` gets.
- ``"ard10"``: X ~ N(0, I_10), y = sum_k sin(x_k) / (k + 1) + 0.01 eps, so that
  the ten length scales differ; ConstantKernel * RBF(ten length scales) +
  WhiteKernel, all started at 1.0.
- ``"seattle"``: the hourly Seattle temperatures of 2010 (n <= 8,759), time in
  hours, y minus its mean; ConstantKernel * Matern(nu=1.5) + WhiteKernel (see
  :func:`seattle_kernel` for the start and bounds).
- ``"gplvm"``: Y = standard normal (n, 12) as in the GPLVM issue's motivating
  case, Q = 2 latent dimensions started at PCA; ConstantKernel * RBF(two
  length scales) + WhiteKernel.
- ``"gpc"``: binary classification, x uniform on [-3, 3]^2, y = [sin(x_1) +
  x_2 / 2 + 0.3 eps > 0] (labels 0 and 1); ConstantKernel(1) * RBF([1, 1])
  (three hyperparameters), no WhiteKernel: the Laplace approximation's
  B = I + W^1/2 K W^1/2 is positive definite without one (Rasmussen &
  Williams 2006, Sec. 3.4.3).
"""

import numpy as np
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

__all__ = ["PROBLEMS", "make_problem", "seattle_kernel", "sin_1d", "ard_10d",
           "gplvm_data", "binary_2d", "ALPHA"]

#: Added to K's diagonal by every library (scikit-learn's default ``alpha``).
ALPHA = 1e-10


def sin_1d(n, seed=0):
    """x standard normal (n, 1), y = sin(x) + 0.01 noise (n,)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 1))
    y = np.sin(X[:, 0]) + 0.01 * rng.standard_normal(n)
    return X, y


def ard_10d(n, seed=0, d=10):
    """X standard normal (n, d), y = sum_k sin(x_k) / (k + 1) + 0.01 noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X) @ (1.0 / np.arange(1, d + 1)) + 0.01 * rng.standard_normal(n)
    return X, y


def gplvm_data(n, seed=0, n_features=12, n_components=2):
    """Y standard normal (n, n_features), centred; X0 (n, n_components): the
    first principal components of Y scaled to unit variance (PCA start)."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((n, n_features))
    Y -= Y.mean(axis=0)
    U, s, _ = np.linalg.svd(Y, full_matrices=False)
    X0 = U[:, :n_components] * s[:n_components]
    X0 /= X0.std(axis=0)
    return X0, Y


def binary_2d(n, seed=0):
    """X uniform on [-3, 3]^2 (n, 2), y (n,) int labels in {0, 1}:
    [sin(x_1) + x_2 / 2 + 0.3 noise > 0]."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = (np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def seattle_kernel():
    """C * Matern(nu=1.5) + WhiteKernel for hourly temperatures (deg F).

    Start: the signal variance at 100 (deg F)^2, about the series' variance
    (its standard deviation is near 10 deg F); a length scale of 24 hours, the
    daily cycle, which a once-differentiable Matern follows without forcing
    periodicity; noise 1 (deg F)^2, the hour-to-hour jitter a weather station
    shows. Bounds: length scale from 1 hour (the sampling step; below it the
    model is white noise) to 10^4 hours (longer than the year's 8,759, so
    "one trend" is reachable); signal variance 1e-2 to 1e4; noise 1e-6 to
    1e2: the readings are rounded to 0.1 deg F (a rounding variance near
    1e-3), so the noise may fall well below the start, and the bound leaves
    it room. The benchmark prints the fitted kernel, so a parameter that
    ends on a bound shows.
    """
    return (C(100.0, (1e-2, 1e4)) * Matern(length_scale=24.0, length_scale_bounds=(1.0, 1e4),
                                           nu=1.5)
            + WhiteKernel(noise_level=1.0, noise_level_bounds=(1e-6, 1e2)))


def _seattle(n, seed=0):
    from fastgp.datasets import load_seattle_temperatures

    X, y = load_seattle_temperatures()
    X, y = X[:n], y[:n]
    return X, y - y.mean()


class Problem:
    """Data, kernel (at its start theta) and output count of one benchmark."""

    def __init__(self, name, n, X, Y, kernel, latent=False):
        self.name = name
        self.n = n
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.Y = np.ascontiguousarray(Y, dtype=np.float64)
        self.kernel = kernel
        self.latent = latent

    @property
    def theta0(self):
        return self.kernel.theta.copy()

    @property
    def bounds(self):
        return self.kernel.bounds

    @property
    def n_features(self):
        return self.X.shape[1]

    @property
    def n_outputs(self):
        return 1 if self.Y.ndim == 1 else self.Y.shape[1]


PROBLEMS = {
    "1d": dict(data=sin_1d, kernel=lambda d: C(1.0) * RBF(1.0) + WhiteKernel(1.0),
               n_features=1, title="1-D, C*RBF + White"),
    "ard10": dict(data=ard_10d, kernel=lambda d: C(1.0) * RBF(np.ones(d)) + WhiteKernel(1.0),
                  n_features=10, title="10-D ARD, C*RBF(10 length scales) + White"),
    "seattle": dict(data=_seattle, kernel=lambda d: seattle_kernel(), n_features=1,
                    title="Seattle hourly temperature, C*Matern(1.5) + White"),
    "gplvm": dict(data=gplvm_data,
                  kernel=lambda d: C(1.0) * RBF(np.ones(d)) + WhiteKernel(1.0),
                  n_features=2, title="GPLVM, Y standard normal (N, 12), Q = 2"),
    "gpc": dict(data=binary_2d, kernel=lambda d: C(1.0) * RBF(np.ones(d)), n_features=2,
                title="Binary classification (Laplace), 2-D, C*RBF(2 length scales)",
                # the comparison's reason for leaving out the LAPACK floor row
                no_floor="No floor row: the classifier's K = C*RBF has no noise term and "
                         "is numerically singular (dpotrf fails on it); the Laplace "
                         "approximation factors B = I + W^1/2 K W^1/2 once per Newton "
                         "step instead (Rasmussen & Williams 2006, Alg. 3.1), so dpotrf "
                         "+ dpotri on K is not its floor."),
}


def make_problem(name, n, seed=0):
    """Build problem ``name`` at size ``n`` (see the module docstring)."""
    spec = PROBLEMS[name]
    X, Y = spec["data"](n, seed)
    kernel = spec["kernel"](spec["n_features"])
    # len(X), not n: the Seattle series has 8,759 rows however many are asked for
    return Problem(name, len(X), X, Y, kernel, latent=(name == "gplvm"))


def n_theta(name):
    """Number of kernel hyperparameters of problem ``name``."""
    spec = PROBLEMS[name]
    return spec["kernel"](spec["n_features"]).n_dims

"""The adapter contract and the one optimiser driver every library's fit uses."""

import time

import numpy as np
import scipy.optimize

__all__ = ["Adapter", "lbfgsb_driver", "LBFGSBCounter", "fit_estimator"]


class Adapter:
    """One library's view of one problem (see :mod:`bench.peers`).

    Class attributes
    ----------------
    name : str            registry name
    package : str         distribution to import (availability check)
    problems : set of str problem names this adapter handles
    """

    name = "?"
    package = None
    problems = {"1d", "ard10", "seattle"}

    @classmethod
    def unavailable(cls):
        """None if the library imports, else the reason (a short string)."""
        # find_spec imports nothing: the parent process stays light; a broken
        # install shows up as the worker's error instead
        import importlib.util

        if cls.package is not None and importlib.util.find_spec(cls.package) is None:
            return f"{cls.package} is not installed (pip install .[compare])"
        return None

    @classmethod
    def estimate_bytes(cls, problem_name, n, n_features, n_theta):
        """Rough peak memory above baseline of one loss+gradient, used only to
        skip cases that cannot fit before running them."""
        raise NotImplementedError

    def warm_up(self, problem_name, n):
        """Import, compile or load whatever the first call needs, without the
        problem's data, so that the memory figure that follows is the
        evaluation's, not the import's or the compiler's. Default: one
        loss+gradient and one loss on the same problem at n = 64."""
        from .._problems import make_problem

        self.prepare(make_problem(problem_name, 64))
        self.loss_grad(self.start())
        self.loss(self.start())
        self.release()

    #: Untimed, before each timed call of :meth:`loss_grad` and :meth:`loss`:
    #: whatever an optimiser step leaves between two evaluations of this
    #: library that the interleaved rounds would not (None: nothing).
    between_calls = None

    def release(self):
        """Drop every reference to the current problem's data."""
        for name in list(vars(self)):
            if not name.startswith("_"):
                setattr(self, name, None)

    def prepare(self, problem):
        """Build this library's objective for ``problem`` (data included)."""
        raise NotImplementedError

    def loss_grad(self, theta):
        raise NotImplementedError

    def loss(self, theta):
        raise NotImplementedError

    def start(self):
        """The start of the optimisation, in ``loss_grad``'s coordinates."""
        return self.problem.theta0

    def bounds(self):
        return self.problem.bounds

    def fit(self, max_iter=None):
        """Full fit from the start with :class:`LBFGSBCounter` (at most
        ``max_iter`` iterations if given); one more loss at the optimum stands
        for the factorisation kept for prediction."""
        counter = LBFGSBCounter(max_iter)
        start = time.perf_counter()
        theta, value = counter(lambda t, eval_gradient=True: self.loss_grad(t),
                               self.start(), self.bounds())
        final = self.loss(theta)
        wall = time.perf_counter() - start
        return dict(wall_s=wall, n_evaluations=counter.n_evaluations,
                    n_iterations=counter.n_iterations, final_nlml=float(final),
                    theta=np.asarray(theta).tolist(), message=counter.message)


class LBFGSBCounter:
    """scikit-learn's default optimiser (``scipy.optimize.minimize`` with
    L-BFGS-B, ``jac=True``, the kernel's bounds, SciPy's default tolerances),
    as a callable with scikit-learn's optimizer signature that also counts
    evaluations and iterations; ``max_iter`` caps the iterations (None:
    SciPy's default)."""

    def __init__(self, max_iter=None):
        self.max_iter = max_iter
        self.n_evaluations = 0
        self.n_iterations = 0
        self.message = ""

    def __call__(self, obj_func, initial_theta, bounds):
        def counted(theta):
            self.n_evaluations += 1
            value, grad = obj_func(theta, eval_gradient=True)
            return float(value), np.asarray(grad, dtype=np.float64)

        options = {} if self.max_iter is None else {"maxiter": int(self.max_iter)}
        res = scipy.optimize.minimize(counted, initial_theta, method="L-BFGS-B",
                                      jac=True, bounds=bounds, options=options)
        self.n_iterations = int(res.nit)
        self.message = str(res.message)
        return res.x, res.fun


def lbfgsb_driver(obj_func, initial_theta, bounds):
    """scikit-learn's default optimiser, for use as ``optimizer=``."""
    return LBFGSBCounter()(obj_func, initial_theta, bounds)


def fit_estimator(estimator, counter, X, Y):
    """Fit a scikit-learn-style Gaussian-process ``estimator`` whose optimizer
    is ``counter`` (an :class:`LBFGSBCounter`) on X, Y, timed: the record
    every adapter's ``fit`` returns."""
    start = time.perf_counter()
    estimator.fit(X, Y)
    wall = time.perf_counter() - start
    return dict(wall_s=wall, n_evaluations=counter.n_evaluations,
                n_iterations=counter.n_iterations,
                final_nlml=-float(estimator.log_marginal_likelihood_value_),
                theta=estimator.kernel_.theta.tolist(), message=counter.message)

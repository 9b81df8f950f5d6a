"""GaussianProcessRegressor: scikit-learn's estimator, with fastgp's
one-buffer likelihood, gradient and prediction underneath.

This module owns the estimator's contract (parameters, validation, targets'
normalisation, prediction, sample_y, log_marginal_likelihood and their
messages); the fit itself runs in the fit core (:mod:`fastgp._fit.session`).
"""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor as _SklearnGPR
from sklearn.gaussian_process.kernels import RBF, Kernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from ._backend.covariance import make_covariance
from ._fit.likelihood import check_evaluation_memory, evaluate_likelihood, likelihood_request
from ._fit.noise import warn_noise_free_fit
from ._fit.session import FitSession
from ._solvers.base import NOT_FINITE_ON_TRAINING_INPUTS, FactorTexts, Fitted, Problem
from ._solvers.choice import choose_solver, fit_description, fit_remedies
from ._solvers.cuda.device import PortableState, host_input
from ._solvers.mean import MEAN_METHODS, MEANS, mean_term, predict_moments
from ._user_warnings import warn_user
from ._validation import (
    Interval,
    StrOptions,
    check_finite_result,
    check_kernel_hyperparameters,
    check_numeric_columns,
    count_samples,
    diagonal_addition,
    fit_context,
    target_moments,
    warn_at_bounds,
)
from .memory import check_memory, predict_cov_bytes, sample_y_bytes

__all__ = ["GaussianProcessRegressor"]

#: ``_validate_X``'s marker for "validate X alone" (predict), as opposed to a y
#: that may be None (fit).
_NO_TARGETS = object()

#: How many times a fit lets its solver adapt the objective to the optimum
#: found and optimises again (Vecchia's neighbours at new length scales).
MAX_UPDATES = 3


class GaussianProcessRegressor(PortableState, _SklearnGPR):
    """Gaussian process regression with an exact gradient in one N x N buffer.

    A drop-in replacement for
    :class:`sklearn.gaussian_process.GaussianProcessRegressor`: the same
    constructor, defaults, fitted attributes and methods, and scikit-learn's
    own kernel objects. What changes is the cost. One evaluation of the log
    marginal likelihood and its gradient fills the covariance into one
    preallocated N x N buffer, factors and inverts it in place with LAPACK and
    reduces the gradient trace (Rasmussen & Williams 2006, eq. 5.9) in one
    fused parallel pass, instead of scikit-learn's (N, N, n_theta) gradient
    tensor and explicit inverse. The buffer is reused by every optimiser step
    and finally holds the Cholesky factor kept for prediction (``L_``).

    Kernels built from ConstantKernel, WhiteKernel, RBF, Matern (nu in 0.5,
    1.5, 2.5, inf), RationalQuadratic, ExpSineSquared, DotProduct and
    :mod:`fastgp.kernels`' per-dimension RationalQuadratic and ExpSineSquared,
    with ``+``, ``*`` and ``**``, run on the fast path; any other kernel object works through its own ``__call__``
    at scikit-learn's memory cost, with a :class:`~fastgp.exceptions.SlowKernelWarning`.

    Parameters
    ----------
    kernel : kernel instance, default=None
        The prior covariance. None means ``C(1.0) * RBF(1.0)``, whose
        hyperparameters are optimised, as in scikit-learn.
    alpha : float or ndarray of shape (n_samples,), default=1e-10
        Added to the diagonal of the training covariance.
    optimizer : "fmin_l_bfgs_b", "CG", callable or None, default="fmin_l_bfgs_b"
        "fmin_l_bfgs_b": SciPy's L-BFGS-B within the kernel's bounds. "CG":
        SciPy's nonlinear conjugate gradients on a smooth map of the bounds'
        box onto R^n (theta = lo + (hi - lo) sigmoid(u) per log-space
        hyperparameter), so it stays within the bounds too. A callable
        ``optimizer(obj_func, initial_theta, bounds) -> (theta_opt,
        func_min)`` as in scikit-learn. None keeps the kernel's parameters.
    n_restarts_optimizer : int, default=0
        Extra optimiser runs from log-uniform random starts within the bounds.
    max_iter : int or None, default=None
        Most iterations of each run of the named optimisers (None: SciPy's
        limit for L-BFGS-B, 15,000; 200 per hyperparameter for CG); a run
        that reaches it keeps its best point with a ConvergenceWarning.
        fastgp's addition.
    max_time : float or None, default=None
        Seconds the optimisation may take, all runs together (None: no
        limit). No evaluation starts after it: the fit keeps the best point
        evaluated, with a ConvergenceWarning, and skips the restarts not yet
        begun; the first evaluation always runs. Where it ends a fit, the
        result depends on the machine's speed and load (docs/reliability.md,
        "Long fits"). Each evaluation's time is ``verbose``'s; a fit that
        will likely take over half a minute says so after its first
        evaluation (a :class:`~fastgp.exceptions.LongFitWarning`). fastgp's
        addition.
    normalize_y : bool, default=False
        Centre and scale the targets before fitting (undone in predictions).
    copy_X_train : bool, default=True
        Store a copy of the training inputs.
    n_targets : int or None, default=None
        Number of target columns, used by predict and sample_y before fit.
    random_state : int, RandomState instance or None, default=None
        Draws the restart points.
    verbose : int, default=0
        If positive, print the objective, the gradient norm and the time per
        iteration at every optimiser iteration, and with restarts a header
        per run and which run was kept. The iterative solver also prints its
        CG iterations and final residual per evaluation. fastgp's addition.
    solver : {"auto", "cholesky", "vecchia", "iterative"}, default="auto"
        "cholesky": the exact path in one N x N buffer. "vecchia": Vecchia's
        nearest-neighbour approximation (docs/design.md, "Vecchia's
        approximation"): the likelihood as a product of conditional
        densities, each point given its ``n_neighbors`` nearest earlier
        points, with its exact gradient; O(N m^3) time and O(N m) memory,
        for data past one N x N buffer. "iterative": the matrix-free path
        (docs/design.md, "The matrix-free path"): batched preconditioned
        conjugate gradients, the log-determinant by stochastic Lanczos
        quadrature and the gradient by probe vectors, memory
        O(N (k + t + d)). Both need a kernel on the fast path. "auto":
        "cholesky" when its buffer fits the machine's memory budget (once
        the other fits running now release theirs: this fit would wait for
        them), else "vecchia" with a warning that says why (docs/solvers.md
        says which solver is for which problem). ``solver_`` records the
        choice.
    cg_tol : float, default=1e-4
        Iterative solver: relative residual ||b - K x|| / ||b|| at which
        conjugate gradients stop. The solves of ``predict``'s standard
        deviation and covariance run to 0.01 x ``cg_tol``: the variance is a
        small difference of two large terms (docs/design.md, "The matrix-free
        path", Prediction).
    n_probes : int, default=16
        Iterative solver: probe vectors of the log-determinant and trace
        estimates (drawn once per fit from ``random_state``).
    preconditioner_rank : int, default=100
        Iterative solver: largest rank of the pivoted Cholesky preconditioner.
    max_cg_iter : int, default=1000
        Iterative solver: most CG iterations per solve; a solve that stops
        short of ``cg_tol`` is a ConvergenceWarning that gives the residual.
    n_neighbors : int, default=30
        Vecchia solver: the conditioning sets' size m, each point's nearest
        earlier points in the ordering, found in the inputs divided by the
        kernel's length scales (and found again when the fit moves their
        ratios by more than 1.5 x). With ``n_neighbors >= n_samples - 1``
        every earlier point is a neighbour and the likelihood is exact.
    n_neighbors_predict : int or None, default=None
        Vecchia solver: each query point's nearest training points that
        ``predict`` conditions it on; None: 2 x ``n_neighbors`` for inputs of
        one or two dimensions, and at least 140 above (after fits on 30
        neighbours, 60 gave the held-out RMSE of 140 within 0.04 % on 2-D
        data at a fifth of the time; on 8-D data 140 gave an RMSE 30 % below
        60's: docs/benchmarks.md, "Neighbours for prediction").
    ordering : {"maxmin", "random"}, default="maxmin"
        Vecchia solver: the ordering of the training points. "maxmin": each
        next point the farthest from those before it (Guinness 2018, far more
        accurate at the same m); "random": drawn from ``random_state``, one
        draw of the approximation (a ``mean``'s coefficients move with it
        by about their standard error; maxmin's likelihood was the highest
        of every ordering measured: docs/benchmarks.md, "A mean estimated
        with the covariance").
    n_jobs : int or None, default=None
        Optimiser runs (the first and the restarts) executed at once, as joblib
        tasks under the active ``joblib.parallel_config`` (loky processes by
        default, threads, or a dask cluster's workers: docs/cluster.md). None
        means 1 unless a ``parallel_config`` says otherwise, -1 all cores. The
        result is the sequential fit's whatever ``n_jobs`` and backend (the
        starts are drawn in this process; the same bits where BLAS runs on as
        many threads, always below 256 samples); every run reserves its own
        buffer in the machine's memory budget (:mod:`fastgp.memory.ledger`).
        The iterative solver runs its restarts one after another. fastgp's
        addition.
    device : {"cpu", "cuda", "cuda:<index>"}, default="cpu"
        Where the exact path runs. "cuda": its N x N buffer in an NVIDIA GPU's
        memory, with the same plan and the same results as on the CPU to
        rounding (docs/gpu.md; install with ``pip install "fastgp[cuda]"``);
        ``L_`` is then a CuPy array on that GPU and predictions run there.
        With a GPU, ``solver`` must be "auto" or "cholesky" (the approximate
        solvers run on the CPU only), and "auto" never moves a fit to a GPU by
        itself. Without the GPU extra or a GPU, a fit raises
        :class:`~fastgp.exceptions.DeviceUnavailableError` naming what is
        missing. fastgp's addition.
    mean : {"constant", "linear"}, callable or None, default=None
        A mean estimated with the covariance (Rasmussen & Williams 2006,
        sec. 2.7; docs/design.md, "A mean estimated with the covariance"):
        the prior mean is H(x) beta with beta at its generalised least
        squares value at every hyperparameter, and the predictions include
        beta's uncertainty (R&W eq. 2.42). "constant": one coefficient;
        "linear": a constant plus one coefficient per input column; a
        callable ``mean(X) -> ndarray of shape (n_samples, n_basis)``: your
        own basis. None: a zero mean (after ``normalize_y``'s centring), as
        scikit-learn's. The basis must be finite and of full column rank at
        the training inputs (a ValueError names the dependent columns
        otherwise) with fewer columns than samples. Every CPU solver; not
        with ``device="cuda"``. fastgp's addition.
    mean_method : {"reml", "profile"}, default="reml"
        How the kernel's hyperparameters are fitted with the mean: "reml",
        the restricted likelihood (the likelihood of the targets' contrasts
        free of the mean: Patterson & Thompson 1971; R&W eq. 2.45), which
        removes most of the downward bias of the variances that the profile
        likelihood has when the mean is estimated (docs/design.md, "A mean
        estimated with the covariance", gives the measurement); "profile",
        the likelihood with beta at its generalised least squares value
        (maximum likelihood, as GPBoost and GpGp fit fixed effects).
        ``log_marginal_likelihood`` returns the one chosen. fastgp's
        addition.

    Attributes
    ----------
    X_train_ : ndarray of shape (n_samples, n_features) float64
        Training inputs (a copy if ``copy_X_train``).
    y_train_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Training targets, normalised if ``normalize_y``.
    kernel_ : kernel instance
        The kernel with the optimised hyperparameters.
    L_ : ndarray of shape (n_samples, n_samples), F-contiguous, or None
        Lower Cholesky factor of ``kernel_(X_train_) + alpha I``; the buffer
        the fit worked in (a CuPy array in the GPU's memory with
        ``device="cuda"``). None with the Vecchia and iterative solvers.
    solver_ : str
        "cholesky", "vecchia" or "iterative": the solver the fit used.
    alpha_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        Dual coefficients K^-1 y (the Vecchia solver's: its sparse inverse
        Cholesky factor's U U^T y); with a ``mean``, of the residuals,
        K^-1 (y - H beta).
    jitter_ : float
        Added to the diagonal beyond ``alpha`` because the training covariance
        was not numerically positive definite (0.0 normally); ``L_``,
        ``alpha_`` and ``log_marginal_likelihood_value_`` include it.
    log_marginal_likelihood_value_ : numpy.float64
        The log marginal likelihood of ``kernel_.theta``.
    n_features_in_ : int
        Number of features seen during fit.
    n_iter_ : int
        Optimiser iterations of the run whose optimum was kept (0 if none ran).
    n_evaluations_ : int
        Objective evaluations over all optimiser runs.
    mean_coef_ : ndarray of shape (n_basis,) or (n_basis, n_targets), or None
        The mean's coefficients beta (generalised least squares at the
        fitted kernel), on the targets' scale: with ``normalize_y`` and a
        named mean, ``H(x) @ mean_coef_`` is the prior mean (the targets' mean
        is in the intercept); with a callable basis the prior mean is then
        the targets' mean plus ``H(x) @ mean_coef_``. None without a mean.
    mean_coef_cov_ : ndarray of shape (n_basis, n_basis) or (n_basis, n_basis, n_targets), or None
        The coefficients' covariance (H^T K^-1 H)^-1, times the square of
        ``normalize_y``'s scale (one matrix per target where there are
        several). None without a mean.

    Notes
    -----
    Failure behaviour (docs/reliability.md): before the N x N buffer is
    allocated (fit, log_marginal_likelihood, predict with ``return_cov``,
    sample_y) the bytes needed are compared with the memory available;
    :class:`~fastgp.exceptions.InsufficientMemoryError` (a MemoryError) names
    both, N and the remedies, and :func:`fastgp.memory.skip_memory_check`
    lets a user proceed anyway. Where the kept factorisation is not
    numerically positive definite, jitter is added to the diagonal in growing
    steps (a :class:`~fastgp.exceptions.JitterWarning` gives the amount;
    ``jitter_`` records it). Optimiser trouble and a
    KeyboardInterrupt during the optimisation end the fit at the best finite
    point with a ConvergenceWarning; after a KeyboardInterrupt the estimator
    is fitted at that point and the interrupt then propagates, so loops and
    cross-validation stop. A fit that raises leaves a previously fitted
    estimator as it was.

    Threads: each evaluation of the likelihood uses only the cores that are
    idle when it starts (Numba and BLAS together, never above the user's
    settings); on a quiet machine that is every core.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from fastgp import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, size=(50, 1))
    >>> y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(50)
    >>> gpr = GaussianProcessRegressor(RBF() + WhiteKernel(), random_state=0).fit(X, y)
    >>> mean, std = gpr.predict(X[:3], return_std=True)
    >>> bool(np.all(np.abs(mean - np.sin(X[:3, 0])) < 0.1))
    True
    """

    # scikit-learn's constraints for its parameters, and fastgp's "CG" and verbose
    _parameter_constraints: dict = {
        "kernel": [None, Kernel],
        "alpha": [Interval(Real, 0, None, closed="left"), np.ndarray],
        "optimizer": [StrOptions({"fmin_l_bfgs_b", "CG"}), callable, None],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "normalize_y": ["boolean"],
        "copy_X_train": ["boolean"],
        "n_targets": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "verbose": [Interval(Integral, 0, None, closed="left"), "boolean"],
        "solver": [StrOptions({"auto", "cholesky", "iterative", "vecchia"})],
        "cg_tol": [Interval(Real, 0, None, closed="neither")],
        "n_probes": [Interval(Integral, 1, None, closed="left")],
        "preconditioner_rank": [Interval(Integral, 0, None, closed="left")],
        "max_cg_iter": [Interval(Integral, 1, None, closed="left")],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "n_neighbors_predict": [Interval(Integral, 1, None, closed="left"), None],
        "ordering": [StrOptions({"maxmin", "random"})],
        "n_jobs": [Integral, None],
        "device": [str],
        "mean": [None, StrOptions(set(MEANS)), callable],
        "mean_method": [StrOptions(set(MEAN_METHODS))],
    }

    def __init__(
        self,
        kernel=None,
        *,
        alpha=1e-10,
        optimizer="fmin_l_bfgs_b",
        n_restarts_optimizer=0,
        max_iter=None,
        max_time=None,
        normalize_y=False,
        copy_X_train=True,
        n_targets=None,
        random_state=None,
        verbose=0,
        solver="auto",
        cg_tol=1e-4,
        n_probes=16,
        preconditioner_rank=100,
        max_cg_iter=1000,
        n_neighbors=30,
        n_neighbors_predict=None,
        ordering="maxmin",
        n_jobs=None,
        device="cpu",
        mean=None,
        mean_method="reml",
    ):
        self.kernel = kernel
        self.alpha = alpha
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_iter = max_iter
        self.max_time = max_time
        self.normalize_y = normalize_y
        self.copy_X_train = copy_X_train
        self.n_targets = n_targets
        self.random_state = random_state
        self.verbose = verbose
        self.solver = solver
        self.cg_tol = cg_tol
        self.n_probes = n_probes
        self.preconditioner_rank = preconditioner_rank
        self.max_cg_iter = max_cg_iter
        self.n_neighbors = n_neighbors
        self.n_neighbors_predict = n_neighbors_predict
        self.ordering = ordering
        self.n_jobs = n_jobs
        self.device = device
        self.mean = mean
        self.mean_method = mean_method

    # ------------------------------------------------------------------ fit
    def _validate_X(self, X, y=_NO_TARGETS, reset=True):
        # a sentinel, not None: fit(X, None) must reach validate_data, which
        # raises scikit-learn's "requires y to be passed" error
        kernel = self.kernel_ if hasattr(self, "kernel_") and not reset else self.kernel
        vector_input = kernel is None or kernel.requires_vector_input
        X, y = host_input(X), (y if y is _NO_TARGETS else host_input(y))
        dtype, ensure_2d = ("numeric", True) if vector_input else (None, False)
        if vector_input:
            check_numeric_columns(X)  # names a table's text column
        if y is _NO_TARGETS:
            X = validate_data(self, X, ensure_2d=ensure_2d, dtype=dtype, reset=reset)
        else:
            X, y = validate_data(self, X, y, multi_output=True, y_numeric=True,
                                 ensure_2d=ensure_2d, dtype=dtype, reset=reset)
        if vector_input:
            # the fast path works in float64; int and float32 are converted
            X = np.ascontiguousarray(X, dtype=np.float64)
        return X if y is _NO_TARGETS else (X, np.asarray(y, dtype=np.float64))

    def _diag_add(self, n_samples):
        """scikit-learn's ``alpha`` as an (n_samples,) diagonal, without
        rewriting the constructor argument (scikit-learn's fit does); NaN,
        infinite or negative entries are a ValueError."""
        return diagonal_addition(self.alpha, n_samples)

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the Gaussian process to the training data.

        Optimise the kernel's hyperparameters by maximising the log marginal
        likelihood, then keep the model at the optimum (the Cholesky factor,
        on the Cholesky path).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Training targets.

        Returns
        -------
        GaussianProcessRegressor
            The fitted estimator (``self``).

        Raises
        ------
        KeyboardInterrupt
            Ctrl-C during the optimisation, after the estimator was fitted at
            the best point so far (with a ConvergenceWarning).
        """
        # every fitted attribute is published at once, at the end: a fit that
        # raises leaves a previously fitted estimator as it was
        with FitSession(self, "Fitting GaussianProcessRegressor") as session:
            kernel = C() * RBF() if self.kernel is None else clone(self.kernel)
            bounds = check_kernel_hyperparameters(
                kernel, n_restarts=0 if self.optimizer is None else self.n_restarts_optimizer)
            rng = check_random_state(self.random_state)
            X, y = self._validate_X(X, y, reset=True)
            n_targets = self._check_n_targets(y)
            y, y_mean, y_std = self._normalised(y)
            n_samples = len(y)
            diag_add = self._diag_add(n_samples)
            X_train = np.copy(X) if self.copy_X_train else X
            y_train = np.copy(y) if self.copy_X_train else y

            # the mean's basis, checked (docs/design.md, "A mean estimated with
            # the covariance"), and the solver, chosen once ("Solvers")
            mean = mean_term(self.mean, self.mean_method, X_train)
            covariance = make_covariance(kernel, X_train, warn=False)
            # the mean's p basis columns go through every solve beside the
            # targets: the memory estimates count them as targets
            problem = self._problem(covariance, kernel, X_train,
                                    n_targets + (0 if mean is None else mean.p))
            params = self.get_params(deep=False)
            solver = choose_solver(self.solver, params, covariance, kernel, problem)
            solver.accept_mean(mean)
            optimise = self.optimizer is not None and kernel.n_dims > 0
            session.budget(solver.fit_memory(problem), n_samples,
                           fit_remedies(solver, params, problem),
                           parallel_runs=((self.n_jobs, self.n_restarts_optimizer)
                                          if optimise and solver.restarts_in_workers
                                          else None),
                           device_check=solver.check_device_memory)
            draws = solver.draw(rng)
            objective = solver.objective(covariance, y_train, diag_add, draws,
                                         verbose=self.verbose, mean=mean)

            # the hyperparameters that maximise the log marginal likelihood
            n_iter = 0
            if optimise:
                limits = dict(verbose=self.verbose, max_iter=self.max_iter,
                              max_time=self.max_time, limit_remedy=self._limit_remedy(),
                              description=fit_description(solver, params, problem),
                              context=solver.evaluation_context)
                best = session.minimize(
                    objective, kernel.theta, bounds, self.optimizer,
                    n_restarts=self.n_restarts_optimizer, rng=rng, n_jobs=self.n_jobs,
                    **limits)
                if math.isfinite(best.value):
                    kernel.theta = best.theta
                    n_iter = best.n_iterations
                # a solver whose objective depends on where the optimum is
                # (Vecchia's neighbours, found at the length scales) adapts
                # it and the optimiser runs again from there, a few times
                for _ in range(MAX_UPDATES):
                    if (not math.isfinite(best.value) or session.out_of_time
                            or not solver.update(objective, kernel.theta)):
                        break
                    best = session.minimize(objective, kernel.theta, bounds,
                                            self.optimizer, **limits)
                    if math.isfinite(best.value):
                        kernel.theta = best.theta
                        n_iter = best.n_iterations
                if math.isfinite(best.value):
                    warn_at_bounds(kernel)
                    warn_noise_free_fit(kernel, X_train, diag_add)

            # Alg. 2.1 lines 2-3: the kept model at the chosen theta
            kept = session.finalise(solver.final, objective, kernel.theta,
                                    self._factor_messages(kernel, y_train),
                                    context=solver.evaluation_context)
            solver.after_fit(objective)
            coef, coef_cov = (None, None) if kept.mean is None else kept.mean.coefficients(
                y_mean, y_std, vector_targets=y.ndim == 1)
            session.publish({
                "solver_": solver.name,
                # what predictions and log_marginal_likelihood(theta) read:
                # the solver and alpha as fitted, never the parameters now
                "_fitted_solver": solver,
                "_fitted_diag_add": diag_add,
                "_fitted_draws": solver.replay(objective, draws),
                "_solver_cache": {"state": kept.state},
                "kernel_": kernel,
                "_rng": rng,
                "_y_train_mean": y_mean,
                "_y_train_std": y_std,
                "X_train_": X_train,
                "y_train_": y_train,
                "n_iter_": n_iter,
                "n_evaluations_": objective.n_evaluations,
                "L_": kept.L,
                "alpha_": kept.A.reshape(y_train.shape),
                "jitter_": kept.jitter,
                "log_marginal_likelihood_value_": np.float64(-kept.value),
                "_fitted_mean": kept.mean,
                "mean_coef_": coef,
                "mean_coef_cov_": coef_cov,
            })
        return self

    def _limit_remedy(self):
        """What a run that reached its iteration limit tells the user."""
        now = "SciPy's default" if self.max_iter is None else self.max_iter
        return f"raise max_iter (now {now}), or pass a callable optimizer"

    def _check_n_targets(self, y):
        n_targets = y.shape[1] if y.ndim > 1 else 1
        if self.n_targets is not None and n_targets != self.n_targets:
            raise ValueError(
                "The number of targets seen in `y` is different from the parameter "
                f"`n_targets`. Got {n_targets} != {self.n_targets}."
            )
        return n_targets

    def _normalised(self, y):
        """(y, mean, std): the targets centred and scaled where
        ``normalize_y``, with the moments that undo it."""
        if self.normalize_y:
            y_mean, y_std = target_moments(y)
            return (y - y_mean) / y_std, y_mean, y_std
        shape_y_stats = (y.shape[1],) if y.ndim == 2 else 1
        return y, np.zeros(shape=shape_y_stats), np.ones(shape=shape_y_stats)

    @staticmethod
    def _problem(covariance, kernel, X_train, n_targets):
        n_features = np.shape(X_train)[1] if np.ndim(X_train) == 2 else 1
        return Problem(n_samples=count_samples(X_train), n_features=n_features,
                       n_targets=n_targets, n_theta=kernel.n_dims, fast=covariance.is_fast)

    # ------------------------------------------------------------- solvers
    def _fitted(self):
        """The fitted model as the solver's prediction reads it: fitted
        attributes only (a parameter set after the fit changes nothing until
        the next fit, as in scikit-learn)."""
        return Fitted(kernel=self.kernel_, X=self.X_train_,
                      Y=self.y_train_.reshape(len(self.y_train_), -1),
                      diag_add=self._fitted_diag_add,
                      A=self.alpha_.reshape(len(self.alpha_), -1), L=self.L_,
                      draws=self._fitted_draws, cache=self._solver_cache,
                      mean=getattr(self, "_fitted_mean", None))

    #: What the kept model's failures tell the user: they name the kernel (at
    #: its fitted hyperparameters) and what to do.
    _FAILURES = FactorTexts(
        non_finite=NOT_FINITE_ON_TRAINING_INPUTS,
        not_positive_definite=(
            "The kernel, {kernel}, is not returning a positive definite matrix, even "
            "with jitter up to {jitter:.3g} added to its diagonal. Try gradually "
            "increasing the 'alpha' parameter of your GaussianProcessRegressor "
            "estimator, or the lower bound of the noise level (WhiteKernel's "
            "noise_level_bounds)."),
        jitter=(
            "The training covariance of the kernel, {kernel}, is not numerically "
            "positive definite at the fitted hyperparameters (duplicated inputs "
            "without noise, or a length scale far beyond the data's spread), so "
            "fastgp added jitter {jitter:.3g} to its diagonal on top of alpha. L_, "
            "alpha_ and log_marginal_likelihood_value_ include it (jitter_). To avoid "
            "it, increase alpha or the lower bound of the noise level (WhiteKernel's "
            "noise_level_bounds)."),
        overflow=(
            "The log marginal likelihood is not finite at the fitted hyperparameters "
            "of {kernel}: the targets (largest magnitude {largest:.3g}) overflow "
            "float64 in y^T K^-1 y. Rescale y, or use normalize_y=True."),
    )

    @classmethod
    def _factor_messages(cls, kernel, y_train):
        return cls._FAILURES.messages(
            kernel, largest=lambda: float(np.max(np.abs(y_train), initial=0.0)))

    # -------------------------------------------------------------- predict
    def predict(self, X, return_std=False, return_cov=False):
        """Predict with the Gaussian process (the prior if not fitted).

        Mean and standard deviation work through X in chunks, so their extra
        memory is O(n_train x chunk); the covariance holds an
        (n_train, n_samples) block beside its (n_samples, n_samples) result.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Query points.
        return_std : bool, default=False
            Also return the predictive standard deviation.
        return_cov : bool, default=False
            Also return the joint predictive covariance.

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
            Predictive mean at the query points.
        y_std : ndarray of shape (n_samples,) or (n_samples, n_targets), optional
            Predictive standard deviation; only with ``return_std``.
        y_cov : ndarray of shape (n_samples, n_samples) or (n_samples, n_samples, n_targets), optional
            Joint predictive covariance; only with ``return_cov``.
        """
        if return_std and return_cov:
            raise RuntimeError(
                "At most one of return_std or return_cov can be requested."
            )
        if not hasattr(self, "X_train_"):  # the prior: scikit-learn's code
            if return_cov:
                self._check_predict_memory(X, n_train=0)
            result = super().predict(X, return_std=return_std, return_cov=return_cov)
            for part in result if isinstance(result, tuple) else (result,):
                check_finite_result("the prior's prediction", part,
                                    "The kernel overflows at these inputs; rescale X.")
            return result

        X = self._validate_X(X, reset=False)
        solver, fitted = self._fitted_solver, self._fitted()
        if return_cov:
            self._check_predict_memory(X, n_train=len(self.alpha_), solver=solver)
            mean, cov = predict_moments(solver, fitted, X, "cov")
            y_cov = np.outer(cov, self._y_train_std**2).reshape(*cov.shape, -1)
            if y_cov.shape[2] == 1:
                y_cov = np.squeeze(y_cov, axis=2)
            return self._checked(self._unnormalize_mean(mean), y_cov, "covariance")
        mean, var = predict_moments(solver, fitted, X, "var" if return_std else "mean")
        if not return_std:
            return self._checked(self._unnormalize_mean(mean))
        negative = var < 0
        if np.any(negative):
            warn_user("Predicted variances smaller than 0. Setting those variances to 0.",
                      UserWarning)
            var[negative] = 0.0
        # sqrt(var) * std rather than sqrt(var * std^2): the same to rounding,
        # and no overflow for targets beyond 1e154 (normalize_y=True)
        y_std = np.outer(np.sqrt(var), self._y_train_std).reshape(*var.shape, -1)
        if y_std.shape[1] == 1:
            y_std = np.squeeze(y_std, axis=1)
        return self._checked(self._unnormalize_mean(mean), y_std, "standard deviation")

    def _n_targets(self):
        if hasattr(self, "alpha_"):
            return self.alpha_.shape[1] if self.alpha_.ndim > 1 else 1
        return 1 if self.n_targets is None else self.n_targets

    def _check_predict_memory(self, X, n_train, n_draws=None, solver=None):
        """The joint covariance over m query points costs O(m^2): check it
        before it is allocated (sample_y adds NumPy's SVD of it). The message
        names the query points (not the training samples) and only remedies
        the calling method has. ``solver`` (fitted models) gives the
        estimate of its own joint prediction."""
        m = count_samples(X)
        if m is None:
            return  # not array-like: validation below says so
        t = self._n_targets()
        # the inputs' dimension (Vecchia's prediction neighbours depend on it)
        d = (np.shape(self.X_train_)[1] if solver is not None and np.ndim(self.X_train_) == 2
             else 1)
        model = (f"the model has {n_train:,} training samples" if n_train
                 else "the unfitted prior")
        size = f"{m:,} query points ({model})"
        fewer = ("ask for fewer query points at once (the joint covariance of m "
                 "query points is m x m)")
        if n_draws is None:
            needed = (predict_cov_bytes(n_train, m, t) if solver is None
                      else solver.predict_cov_bytes(n_train, m, t, d))
            operation = "predict(return_cov=True)"
            remedies = [fewer,
                        "use predict(X, return_std=True) instead if the marginal "
                        "variances are enough (its memory is bounded whatever m)",
                        "use a machine with more memory"]
        else:
            needed = sample_y_bytes(n_train, m, t, n_draws, None if solver is None
                                    else solver.predict_cov_bytes(n_train, m, t, d))
            operation = "sample_y"
            remedies = [fewer + "; draws on separate calls are not jointly "
                        "distributed, so split only where the joint draw does not matter",
                        "use a machine with more memory"]
        check_memory(needed, n_samples=m, operation=operation, remedies=remedies,
                     size=size)

    @staticmethod
    def _checked(mean, spread=None, spread_name=None):
        """The prediction, or a ValueError where it is not finite (never NaN
        returned in silence)."""
        hint = ("The fitted model or the kernel at these inputs overflows float64; "
                "rescale X, or y (normalize_y=True keeps the fit scale-free, but a "
                "covariance of targets beyond 1e154 cannot be represented).")
        check_finite_result("the predicted mean", mean, hint)
        if spread is None:
            return mean
        check_finite_result(f"the predicted {spread_name}", spread, hint)
        return mean, spread

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw samples from the Gaussian process and evaluate them at X.

        scikit-learn's ``sample_y`` on fastgp's predictive mean and
        covariance, after checking that the joint covariance and its SVD fit
        in memory: for the same ``random_state`` the same draws as
        scikit-learn's up to the SVD's choice of signs (docs/differences.md).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features) or list of object
            Query points.
        n_samples : int, default=1
            Number of draws per query point.
        random_state : int, RandomState instance or None, default=0
            Seeds the draws.

        Returns
        -------
        ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
            The draws, jointly distributed over the query points.
        """
        n_train = len(self.alpha_) if hasattr(self, "alpha_") else 0
        self._check_predict_memory(X, n_train=n_train, n_draws=n_samples,
                                   solver=self._fitted_solver if n_train else None)
        return super().sample_y(X, n_samples=n_samples, random_state=random_state)

    def _unnormalize_mean(self, mean):
        y_mean = self._y_train_std * mean + self._y_train_mean
        if y_mean.ndim > 1 and y_mean.shape[1] == 1:
            y_mean = np.squeeze(y_mean, axis=1)
        return y_mean

    # ------------------------------------------------------------------ LML
    def log_marginal_likelihood(self, theta=None, eval_gradient=False,
                                clone_kernel=True):
        """Log marginal likelihood of ``theta`` for the training data.

        Parameters
        ----------
        theta : array-like of shape (n_kernel_params,), default=None
            Log-space hyperparameters. None returns the fitted value.
        eval_gradient : bool, default=False
            Also return the gradient with respect to ``theta``.
        clone_kernel : bool, default=True
            If False, ``kernel_``'s theta is set to ``theta``.

        Returns
        -------
        log_likelihood : numpy.float64
            Log marginal likelihood; ``-inf`` where the kernel matrix is not
            positive definite. With the Vecchia solver, Vecchia's
            approximation of it on the fit's ordering and neighbours (the
            function the optimiser saw; its error falls quickly with
            ``n_neighbors``: docs/benchmarks.md); with the iterative solver,
            the stochastic estimate with the fit's probes. With a ``mean``,
            the restricted or the profile likelihood (``mean_method`` as
            fitted), the mean's coefficients at their generalised least
            squares value at ``theta``.
        log_likelihood_gradient : ndarray of shape (n_kernel_params,), optional
            Its gradient with respect to ``theta``; only with
            ``eval_gradient``.

        Notes
        -----
        Each call allocates one N x N buffer of its own and leaves ``L_``
        untouched.
        """
        request = likelihood_request(self, theta, eval_gradient, clone_kernel)
        if request is None:
            return self.log_marginal_likelihood_value_
        kernel, theta, covariance = request
        n_samples = len(self.y_train_)
        solver = self._fitted_solver
        fitted_mean = getattr(self, "_fitted_mean", None)
        problem = self._problem(covariance, kernel, self.X_train_, self._n_targets() + (
            0 if fitted_mean is None else fitted_mean.term.p))
        check_evaluation_memory(solver.evaluation_bytes(problem, eval_gradient), n_samples)
        # the fit's own draws, if the solver has any: the function the
        # optimiser saw
        objective = solver.objective(covariance, self.y_train_, self._fitted_diag_add,
                                     self._fitted_draws, verbose=self.verbose,
                                     mean=None if fitted_mean is None else fitted_mean.term,
                                     kept=self._solver_cache.get("state"))
        result = evaluate_likelihood(
            objective, theta, eval_gradient,
            lambda function, point: solver.outside_fit(n_samples, function, point))
        solver.after_evaluation(objective)
        return result

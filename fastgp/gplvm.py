"""GPLVM: the Gaussian-process latent variable model as a scikit-learn
transformer, with an exact gradient in one N x N buffer.

This module owns the estimator's contract (parameters, the data's centring
and scaling, the initial latent points, the default kernel, transform and
inverse_transform, and their messages); the fit itself runs in the fit core
(:class:`fastgp._fit.session.FitSession`), the objectives and the kept
factor are the exact solver's (:meth:`fastgp._solvers.base.Solver.latent_objective`).
"""

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.gaussian_process.kernels import RBF, Kernel, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.metrics import pairwise_distances_argmin
from sklearn.utils import check_array, check_random_state
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import check_is_fitted, validate_data

from ._fit.clock import LATENT_EVALUATIONS, FitDescription
from ._fit.session import FitSession
from ._optimize.rows import minimize_rows
from ._solvers.base import FactorTexts
from ._solvers.choice import exact_solver
from ._solvers.cuda.device import PortableState, host_input
from ._validation import (
    Interval,
    StrOptions,
    check_kernel_hyperparameters,
    check_latent_dimension,
    check_numeric_columns,
    fit_context,
    nonzero_scale,
)

__all__ = ["GPLVM"]

#: BFGS iterations per row in transform, and its gradient tolerance (relative
#: to max(1, |f|)). Tight, so that a row's answer is the same, to rounding
#: amplified by the optimiser, whichever rows are transformed with it.
TRANSFORM_MAX_ITER = 200
TRANSFORM_GTOL = 1e-10


class GPLVM(PortableState, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
            BaseEstimator):
    r"""Gaussian-process latent variable model (Lawrence 2005).

    Finds latent points X (n_samples x n_components) and kernel
    hyperparameters that maximise the marginal likelihood of the data Y
    (n_samples x n_features) under a Gaussian process mapping from latent to
    data space with independent outputs:

    .. math::
        \log p(Y \mid X, \theta) = -\tfrac{1}{2} \operatorname{tr}(Y^\top K^{-1} Y)
        - \tfrac{D}{2} \log |K| - \tfrac{N D}{2} \log 2\pi,
        \qquad K = k(X, X; \theta) + \alpha I.

    The optimiser moves all of X and theta together with the exact gradient
    (docs/design.md; Lawrence 2005, sec. 3):
    :math:`\partial L / \partial x_n = \sum_j W_{nj}\, \partial k(x_n, x_j) / \partial x_n`
    with :math:`W = D K^{-1} - A A^\top`, :math:`A = K^{-1} Y`. Each
    evaluation fills K into one preallocated N x N buffer, factors and inverts
    it in place with LAPACK, and reduces W against the latent and
    hyperparameter derivatives of K in one fused parallel pass; W and the
    derivatives are never stored. So a fit needs about 8 N^2 bytes, not the
    several N x N intermediates that reverse-mode autodiff keeps.

    Parameters
    ----------
    n_components : int, default=2
        Latent dimension Q.
    kernel : kernel instance, default=None
        Covariance on the latent space, on fastgp's fast path (built from
        ConstantKernel, WhiteKernel, RBF, Matern with nu in {0.5, 1.5, 2.5,
        inf}, RationalQuadratic, ExpSineSquared, DotProduct and
        fastgp.kernels' ARD kernels with ``+``, ``*`` and ``**``). None means
        ``ConstantKernel(v) * RBF(np.ones(n_components)) + WhiteKernel(0.1 v)``
        with v the mean variance of the (centred, scaled) features, their
        bounds scaled by v. Include a WhiteKernel: it is the model's noise.
    init : {"pca", "random"} or array-like of shape (n_samples, n_components), default="pca"
        Starting latent points. "pca": the leading principal-component scores
        of the centred data, each latent dimension scaled to unit variance
        (dimensions beyond the data's rank are random); "random": standard
        normal draws.
    optimizer : {"fmin_l_bfgs_b", "CG"}, default="fmin_l_bfgs_b"
        SciPy's L-BFGS-B (the kernel's log-space bounds on theta, the latent
        points unbounded) or nonlinear conjugate gradients (theta kept within
        its bounds by a smooth map of the box, the latent points unbounded).
    max_iter : int, default=1000
        Optimiser iterations. 0 keeps the initial latent points and kernel.
    max_time : float or None, default=None
        Seconds the optimisation may take (None: no limit). No evaluation
        starts after it: the fit keeps the best point evaluated, with a
        ConvergenceWarning; where it ends a fit, the result depends on the
        machine's speed and load (docs/reliability.md, "Long fits").
    tol : float, default=1e-6
        SciPy's ``tol`` for the optimiser (L-BFGS-B: relative decrease of the
        objective and largest projected gradient; CG: largest gradient
        component, in the map's coordinates).
    standardize : bool, default=False
        Divide each centred feature by its standard deviation before fitting
        (the data are always centred); transform and inverse_transform apply
        and undo the same.
    alpha : float, default=1e-8
        Jitter added to the diagonal of K.
    device : {"cpu", "cuda", "cuda:<index>"}, default="cpu"
        Where the fit runs: "cuda" keeps the N x N buffer in an NVIDIA GPU's
        memory (docs/gpu.md; ``pip install "fastgp[cuda]"``), with the same
        results as on the CPU to rounding; ``L_`` is then a CuPy array on
        that GPU, and transform and inverse_transform run there.
    random_state : int, RandomState instance or None, default=None
        Draws the random initial latent points (``init="random"``, or the
        dimensions beyond the data's rank with ``init="pca"``).
    verbose : int, default=0
        If positive, print the objective, the gradient norm and the time per
        iteration every iteration.

    Attributes
    ----------
    embedding_ : ndarray of shape (n_samples, n_components)
        The fitted latent points.
    kernel_ : kernel instance
        The kernel with the fitted hyperparameters.
    log_marginal_likelihood_value_ : numpy.float64
        :math:`\log p(Y \mid X, \theta)` at the fitted point (of the centred,
        scaled data).
    n_iter_ : int
        Optimiser iterations.
    n_evaluations_ : int
        Objective evaluations.
    mean_ : ndarray of shape (n_features,)
        Per-feature mean of the data, subtracted before the fit.
    scale_ : ndarray of shape (n_features,)
        Per-feature divisor (ones unless ``standardize``).
    L_ : ndarray of shape (n_samples, n_samples), F-contiguous
        Lower Cholesky factor of K at the fitted point: the buffer the fit
        worked in (in the GPU's memory with ``device="cuda"``), kept for
        transform and inverse_transform.
    alpha_ : ndarray of shape (n_samples, n_features)
        :math:`K^{-1} Y` at the fitted point.
    jitter_ : float
        Jitter added to K's diagonal, beyond ``alpha``, to factor it at the
        fitted point (0 unless K was not numerically positive definite).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Defined when the data have string feature names.

    See Also
    --------
    sklearn.decomposition.PCA : The linear special case (a DotProduct kernel
        plus noise, Lawrence 2005, sec. 2).

    References
    ----------
    N. D. Lawrence (2005). Probabilistic non-linear principal component
    analysis with Gaussian process latent variable models. JMLR 6, 1783-1816.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgp import GPLVM
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(0, 3, size=60)
    >>> Y = np.column_stack([np.sin(t), np.cos(t), t]) + 0.01 * rng.standard_normal((60, 3))
    >>> gplvm = GPLVM(n_components=1, max_iter=100, random_state=0)
    >>> X = gplvm.fit_transform(Y)
    >>> X.shape
    (60, 1)
    >>> Y_back = gplvm.inverse_transform(X)
    >>> bool(np.abs(Y_back - Y).max() < 0.1)
    True
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "kernel": [None, Kernel],
        "init": [StrOptions({"pca", "random"}), "array-like"],
        "optimizer": [StrOptions({"fmin_l_bfgs_b", "CG"})],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "standardize": ["boolean"],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "device": [str],
    }

    def __init__(
        self,
        n_components=2,
        *,
        kernel=None,
        init="pca",
        optimizer="fmin_l_bfgs_b",
        max_iter=1000,
        max_time=None,
        tol=1e-6,
        standardize=False,
        alpha=1e-8,
        device="cpu",
        random_state=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.init = init
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.max_time = max_time
        self.tol = tol
        self.standardize = standardize
        self.alpha = alpha
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the latent points and the kernel's hyperparameters to X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data (called Y in the model's equations).
        y : None
            Ignored.

        Returns
        -------
        GPLVM
            The fitted estimator (``self``).

        Raises
        ------
        fastgp.exceptions.InsufficientMemoryError
            Before the N x N buffer is allocated, if the memory needed exceeds
            the memory available (the message names both and the remedies).
        KeyboardInterrupt
            Ctrl-C during the optimisation, after the estimator was fitted at
            the best point so far (with a ConvergenceWarning).

        Notes
        -----
        A fit that raises anything else leaves a previously fitted estimator
        exactly as it was.
        """
        # every fitted attribute is published at once, at the end: a fit that
        # raises leaves a previously fitted estimator as it was
        with FitSession(self, "Fitting GPLVM") as session:
            check_numeric_columns(X)  # names a table's text column
            Y = validate_data(self, host_input(X), dtype=np.float64, ensure_min_samples=2)
            n_samples, n_features = Y.shape
            Q = self.n_components
            check_latent_dimension(Q, n_features)
            mean = Y.mean(axis=0)
            scale = (nonzero_scale(Y.std(axis=0)) if self.standardize
                     else np.ones(n_features))
            Yc = (Y - mean) / scale
            rng = check_random_state(self.random_state)
            X0 = self._initial_latent(Yc, rng)
            kernel = self._default_kernel(Yc) if self.kernel is None else clone(self.kernel)
            bounds = check_kernel_hyperparameters(kernel)
            solver = exact_solver(self.device)
            objective = solver.latent_objective(kernel, Yc, Q, self.alpha)
            session.budget(
                solver.latent_fit_memory(n_samples, n_features, Q, objective),
                n_samples, ["fit on a random subset of the rows and place the others "
                            "with transform", "use a machine with more memory"],
                device_check=solver.check_device_memory)

            # the latent points and hyperparameters together (Lawrence 2005)
            z, n_iter = objective.pack(X0, kernel.theta), 0
            if self.max_iter > 0:
                best = session.minimize(
                    objective, z, self._bounds(objective, bounds), self.optimizer,
                    verbose=self.verbose, objective_name="-log p(Y|X)", width=5,
                    max_iter=self.max_iter, tol=self.tol, max_time=self.max_time,
                    limit_remedy=(f"raise max_iter (now {self.max_iter}) or loosen tol "
                                  f"(now {self.tol:g})"),
                    description=FitDescription(
                        f"N = {n_samples:,} points, {Q} latent dimensions, "
                        f"{n_features} features", evaluations=LATENT_EVALUATIONS),
                    context=solver.evaluation_context)
                z, n_iter = best.theta, best.n_iterations
                if kernel.n_dims > 0:
                    kernel.theta = objective.unpack(z)[1]

            # the factor at the chosen point, in the workspace the optimiser used
            kept = session.finalise(solver.final, objective, z,
                                    self._FAILURES.messages(kernel),
                                    context=solver.evaluation_context)
            X_fit, _ = objective.unpack(z)
            session.publish({
                "_fitted_solver": solver,
                "mean_": mean,
                "scale_": scale,
                "kernel_": kernel,
                "n_iter_": n_iter,
                "n_evaluations_": objective.n_evaluations,
                "embedding_": np.array(X_fit),
                "jitter_": kept.jitter,
                "L_": kept.L,
                "alpha_": kept.A,
                "log_marginal_likelihood_value_": np.float64(-kept.value),
                "_Y_fit": Yc,
            })
        return self

    @staticmethod
    def _bounds(objective, kernel_bounds):
        """The optimiser's box over z = [X.ravel(), theta]: the latent points
        unbounded, the hyperparameters within ``kernel_bounds`` (the kernel's
        log-space bounds, shape (n_theta, 2))."""
        n_x = objective.X.size
        bounds = np.empty((n_x + objective.n_theta, 2))
        bounds[:n_x] = (-np.inf, np.inf)
        bounds[n_x:] = kernel_bounds
        return bounds

    #: What the kept model's failures tell the user: they name the kernel (at
    #: its fitted hyperparameters) and what to do.
    _FAILURES = FactorTexts(
        non_finite=(
            "The kernel, {kernel}, returns non-finite values (NaN or infinity) at the "
            "fitted latent points. Check the kernel's hyperparameters and their bounds."),
        not_positive_definite=(
            "The kernel, {kernel}, is not returning a positive definite matrix at the "
            "fitted latent points, even with jitter. Add a WhiteKernel to it (the "
            "model's noise) or increase alpha."),
        jitter=(
            "The covariance of the kernel, {kernel}, is not numerically positive "
            "definite at the fitted latent points, so fastgp added jitter {jitter:.3g} "
            "to its diagonal on top of alpha; L_, alpha_ and "
            "log_marginal_likelihood_value_ include it (jitter_). Add a WhiteKernel or "
            "increase alpha to avoid it."),
        overflow=(
            "The log marginal likelihood is not finite at the fitted point: the data "
            "overflow float64. Rescale them, or use standardize=True."),
    )

    def fit_transform(self, X, y=None):
        """Fit the model to X and return the latent points.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data.
        y : None
            Ignored.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            A copy of ``embedding_``.
        """
        return self.fit(X).embedding_.copy()

    def _initial_latent(self, Yc, rng):
        n_samples = Yc.shape[0]
        Q = self.n_components
        if not isinstance(self.init, str):
            X0 = check_array(self.init, dtype=np.float64)
            if X0.shape != (n_samples, Q):
                raise ValueError(
                    f"init has shape {X0.shape}; expected (n_samples, n_components) "
                    f"= ({n_samples}, {Q})."
                )
            return np.array(X0)
        X0 = rng.standard_normal((n_samples, Q))
        if self.init == "pca":
            # Lawrence (2005) and GPy start from PCA: leading principal
            # component scores, each dimension scaled to unit variance.
            U, S, Vt = np.linalg.svd(Yc, full_matrices=False)
            U, Vt = svd_flip(U, Vt)
            rank = int(np.sum(S > max(S[0], 1e-300) * max(Yc.shape) * np.finfo(float).eps))
            k = min(Q, rank)
            X0[:, :k] = U[:, :k] * S[:k]
        X0 -= X0.mean(axis=0)
        X0 /= nonzero_scale(X0.std(axis=0))
        return X0

    def _default_kernel(self, Yc):
        v = float(np.mean(np.var(Yc, axis=0)))
        if not (np.isfinite(v) and v > 0.0):
            v = 1.0
        bounds = (1e-5 * v, 1e5 * v)
        return (C(v, constant_value_bounds=bounds)
                * RBF(np.ones(self.n_components), length_scale_bounds=(1e-5, 1e5))
                + WhiteKernel(0.1 * v, noise_level_bounds=(1e-6 * v, 1e5 * v)))

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """Place new data in the fitted latent space.

        For each row y of X, start at the latent point of its nearest training
        row (Euclidean, in the centred, scaled coordinates) and minimise
        -log p(y | x) over x, the fitted GP's predictive density with the
        training posterior fixed (GPy's ``infer_newX``): mean
        k(X, x)^T K^-1 Y, one variance k(x, x) - k(X, x)^T K^-1 k(X, x)
        (noise included) shared by all features. Each row is optimised on its
        own (a BFGS per row, evaluated in batches), so its answer does not
        depend on the other rows beyond rounding (batched BLAS calls may round
        a row's numbers differently, which can move the point found within the
        optimiser's tolerance, most along a latent direction the kernel
        barely uses).

        A row equal to a training row returns that row's latent point: the
        GPLVM objective splits as
        ``log p(Y) = log p(Y_-i | X_-i) + log p(y_i | x_i, X_-i, Y_-i)``,
        so the fit has already maximised
        y_i's leave-one-out predictive density over x_i, which is the density
        a duplicate of a training row should be placed by.

        Parameters
        ----------
        X : array-like of shape (n_samples_new, n_features)
            New data, in the original (uncentred) coordinates.

        Returns
        -------
        ndarray of shape (n_samples_new, n_components)
            The latent point of each row.
        """
        check_is_fitted(self)
        Y = validate_data(self, host_input(X), dtype=np.float64, reset=False)
        Yc = (Y - self.mean_) / self.scale_
        nearest = pairwise_distances_argmin(Yc, self._Y_fit)
        out = self.embedding_[nearest].copy()
        moving = np.flatnonzero(~np.all(Yc == self._Y_fit[nearest], axis=1))
        if moving.size == 0:
            return out
        solver = self._fitted_solver
        density = solver.latent_density(self.kernel_, self.embedding_, self.L_, self.alpha_,
                                        Yc[moving])
        spread = float(np.mean(np.std(self.embedding_, axis=0)))
        step0 = 0.1 * spread if spread > 0.0 else 0.1
        X_new, _, _ = solver.outside_fit(len(self.embedding_), minimize_rows, density,
                                         out[moving], step0, max_iter=TRANSFORM_MAX_ITER,
                                         gtol=TRANSFORM_GTOL, ftol=0.0)
        out[moving] = X_new
        return out

    def inverse_transform(self, X, return_std=False):
        """Map latent points to data space: the GP's predictive mean.

        Parameters
        ----------
        X : array-like of shape (n_samples_new, n_components)
            Latent points.
        return_std : bool, default=False
            Also return the predictive standard deviation of each feature
            (noise included, as scikit-learn's GaussianProcessRegressor).

        Returns
        -------
        Y_mean : ndarray of shape (n_samples_new, n_features)
            Predictive mean in data space.
        Y_std : ndarray of shape (n_samples_new, n_features), optional
            Predictive standard deviation; only with ``return_std``.
        """
        check_is_fitted(self)
        X = check_array(host_input(X), dtype=np.float64)
        if X.shape[1] != self.n_components:
            raise ValueError(
                f"X has {X.shape[1]} columns; this GPLVM has n_components = "
                f"{self.n_components} latent dimensions."
            )
        mean, var = self._fitted_solver.predict_from_factor(
            self.kernel_, self.embedding_, self.L_, self.alpha_, X, want_var=return_std)
        mean = mean * self.scale_ + self.mean_
        if not return_std:
            return mean
        std = np.sqrt(np.maximum(var, 0.0))[:, None] * self.scale_
        return mean, std

    @property
    def _n_features_out(self):
        return self.n_components

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

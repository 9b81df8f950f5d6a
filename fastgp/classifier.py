"""GaussianProcessClassifier: scikit-learn's Laplace classifier, with
fastgp's one-buffer Newton iterations, gradient and prediction underneath.

This module owns the estimators' contract (parameters, validation, classes,
multi-class wrapping, prediction and their messages). The binary model's
mathematics is :mod:`fastgp._solvers.cholesky.laplace`'s; its fit runs in the fit core
(:class:`fastgp._fit.session.FitSession`), as the regressor's does.
"""

import contextvars
import math
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessClassifier as _SklearnGPC
from sklearn.gaussian_process.kernels import RBF, CompoundKernel, Kernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.multiclass import OneVsOneClassifier, OneVsRestClassifier
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ._backend.covariance import make_covariance
from ._backend.lowering import lower_kernel
from ._fit.clock import FitDescription
from ._fit.likelihood import check_evaluation_memory, evaluate_likelihood, likelihood_request
from ._fit.session import FitSession
from ._solvers.base import NOT_FINITE_ON_TRAINING_INPUTS, FactorTexts, MemoryNeed
from ._solvers.choice import exact_solver
from ._solvers.laplace_predictive import (latent_moments, positive_class_decision,
                                          positive_class_probability)
from ._user_warnings import warn_user
from ._validation import (
    Interval,
    StrOptions,
    check_finite_result,
    check_kernel_hyperparameters,
    check_numeric_columns,
    fit_context,
    warn_at_bounds,
)
from .memory import check_memory, laplace_fit_bytes

__all__ = ["GaussianProcessClassifier"]

#: While a multi-class fit runs its binary models one after another in this
#: thread, a list that collects a KeyboardInterrupt (Ctrl-C) that ended one
#: model's optimisation: that model keeps its best point, the models after it
#: are fitted at the kernel's initial hyperparameters without optimising, and
#: the multi-class fit publishes them all and then re-raises the interrupt.
#: None elsewhere (joblib workers in other processes or threads do not see
#: it, and an interrupt there propagates).
_INTERRUPTS = contextvars.ContextVar("fastgp_classifier_interrupts", default=None)


def _default_kernel():
    """scikit-learn's default: ``C(1.0) * RBF(1.0)`` with both fixed, so
    that nothing is optimised."""
    return C(1.0, constant_value_bounds="fixed") * RBF(1.0, length_scale_bounds="fixed")


def _training_input(X, kernel):
    """X as the fast path takes it (float64, C-contiguous) where the kernel
    works on vectors; anything else (strings, objects) as it is."""
    if kernel.requires_vector_input:
        return np.ascontiguousarray(X, dtype=np.float64)
    return X


class _BinaryLaplaceClassifier(BaseEstimator):
    """One binary Laplace model (R&W 2006, Algorithms 3.1, 3.2 and 5.1):
    scikit-learn's ``_BinaryGaussianProcessClassifierLaplace`` contract,
    fitted through :class:`fastgp._solvers.cholesky.laplace.LaplaceObjective` in one N x N
    buffer. :class:`GaussianProcessClassifier` wraps it (one per class or
    pair of classes for more than two).

    Fitted attributes: ``X_train_``, ``y_train_`` (0/1), ``classes_``,
    ``kernel_``, ``L_`` ((n, n) F-contiguous lower factor of
    B = I + W^1/2 K W^1/2 at the mode), ``pi_``, ``W_sr_`` ((n,) at the
    mode), ``log_marginal_likelihood_value_``, ``jitter_`` (added to B's
    diagonal, 0.0 normally), ``n_iter_`` and ``n_evaluations_``.
    """

    def __init__(self, kernel=None, *, optimizer="fmin_l_bfgs_b", n_restarts_optimizer=0,
                 max_iter_predict=100, warm_start=False, copy_X_train=True,
                 random_state=None, max_time=None):
        self.kernel = kernel
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_time = max_time
        self.max_iter_predict = max_iter_predict
        self.warm_start = warm_start
        self.copy_X_train = copy_X_train
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Fit on (X, y), y with two classes; returns self. A fit that raises
        leaves the model as it was; Ctrl-C keeps the best point, then
        propagates, except inside a multi-class fit that collects it
        (:data:`_INTERRUPTS`): then this model stays fitted at its best
        point, and the models after it are fitted without optimising."""
        interrupts = _INTERRUPTS.get()
        optimize_theta = not interrupts  # no collector, or nothing collected yet
        try:
            self._fit(X, y, optimize_theta)
        except KeyboardInterrupt as exc:
            if interrupts is None or not hasattr(self, "L_"):
                raise
            interrupts.append(exc)
        return self

    def _fit(self, X, y, optimize_theta=True):
        with FitSession(self, "Fitting GaussianProcessClassifier") as session:
            kernel = _default_kernel() if self.kernel is None else clone(self.kernel)
            bounds = check_kernel_hyperparameters(
                kernel, n_restarts=0 if self.optimizer is None else self.n_restarts_optimizer)
            rng = check_random_state(self.random_state)
            X_train = _training_input(X, kernel)
            if self.copy_X_train and X_train is X:
                X_train = (np.copy(X_train) if isinstance(X_train, np.ndarray)
                           else list(X_train))

            encoder = LabelEncoder()
            y_train = encoder.fit_transform(y)
            classes = encoder.classes_
            name = type(self).__name__
            if classes.size > 2:
                raise ValueError(f"{name} supports only binary classification. "
                                 f"y contains classes {classes}")
            if classes.size == 1:
                raise ValueError(f"{name} requires 2 classes; got {classes.size} class")

            n_samples = len(y_train)
            covariance = make_covariance(kernel, X_train)
            solver = exact_solver()
            objective = solver.laplace_objective(covariance, y_train, self.max_iter_predict,
                                                 self.warm_start)
            n_features = np.shape(X_train)[1] if np.ndim(X_train) == 2 else 1
            session.budget(
                MemoryNeed(host=laplace_fit_bytes([n_samples], n_features, kernel.n_dims,
                                                  fast=covariance.is_fast)),
                n_samples,
                ["fit on fewer samples (a random subset)", "use a machine with more memory"]
                + ([] if covariance.is_fast else
                   ["use a kernel on fastgp's fast path, whose gradient needs no "
                    "(N, N, n_hyperparameters) tensor"]))

            # the hyperparameters that maximise the approximate likelihood
            n_iter = 0
            if self.optimizer is not None and kernel.n_dims > 0 and optimize_theta:
                best = session.minimize(
                    objective, kernel.theta, bounds, self.optimizer,
                    n_restarts=self.n_restarts_optimizer, rng=rng, max_time=self.max_time,
                    description=FitDescription(
                        f"the Laplace approximation, N = {n_samples:,} samples, "
                        f"{kernel.n_dims} hyperparameters"),
                    context=solver.evaluation_context)
                if math.isfinite(best.value):
                    kernel.theta = best.theta
                    warn_at_bounds(kernel)
                    n_iter = best.n_iterations

            # Newton's mode and the factor of B there, kept as L_
            kept = session.finalise(solver.final, objective, kernel.theta,
                                    self._FAILURES.messages(kernel),
                                    context=solver.evaluation_context)
            mode = objective.mode
            session.publish({
                "_fitted_solver": solver,
                "kernel_": kernel,
                "_rng": rng,
                "X_train_": X_train,
                "y_train_": y_train,
                "classes_": classes,
                "L_": kept.L,
                "pi_": mode.pi,
                "W_sr_": mode.W_sr,
                "_f_cached": objective.f_cached,
                "jitter_": kept.jitter,
                "n_iter_": n_iter,
                "n_evaluations_": objective.n_evaluations,
                "log_marginal_likelihood_value_": np.float64(-kept.value),
            })

    #: What the kept model's failures tell the user: they name the kernel (at
    #: its fitted hyperparameters) and what to do.
    _FAILURES = FactorTexts(
        non_finite=NOT_FINITE_ON_TRAINING_INPUTS,
        not_positive_definite=(
            "The kernel, {kernel}, is not returning a positive semi-definite matrix: "
            "B = I + W^1/2 K W^1/2 of the Laplace approximation is not positive "
            "definite even with jitter up to {jitter:.3g} added to its diagonal. Check "
            "the kernel (a user-defined kernel must be positive semi-definite), or "
            "rescale X."),
        jitter=(
            "The Laplace approximation's matrix B = I + W^1/2 K W^1/2 of the kernel, "
            "{kernel}, is not numerically positive definite at the fitted "
            "hyperparameters, so fastgp added jitter {jitter:.3g} to its diagonal "
            "(jitter_). The kernel matrix is likely not positive semi-definite; check "
            "the kernel, or rescale X."),
        overflow=(
            "The approximate log marginal likelihood is not finite at the fitted "
            "hyperparameters of {kernel}: the kernel's values overflow the Newton "
            "iterations. Rescale X or bound the kernel's amplitude."),
    )

    # -------------------------------------------------------------- predict
    def _latent(self, X, function):
        """``function`` of :mod:`fastgp._solvers.laplace_predictive` at X;
        its mean and variance (all or some; None: not computed) checked
        finite."""
        check_is_fitted(self)
        X = _training_input(X, self.kernel_)
        covariance = make_covariance(self.kernel_, self.X_train_, warn=False)
        result = self._fitted_solver.outside_fit(
            len(self.y_train_), function, covariance, self.kernel_.theta, self.L_,
            self.W_sr_, self.y_train_ - self.pi_, X)
        mean, var = result[-2:]
        # never NaN returned in silence: the kernel overflows at these inputs
        hint = "The kernel at these inputs overflows float64; rescale X."
        check_finite_result("the latent mean", mean, hint)
        if var is not None:
            check_finite_result("the latent variance", var, hint)
        return result

    def _moments(self, X):
        return self._latent(X, lambda *args: latent_moments(*args, want_var=True))

    def predict(self, X):
        """Classes (from ``classes_``): ``np.argmax`` of predict_proba's row
        (the first class at a tie), exactly. The latent mean's sign decides
        it (the MAP decision, R&W 2006, sec. 3.4.2) except within 1e-6 x
        sqrt(1 + k(x*, x*)) above 0, where the probability's 0.5 crossing
        lies; there the variance and the probability are computed as
        predict_proba computes them."""
        positive, _, _ = self._latent(X, positive_class_decision)
        return np.where(positive, self.classes_[1], self.classes_[0])

    def predict_proba(self, X):
        """(n_samples, 2) probabilities of ``classes_`` (Alg. 3.2 line 7)."""
        mean, var = self._moments(X)
        pi_star = positive_class_probability(mean, var)
        return np.vstack((1.0 - pi_star, pi_star)).T

    def latent_mean_and_variance(self, X):
        """Mean and variance (n_samples,) of the latent function at X
        (Alg. 3.2 lines 4-6)."""
        return self._moments(X)

    # ------------------------------------------------------------------ LML
    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        """The approximate log marginal likelihood (R&W 2006, eq. 3.32) at
        log-space ``theta`` (None: the fitted value) and, with
        ``eval_gradient``, its gradient (Alg. 5.1). ``-inf`` (and a zero
        gradient) where B is not positive definite. Each call allocates its
        own N x N buffer and leaves ``L_`` untouched."""
        request = likelihood_request(self, theta, eval_gradient, clone_kernel)
        if request is None:
            return self.log_marginal_likelihood_value_
        kernel, theta, covariance = request
        n_samples = len(self.y_train_)
        n_features = np.shape(self.X_train_)[1] if np.ndim(self.X_train_) == 2 else 1
        check_evaluation_memory(
            laplace_fit_bytes([n_samples], n_features, kernel.n_dims,
                              fast=covariance.is_fast or not eval_gradient),
            n_samples)
        solver = self._fitted_solver
        objective = solver.laplace_objective(covariance, self.y_train_, self.max_iter_predict,
                                             self.warm_start,
                                             f_cached=getattr(self, "_f_cached", None))
        result = evaluate_likelihood(
            objective, theta, eval_gradient,
            lambda function, point: solver.outside_fit(n_samples, function, point))
        if objective.f_cached is not None:
            self._f_cached = objective.f_cached  # scikit-learn's warm start
        return result


class GaussianProcessClassifier(_SklearnGPC):
    """Gaussian process classification with the Laplace approximation in one buffer.

    Newton's iterations and the gradient work in one N x N buffer. A drop-in replacement for
    :class:`sklearn.gaussian_process.GaussianProcessClassifier`: the same
    constructor, defaults, fitted attributes, methods and messages, and
    scikit-learn's kernel objects. The binary model follows Rasmussen &
    Williams (2006), Algorithms 3.1, 3.2 and 5.1, as scikit-learn's does; what
    changes is the cost. K is filled once per hyperparameter point and kept
    in one triangle of a preallocated N x N buffer while Newton's iterations
    factor B = I + W^1/2 K W^1/2 in place in the other; the gradient needs
    dpotri in place and one fused pass over the buffer that recomputes
    dK/dtheta on the fly, instead of scikit-learn's (N, N, n_theta) gradient
    tensor beside five N x N matrices (docs/design.md, "The Laplace
    classifier in one buffer"). Kernels outside fastgp's fast path work
    through their own ``__call__`` at scikit-learn's memory cost, with a
    :class:`~fastgp.exceptions.SlowKernelWarning`.

    Parameters
    ----------
    kernel : kernel instance, default=None
        The prior covariance of the latent function. None means
        ``C(1.0, "fixed") * RBF(1.0, "fixed")``, which has nothing to
        optimise, as in scikit-learn. Cannot be a CompoundKernel.
    optimizer : "fmin_l_bfgs_b", "CG", callable or None, default="fmin_l_bfgs_b"
        As the regressor's: L-BFGS-B within the kernel's bounds, CG on a
        smooth map of the bounds' box (fastgp's addition), a callable
        ``optimizer(obj_func, initial_theta, bounds) -> (theta_opt,
        func_min)``, or None to keep the kernel's hyperparameters.
    n_restarts_optimizer : int, default=0
        Extra optimiser runs from log-uniform random starts within the bounds
        (drawn in log space, as documented by scikit-learn; scikit-learn's
        classifier exponentiates the log-space draw).
    max_iter_predict : int, default=100
        Newton iterations for the posterior mode, at every hyperparameter
        point and for the kept model.
    warm_start : bool, default=False
        Start Newton's iterations from the last mode found instead of zero
        (useful during the optimisation).
    copy_X_train : bool, default=True
        Store a copy of the training inputs.
    random_state : int, RandomState instance or None, default=None
        Draws the restart points.
    multi_class : {"one_vs_rest", "one_vs_one"}, default="one_vs_rest"
        For more than two classes: one binary model per class against the
        rest, or per pair of classes (no probabilities then).
    n_jobs : int, default=None
        Binary models fitted at once (joblib); None fits them one after
        another. Each keeps its own N x N factor.
    max_time : float or None, default=None
        Seconds each binary model's optimisation may take (None: no limit):
        no evaluation starts after it, and the model keeps its best point
        with a ConvergenceWarning; where it ends a fit, the result depends
        on the machine's speed and load (docs/reliability.md, "Long fits").
        The classifier has no ``max_iter`` (scikit-learn's estimators with
        one report ``n_iter_ >= 1``, which a classifier with nothing to
        optimise cannot); a callable ``optimizer`` sets any limit. fastgp's
        addition.

    Attributes
    ----------
    base_estimator_ : estimator
        The binary model, or scikit-learn's OneVsRestClassifier /
        OneVsOneClassifier of binary models.
    kernel_ : kernel instance
        The fitted kernel (a CompoundKernel of the binary models' for more
        than two classes).
    log_marginal_likelihood_value_ : numpy.float64
        Of the fitted hyperparameters (the mean over binary models).
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.
    n_classes_ : int
        The number of classes.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Only when X has string feature names.

    Notes
    -----
    Failure behaviour, as the regressor's (docs/reliability.md): before any
    N x N buffer is allocated, the bytes of every buffer the fit will hold at
    once (one factor kept per binary model, the models fitted in parallel)
    are compared with the memory available, and
    :class:`~fastgp.exceptions.InsufficientMemoryError` names both and the
    remedies. Where B is not numerically positive definite in the kept
    model, jitter is added to its diagonal with a
    :class:`~fastgp.exceptions.JitterWarning`. Optimiser trouble keeps the best
    point with a ConvergenceWarning; a KeyboardInterrupt during a binary
    model's optimisation keeps its best point, fits the estimator there and
    then propagates (with more than two classes fitted one after another,
    the models after the interrupted one are fitted at the kernel's initial
    hyperparameters without optimising; with ``n_jobs`` the estimator is left
    as it was). A fit that raises leaves a previously fitted estimator as it
    was.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> from fastgp import GaussianProcessClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(80, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> gpc = GaussianProcessClassifier(1.0 * RBF(1.0), random_state=0).fit(X, y)
    >>> bool(gpc.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        "kernel": [Kernel, None],
        "optimizer": [StrOptions({"fmin_l_bfgs_b", "CG"}), callable, None],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
        "max_iter_predict": [Interval(Integral, 1, None, closed="left")],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "warm_start": ["boolean"],
        "copy_X_train": ["boolean"],
        "random_state": ["random_state"],
        "multi_class": [StrOptions({"one_vs_rest", "one_vs_one"})],
        "n_jobs": [Integral, None],
    }

    def __init__(self, kernel=None, *, optimizer="fmin_l_bfgs_b", n_restarts_optimizer=0,
                 max_iter_predict=100, warm_start=False, copy_X_train=True,
                 random_state=None, multi_class="one_vs_rest", n_jobs=None,
                 max_time=None):
        # scikit-learn's constructor stores each argument under its own name
        super().__init__(
            kernel, optimizer=optimizer, n_restarts_optimizer=n_restarts_optimizer,
            max_iter_predict=max_iter_predict, warm_start=warm_start,
            copy_X_train=copy_X_train, random_state=random_state,
            multi_class=multi_class, n_jobs=n_jobs)
        self.max_time = max_time

    @fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit the Gaussian process classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Training inputs.
        y : array-like of shape (n_samples,)
            Class labels (two or more classes).

        Returns
        -------
        GaussianProcessClassifier
            The fitted estimator (``self``).

        Raises
        ------
        KeyboardInterrupt
            Ctrl-C during a binary model's optimisation, after the estimator
            was fitted at the best point so far (with a ConvergenceWarning).
        """
        # every fitted attribute is published at once, at the end: a fit that
        # raises leaves a previously fitted estimator as it was
        with FitSession(self, "Fitting GaussianProcessClassifier") as session:
            if isinstance(self.kernel, CompoundKernel):
                raise ValueError("kernel cannot be a CompoundKernel")
            if self.kernel is None or self.kernel.requires_vector_input:
                check_numeric_columns(X)  # names a table's text column
                X, y = validate_data(self, X, y, multi_output=False, ensure_2d=True,
                                     dtype="numeric")
            else:
                X, y = validate_data(self, X, y, multi_output=False, ensure_2d=False,
                                     dtype=None)
            binary = _BinaryLaplaceClassifier(
                kernel=self.kernel, optimizer=self.optimizer,
                n_restarts_optimizer=self.n_restarts_optimizer,
                max_iter_predict=self.max_iter_predict, warm_start=self.warm_start,
                copy_X_train=self.copy_X_train, random_state=self.random_state,
                max_time=self.max_time)
            classes, counts = np.unique(y, return_counts=True)
            n_classes = classes.size
            if n_classes == 1:
                raise ValueError(
                    "GaussianProcessClassifier requires 2 or more distinct classes; got "
                    f"{n_classes} class (only class {classes[0]} is present)")
            self._check_fit_memory(X, counts)

            if n_classes == 2:
                base = binary
            elif self.multi_class == "one_vs_rest":
                base = OneVsRestClassifier(binary, n_jobs=self.n_jobs)
            else:
                base = OneVsOneClassifier(binary, n_jobs=self.n_jobs)
            interrupt = None
            if n_classes == 2:
                try:
                    base.fit(X, y)
                except KeyboardInterrupt as exc:
                    # the binary model kept its best point and is fitted there
                    if not hasattr(binary, "L_"):
                        raise
                    interrupt = exc
            else:
                interrupts = []
                token = _INTERRUPTS.set(interrupts)
                try:
                    base.fit(X, y)
                finally:
                    _INTERRUPTS.reset(token)
                if interrupts:
                    interrupt = interrupts[0]
                    warn_user(
                        "The fit was interrupted (KeyboardInterrupt): the binary model "
                        "being optimised keeps its best point, and the models after it "
                        "were fitted at the kernel's initial hyperparameters without "
                        "optimising; then the interrupt propagates.", ConvergenceWarning)
            if n_classes > 2:
                lml = np.mean([e.log_marginal_likelihood() for e in base.estimators_])
            else:
                lml = base.log_marginal_likelihood()
            session.publish({
                "base_estimator_": base,
                "classes_": classes,
                "n_classes_": n_classes,
                "log_marginal_likelihood_value_": lml,
            })
            if interrupt is not None:
                session.defer(interrupt)
        return self

    # scikit-learn's methods, written here rather than inherited: scikit-learn's
    # own read its private layout (base_estimator_ as it builds it), and
    # latent_mean_and_variance exists there only from 1.7
    def _query(self, X):
        """X validated as fit's inputs were (vectors, or any objects for a
        kernel that takes them)."""
        check_is_fitted(self)
        if self.kernel is None or self.kernel.requires_vector_input:
            return validate_data(self, X, ensure_2d=True, dtype="numeric", reset=False)
        return validate_data(self, X, ensure_2d=False, dtype=None, reset=False)

    def predict(self, X):
        """Predict the class of each query point.

        The class of largest predicted probability, exactly ``np.argmax`` of
        predict_proba's row (the first class at a tie), for two classes and
        for one-vs-rest; for two classes the latent mean's sign decides it
        (the MAP decision, Rasmussen & Williams 2006, sec. 3.4.2) wherever
        the probability is not within the mixture's rounding of 0.5
        (docs/gpc.md, "Predictions"). One-vs-one: scikit-learn's vote.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Query points.

        Returns
        -------
        ndarray of shape (n_samples,)
            Predicted labels, from ``classes_``.
        """
        X = self._query(X)
        if self.n_classes_ > 2 and self.multi_class == "one_vs_rest":
            # scikit-learn's vote takes np.argmax of the binary models'
            # probabilities; normalised they can tie where they did not, so
            # the argmax is of the probabilities predict_proba returns
            proba = self.base_estimator_.predict_proba(X)
            return self.classes_[np.argmax(proba, axis=1)]
        return self.base_estimator_.predict(X)

    def predict_proba(self, X):
        """Probability of each class at each query point.

        Rasmussen & Williams (2006), Alg. 3.2: the latent mean and variance
        from the kept factor, and the logistic function integrated against
        them (Williams & Barber's probit mixture); one-vs-rest probabilities
        are normalised to sum to one. Not available for one-vs-one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Query points.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Probabilities, columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        if self.n_classes_ > 2 and self.multi_class == "one_vs_one":
            raise ValueError(
                "one_vs_one multi-class mode does not support predicting probability "
                "estimates. Use one_vs_rest mode instead.")
        X = self._query(X)
        return self.base_estimator_.predict_proba(X)

    @property
    def kernel_(self):
        """The fitted kernel: the binary model's, or with more than two
        classes a CompoundKernel of every binary model's."""
        if self.n_classes_ == 2:
            return self.base_estimator_.kernel_
        return CompoundKernel([model.kernel_ for model in self.base_estimator_.estimators_])

    def latent_mean_and_variance(self, X):
        """Mean and variance of the latent function at the query points.

        Rasmussen & Williams (2006), Alg. 3.2 lines 4 and 6; binary
        classification only.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or list of object
            Query points.

        Returns
        -------
        latent_mean : ndarray of shape (n_samples,)
            Mean of the latent function.
        latent_var : ndarray of shape (n_samples,)
            Variance of the latent function.
        """
        check_is_fitted(self)
        if self.n_classes_ > 2:
            raise ValueError(
                "Returning the mean and variance of the latent function f is only "
                f"supported for binary classification, received {self.n_classes_} classes.")
        X = self._query(X)
        return self.base_estimator_.latent_mean_and_variance(X)

    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        """Approximate log marginal likelihood of ``theta`` for the training data.

        Rasmussen & Williams (2006), eq. 3.32 at Newton's mode, and its
        gradient by Alg. 5.1, in one N x N buffer of the call's own (``L_``
        is left untouched). With more than two classes, the mean over the
        binary models (no gradient).

        Parameters
        ----------
        theta : array-like of shape (n_kernel_params,), default=None
            Log-space hyperparameters: of one binary model (used for all),
            or of the compound kernel. None returns the fitted value.
        eval_gradient : bool, default=False
            Also return the gradient with respect to ``theta`` (binary only).
        clone_kernel : bool, default=True
            If False, the fitted kernel's theta is set to ``theta``.

        Returns
        -------
        log_likelihood : numpy.float64
            The approximate log marginal likelihood; ``-inf`` where
            B = I + W^1/2 K W^1/2 is not positive definite.
        log_likelihood_gradient : ndarray of shape (n_kernel_params,), optional
            Its gradient; only with ``eval_gradient``.
        """
        check_is_fitted(self)
        if theta is None:
            if eval_gradient:
                raise ValueError("Gradient can only be evaluated for theta!=None")
            return self.log_marginal_likelihood_value_
        theta = np.asarray(theta)
        if self.n_classes_ == 2:
            return self.base_estimator_.log_marginal_likelihood(theta, eval_gradient,
                                                                clone_kernel=clone_kernel)
        if eval_gradient:
            raise NotImplementedError(
                "Gradient of log-marginal-likelihood not implemented for multi-class GPC.")
        models = self.base_estimator_.estimators_
        n_dims = models[0].kernel_.n_dims
        if theta.shape[0] == n_dims:  # the same theta for every binary model
            thetas = [theta] * len(models)
        elif theta.shape[0] == n_dims * self.classes_.shape[0]:  # the compound kernel's
            thetas = [theta[n_dims * i:n_dims * (i + 1)] for i in range(len(models))]
        else:
            raise ValueError(
                f"Shape of theta must be either {n_dims} or "
                f"{n_dims * self.classes_.shape[0]}. Obtained theta with shape "
                f"{theta.shape[0]}.")
        return np.mean([model.log_marginal_likelihood(t, clone_kernel=clone_kernel)
                        for model, t in zip(models, thetas)])

    def _check_fit_memory(self, X, counts):
        """Every N x N buffer alive at once: one kept factor per binary model,
        and the models in flight (docs/design.md, "The Laplace classifier in
        one buffer")."""
        n_samples = int(counts.sum())
        n_classes = counts.size
        if n_classes == 2:
            sizes = [n_samples]
        elif self.multi_class == "one_vs_rest":
            sizes = [n_samples] * n_classes
        else:
            sizes = [int(counts[i] + counts[j])
                     for i in range(n_classes) for j in range(i + 1, n_classes)]
        n_parallel = effective_n_jobs(self.n_jobs) if n_classes > 2 else 1
        kernel = self.kernel if self.kernel is not None else _default_kernel()
        n_features = np.shape(X)[1] if np.ndim(X) == 2 else 1
        # the fast path: vector input and a kernel that lowers to a program
        fast = (isinstance(X, np.ndarray) and np.ndim(X) == 2
                and lower_kernel(kernel, n_features) is not None)
        remedies = ["fit on fewer samples (a random subset)"]
        if n_classes > 2 and self.multi_class == "one_vs_rest":
            remedies.append("use multi_class='one_vs_one', whose models hold only two "
                            "classes' samples each")
        if n_parallel > 1:
            remedies.append("use n_jobs=None, which fits one binary model at a time")
        remedies.append("use a machine with more memory")
        models = "" if n_classes == 2 else f" ({self.multi_class}, {len(sizes)} binary models)"
        check_memory(
            laplace_fit_bytes(sizes, n_features, kernel.n_dims, fast=fast,
                              n_parallel=n_parallel),
            n_samples=n_samples, operation=f"Fitting GaussianProcessClassifier{models}",
            remedies=remedies)

"""Checks at the estimators' boundary that scikit-learn's ``validate_data``
does not make, so that bad input is a ValueError with a reason, not a crash
inside Numba or LAPACK and not NaN returned in silence.

``validate_data`` already rejects NaN and infinity in X and y, empty arrays,
non-numeric input, 3-D input and a feature count at predict that differs from
fit's. What it leaves to the estimator: the ``alpha`` array (finite, not
negative), kernel hyperparameters that are not finite (``RBF(0)`` has
theta = -inf), fixed ones that are negative (``C(-1.0, "fixed")``) and
bounds without a usable logarithm (a negative bound; 0 or inf where restarts
need finite ones), each named, a table's columns that are not numbers (named,
where ``validate_data`` says only "could not convert string to float"), a
latent dimension above the features' count, targets so large that their
moments overflow, and results that come out non-finite anyway.

It is also fastgp's one door to scikit-learn's private names. fastgp uses
scikit-learn's public API wherever there is one (``validate_data``,
``check_random_state``, ``check_is_fitted``, ``__sklearn_tags__``); where there
is none, the private name is imported here and nowhere else (tests/project/test_layers.py
checks that), and tests/estimators/test_sklearn_contract.py pins the behaviour fastgp
relies on:

- ``sklearn.utils._param_validation.Interval`` and ``StrOptions`` describe
  the estimators' ``_parameter_constraints``, which scikit-learn's
  ``sklearn.base._fit_context`` checks before ``fit`` runs (an
  ``InvalidParameterError``, a ValueError, naming the parameter);
- ``sklearn.base._fit_context`` wraps ``fit`` (:data:`fit_context`);
- ``Kernel._check_bounds_params`` warns when a fitted hyperparameter is at a
  bound, as scikit-learn's own regressor does (:func:`warn_at_bounds`).

Which scikit-learn releases fastgp supports: from the lower bound in
pyproject.toml (the oldest CI runs) to the newest one, which CI's first stage
installs; there is no upper bound, because each private name above is pinned
by a test that fails on the release that changes it, and a fix then lands
before users are told to stay behind (docs/install.md).
"""

from numbers import Integral

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = [
    "Interval",
    "StrOptions",
    "fit_context",
    "warn_at_bounds",
    "diagonal_addition",
    "check_kernel_hyperparameters",
    "check_numeric_columns",
    "check_latent_dimension",
    "kernel_log_bounds",
    "target_moments",
    "nonzero_scale",
    "count_samples",
    "check_finite_result",
    "kernel_for_likelihood",
]


#: scikit-learn's ``_fit_context(prefer_skip_nested_validation=...)``: checks
#: the estimator's ``_parameter_constraints`` before ``fit`` runs.
fit_context = _fit_context


def warn_at_bounds(kernel):
    """scikit-learn's ConvergenceWarning for each fitted hyperparameter of
    ``kernel`` that lies at one of its bounds (what scikit-learn's regressor
    says after its optimiser, ``Kernel._check_bounds_params``), without the
    RuntimeWarning its ``np.log`` of a bound of 0 or inf gives."""
    with np.errstate(divide="ignore"):
        kernel._check_bounds_params()


def nonzero_scale(scale):
    """A divisor that leaves constant features or targets as they are, with
    scikit-learn's convention (its scalers' and its regressor's
    ``normalize_y``): in an array of scales (float64, changed in place and
    returned) every entry below 10 eps becomes 1; a scalar (not a 0-d array)
    becomes 1 only where it is exactly 0."""
    if np.isscalar(scale):
        return 1.0 if scale == 0.0 else scale
    scale[scale < 10 * np.finfo(scale.dtype).eps] = 1.0
    return scale


def count_samples(X):
    """The number of samples (rows) of array-like ``X``, or None if ``X`` is
    not array-like (a scalar, an estimator, an object without a length)."""
    if hasattr(X, "fit"):
        return None
    shape = getattr(X, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) and isinstance(shape[0], Integral) else None
    try:
        return len(X)
    except TypeError:
        return None


def diagonal_addition(alpha, n_samples):
    """scikit-learn's ``alpha`` as an (n_samples,) float64 diagonal.

    A scalar is broadcast; an array must have ``n_samples`` entries (or one).
    Raises ValueError for a wrong length, NaN, infinity or a negative entry
    (scikit-learn's parameter validation checks a scalar ``alpha`` but not an
    array's entries).
    """
    values = np.asarray(alpha)
    if not np.issubdtype(values.dtype, np.number) or np.iscomplexobj(values):
        raise ValueError(f"alpha must be real numbers; got dtype {values.dtype}.")
    values = values.astype(np.float64)
    if values.ndim > 0 and values.shape[0] != n_samples:
        if values.size != 1:
            raise ValueError(
                "alpha must be a scalar or an array with same number of "
                f"entries as y. ({values.shape[0]} != {n_samples})"
            )
        values = values.reshape(-1)[0]
    if values.ndim > 1:
        raise ValueError(f"alpha must be a scalar or 1-D; got shape {values.shape}.")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(
            "alpha must be finite and not negative: it is added to the diagonal "
            "of the training covariance (a noise variance)."
        )
    return np.broadcast_to(values, (n_samples,)).copy()


def check_kernel_hyperparameters(kernel, n_restarts=0):
    """Check the kernel's free hyperparameters and their bounds; return the
    bounds in log space.

    Hyperparameters are optimised in log space (scikit-learn's ``theta`` and
    ``bounds`` are the logarithms of the values and bounds the user wrote), so
    a value must be positive and finite, and a bound must have a logarithm: a
    lower bound in [0, inf) and an upper bound in (0, inf], the lower one not
    above the upper one. A lower bound of 0 or an upper bound of inf is
    scikit-learn's way to leave that side open (its log is -inf or inf; the
    optimisers allow that), except with restarts, which draw their starts
    uniformly between the log-space bounds, so they must be finite.

    Every message names the hyperparameter (``k1__length_scale``, with
    ``[i]`` for one element of a vector), its value or bounds as given, and
    what is wrong; no numpy RuntimeWarning comes from taking the logs.

    Parameters
    ----------
    kernel : Kernel
    n_restarts : int, default=0
        The optimiser's restarts; above 0, every bound must be finite in log
        space (positive and finite).

    Returns
    -------
    ndarray of shape (n_theta, 2)
        ``kernel.bounds`` (log space), computed without RuntimeWarnings.

    Raises
    ------
    ValueError
        A value that is not finite and positive, or a bound as above.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.asarray(kernel.theta, dtype=np.float64)
        # scikit-learn's repr takes the square root of a ConstantKernel's value
        described = repr(kernel)
    if not np.all(np.isfinite(theta)):
        raise ValueError(
            f"The kernel {described} has hyperparameters that are not finite and "
            f"positive: {_bad_values(kernel, theta)}. Length scales, constants, "
            "noise levels, periodicities and alphas must be positive and finite "
            "(they are optimised in log space).")
    fixed = _named_values(kernel, fixed=True, bad=lambda v: not (np.isfinite(v) and v >= 0))
    if fixed:
        raise ValueError(
            f"The kernel has fixed hyperparameters that are negative or not finite: "
            f"{fixed}. A ConstantKernel's constant_value and a WhiteKernel's "
            "noise_level are variances, and length scales, periodicities and alphas "
            "are positive: with a negative value the kernel matrix is not a covariance "
            "(not positive definite). Give a positive value; fixed bounds keep it out "
            "of the optimisation.")
    bounds = kernel_log_bounds(kernel)
    for name, lower, upper, log_lower, log_upper in _bound_rows(kernel, bounds):
        problem = _bound_problem(lower, upper, log_lower, log_upper, n_restarts)
        if problem:
            raise ValueError(
                f"The kernel {described} has unusable bounds for {name}: "
                f"({_number(lower)}, {_number(upper)}). {problem}")
    return bounds


def kernel_log_bounds(kernel):
    """``kernel.bounds`` as an (n_theta, 2) float64 array (empty for a kernel
    with every hyperparameter fixed), without numpy's RuntimeWarnings for the
    log of 0, of inf or of a negative bound (scikit-learn's ``bounds`` takes
    ``np.log`` of the bounds as given)."""
    if kernel.n_dims == 0:
        return np.empty((0, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(kernel.bounds, dtype=np.float64).reshape(-1, 2)


#: Why a bound needs a logarithm, said once in each message about a bound.
_LOG_SPACE = "Hyperparameters are optimised in log space, between the logarithms of the bounds"


def _bound_problem(lower, upper, log_lower, log_upper, n_restarts):
    """What is wrong with one coordinate's bounds (natural scale as given,
    and their logs), or "" if nothing is."""
    if lower < 0:
        return (f"The lower bound is negative, so it has no logarithm. {_LOG_SPACE}: "
                "give a positive lower bound (such as 1e-5), or 0 to leave the lower "
                "side open.")
    if upper < 0:
        return (f"The upper bound is negative, so it has no logarithm. {_LOG_SPACE}: "
                "give a positive upper bound, or inf to leave the upper side open.")
    if np.isnan([lower, upper, log_lower, log_upper]).any():
        return f"A bound is NaN (their logarithms: ({log_lower}, {log_upper}))."
    if upper == 0:
        return (f"The upper bound is 0, whose logarithm is -inf, so no positive value "
                f"lies below it. {_LOG_SPACE}: give a positive upper bound.")
    if np.isposinf(log_lower):
        return (f"The lower bound is infinite, so no finite value lies above it. "
                f"{_LOG_SPACE}: give a finite lower bound.")
    if log_lower > log_upper:
        return "The lower bound exceeds the upper bound: swap them."
    if n_restarts > 0 and not (np.isfinite(log_lower) and np.isfinite(log_upper)):
        side, what, log = (("lower", "0", log_lower) if not np.isfinite(log_lower)
                           else ("upper", "infinite", log_upper))
        return (f"Multiple optimizer restarts (n_restarts_optimizer>0) requires that "
                f"all bounds are finite: the {side} bound is {what}, whose logarithm "
                f"is {log}. {_LOG_SPACE}, and each restart starts at a point drawn "
                "uniformly between them: give positive finite bounds (such as 1e-5 "
                "and 1e5, scikit-learn's default), or n_restarts_optimizer=0.")
    return ""


def _bound_rows(kernel, log_bounds):
    """(name, lower, upper, log lower, log upper) per free coordinate of
    theta, the natural-scale bounds as the user wrote them. Where the
    kernel's ``hyperparameters`` do not describe its ``bounds`` (a user
    kernel that overrides ``bounds``) the names are ``theta[i]`` and the
    natural bounds are the exponentials of the log ones."""
    rows = []
    try:
        for h in kernel.hyperparameters:
            if h.fixed:
                continue
            natural = np.asarray(h.bounds, dtype=np.float64).reshape(-1, 2)
            if natural.shape[0] == 1 and h.n_elements > 1:
                natural = np.repeat(natural, h.n_elements, axis=0)
            for i, (lower, upper) in enumerate(natural):
                rows.append((h.name if h.n_elements == 1 else f"{h.name}[{i}]",
                             lower, upper))
    except (TypeError, ValueError, AttributeError):
        rows = None
    if rows is None or len(rows) != len(log_bounds):
        with np.errstate(over="ignore", invalid="ignore"):
            natural = np.exp(log_bounds)
        rows = [(f"theta[{i}]", lower, upper) for i, (lower, upper) in enumerate(natural)]
    return [row + (log_lower, log_upper)
            for row, (log_lower, log_upper) in zip(rows, log_bounds)]


def _bad_values(kernel, theta):
    """The free hyperparameters whose log is not finite, named with the
    values as given ("k2__length_scale = 0"), or theta itself where the
    kernel's parameters do not say."""
    named = _named_values(kernel, fixed=False, bad=lambda v: not (np.isfinite(v) and v > 0))
    return named or f"log-space theta = {theta}"


def _named_values(kernel, fixed, bad):
    """The hyperparameters (the fixed ones, or the free ones) whose value
    ``bad(value)`` is true, named with the values as given
    ("k2__length_scale = 0", ``[i]`` for one element of a vector), joined
    by commas; "" where none is, or the kernel's parameters do not say."""
    try:
        params = kernel.get_params(deep=True)
        named = []
        for h in kernel.hyperparameters:
            if bool(h.fixed) != fixed:
                continue
            values = np.atleast_1d(np.asarray(params[h.name], dtype=np.float64))
            for i, value in enumerate(values):
                if bad(value):
                    name = h.name if values.size == 1 else f"{h.name}[{i}]"
                    named.append(f"{name} = {_number(value)}")
        return ", ".join(named)
    except (KeyError, TypeError, ValueError, AttributeError):
        return ""


def check_numeric_columns(X, name="X"):
    """Raise a ValueError that names the columns of a table (a pandas
    DataFrame, or a Series) that are not numbers: text, or categories that
    are not numbers. scikit-learn's ``validate_data`` says only "could not
    convert string to float: 'y'", without the column. Anything that is not
    a table is left to ``validate_data``.

    Parameters
    ----------
    X : array-like
        The estimator's input, as the user gave it.
    name : str
        What the message calls it ("X", "y").
    """
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(dtypes, "items"):
        dtype = getattr(X, "dtype", None)
        if dtype is None or not hasattr(X, "name") or not hasattr(X, "index"):
            return  # an array or a list: validate_data's
        dtypes = {X.name: dtype}
    bad = [f"{column!r} ({dtype})" for column, dtype in dtypes.items()
           if not _numeric_dtype(dtype)]
    if bad:
        raise ValueError(
            f"{name} has columns that are not numbers: {', '.join(bad)}. A Gaussian "
            "process's kernel measures distances between numbers: encode them "
            "(scikit-learn's OneHotEncoder or OrdinalEncoder, in a ColumnTransformer "
            "of a Pipeline) or drop them.")


def _numeric_dtype(dtype):
    """Whether a column of ``dtype`` (NumPy's or a pandas extension dtype)
    holds numbers (booleans included), or categories that are numbers."""
    categories = getattr(dtype, "categories", None)
    if categories is not None:  # pandas' CategoricalDtype
        return _numeric_dtype(categories.dtype)
    kind = getattr(dtype, "kind", "O")
    return kind in "biuf"


def check_latent_dimension(n_components, n_features):
    """Raise a ValueError where a latent space (the GPLVM's) would have
    more dimensions than the data have features, as scikit-learn's PCA
    does: a dimensionality reduction to more dimensions than there are has
    latent directions the data do not determine (the likelihood is flat
    along them, and the optimiser runs to its iteration limit), and the PCA
    start has only ``n_features`` components."""
    if n_components > n_features:
        raise ValueError(
            f"n_components={n_components} is more than the data's n_features="
            f"{n_features}: the GPLVM reduces the data's dimension, and latent "
            "dimensions beyond the features' count are not determined by the data (the "
            f"fit would run to max_iter). Use n_components <= {n_features}.")


def _number(value):
    """A bound or value as the user would write it: 0, 10, 1e-05, -inf."""
    return f"{float(value):g}"


def target_moments(y):
    """Mean and standard deviation of y per column, as scikit-learn's
    ``normalize_y`` computes them (zero deviations replaced by 1), without
    overflow or underflow: targets near the float64 limit (|y| above about
    1e154) make ``np.std``'s squares infinite, which would turn every
    normalised target into 0 and every prediction into NaN; targets below
    about 1e-162 make them 0, which would silently switch normalisation off.
    Then the moments are computed after scaling by the largest magnitude.

    y : ndarray of shape (n_samples,) or (n_samples, n_targets), finite.
    Returns mean, std of shape y.shape[1:].
    """
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.mean(y, axis=0)
        std = np.std(y, axis=0)
    spread = np.ptp(y, axis=0) if len(y) else np.zeros(y.shape[1:])
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std))) or np.any(
            (std == 0) & (spread != 0)):
        scale = np.max(np.abs(y), axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        scaled = y / scale
        mean = scale * np.mean(scaled, axis=0)
        std = scale * np.std(scaled, axis=0)
    return mean, nonzero_scale(std)


def check_finite_result(name, values, hint):
    """Raise ValueError if ``values`` holds NaN or infinity, saying how many
    entries of ``name`` are affected and ``hint`` (what to do)."""
    values = np.asarray(values)
    bad = ~np.isfinite(values)
    if np.any(bad):
        raise ValueError(
            f"{int(bad.sum())} of {values.size} entries of {name} are not finite. {hint}"
        )


def kernel_for_likelihood(fitted_kernel, theta, eval_gradient, clone_kernel):
    """The kernel ``log_marginal_likelihood(theta, eval_gradient,
    clone_kernel)`` evaluates, by scikit-learn's contract.

    Parameters
    ----------
    fitted_kernel : Kernel
        The estimator's ``kernel_``; set to ``theta`` in place when
        ``clone_kernel`` is False.
    theta : array-like of shape (n_theta,) or None
        Log-space hyperparameters; None asks for the fitted value.
    eval_gradient : bool
        Whether the gradient is asked for (impossible with theta None).
    clone_kernel : bool
        Evaluate a clone at ``theta`` (True) or ``fitted_kernel`` itself.

    Returns
    -------
    tuple (kernel, theta) or None
        None where ``theta`` is None (the caller returns its fitted value);
        else the kernel at ``theta`` and ``theta`` as float64.

    Raises
    ------
    ValueError
        ``eval_gradient`` with ``theta`` None, in scikit-learn's words.
    """
    if theta is None:
        if eval_gradient:
            raise ValueError("Gradient can only be evaluated for theta!=None")
        return None
    theta = np.asarray(theta, dtype=np.float64)
    if clone_kernel:
        return fitted_kernel.clone_with_theta(theta), theta
    fitted_kernel.theta = theta
    return fitted_kernel, theta

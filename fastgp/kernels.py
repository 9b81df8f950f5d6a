r"""Kernels that scikit-learn lacks, with scikit-learn's kernel API.

Both are subclasses of :class:`sklearn.gaussian_process.kernels.Kernel`, so
they behave like every scikit-learn kernel: log-space ``theta`` and
``bounds``, ``"fixed"`` bounds, ``clone``/``get_params``, the ``+``, ``*`` and
``**`` operators, ``__call__(X, Y=None, eval_gradient=False)`` and ``diag``.
They work with scikit-learn's own estimators too. Their ``__call__`` is a plain
NumPy reference; fastgp's estimators evaluate them on the fast path instead
(this module registers them in :data:`fastgp._backend.lowering.FAST_PATH_KERNELS`
through :func:`~fastgp._backend.lowering.register_leaf`, as a kernel defined
outside fastgp would).

- :class:`RationalQuadratic`: one length scale per input dimension (ARD);
  scikit-learn's raises for a vector length scale.
- :class:`ExpSineSquared`: one length scale and one period per input
  dimension.

They print with their module ("fastgp.kernels.RationalQuadratic(alpha=1,
length_scale=[1, 2])"), so a fitted kernel shows which class is in use.

:func:`fast_path` says whether a kernel (on given inputs) runs on the fast
path, and if not, which part keeps it off and why.

This module imports no Numba.
"""

import types
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.gaussian_process.kernels import (
    Hyperparameter,
    Kernel,
    NormalizedKernelMixin,
    StationaryKernelMixin,
)

from ._backend.lowering import (ARD_EXP_SINE_SQUARED, ARD_RATIONAL_QUADRATIC,
                                lowering_obstacle, register_leaf)
from ._solvers.choice import SOLVERS
from .exceptions import SlowKernelWarning

__all__ = ["RationalQuadratic", "ExpSineSquared", "fast_path", "FastPath"]


def _per_dimension(value, n_features, name):
    """``value`` as a float array of size 1 or ``n_features``."""
    value = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if value.ndim > 1:
        raise ValueError(f"{name} cannot be of dimension greater than 1")
    if value.size not in (1, n_features):
        raise ValueError(
            f"Anisotropic {name} must have the same number of dimensions as the "
            f"data ({value.size} != {n_features}): give one value per column of "
            "X, or a scalar."
        )
    return value


def _is_vector(value):
    return np.iterable(value) and len(value) > 1


def _format(value):
    if _is_vector(value):
        return "[{}]".format(", ".join(f"{v:.3g}" for v in value))
    return f"{float(np.squeeze(value)):.3g}"


def _scalar_or_vector_hyperparameter(name, value, bounds):
    """A ``Hyperparameter`` with one entry, or one per dimension for a vector."""
    if _is_vector(value):
        return Hyperparameter(name, "numeric", bounds, len(value))
    return Hyperparameter(name, "numeric", bounds)


def _qualified_name(cls):
    """``module.Class``: these kernels share their names with scikit-learn's,
    so a printed kernel (a fitted ``kernel_``, a message) says which one is in
    use: "fastgp.kernels.RationalQuadratic(...)"."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _pairwise_differences(X, Y):
    """X[:, None, :] - Y[None, :, :], shape (n_X, n_Y, n_features)."""
    return X[:, np.newaxis, :] - Y[np.newaxis, :, :]


def _check_inputs(X, Y, eval_gradient):
    X = np.atleast_2d(X)
    if Y is None:
        return X, X
    if eval_gradient:
        raise ValueError("Gradient can only be evaluated when Y is None.")
    return X, np.atleast_2d(Y)


class _PerDimensionKernel(StationaryKernelMixin, NormalizedKernelMixin, Kernel):
    """What the kernels below share: a length scale per input dimension,
    scikit-learn's ``__call__`` contract, and a NumPy reference evaluation
    (``_evaluate``) that each kernel writes once."""

    @property
    def hyperparameter_length_scale(self):
        return _scalar_or_vector_hyperparameter("length_scale", self.length_scale,
                                                self.length_scale_bounds)

    def __call__(self, X, Y=None, eval_gradient=False):
        """Return k(X, Y) and, if ``eval_gradient``, its gradient.

        Parameters
        ----------
        X : ndarray of shape (n_samples_X, n_features)
        Y : ndarray of shape (n_samples_Y, n_features), default=None
            None means k(X, X).
        eval_gradient : bool, default=False
            Also return the gradient with respect to the log-hyperparameters
            (only when Y is None).

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
        K_gradient : ndarray of shape (n_samples_X, n_samples_X, n_dims), optional
            In ``theta`` order (the class's Notes); fixed hyperparameters have
            no column.
        """
        X, Y = _check_inputs(X, Y, eval_gradient)
        return self._evaluate(X, Y, eval_gradient)


class RationalQuadratic(_PerDimensionKernel):
    r"""Rational quadratic kernel with one length scale per dimension (ARD).

    .. math::
        k(x, x') = \left(1 + \frac{r^2}{2 \alpha}\right)^{-\alpha},
        \qquad r^2 = \sum_{k=1}^{d} \frac{(x_k - x'_k)^2}{l_k^2}

    (Rasmussen & Williams 2006, eq. 4.19, with the squared distance scaled per
    dimension as in their eq. 5.2). A scale mixture of RBF kernels: as
    :math:`\alpha \to \infty` it tends to ``RBF(length_scale)``. With a scalar
    ``length_scale`` (:math:`l_k = l`) it is scikit-learn's
    :class:`~sklearn.gaussian_process.kernels.RationalQuadratic`.

    Parameters
    ----------
    length_scale : float or ndarray of shape (n_features,), default=1.0
        Length scale(s) :math:`l > 0`; a vector gives one per input dimension.
    alpha : float > 0, default=1.0
        Scale mixture parameter :math:`\alpha`.
    length_scale_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        The range the optimiser may move ``length_scale`` in; "fixed" keeps it.
    alpha_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        The range the optimiser may move ``alpha`` in; "fixed" keeps it.

    Notes
    -----
    Hyperparameters in ``theta`` order (sorted by name, as scikit-learn):
    ``alpha``, then ``length_scale`` (one entry per dimension if a vector).
    The gradient with respect to the log-parameters is

    .. math::
        \frac{\partial k}{\partial \log \alpha} = k \left(-\alpha \log b
        + \frac{r^2}{2 b}\right), \qquad
        \frac{\partial k}{\partial \log l_k} = \frac{k}{b}
        \frac{(x_k - x'_k)^2}{l_k^2}, \qquad b = 1 + \frac{r^2}{2\alpha}.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgp.kernels import RationalQuadratic
    >>> kernel = RationalQuadratic(length_scale=[1.0, 10.0], alpha=2.0)
    >>> kernel
    fastgp.kernels.RationalQuadratic(alpha=2, length_scale=[1, 10])
    >>> K, K_gradient = kernel(np.array([[0.0, 0.0], [1.0, 1.0]]), eval_gradient=True)
    >>> K_gradient.shape
    (2, 2, 3)
    """

    def __init__(self, length_scale=1.0, alpha=1.0,
                 length_scale_bounds=(1e-5, 1e5), alpha_bounds=(1e-5, 1e5)):
        self.length_scale = length_scale
        self.alpha = alpha
        self.length_scale_bounds = length_scale_bounds
        self.alpha_bounds = alpha_bounds

    @property
    def anisotropic(self):
        return _is_vector(self.length_scale)


    @property
    def hyperparameter_alpha(self):
        return Hyperparameter("alpha", "numeric", self.alpha_bounds)

    def _evaluate(self, X, Y, eval_gradient):
        """K (n_X, n_Y) and, with ``eval_gradient``, K_gradient (n_X, n_X, n_dims)."""
        length_scale = _per_dimension(self.length_scale, X.shape[1], "length_scale")
        alpha = float(self.alpha)
        D = (_pairwise_differences(X, Y) / length_scale) ** 2  # (n_X, n_Y, d)
        r2 = D.sum(axis=2)
        base = 1.0 + r2 / (2.0 * alpha)
        K = base ** -alpha
        if not eval_gradient:
            return K
        parts = []
        if not self.hyperparameter_alpha.fixed:
            parts.append((K * (-alpha * np.log(base) + r2 / (2.0 * base)))[:, :, None])
        if not self.hyperparameter_length_scale.fixed:
            radial = (K / base)[:, :, None]
            parts.append(radial * D if self.anisotropic else radial * r2[:, :, None])
        return K, _stack_gradients(K, parts)

    def __repr__(self):
        return (f"{_qualified_name(type(self))}(alpha={float(self.alpha):.3g}, "
                f"length_scale={_format(self.length_scale)})")


class ExpSineSquared(_PerDimensionKernel):
    r"""Periodic (exp-sine-squared) kernel with a length scale and period per axis.

    .. math::
        k(x, x') = \exp\left(-2 \sum_{k=1}^{d}
        \frac{\sin^2\left(\pi (x_k - x'_k) / p_k\right)}{l_k^2}\right)

    the product over input dimensions of MacKay's periodic kernel (Rasmussen &
    Williams 2006, eq. 4.31): TensorFlow Probability's ``ExpSinSquared`` with
    a length scale and a period per dimension (GPflow's ``Periodic`` is the
    same with its length scale scaled by 2). A scalar ``length_scale`` or
    ``periodicity`` is shared by all dimensions.

    In one dimension this is scikit-learn's
    :class:`~sklearn.gaussian_process.kernels.ExpSineSquared`. In several it is
    not: scikit-learn's takes the sine of the Euclidean distance,
    :math:`\sin^2(\pi \lVert x - x' \rVert / p)`, which is periodic along no
    axis; this kernel is periodic along each axis with its own period. Use
    scikit-learn's class for its definition (it is on fastgp's fast path too).

    Parameters
    ----------
    length_scale : float or ndarray of shape (n_features,), default=1.0
        Length scale(s) :math:`l > 0`.
    periodicity : float or ndarray of shape (n_features,), default=1.0
        Period(s) :math:`p > 0`.
    length_scale_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        The range the optimiser may move ``length_scale`` in; "fixed" keeps it.
    periodicity_bounds : pair of floats >= 0 or "fixed", default=(1e-5, 1e5)
        The range the optimiser may move ``periodicity`` in; "fixed" keeps it.

    Notes
    -----
    Hyperparameters in ``theta`` order (sorted by name, as scikit-learn):
    ``length_scale``, then ``periodicity``. With :math:`a_k = \pi (x_k -
    x'_k) / p_k`,

    .. math::
        \frac{\partial k}{\partial \log l_k} = \frac{4 \sin^2 a_k}{l_k^2} k,
        \qquad
        \frac{\partial k}{\partial \log p_k} = \frac{4 a_k \sin a_k \cos a_k}{l_k^2} k,

    and a shared (scalar) parameter's derivative is the sum over k.

    Examples
    --------
    >>> import numpy as np
    >>> from fastgp.kernels import ExpSineSquared
    >>> kernel = ExpSineSquared(length_scale=[1.0, 2.0], periodicity=[1.0, 7.0])
    >>> kernel
    fastgp.kernels.ExpSineSquared(length_scale=[1, 2], periodicity=[1, 7])
    >>> X = np.array([[0.0, 0.0], [1.0, 7.0]])   # one period apart on each axis
    >>> bool(np.allclose(kernel(X), 1.0))
    True
    """

    def __init__(self, length_scale=1.0, periodicity=1.0,
                 length_scale_bounds=(1e-5, 1e5), periodicity_bounds=(1e-5, 1e5)):
        self.length_scale = length_scale
        self.periodicity = periodicity
        self.length_scale_bounds = length_scale_bounds
        self.periodicity_bounds = periodicity_bounds

    @property
    def anisotropic(self):
        return _is_vector(self.length_scale) or _is_vector(self.periodicity)

    @property
    def hyperparameter_periodicity(self):
        return _scalar_or_vector_hyperparameter("periodicity", self.periodicity,
                                                self.periodicity_bounds)

    def _evaluate(self, X, Y, eval_gradient):
        """K (n_X, n_Y) and, with ``eval_gradient``, K_gradient (n_X, n_X, n_dims)."""
        d = X.shape[1]
        length_scale = _per_dimension(self.length_scale, d, "length_scale")
        periodicity = _per_dimension(self.periodicity, d, "periodicity")
        arg = np.pi * _pairwise_differences(X, Y) / periodicity  # (n_X, n_Y, d)
        sin_arg = np.sin(arg)
        S = (sin_arg / length_scale) ** 2
        K = np.exp(-2.0 * S.sum(axis=2))
        if not eval_gradient:
            return K
        parts = []
        if not self.hyperparameter_length_scale.fixed:
            dl = 4.0 * S * K[:, :, None]
            parts.append(dl if _is_vector(self.length_scale)
                         else dl.sum(axis=2, keepdims=True))
        if not self.hyperparameter_periodicity.fixed:
            dp = 4.0 * arg * sin_arg * np.cos(arg) / length_scale**2 * K[:, :, None]
            parts.append(dp if _is_vector(self.periodicity)
                         else dp.sum(axis=2, keepdims=True))
        return K, _stack_gradients(K, parts)

    def __repr__(self):
        return (f"{_qualified_name(type(self))}(length_scale={_format(self.length_scale)}, "
                f"periodicity={_format(self.periodicity)})")


def _stack_gradients(K, parts):
    """Concatenate per-hyperparameter gradient blocks (n, n, k_i) along axis 2."""
    if not parts:
        return np.empty((K.shape[0], K.shape[1], 0))
    return np.concatenate(parts, axis=2)


@dataclass(frozen=True)
class FastPath:
    """Whether a kernel runs on fastgp's fast path: :func:`fast_path`'s answer.

    ``bool(result)`` is ``result.on_fast_path``; ``str(result)`` says it in
    one sentence.

    Parameters
    ----------
    on_fast_path : bool
        Whether fastgp evaluates the kernel by its lowered program (one N x N
        buffer for the gradient) rather than by calling the kernel object
        (scikit-learn's (N, N, n_hyperparameters) gradient tensor).
    reason : str
        Empty on the fast path; otherwise the first part of the kernel or of
        the inputs that keeps it off, and why.
    solvers : tuple of str
        The ``solver`` values of :class:`~fastgp.GaussianProcessRegressor`
        that accept it ("cholesky" always, off the fast path with a
        :class:`~fastgp.exceptions.SlowKernelWarning`; "iterative" and
        "vecchia" only on it); empty if the kernel does not fit the inputs at
        all (a fit would raise: ``reason`` says what).
    """

    on_fast_path: bool
    reason: str
    solvers: tuple

    def __bool__(self):
        return self.on_fast_path

    def __str__(self):
        solvers = ", ".join(self.solvers) or "none"
        if self.on_fast_path:
            return f"on fastgp's fast path (solvers: {solvers})"
        return f"not on fastgp's fast path: {self.reason} (solvers: {solvers})"


def fast_path(kernel, X=None, *, n_features=None):
    """Whether ``kernel`` runs on fastgp's fast path for inputs ``X``, and why not.

    The answer is the estimators' own decision: the same lowering and the
    same input conversion a fit makes (docs/adding_a_kernel.md lists what
    the fast path covers). ``GPLVM`` takes only kernels on the fast path
    (pass ``n_features=n_components``: its kernel works on the latent
    points); ``GaussianProcessClassifier`` and the regressor's Cholesky path
    take any kernel, off the fast path at scikit-learn's memory cost.

    Parameters
    ----------
    kernel : Kernel
        A scikit-learn kernel or an expression of them (``+``, ``*``, ``**``).
    X : array-like of shape (n_samples, n_features) or list of object, default=None
        The inputs a fit would get (only their type and shape are read).
        None: judge the kernel alone.
    n_features : int, default=None
        The number of input columns when ``X`` is None; None takes the size
        of the kernel's per-dimension hyperparameters (1 if it has none).

    Returns
    -------
    FastPath
        ``bool(result)``, ``result.reason`` (the first part off the fast
        path) and ``result.solvers``.

    Examples
    --------
    >>> from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
    >>> from fastgp.kernels import fast_path
    >>> bool(fast_path(RBF([1.0, 2.0]) + WhiteKernel()))
    True
    >>> result = fast_path(RBF() * Matern(nu=1.0))
    >>> bool(result), result.solvers
    (False, ('cholesky',))
    >>> print(result.reason.split(":")[0])
    Matern(length_scale=1, nu=1) is not on the fast path, which takes Matern (nu in 0.5, 1.5, 2.5, inf)
    """
    if X is not None:
        obstacle, n_features = _input_obstacle(kernel, X)
        if obstacle:
            return FastPath(False, obstacle, _accepting_solvers(kernel, False))
    elif n_features is None:
        n_features = _hyperparameter_size(kernel)
    try:
        obstacle = lowering_obstacle(kernel, n_features)
    except (ValueError, AttributeError) as error:
        return FastPath(False, f"the kernel does not fit inputs with {n_features} "
                               f"feature(s): {error}", ())
    fast = obstacle is None
    return FastPath(fast, obstacle or "", _accepting_solvers(kernel, fast))


def _input_obstacle(kernel, X):
    """(why the inputs keep the fit off the fast path or "", their number of
    columns): the estimators convert numeric input to a float64 2-D array
    where the kernel works on vectors, and keep anything else as it is."""
    if not kernel.requires_vector_input:
        return (f"{type(kernel).__name__} works on structured inputs "
                "(requires_vector_input is False), which fastgp's estimators pass to "
                "the kernel object as they are: only numeric 2-D arrays run on the "
                "fast path"), None
    try:
        values = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        return (f"the inputs are {_describe_inputs(X)} (structured): only numeric 2-D "
                "arrays run on the fast path"), None
    if values.ndim != 2:
        return (f"the inputs have shape {values.shape}: only numeric 2-D arrays "
                "(n_samples, n_features) run on the fast path, and fastgp's estimators "
                "refuse others (reshape(-1, 1) makes one column of a 1-D array)"), None
    return "", values.shape[1]


def _describe_inputs(X):
    """'a list of str', 'an ndarray of dtype <U3', ..."""
    if isinstance(X, np.ndarray):
        return f"an ndarray of dtype {X.dtype}"
    kinds = sorted({type(x).__name__ for x in X}) if isinstance(X, (list, tuple)) else []
    article = "an" if type(X).__name__[0] in "aeiou" else "a"
    return f"{article} {type(X).__name__}" + (f" of {', '.join(kinds)}" if kinds else "")


def _hyperparameter_size(kernel):
    """The largest size of the kernel's hyperparameters (fixed ones too):
    its number of input columns where it has per-dimension ones, else 1."""
    return max([h.n_elements for h in kernel.hyperparameters] + [1])


def _accepting_solvers(kernel, fast):
    """The regressor's solvers whose ``accept`` takes ``kernel`` (on the fast
    path or not): each solver's acceptance depends on the kernel alone."""
    backend = types.SimpleNamespace(is_fast=fast)
    names = []
    for name, solver in SOLVERS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SlowKernelWarning)
            try:
                solver.accept(backend, kernel)
            except ValueError:
                continue
        names.append(name)
    return tuple(names)


register_leaf(RationalQuadratic, *ARD_RATIONAL_QUADRATIC,
              name="fastgp.kernels.RationalQuadratic")
register_leaf(ExpSineSquared, *ARD_EXP_SINE_SQUARED, name="fastgp.kernels.ExpSineSquared")

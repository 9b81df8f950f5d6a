"""Lowering of scikit-learn kernel expressions into flat programs for Numba.

A kernel such as ``C(1.0) * RBF([1.0, 2.0]) + WhiteKernel()`` is a tree of
Python objects. fastgp's jitted routines never see Python objects: once per fit
the tree is lowered, in post-order, into a :class:`KernelProgram` of plain
arrays that one compiled interpreter (:mod:`fastgp._engine.interpreter`) evaluates for many
matrix entries at a time. Because the interpreter's signature does not depend
on the kernel's structure, it is compiled once per install and cached.

Hyperparameter bookkeeping follows scikit-learn exactly: ``theta`` is the
log-space vector of *free* hyperparameters in ``kernel.theta`` order (each
leaf's hyperparameters sorted by name, a Sum or Product concatenating its
children's). A subtree's free parameters therefore occupy one contiguous range
of ``theta``; the program stores that range per operation, which is all the
interpreter needs to apply the sum, product and power rules to gradients.

This module imports no Numba. It holds the one registry of fast-path kernels,
:data:`FAST_PATH_KERNELS` (kernel class -> opcodes, lowering, name), from
which every list of supported kernels in fastgp's messages is generated.
Adding a kernel means an opcode, one leaf helper in
:mod:`fastgp._engine.leaves`, one :func:`register_leaf` call here, and tests
(docs/adding_a_kernel.md; docs/design.md, "Adding a kernel").
"""

from dataclasses import dataclass

import numpy as np
from sklearn.gaussian_process import kernels as skk

from .._engine import opcodes as op

__all__ = ["KernelProgram", "lower_kernel", "FastPathKernel", "FAST_PATH_KERNELS",
           "register_leaf", "fast_path_summary", "lowering_obstacle",
           "ARD_RATIONAL_QUADRATIC", "ARD_EXP_SINE_SQUARED"]


@dataclass(frozen=True, eq=False)
class KernelProgram:
    """A kernel expression lowered to flat arrays.

    Attributes
    ----------
    ops : ndarray of shape (n_ops, N_COLS), int64
        Post-order operations; columns are described in :mod:`fastgp._engine.opcodes`.
    op_float : ndarray of shape (n_ops,), float64
        Per-operation float constant (the exponent of ``POW``; else 0).
    theta_of_param : ndarray of shape (n_params,), int64
        For each natural-scale parameter slot, its index in ``theta``, or -1
        if the hyperparameter is fixed.
    base_params : ndarray of shape (n_params,), float64
        Natural-scale parameter values at lowering time; fixed slots keep them.
    n_theta : int
        Number of free hyperparameters (``len(kernel.theta)``).
    stack_depth : int
        Largest number of values on the interpreter's stack.
    n_features : int
        Input dimension the program was lowered for.
    """

    ops: np.ndarray
    op_float: np.ndarray
    theta_of_param: np.ndarray
    base_params: np.ndarray
    n_theta: int
    stack_depth: int
    n_features: int

    def args(self, theta):
        """(ops, op_float, params(theta), theta_of_param, stack_depth): the
        program as every pass of the engine takes it, in that order."""
        return self.ops, self.op_float, self.params(theta), self.theta_of_param, self.stack_depth

    def params(self, theta):
        """Natural-scale parameter vector (n_params,) for log-space ``theta``."""
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.n_theta,):
            raise ValueError(
                f"theta has shape {theta.shape}; this kernel has {self.n_theta} "
                "free hyperparameters."
            )
        params = self.base_params.copy()
        free = self.theta_of_param >= 0
        params[free] = np.exp(theta[self.theta_of_param[free]])
        return params


class _Builder:
    """Accumulates operations while walking the kernel tree in post-order."""

    def __init__(self, n_features):
        self.n_features = n_features
        self.ops = []
        self.op_float = []
        self.params = []
        self.theta_of_param = []
        self.n_theta = 0
        self.depth = 0
        self.max_depth = 0

    def push_leaf(self, kernel, code, slots):
        """Append a leaf.

        ``slots`` is a list of (hyperparameter name, natural values) in the
        order the interpreter reads them; the number of length scales ``m`` is
        the size of the slot named ``length_scale`` and the number of periods
        ``m2`` that of the slot named ``periodicity`` (1 if there is none).
        """
        # theta indices in scikit-learn's order: kernel.hyperparameters
        # (sorted by name), free ones only, n_elements entries each.
        t0 = self.n_theta
        theta_index = {}
        for hp in kernel.hyperparameters:
            if hp.fixed:
                continue
            theta_index[hp.name] = self.n_theta
            self.n_theta += hp.n_elements
        pstart = len(self.params)
        m = m2 = 1
        for name, values in slots:
            values = np.atleast_1d(np.asarray(values, dtype=np.float64))
            if name == "length_scale":
                m = values.size
            elif name == "periodicity":
                m2 = values.size
            first = theta_index.get(name, -1)
            for k, v in enumerate(values):
                self.params.append(float(v))
                self.theta_of_param.append(first + k if first >= 0 else -1)
        self._append(code, pstart, m, t0, t0, self.n_theta, 0.0, pushes=1, m2=m2)

    def push_operator(self, code, t0, tm, exponent=0.0):
        pops = 1 if code == op.POW else 2
        self._append(code, 0, 0, t0, tm, self.n_theta, exponent, pushes=1 - pops)

    def _append(self, code, pstart, m, t0, tm, t1, fval, pushes, m2=0):
        row = [0] * op.N_COLS
        row[op.COL_CODE], row[op.COL_PSTART], row[op.COL_M] = code, pstart, m
        row[op.COL_T0], row[op.COL_TM], row[op.COL_T1] = t0, tm, t1
        row[op.COL_M2] = m2
        self.ops.append(tuple(row))
        self.op_float.append(fval)
        self.depth += pushes
        self.max_depth = max(self.max_depth, self.depth)

    def build(self):
        return KernelProgram(
            ops=np.asarray(self.ops, dtype=np.int64).reshape(-1, op.N_COLS),
            op_float=np.asarray(self.op_float, dtype=np.float64),
            theta_of_param=np.asarray(self.theta_of_param, dtype=np.int64),
            base_params=np.asarray(self.params, dtype=np.float64),
            n_theta=self.n_theta,
            stack_depth=self.max_depth,
            n_features=self.n_features,
        )


def _length_scales(kernel, n_features, name="length_scale"):
    """Length scales (or another per-dimension hyperparameter ``name``) as an
    array of size 1 or n_features (scikit-learn's rule)."""
    ls = np.atleast_1d(np.asarray(getattr(kernel, name), dtype=np.float64))
    if ls.ndim > 1:
        raise ValueError(f"{name} cannot be of dimension greater than 1")
    if ls.size not in (1, n_features):
        raise ValueError(
            "Anisotropic kernel must have the same number of dimensions as data "
            f"({ls.size}!={n_features})"
        )
    return ls


def _lower_constant(kernel, n_features):
    return op.CONST, [("constant_value", kernel.constant_value)]


def _lower_white(kernel, n_features):
    return op.WHITE, [("noise_level", kernel.noise_level)]


def _lower_rbf(kernel, n_features):
    return op.RBF, [("length_scale", _length_scales(kernel, n_features))]


_MATERN_CODES = {0.5: op.MATERN12, 1.5: op.MATERN32, 2.5: op.MATERN52, np.inf: op.RBF}


def _lower_matern(kernel, n_features):
    code = _MATERN_CODES.get(float(kernel.nu))
    if code is None:
        return None  # other nu need Bessel functions: not on the fast path
    return code, [("length_scale", _length_scales(kernel, n_features))]


def _lower_rational_quadratic(kernel, n_features):
    ls = np.atleast_1d(np.asarray(kernel.length_scale, dtype=np.float64))
    if ls.size > 1:  # scikit-learn's own message
        raise AttributeError(
            "RationalQuadratic kernel only supports isotropic version, "
            "please use a single scalar for length_scale"
        )
    return op.RQ, [("alpha", kernel.alpha), ("length_scale", ls)]


def _lower_exp_sine_squared(kernel, n_features):
    # scikit-learn's takes scalars only (it works on the Euclidean distance);
    # anything else is left to the object itself.
    if np.size(kernel.length_scale) != 1 or np.size(kernel.periodicity) != 1:
        return None
    return op.EXPSINE, [("length_scale", float(np.squeeze(kernel.length_scale))),
                        ("periodicity", float(np.squeeze(kernel.periodicity)))]


def _lower_dot_product(kernel, n_features):
    return op.DOT, [("sigma_0", kernel.sigma_0)]


def _lower_ard_rational_quadratic(kernel, n_features):
    return op.RQ_ARD, [("alpha", kernel.alpha),
                       ("length_scale", _length_scales(kernel, n_features))]


def _lower_ard_exp_sine_squared(kernel, n_features):
    return op.EXPSINE_ARD, [
        ("length_scale", _length_scales(kernel, n_features)),
        ("periodicity", _length_scales(kernel, n_features, "periodicity")),
    ]


@dataclass(frozen=True)
class FastPathKernel:
    """One kernel class on the fast path: the registry's entry.

    Attributes
    ----------
    kernel_type : type
        Matched by exact type: a user's subclass may change ``__call__`` and
        must take the general path.
    lower : callable
        ``lower(kernel, n_features)`` returns ``(opcode, [(hyperparameter
        name, natural values), ...])`` with the slots in the order the leaf
        helper reads them, or None when this instance cannot be lowered.
    opcodes : tuple of int
        The opcodes ``lower`` may return (each has one helper in
        :mod:`fastgp._engine.leaves`).
    name : str
        How messages and docs name the kernel, with its restrictions.
    """

    kernel_type: type
    lower: object
    opcodes: tuple
    name: str


#: The registry of fast-path leaf kernels, in the order messages list them.
#: Every list of supported kernels that fastgp prints is generated from it
#: (:func:`fast_path_summary`).
FAST_PATH_KERNELS = {}


def register_leaf(kernel_type, lower, opcodes, name=None):
    """Put ``kernel_type`` on the fast path (see :class:`FastPathKernel`).

    A kernel class defined outside fastgp registers itself at import time of
    its module; its opcodes must be leaves the engine knows
    (:data:`fastgp._engine.opcodes.LEAVES`).
    """
    opcodes = tuple(int(c) for c in np.atleast_1d(opcodes))
    unknown = sorted(set(opcodes) - set(op.LEAVES))
    if unknown:
        raise ValueError(f"opcode(s) {unknown} are not leaves of fastgp's engine; "
                         "see docs/adding_a_kernel.md")
    FAST_PATH_KERNELS[kernel_type] = FastPathKernel(
        kernel_type, lower, opcodes, name or kernel_type.__name__)


def fast_path_summary():
    """One sentence listing the fast path's kernels, for messages."""
    names = ", ".join(entry.name for entry in FAST_PATH_KERNELS.values())
    return f"{names}, combined with +, * and **"


register_leaf(skk.ConstantKernel, _lower_constant, op.CONST)
register_leaf(skk.WhiteKernel, _lower_white, op.WHITE)
register_leaf(skk.RBF, _lower_rbf, op.RBF)
register_leaf(skk.Matern, _lower_matern,
              (op.MATERN12, op.MATERN32, op.MATERN52, op.RBF),
              "Matern (nu in 0.5, 1.5, 2.5, inf)")
register_leaf(skk.RationalQuadratic, _lower_rational_quadratic, op.RQ)
register_leaf(skk.ExpSineSquared, _lower_exp_sine_squared, op.EXPSINE)
register_leaf(skk.DotProduct, _lower_dot_product, op.DOT)

#: (lower, opcodes) of :mod:`fastgp.kernels`' per-dimension kernels, which
#: that module registers with :func:`register_leaf` as it is imported (the
#: backend does not import the public kernels: imports run one way).
ARD_RATIONAL_QUADRATIC = (_lower_ard_rational_quadratic, op.RQ_ARD)
ARD_EXP_SINE_SQUARED = (_lower_ard_exp_sine_squared, op.EXPSINE_ARD)


class _NotLowerable(Exception):
    """Some part of the expression is not on the fast path; ``args[0]``
    says which and why, in words for users (:func:`lowering_obstacle`)."""


def _why_not(kernel, entry):
    """Why the leaf ``kernel`` (its registry entry, or None) is not on the
    fast path: the first sentence :func:`lowering_obstacle` returns."""
    kind = type(kernel)
    if entry is not None:
        try:
            described = repr(kernel)
        except (TypeError, ValueError):  # scikit-learn's repr of a malformed kernel
            described = f"{kind.__name__} with these hyperparameters"
        return (f"{described} is not on the fast path, which takes {entry.name}: "
                "its lowering does not support these hyperparameters")
    registered = next((t for t in FAST_PATH_KERNELS if issubclass(kind, t)), None)
    if registered is not None:
        return (f"{kind.__name__} is a subclass of {registered.__name__}, and the fast "
                "path matches kernel classes exactly (a subclass may change __call__): "
                "register it to put it there (docs/adding_a_kernel.md)")
    own = kind.__module__.startswith("sklearn.")
    return (f"{kind.__name__} is not on the fast path, which covers "
            f"{fast_path_summary()}" + ("" if own else
                                        ": register it to put it there "
                                        "(docs/adding_a_kernel.md)"))


def _walk(kernel, builder):
    kind = type(kernel)
    if kind in (skk.Sum, skk.Product):
        t0 = builder.n_theta
        _walk(kernel.k1, builder)
        tm = builder.n_theta
        _walk(kernel.k2, builder)
        builder.push_operator(op.SUM if kind is skk.Sum else op.PRODUCT, t0, tm)
    elif kind is skk.Exponentiation:
        t0 = builder.n_theta
        _walk(kernel.kernel, builder)
        builder.push_operator(op.POW, t0, t0, exponent=float(kernel.exponent))
    else:
        entry = FAST_PATH_KERNELS.get(kind)
        lowered = None if entry is None else entry.lower(kernel, builder.n_features)
        if lowered is None:
            raise _NotLowerable(_why_not(kernel, entry))
        code, slots = lowered
        builder.push_leaf(kernel, code, slots)


def lowering_obstacle(kernel, n_features):
    """Why ``kernel`` cannot be lowered for ``n_features`` input columns, or
    None if it can: the first part of the expression (in ``theta`` order)
    that is off the fast path, named, with the reason.

    Raises
    ------
    ValueError or AttributeError
        As :func:`lower_kernel` (hyperparameters that do not fit the inputs).
    """
    try:
        _walk(kernel, _Builder(int(n_features)))
    except _NotLowerable as obstacle:
        return str(obstacle.args[0])
    return None


def lower_kernel(kernel, n_features):
    """Lower ``kernel`` for inputs with ``n_features`` columns.

    Returns
    -------
    program : KernelProgram or None
        None when some part of the expression is not on the fast path; the
        caller then evaluates the kernel object itself.

    Raises
    ------
    ValueError
        If a length-scale vector does not match ``n_features`` (as
        scikit-learn's kernels raise when called).
    """
    builder = _Builder(int(n_features))
    try:
        _walk(kernel, builder)
    except _NotLowerable:
        return None
    program = builder.build()
    if program.n_theta != kernel.n_dims:  # a bookkeeping bug, not user error
        raise AssertionError(
            f"lowered {program.n_theta} free hyperparameters, kernel has "
            f"{kernel.n_dims}: {kernel!r}"
        )
    return program

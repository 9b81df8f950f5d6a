"""The engine's kernel description compiled for an NVIDIA GPU: the one
interpreter (:mod:`.interpreter`) and the leaves (:mod:`.leaves`), as written
for the CPU, retargeted to CUDA device functions by numba-cuda
(docs/design.md, "The GPU path").

No leaf formula is written twice. :func:`device_function` takes a routine of
the engine (a Numba CPU dispatcher, or a plain function where the JIT is
disabled), rebuilds its Python function with the same code object and a copy
of its globals in which every other engine routine it calls is replaced by
that routine's own device version (recursively, each once), and compiles the
result with ``numba.cuda.jit(device=True)``. Two CPU-only mechanisms are
replaced on the way:

- the interpreter reaches a leaf through the engine table's addresses
  (:func:`.leaves.call_leaf`, an intrinsic); on the device it calls
  :func:`call_leaf`, a dispatch over the leaf opcodes generated from
  :data:`.leaves.LEAF_ENTRIES` (so a new leaf needs nothing here);
- the table itself is passed on unread (an int64 array of one entry).

The transcendental helpers of :mod:`.vector_math` come along as they are:
the GPU evaluates the same polynomials as the CPU, so the two paths agree to
a few roundings (the device's fused multiply-adds) rather than to libm's
differences.

Importing this module imports numba.cuda, which fails where numba-cuda is
absent; :mod:`fastgp._engine.cuda_passes` is its only importer. Under
``NUMBA_ENABLE_CUDASIM=1`` the device functions are numba-cuda's simulator
objects, which run the same Python code on the host (the CPU tests of the
GPU path).
"""

import types

from numba import cuda

from . import interpreter as _interpreter
from . import leaves as _leaves
from . import opcodes as op

__all__ = ["device_function", "eval_tile", "call_leaf"]

#: Engine routine (its Python function) -> its device function.
_DEVICE_VERSIONS = {}


def _python_function(routine):
    """The Python function behind an engine routine (a Numba dispatcher's
    ``py_func``, or the routine itself without the JIT), or None for
    anything else (a module, a constant, a NumPy function)."""
    function = getattr(routine, "py_func", routine)
    if isinstance(function, types.FunctionType) and function.__module__.startswith(
            "fastgp._engine."):
        return function
    return None


def device_function(routine, overrides=None):
    """The CUDA device function of engine routine ``routine``: its code,
    with each engine routine it names replaced by that routine's device
    version (``overrides``: name -> device function, for the CPU-only ones).
    Memoised, so that a helper shared by many leaves compiles into each
    kernel once."""
    function = _python_function(routine)
    if function is None:
        raise TypeError(f"{routine!r} is not a routine of fastgp's engine")
    if function in _DEVICE_VERSIONS:
        return _DEVICE_VERSIONS[function]
    overrides = _OVERRIDES if overrides is None else overrides
    names = dict(function.__globals__)
    for name in function.__code__.co_names:
        if name in overrides:
            names[name] = overrides[name]
        elif _python_function(names.get(name)) is not None:
            names[name] = device_function(names[name], overrides)
    rebuilt = types.FunctionType(function.__code__, names, function.__name__,
                                 function.__defaults__, function.__closure__)
    device = cuda.jit(device=True)(rebuilt)
    _DEVICE_VERSIONS[function] = device
    return device


def _leaf_dispatch():
    """``call_leaf(engine, code, *args)`` for the device: an if-chain over
    the opcodes of :data:`.leaves.LEAF_ENTRIES`, one branch per entry
    family, generated so that it follows the CPU's table."""
    families = {}
    for code, entry in enumerate(_leaves.LEAF_ENTRIES):
        families.setdefault(entry, []).append(code)
    args = ("X1, i0, n, X2, j, diag_t, ops, o, params, theta_of_param, want_theta, "
            "want_x1, want_x2, V, s, G, D1, D2, Wk")
    lines = [f"def call_leaf(engine, code, {args}):"]
    namespace = {}
    for index, (entry, codes) in enumerate(families.items()):
        test = " or ".join(f"code == {c}" for c in codes)
        keyword = "if" if index == 0 else "elif"
        lines.append(f"    {keyword} {test}:")
        lines.append(f"        _entry_{index}(engine, {args})")
        namespace[f"_entry_{index}"] = device_function(entry, {})
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<fastgp._engine.cuda_retarget.call_leaf>", "exec"), namespace)
    return cuda.jit(device=True)(namespace["call_leaf"])


#: CPU-only names replaced in every retargeted routine (filled below).
_OVERRIDES = {}

if sorted(op.LEAVES) != list(range(len(_leaves.LEAF_ENTRIES))):  # pragma: no cover
    raise ImportError("the leaf opcodes must be 0 .. n-1 (see fastgp._engine.leaves)")

#: The leaf dispatch on the device (the engine table's role on the CPU).
call_leaf = _leaf_dispatch()
_OVERRIDES["call_leaf"] = call_leaf

#: The interpreter on the device: :func:`.interpreter.eval_tile`'s code.
eval_tile = device_function(_interpreter.eval_tile)

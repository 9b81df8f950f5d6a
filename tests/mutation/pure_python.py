"""pytest plugin for mutation runs of fastgp's engine in pure Python.

With ``NUMBA_DISABLE_JIT=1`` Numba's ``njit`` returns the Python function
itself, which has no ``py_func`` for fastgp's package-wide cache to read
(fastgp._engine.config._with_package_cache). This plugin, loaded with
``-p mutation.pure_python`` before fastgp is imported, gives each such
function a ``py_func`` that is itself, so the engine imports and runs as plain
Python: a mutant then costs no compile (docs/testing.md, mutation testing).
It does nothing where the JIT is on.
"""

import numba

if numba.config.DISABLE_JIT:
    _njit = numba.njit

    def _pure(function):
        function.py_func = function
        return function

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return _pure(_njit(args[0]))
        decorate = _njit(*args, **kwargs)
        return lambda function: _pure(decorate(function))

    numba.njit = njit
